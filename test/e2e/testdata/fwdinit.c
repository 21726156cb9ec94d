/* fwdinit: a dumb-init-style init that forwards signals from a handler.
 *
 * Usage: fwdinit PROGRAM [ARG...]
 *
 * It installs a SIGTERM and a SIGINT handler with sigaction, fork+execs its
 * arguments as a child, and in the handler forwards the signal to that
 * child with kill(). It reaps every child (it is PID 1: orphans come to it)
 * and when its own child ends it exits with 128 + the signal if the child
 * died by a signal, else with the child's exit code. This is a test program
 * for test/e2e/inits_test.go, built static for the image sigscope-e2e-inits; it
 * is not dumb-init. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t child;

static void forward(int sig)
{
	if (child > 0)
		kill(child, sig);
}

int main(int argc, char **argv)
{
	struct sigaction sa = {0};
	sigset_t set, old;
	int status;
	pid_t pid;

	if (argc < 2) {
		fprintf(stderr, "usage: fwdinit PROGRAM [ARG...]\n");
		return 2;
	}
	sa.sa_handler = forward;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0) {
		perror("fwdinit: sigaction");
		return 1;
	}
	/* Hold the signals until child is set, so a signal that comes during
	 * the fork is forwarded rather than lost. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, &old);
	pid = fork();
	if (pid < 0) {
		perror("fwdinit: fork");
		return 1;
	}
	if (pid == 0) {
		/* exec resets caught signals to SIG_DFL; the mask is inherited. */
		sigprocmask(SIG_SETMASK, &old, NULL);
		execvp(argv[1], argv + 1);
		perror("fwdinit: exec");
		_exit(127);
	}
	child = pid;
	sigprocmask(SIG_SETMASK, &old, NULL);
	for (;;) {
		pid_t got = waitpid(-1, &status, 0);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			perror("fwdinit: waitpid");
			return 1;
		}
		if (got != pid)
			continue; /* an orphan reparented to us */
		if (WIFSIGNALED(status))
			return 128 + WTERMSIG(status);
		return WEXITSTATUS(status);
	}
}
