/* N threads, each blocked in usleep() at the bottom of a deep recursion: every wait is
 * long enough for a user-stack copy, and every copy is the full 16 KiB. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include <time.h>
static int depth, secs;
__attribute__((noinline)) static int dive(int d, volatile char *pad)
{
	volatile char buf[64];
	buf[0] = (char)d;
	if (d == 0) {
		time_t end = time(NULL) + secs;
		while (time(NULL) < end)
			usleep(500);
		return buf[0];
	}
	return dive(d - 1, buf) + pad[0];
}
static void *run(void *a) { char p[1] = {0}; (void)a; dive(depth, p); return NULL; }
int main(int argc, char **argv)
{
	int n = atoi(argv[1]);
	depth = atoi(argv[2]);
	secs = atoi(argv[3]);
	pthread_t t[256];
	for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, run, NULL);
	for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
	return 0;
}
