// rss_creep reproduces seed 003 (Ctrip): many threads allocate and free through glibc malloc;
// each thread that finds its arena busy gets a new one (up to 8 x the host's CPUs), every
// non-main arena lives in 64 MiB heaps, and a few long-lived blocks scattered through each
// heap keep it from shrinking. RSS creeps up while the live data stays small. Run it again
// with MALLOC_ARENA_MAX=2 as the control: same work, far less RSS.
//
// Every 10 s it prints its RSS and glibc's own arena count (from malloc_info), the ground
// truth for the exporter's quota_process_malloc_arenas.
//
// Usage: rss_creep [threads] [long-lived-blocks-per-thread]
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static size_t slots; // long-lived blocks per thread (about 16 KiB each), filled gradually

static void *churn(void *arg) {
	unsigned seed = (unsigned)(size_t)arg;
	void **live = calloc(slots, sizeof(void *));
	void *batch[256];
	time_t start = time(NULL);
	for (;;) {
		// A burst of short-lived allocations of mixed sizes (below the mmap threshold).
		for (int i = 0; i < 256; i++) {
			batch[i] = malloc(64 + rand_r(&seed) % (32 * 1024));
			memset(batch[i], 0xa5, 64);
		}
		// One in 64 survives and replaces a random long-lived slot; the live set grows over
		// the first ten minutes, and the survivors pin the pages around them.
		size_t used = slots * (size_t)(time(NULL) - start + 1) / 600;
		if (used > slots)
			used = slots;
		for (int i = 0; i < 256; i++) {
			if (i % 64 == 0 && used > 0) {
				size_t k = rand_r(&seed) % used;
				free(live[k]);
				live[k] = batch[i];
			} else {
				free(batch[i]);
			}
		}
		usleep(20000); // light CPU (a few % of a core): this case is about memory, not throttling
	}
	return NULL;
}

// arenas counts glibc's arenas the way the reference says: <heap nr=...> elements of malloc_info.
static int arenas(void) {
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (f == NULL)
		return -1;
	malloc_info(0, f);
	fclose(f);
	int n = 0;
	for (char *p = buf; (p = strstr(p, "<heap nr=")) != NULL; p++)
		n++;
	free(buf);
	return n;
}

static long rss_kib(void) {
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f == NULL)
		return -1;
	if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
		resident = -1;
	fclose(f);
	return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

int main(int argc, char **argv) {
	int threads = argc > 1 ? atoi(argv[1]) : 32;
	slots = argc > 2 ? (size_t)atoi(argv[2]) : 256;
	const char *limit = getenv("MALLOC_ARENA_MAX");
	printf("rss_creep: %d threads, MALLOC_ARENA_MAX=%s, %ld online CPUs\n", threads,
	       limit ? limit : "(unset: 8 x CPUs)", sysconf(_SC_NPROCESSORS_ONLN));
	fflush(stdout);
	for (int i = 0; i < threads; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, churn, (void *)(size_t)(i + 1)) != 0) {
			perror("pthread_create");
			return 1;
		}
	}
	for (;;) {
		sleep(10);
		printf("rss_creep: RSS %ld MiB, glibc arenas %d\n", rss_kib() / 1024, arenas());
		fflush(stdout);
	}
}
