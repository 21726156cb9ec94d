/* floodsend SIGNO RATE SECONDS: ignores signal SIGNO (SIG_IGN) and sends it
 * to itself with kill(2) for SECONDS: RATE times a second, or as fast as it
 * can with RATE 0. Then prints "sent N ns T": the signals sent and the
 * nanoseconds it took.
 *
 * Every kill(2) is one signal_generate with result IGNORED and no delivery:
 * one event for sigscope per signal, and nothing else. Self-directed so that
 * a flood needs no second process; C so that nothing but kill(2) runs (a Go
 * sender adds its runtime's own signals). Built by test/e2e/flood_test.go. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	int sig;
	long rate;
	double seconds;
	long long start, end, next, period, t;
	unsigned long long sent = 0;
	pid_t self = getpid();

	if (argc != 4) {
		fprintf(stderr, "usage: floodsend SIGNO RATE SECONDS\n");
		return 2;
	}
	sig = atoi(argv[1]);
	rate = atol(argv[2]);
	seconds = atof(argv[3]);
	if (signal(sig, SIG_IGN) == SIG_ERR) {
		perror("floodsend: signal");
		return 1;
	}
	start = now_ns();
	end = start + (long long)(seconds * 1e9);
	if (rate <= 0) {
		/* The clock is read once per batch: the loop is kill(2). */
		do {
			for (int i = 0; i < 1024; i++) {
				if (kill(self, sig) != 0) {
					perror("floodsend: kill");
					return 1;
				}
			}
			sent += 1024;
		} while (now_ns() < end);
	} else {
		period = 1000000000LL / rate;
		for (next = start; next < end; next += period) {
			struct timespec ts = { next / 1000000000LL, next % 1000000000LL };

			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
			if (kill(self, sig) != 0) {
				perror("floodsend: kill");
				return 1;
			}
			sent++;
			/* Late (a busy CPU): go on from now rather than send a
			 * burst to catch up, so the rate stays modest. */
			t = now_ns();
			if (t - next > period)
				next = t - period;
		}
	}
	printf("sent %llu ns %lld\n", sent, now_ns() - start);
	return 0;
}
