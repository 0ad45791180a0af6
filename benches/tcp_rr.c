// TCP request/response with millisecond waits, for benches/suite.sh.
//
// A server thread per connection reads a 64-byte request, does `work_us` of CPU work,
// waits `wait_us` (clock_nanosleep: a backend, a disk) and replies with 64 bytes. Each
// client thread sends a request and blocks in recv for the reply, in a loop, over its own
// loopback connection. Prints `requests/s: N` after `secs` seconds.
//
//   cc -O2 -pthread -o tcp_rr benches/tcp_rr.c
//   ./tcp_rr [connections=16] [wait_us=1000] [work_us=20] [secs=5]
//
// Every request makes the client, the server thread and the sleeping server wait: three
// waits of ~wait_us or more per request (all above chainrec's 100 us stack threshold), and
// a TCP loopback softirq in the sender's context.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long wait_us = 1000, work_us = 20;
static atomic_long done;
static atomic_int stop;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int full(int fd, char *b, int n, int rd) {
    int got = 0;
    while (got < n) {
        ssize_t r = rd ? recv(fd, b + got, n - got, 0) : send(fd, b + got, n - got, MSG_NOSIGNAL);
        if (r <= 0) return -1;
        got += r;
    }
    return 0;
}

static void *server(void *arg) {
    int fd = (int)(long)arg;
    char b[64];
    struct timespec w = {wait_us / 1000000, (wait_us % 1000000) * 1000};
    while (full(fd, b, sizeof b, 1) == 0) {
        double end = now_s() + work_us * 1e-6;
        while (now_s() < end) {
        }
        clock_nanosleep(CLOCK_MONOTONIC, 0, &w, NULL);
        if (full(fd, b, sizeof b, 0) != 0) break;
    }
    close(fd);
    return NULL;
}

static void *client(void *arg) {
    int fd = (int)(long)arg;
    char b[64] = {1};
    while (!atomic_load(&stop)) {
        if (full(fd, b, sizeof b, 0) || full(fd, b, sizeof b, 1)) break;
        atomic_fetch_add(&done, 1);
    }
    shutdown(fd, SHUT_RDWR);
    close(fd);
    return NULL;
}

int main(int argc, char **argv) {
    int conns = argc > 1 ? atoi(argv[1]) : 16;
    if (argc > 2) wait_us = atol(argv[2]);
    if (argc > 3) work_us = atol(argv[3]);
    double secs = argc > 4 ? atof(argv[4]) : 5;
    if (conns < 1 || conns > 1024 || wait_us < 0 || work_us < 0 || secs <= 0) {
        fprintf(stderr, "usage: tcp_rr [connections 1..1024] [wait_us] [work_us] [secs]\n");
        return 2;
    }
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (ls < 0 || bind(ls, (void *)&a, sizeof a) || listen(ls, conns) ||
        getsockname(ls, (void *)&a, &al)) {
        perror("tcp_rr: listen");
        return 1;
    }
    pthread_t *th = calloc(2 * conns, sizeof *th);
    for (int i = 0; i < conns; i++) {
        int c = socket(AF_INET, SOCK_STREAM, 0);
        if (c < 0 || connect(c, (void *)&a, sizeof a)) {
            perror("tcp_rr: connect");
            return 1;
        }
        int s = accept(ls, NULL, NULL);
        if (s < 0) {
            perror("tcp_rr: accept");
            return 1;
        }
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_create(&th[2 * i], NULL, server, (void *)(long)s);
        pthread_create(&th[2 * i + 1], NULL, client, (void *)(long)c);
    }
    double t0 = now_s();
    struct timespec d = {(time_t)secs, (long)((secs - (time_t)secs) * 1e9)};
    nanosleep(&d, NULL);
    long n = atomic_load(&done);
    double dt = now_s() - t0;
    atomic_store(&stop, 1);
    for (int i = 0; i < 2 * conns; i++) pthread_join(th[i], NULL);
    printf("requests/s: %.0f\n", n / dt);
    return 0;
}
