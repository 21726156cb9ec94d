/*
 * The sandbox ("pause") process of the local cluster's pods: PID 1 of each
 * pod's sandbox, holding its namespaces. Like Kubernetes' own pause
 * (build/pause/linux/pause.c), it sleeps, reaps the children a shared pid
 * namespace hands it, and exits 0 on SIGINT or SIGTERM. Built static
 * (gcc -static) by test/cluster/build.sh, so its image is this file alone.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef VERSION
#define VERSION "dev"
#endif

static void sigdown(int signo)
{
	(void)signo;
	_exit(0);
}

static void sigreap(int signo)
{
	int saved = errno;

	(void)signo;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	errno = saved;
}

int main(int argc, char **argv)
{
	struct sigaction down = {.sa_handler = sigdown};
	struct sigaction reap = {.sa_handler = sigreap, .sa_flags = SA_NOCLDSTOP};

	if (argc > 1 && strcmp(argv[1], "-v") == 0) {
		printf("pause (sigscope) %s\n", VERSION);
		return 0;
	}
	if (getpid() != 1)
		fprintf(stderr, "pause: warning: not PID 1\n");
	if (sigaction(SIGINT, &down, NULL) < 0 || sigaction(SIGTERM, &down, NULL) < 0 ||
	    sigaction(SIGCHLD, &reap, NULL) < 0) {
		perror("pause: sigaction");
		return 1;
	}
	for (;;)
		pause();
}
