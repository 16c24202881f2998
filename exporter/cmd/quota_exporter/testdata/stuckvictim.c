/*
 * stuckvictim: a process stuck in the kernel with its mmap_lock held, as on a node where a
 * FUSE or NFS server stops answering. Usage: stuckvictim FILE (FILE on a FUSE mount whose
 * reads are not answered).
 *
 * It maps FILE and reads the mapped page through /proc/self/mem from a second thread: that
 * read faults the page in with the process's mmap_lock held and no retry (access_remote_vm),
 * unlike an ordinary page fault, which drops the lock while it waits. Once the test has seen
 * the FUSE read arrive it writes a line on stdin, and the main thread asks for the lock for
 * writing (an anonymous mmap): from then on every reader of the lock (/proc/<pid>/cmdline,
 * environ, mem, smaps) blocks behind the waiting writer until the FUSE server answers.
 * Prints "mapped", then "unblocked" once the server answered; exits at the end of stdin.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

static volatile char *page;

static void *reader(void *arg) {
	(void)arg;
	int mem = open("/proc/self/mem", O_RDONLY);
	char c;
	if (mem < 0 || pread(mem, &c, 1, (off_t)(uintptr_t)page) != 1)
		perror("stuckvictim: read /proc/self/mem");
	return NULL;
}

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: stuckvictim FILE\n");
		return 2;
	}
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0) {
		perror("stuckvictim: open");
		return 1;
	}
	page = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (page == MAP_FAILED) {
		perror("stuckvictim: mmap");
		return 1;
	}
	pthread_t th;
	if (pthread_create(&th, NULL, reader, NULL) != 0) {
		perror("stuckvictim: pthread_create");
		return 1;
	}
	printf("mapped\n");
	fflush(stdout);
	char line[64];
	if (!fgets(line, sizeof line, stdin))
		return 0;
	printf("locking\n");
	fflush(stdout);
	/* Waits for the mmap_lock (write) behind the reader; readers queue behind it. */
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	(void)p;
	printf("unblocked\n");
	fflush(stdout);
	while (fgets(line, sizeof line, stdin))
		;
	return 0;
}
