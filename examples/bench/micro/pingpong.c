// A 100-byte ping-pong over loopback TCP, one way of doing the I/O per mode, to tell what the
// system calls of a round trip cost apart from any ORB (PROFILE.md, 2026-11-27). Both sides
// use the same mode; the client prints the round trip's p50 and p99.
//
//   gcc -O2 -o /tmp/pingpong pingpong.c                       # without the io_uring modes
//   gcc -O2 -DWITH_URING -o /tmp/pingpong pingpong.c -luring  # with them (liburing-dev)
//   taskset -c 0 /tmp/pingpong server MODE PORT &
//   taskset -c 0 /tmp/pingpong client MODE PORT 200000
//
// With WITH_WORK (python3 gen_work.py > work.h, then add -DWITH_WORK), both sides also run
// WSTEPS instructions after every message they receive: distinct straight-line code, or with
// WLOOP=1 a small loop (see gen_work.py), to tell what the size of the code a round trip
// runs costs apart from its instruction count:
//   WSTEPS=2400 taskset -c 0 /tmp/pingpong server send PORT &   (the same WSTEPS, WLOOP
//   WSTEPS=2400 taskset -c 0 /tmp/pingpong client send PORT     for both sides)
//
// Modes: write (blocking read/write), send (blocking recv/send), sendreg (send, with the
// socket also in an epoll set, edge-triggered for input, that nobody waits on: what being
// registered costs a blocking reader), writev2 and sendmsg2 (the
// message in two buffers, 12 + 88 bytes, as a GIOP header and body), epoll (non-blocking:
// epoll_wait, then one recv), recvfirst (recv first, epoll_wait only when it would block),
// uring1 (send; the receive through io_uring), uring2 (send and receive in one
// io_uring_enter), poll (non-blocking: poll(2) on the socket and two idle descriptors, then
// one recv), epollnest (epoll, with the set registered without events in a second set, as the
// ORB's standby set holds its main set), twoconn (blocking, pings over one connection and
// pongs over a second: each connection carries data one way, as in a chain of callbacks
// between two ORBs without bidirectional GIOP), twoconnepoll (twoconn, both connections in one
// epoll set: epoll_wait, then one recv, as an event loop must when a message may come on
// either). With QUICKACK0=1 in the environment (both sides), every socket starts with
// TCP_QUICKACK off: delayed acknowledgements, one for every second message of a one-way
// connection instead of one for each.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#ifdef WITH_URING
#include <liburing.h>
static struct io_uring ring;
#endif

#ifdef WITH_WORK
#include "work.h"
static int wsteps, wloop;
static volatile uint64_t wsink;
// The work after each message received (none unless WSTEPS is set).
static void work(void) {
    if (wsteps) wsink = wloop ? loop(wsink, wsteps) : bloat(wsink, wsteps);
}
#else
static void work(void) {}
#endif

#define MSG 100
#define HEAD 12
static const char *mode;
static int ep = -1;
static struct pollfd pfds[3];

static int is(const char *m) { return strcmp(mode, m) == 0; }

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void setup(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (getenv("QUICKACK0")) {
        // Delayed acknowledgements from the start (the kernel's ping-pong mode).
        int zero = 0;
        setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &zero, sizeof zero);
    }
    if (is("sendreg")) {
        ep = epoll_create1(0);
        struct epoll_event e = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.fd = fd};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
    }
    if (is("epoll") || is("recvfirst") || is("epollnest")) {
        fcntl(fd, F_SETFL, O_NONBLOCK);
        ep = epoll_create1(0);
        struct epoll_event e = {.events = EPOLLIN | EPOLLET, .data.fd = fd};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
        if (is("epollnest")) {
            // The set registered, with no events, in a second set nobody waits on (as the
            // ORB's standby set holds its main set).
            int outer = epoll_create1(0);
            struct epoll_event o = {.events = 0, .data.fd = ep};
            epoll_ctl(outer, EPOLL_CTL_ADD, ep, &o);
        }
    }
    if (is("twoconnepoll")) {
        // Both connections in one set, as an event loop holds them.
        fcntl(fd, F_SETFL, O_NONBLOCK);
        if (ep < 0) ep = epoll_create1(0);
        struct epoll_event e = {.events = EPOLLIN | EPOLLET, .data.fd = fd};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
    }
    if (is("poll")) {
        // poll(2) on the socket and two idle descriptors (a wake-up eventfd and a timerfd).
        fcntl(fd, F_SETFL, O_NONBLOCK);
        pfds[0] = (struct pollfd){.fd = fd, .events = POLLIN};
        pfds[1] = (struct pollfd){.fd = eventfd(0, EFD_NONBLOCK), .events = POLLIN};
        pfds[2] = (struct pollfd){.fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK), .events = POLLIN};
    }
#ifdef WITH_URING
    if (mode[0] == 'u') io_uring_queue_init(8, &ring, 0);
#endif
}

