/* manyns: makes N short-lived pid namespaces, one after the other, and
 * stops each one, for test/e2e/many_test.go.
 *
 *   manyns N INTERVAL_US
 *
 * Namespace i is a clone(CLONE_NEWPID) child, PID 1 of its namespace,
 * named "manyns-init". What it does depends on i % 3:
 *   0  no handler, and a child of its own ("manyns-child", pid 2): this
 *      program sends SIGTERM (the kernel drops it: a namespace init
 *      without a handler), then SIGKILL; the init's exit kills the child
 *      (the namespace cascade). Status 137.
 *   1  a SIGTERM handler that exits with code 1 + i % 100: this program
 *      sends SIGTERM. Status 1 + i % 100.
 *   2  exits on its own with code 1 + i % 100, no signal.
 * Each namespace starts INTERVAL_US after the previous one started (or at
 * once when it is late). For each one it prints, once the init has ended,
 *   ns I PID PIDNS VARIANT STATUS
 * (host pid, pid namespace inode, status as a runtime reports it: the exit
 * code, or 128 + the signal) and finally "done N". Any surprise (a wrong
 * status, a failed call) is an error on stderr and exit status 1.
 *
 * A C program and not `unshare` per namespace: one clone without exec is a
 * fraction of a millisecond, 10,000 execs of unshare are not. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct arg {
	int variant, code;
	int ready; /* write end: one byte once set up */
	int go;    /* read end: variant 2 exits when it reads */
};

static int exit_code;

static void on_term(int sig)
{
	(void)sig;
	_exit(exit_code);
}

static int init_main(void *p)
{
	struct arg *a = p;
	char c = 'r';

	prctl(PR_SET_NAME, "manyns-init");
	/* Ended with this program, when a failed test kills it: an orphan
	 * would hold its pipes (the test's cleanup waits for their end) and
	 * whatever else it inherited (a lock the test runs under). */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	switch (a->variant) {
	case 0:
		if (fork() == 0) {
			prctl(PR_SET_NAME, "manyns-child");
			for (;;)
				pause();
		}
		break;
	case 1: {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_term;
		exit_code = a->code;
		sigaction(SIGTERM, &sa, NULL);
		break;
	}
	}
	if (write(a->ready, &c, 1) != 1)
		_exit(100);
	if (a->variant == 2) {
		/* Wait until the parent has read our namespace: a zombie has none. */
		if (read(a->go, &c, 1) != 1)
			_exit(101);
		_exit(a->code);
	}
	for (;;)
		pause();
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static char stack[256 << 10];

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: manyns N INTERVAL_US\n");
		return 2;
	}
	int n = atoi(argv[1]);
	double interval = atof(argv[2]), next = now_us();

	for (int i = 0; i < n; i++) {
		double t = now_us();
		if (t < next)
			usleep((useconds_t)(next - t));
		next += interval;

		int ready[2], go[2];
		if (pipe(ready) || pipe(go)) {
			perror("manyns: pipe");
			return 1;
		}
		struct arg a = {.variant = i % 3, .code = 1 + i % 100, .ready = ready[1], .go = go[0]};
		/* Without CLONE_VM the child runs on its own copy of the stack. */
		pid_t pid = clone(init_main, stack + sizeof(stack), CLONE_NEWPID | SIGCHLD, &a);
		if (pid < 0) {
			perror("manyns: clone");
			return 1;
		}
		close(ready[1]);
		close(go[0]);
		char c;
		if (read(ready[0], &c, 1) != 1) {
			fprintf(stderr, "manyns: namespace %d (pid %d) never got ready\n", i, pid);
			return 1;
		}
		close(ready[0]);
		char path[64];
		struct stat st;
		snprintf(path, sizeof(path), "/proc/%d/ns/pid", pid);
		if (stat(path, &st)) {
			perror("manyns: stat ns");
			return 1;
		}
		int want;
		switch (a.variant) {
		case 0:
			kill(pid, SIGTERM);
			kill(pid, SIGKILL);
			want = 128 + SIGKILL;
			break;
		case 1:
			kill(pid, SIGTERM);
			want = a.code;
			break;
		default:
			if (write(go[1], &c, 1) != 1) {
				perror("manyns: write");
				return 1;
			}
			want = a.code;
		}
		close(go[1]);
		int status;
		while (waitpid(pid, &status, 0) < 0) {
			if (errno != EINTR) {
				perror("manyns: waitpid");
				return 1;
			}
		}
		int got = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
		if (got != want) {
			fprintf(stderr, "manyns: namespace %d (pid %d) ended with status %d, want %d\n", i, pid, got, want);
			return 1;
		}
		printf("ns %d %d %lu %d %d\n", i, pid, (unsigned long)st.st_ino, a.variant, got);
	}
	printf("done %d\n", n);
	return 0;
}
