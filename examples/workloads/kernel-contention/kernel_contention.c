// kernel_contention reproduces seed 002: many threads doing small read()s of one shared file
// descriptor. Every read takes the file's position lock in the kernel, so the threads spend
// their time contending inside the kernel: system CPU dominates, and under a CFS quota the
// lock holder is often throttled while the others wait, which makes it worse.
//
// Usage: kernel_contention <file> [threads]
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

static int fd;
static volatile unsigned long reads[256];

static void *reader(void *arg) {
	size_t id = (size_t)arg;
	char buf[64];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf); // shared offset: the contended kernel lock
		if (n <= 0)
			lseek(fd, 0, SEEK_SET);
		reads[id % 256]++;
	}
	return NULL;
}

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: %s <file> [threads]\n", argv[0]);
		return 2;
	}
	int threads = argc > 2 ? atoi(argv[2]) : 32;
	fd = open(argv[1], O_RDONLY);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	printf("kernel_contention: %d threads reading %s in 64-byte pieces\n", threads, argv[1]);
	fflush(stdout);
	for (int i = 0; i < threads; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, reader, (void *)(size_t)i) != 0) {
			perror("pthread_create");
			return 1;
		}
	}
	for (;;) {
		sleep(10);
		unsigned long total = 0;
		for (int i = 0; i < 256; i++)
			total += reads[i];
		printf("kernel_contention: %lu reads so far\n", total);
		fflush(stdout);
	}
}
