/* The pod sandbox's process (the "pause" container): holds the pod's namespaces, reaps
 * zombies, exits on SIGTERM/SIGINT. Built statically by the kubenode test into its pause image. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }

int main(void) {
	signal(SIGTERM, stop);
	signal(SIGINT, stop);
	signal(SIGCHLD, reap);
	for (;;) pause();
}