// Sends MSG bytes (the whole message in the modes that do it in one call).
static int send_msg(int fd, char *out) {
    struct iovec v[2] = {{out, HEAD}, {out + HEAD, MSG - HEAD}};
    if (is("write")) return write(fd, out, MSG) == MSG ? 0 : -1;
    if (is("writev2")) return writev(fd, v, 2) == MSG ? 0 : -1;
    if (is("sendmsg2")) {
        struct msghdr h = {.msg_iov = v, .msg_iovlen = 2};
        return sendmsg(fd, &h, MSG_NOSIGNAL) == MSG ? 0 : -1;
    }
    return send(fd, out, MSG, MSG_NOSIGNAL) == MSG ? 0 : -1;
}

// Receives MSG bytes.
static int recv_msg(int fd, char *in) {
    int got = 0;
    while (got < MSG) {
        int n;
        if (is("poll")) {
            if (poll(pfds, 3, -1) < 0) return -1;
            n = recv(fd, in + got, MSG - got, 0);
            if (n < 0) continue;
        } else if (is("epoll") || is("epollnest") || is("twoconnepoll")) {
            struct epoll_event e;
            if (epoll_wait(ep, &e, 1, -1) < 0) return -1;
            n = recv(fd, in + got, MSG - got, 0);
            if (n < 0) continue;
        } else if (is("recvfirst")) {
            n = recv(fd, in + got, MSG - got, 0);
            if (n < 0) {
                struct epoll_event e;
                if (epoll_wait(ep, &e, 1, -1) < 0) return -1;
                continue;
            }
#ifdef WITH_URING
        } else if (mode[0] == 'u') {
            struct io_uring_sqe *s = io_uring_get_sqe(&ring);
            io_uring_prep_recv(s, fd, in + got, MSG - got, 0);
            s->user_data = 2;
            io_uring_submit_and_wait(&ring, 1);
            n = -1;
            while (n == -1) {
                struct io_uring_cqe *c;
                if (io_uring_wait_cqe(&ring, &c)) return -1;
                if (c->user_data == 2) n = c->res;
                io_uring_cqe_seen(&ring, c);
            }
#endif
        } else {
            n = recv(fd, in + got, MSG - got, 0);
        }
        if (n <= 0) return -1;
        got += n;
    }
    return 0;
}

// One exchange: send `out` (unless `send_first` is 0), then receive into `in`.
static int exchange(int fd, char *out, char *in, int send_first) {
#ifdef WITH_URING
    if (is("uring2") && send_first) {
        // The send goes into the ring with the receive: one io_uring_enter for both.
        struct io_uring_sqe *s = io_uring_get_sqe(&ring);
        io_uring_prep_send(s, fd, out, MSG, MSG_NOSIGNAL);
        s->user_data = 1;
        s->flags |= IOSQE_CQE_SKIP_SUCCESS;
        return recv_msg(fd, in);
    }
#endif
    if (send_first && send_msg(fd, out)) return -1;
    int r = recv_msg(fd, in);
    work();
    return r;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s server|client MODE PORT [CALLS]\n", argv[0]);
        return 2;
    }
    mode = argv[2];
#ifdef WITH_WORK
    init_k();
    if (getenv("WSTEPS")) wsteps = atoi(getenv("WSTEPS"));
    wloop = getenv("WLOOP") != NULL;
#endif
    char out[MSG], in[MSG];
    memset(out, 'x', MSG);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[3]))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (strcmp(argv[1], "server") == 0) {
        int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(l, (void *)&a, sizeof a) || listen(l, 1)) return perror("bind"), 1;
        int fd = accept(l, 0, 0);
        setup(fd);
        if (is("twoconn") || is("twoconnepoll")) {
            // Pings come in on the first connection, pongs go out on the second.
            int back = accept(l, 0, 0);
            setup(back);
            for (;;) {
                if (recv_msg(fd, in)) return 0;
                memcpy(out, in, MSG);
                if (send_msg(back, out)) return 0;
            }
        }
        // Echo: the first receive alone, then each reply with the next receive.
        if (exchange(fd, out, in, 0)) return 0;
        for (;;) {
            memcpy(out, in, MSG);
            if (exchange(fd, out, in, 1)) return 0;
        }
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (void *)&a, sizeof a)) return perror("connect"), 1;
    setup(fd);
    int back = -1;
    if (is("twoconn") || is("twoconnepoll")) {
        back = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(back, (void *)&a, sizeof a)) return perror("connect"), 1;
        setup(back);
    }
    int n = argc > 4 ? atoi(argv[4]) : 200000, warm = 2000;
    double *t = malloc(n * sizeof *t);
    for (int i = 0; i < n + warm; i++) {
        double t0 = now_us();
        if (back >= 0 ? send_msg(fd, out) || recv_msg(back, in) : exchange(fd, out, in, 1))
            return fprintf(stderr, "exchange failed\n"), 1;
        if (i >= warm) t[i - warm] = now_us() - t0;
    }
    qsort(t, n, sizeof *t, cmp);
    printf("%-9s p50 %.2f us  p99 %.2f us\n", mode, t[n / 2], t[n * 99 / 100]);
    return 0;
}
