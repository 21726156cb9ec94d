/* sigblock: blocks SIGTERM, installs no handler, and sleeps forever.
 *
 * As PID 1 of a container it keeps SIGTERM blocked with SIG_DFL: the
 * kernel queues runc's SIGTERM (a blocked signal is never dropped at
 * generation) but nothing ever dequeues it, so `docker stop` waits the
 * whole timeout and SIGKILLs. Built static by the e2e tests
 * (test/e2e/inits_test.go) for the image sigscope-e2e-inits. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &set, NULL) != 0) {
		perror("sigblock: sigprocmask");
		return 1;
	}
	for (;;)
		pause();
}
