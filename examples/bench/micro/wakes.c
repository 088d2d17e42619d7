// How a client with many caller threads over one connection wakes its callers: a model of the
// ORB's unpinned `tput 32` client, without the ORB (PROFILE.md, 2026-12-07, evening).
//
// 32 caller threads share one loopback TCP connection: each sends a 16-byte request (its
// index), under a mutex, and sleeps until its reply is in. One reader thread reads the
// replies in batches (a blocking `recv` of whatever is there) and wakes their callers:
//   one     a futex per caller, one FUTEX_WAKE per reply (what a condition variable per
//           waiting thread, as the ORB's followers have, comes to);
//   bitset  one shared futex word, one FUTEX_WAKE_BITSET per batch with a bit per caller
//           whose reply came (so one system call, and at most one wake-up preemption of the
//           reader, per batch).
// The server is one thread: it reads what is there and answers all of it in one `send`.
//
//   gcc -O2 -pthread -o /tmp/wakes wakes.c
//   /tmp/wakes server PORT &
//   /tmp/wakes client MODE PORT [SECONDS]     # prints calls/s, context switches per call
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CALLERS 32
#define MSG 16

static int fd, bitset;
static pthread_mutex_t send_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint32_t done[CALLERS];  // per caller: its reply is in (mode one: its futex)
static _Atomic uint32_t epoch;          // mode bitset: bumped before each batch's wake
static _Atomic long calls;

static long futex(_Atomic uint32_t *w, int op, uint32_t val, uint32_t mask) {
    return syscall(SYS_futex, w, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL, mask);
}

static void *caller(void *arg) {
    int i = (int)(intptr_t)arg;
    char m[MSG] = {0};
    m[0] = (char)i;
    for (;;) {  // until main's _exit
        atomic_store(&done[i], 0);
        pthread_mutex_lock(&send_mu);
        if (send(fd, m, MSG, MSG_NOSIGNAL) != MSG) exit(1);
        pthread_mutex_unlock(&send_mu);
        if (bitset) {
            for (;;) {
                uint32_t e = atomic_load(&epoch);
                if (atomic_load(&done[i])) break;
                futex(&epoch, FUTEX_WAIT_BITSET, e, 1u << i);
            }
        } else {
            while (!atomic_load(&done[i])) futex(&done[i], FUTEX_WAIT, 0, 0);
        }
        atomic_fetch_add(&calls, 1);
    }
    return NULL;
}

static void *reader(void *arg) {
    (void)arg;
    static char buf[64 * 1024];
    size_t have = 0;
    for (;;) {
        ssize_t n = recv(fd, buf + have, sizeof buf - have, 0);
        if (n <= 0) return NULL;
        have += (size_t)n;
        size_t off = 0;
        uint32_t mask = 0;
        for (; have - off >= MSG; off += MSG) {
            int i = buf[off];
            atomic_store(&done[i], 1);
            if (bitset) mask |= 1u << i;
            else futex(&done[i], FUTEX_WAKE, 1, 0);
        }
        if (mask) {
            atomic_fetch_add(&epoch, 1);
            futex(&epoch, FUTEX_WAKE_BITSET, CALLERS, mask);
        }
        memmove(buf, buf + off, have - off);
        have -= off;
    }
}

static long ctx_switches(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_nvcsw + u.ru_nivcsw;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s server PORT | client one|bitset PORT [SECONDS]\n", argv[0]);
        return 2;
    }
    int one = 1, server = strcmp(argv[1], "server") == 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[server ? 2 : 3]))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (server) {
        int l = socket(AF_INET, SOCK_STREAM, 0);
        setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(l, (void *)&a, sizeof a) || listen(l, 1)) return perror("bind"), 1;
        int c = accept(l, 0, 0);
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        static char buf[64 * 1024];
        size_t have = 0;
        for (;;) {
            ssize_t n = recv(c, buf + have, sizeof buf - have, 0);
            if (n <= 0) return 0;
            have += (size_t)n;
            size_t whole = have - have % MSG;
            if (whole && send(c, buf, whole, MSG_NOSIGNAL) != (ssize_t)whole) return 0;
            memmove(buf, buf + whole, have - whole);
            have -= whole;
        }
    }
    bitset = strcmp(argv[2], "bitset") == 0;
    double secs = argc > 4 ? atof(argv[4]) : 3;
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (void *)&a, sizeof a)) return perror("connect"), 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    pthread_t r, t[CALLERS];
    pthread_create(&r, NULL, reader, NULL);
    for (int i = 0; i < CALLERS; i++) pthread_create(&t[i], NULL, caller, (void *)(intptr_t)i);
    usleep(300000);  // warm-up
    long c0 = atomic_load(&calls), s0 = ctx_switches();
    usleep((useconds_t)(secs * 1e6));
    long c1 = atomic_load(&calls), s1 = ctx_switches();
    printf("%-6s %.0f calls/s, %.2f context switches per call\n", argv[2], (c1 - c0) / secs,
           (double)(s1 - s0) / (double)(c1 - c0));
    fflush(stdout);
    _exit(0);
}
