// bursty: THREADS threads each burn BURST_MS of CPU every EVERY_MS (wall clock, absolute ticks),
// idle in between: a service answering bursts of requests. With BURST_MS >= EVERY_MS the threads
// never idle: a CPU-bound batch job.
//
// Usage: bursty THREADS BURST_MS EVERY_MS
//   bursty 2 40 200   2 x 40 ms every 200 ms (0.4 cores on average, 80 ms wanted at once)
//   bursty 1 1 1      one thread that computes without pause
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long burst_ns, every_ns;

static long now_ns(clockid_t c) {
	struct timespec ts;
	clock_gettime(c, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void *run(void *arg) {
	(void)arg;
	volatile unsigned long sink = 0;
	if (burst_ns >= every_ns) {
		for (;;) sink++;
	}
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (;;) {
		// Burn BURST_MS of this thread's own CPU time: throttling stretches it in wall time.
		long until = now_ns(CLOCK_THREAD_CPUTIME_ID) + burst_ns;
		while (now_ns(CLOCK_THREAD_CPUTIME_ID) < until)
			for (int i = 0; i < 1000; i++) sink++;
		long t = next.tv_sec * 1000000000L + next.tv_nsec + every_ns;
		long now = now_ns(CLOCK_MONOTONIC);
		while (t <= now) t += every_ns; // a burst that overran skips the ticks it missed
		next.tv_sec = t / 1000000000L;
		next.tv_nsec = t % 1000000000L;
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
	}
	return NULL;
}

int main(int argc, char **argv) {
	if (argc != 4) {
		fprintf(stderr, "usage: bursty THREADS BURST_MS EVERY_MS\n");
		return 2;
	}
	int threads = atoi(argv[1]);
	burst_ns = atol(argv[2]) * 1000000L;
	every_ns = atol(argv[3]) * 1000000L;
	if (threads < 1 || burst_ns <= 0 || every_ns <= 0) {
		fprintf(stderr, "bursty: bad arguments\n");
		return 2;
	}
	printf("bursty: %d threads, %ld ms every %ld ms\n", threads, burst_ns / 1000000L, every_ns / 1000000L);
	fflush(stdout);
	pthread_t t[threads];
	for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, run, NULL);
	for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
	return 0;
}
