// Test program for the malloc package: many threads allocate from glibc so that it creates
// many arenas, and a few threads keep more than 64 MiB so their arena chains extra heaps
// (heaps > arenas). Then it prints malloc_info (the ground truth), "READY", and waits for
// stdin to close so the test can inspect it from outside.
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_barrier_t start, done;
static int nthreads = 32;
static long big_bytes = 80L << 20; // kept by every 8th thread: more than one heap

static void *worker(void *arg) {
	long id = (long)arg;
	pthread_barrier_wait(&start); // all threads ask for an arena at about the same time
	unsigned seed = (unsigned)id * 2654435761u;
	long keep = (id % 8 == 0) ? big_bytes : 4L << 20;
	long n = 0;
	size_t cap = 1 << 16;
	void **ptrs = malloc(cap * sizeof(void *));
	for (long total = 0; total < keep;) {
		// Below the mmap threshold. Big keepers use small sizes: a heap grows page by page up
		// to exactly 64 MiB read-write, the "full" heap the maps heuristic misses.
		size_t sz = 16 + rand_r(&seed) % (id % 8 == 0 ? 1024 : 60 << 10);
		void *p = malloc(sz);
		if (p == NULL)
			break;
		memset(p, (int)id, sz < 256 ? sz : 256);
		if (n == (long)cap) {
			cap *= 2;
			ptrs = realloc(ptrs, cap * sizeof(void *));
		}
		ptrs[n++] = p;
		total += (long)sz;
		if (rand_r(&seed) % 4 == 0) { // free some, so the arena has holes
			long j = rand_r(&seed) % n;
			total -= (long)malloc_usable_size(ptrs[j]);
			free(ptrs[j]);
			ptrs[j] = ptrs[--n];
		}
	}
	pthread_barrier_wait(&done);
	pause(); // stay attached to the arena
	return NULL;
}

int main(int argc, char **argv) {
	if (argc > 1)
		nthreads = atoi(argv[1]);
	if (argc > 2)
		big_bytes = atol(argv[2]) << 20;
	pthread_barrier_init(&start, NULL, (unsigned)nthreads);
	pthread_barrier_init(&done, NULL, (unsigned)nthreads + 1);
	for (long i = 0; i < nthreads; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, worker, (void *)i) != 0) {
			perror("pthread_create");
			return 1;
		}
	}
	pthread_barrier_wait(&done);
	malloc_info(0, stdout);
	printf("READY\n");
	fflush(stdout);
	char buf[64];
	while (read(0, buf, sizeof buf) > 0) {
	}
	return 0;
}
