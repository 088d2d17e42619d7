// What a system call costs on this machine, by kind: the event loop's calls beside a trivial
// one. Build and run: gcc -O2 -o /tmp/syscalls syscalls.c && taskset -c 0 /tmp/syscalls
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(void) {
    const int n = 200000;
    double t = now_ns();
    for (int i = 0; i < n; i++) syscall(SYS_getppid);
    printf("getppid                           %4.0f ns\n", (now_ns() - t) / n);

    // The standby's arming: EPOLL_CTL_MOD of an epoll fd (the main poll set) inside another.
    int outer = epoll_create1(0), inner = epoll_create1(0), efd = eventfd(0, 0);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET};
    epoll_ctl(inner, EPOLL_CTL_ADD, efd, &ev);
    epoll_ctl(outer, EPOLL_CTL_ADD, inner, &ev);
    t = now_ns();
    for (int i = 0; i < n; i++) {
        ev.events = (i & 1) ? 0 : (EPOLLIN | EPOLLET);
        epoll_ctl(outer, EPOLL_CTL_MOD, inner, &ev);
    }
    printf("epoll_ctl MOD (nested epoll fd)   %4.0f ns\n", (now_ns() - t) / n);

    struct epoll_event out[32];
    t = now_ns();
    for (int i = 0; i < n; i++) epoll_wait(inner, out, 32, 0);
    printf("epoll_wait, timeout 0, no events  %4.0f ns\n", (now_ns() - t) / n);

    struct timespec ts;
    t = now_ns();
    for (int i = 0; i < n; i++) clock_gettime(CLOCK_MONOTONIC, &ts);
    printf("clock_gettime (vDSO)              %4.0f ns\n", (now_ns() - t) / n);
    return 0;
}
