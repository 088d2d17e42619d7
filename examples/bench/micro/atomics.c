// What an uncontended atomic read-modify-write costs on this machine (a lock and its unlock
// are two of them). Build and run: gcc -O2 -o /tmp/atomics atomics.c && taskset -c 1 /tmp/atomics
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(void) {
    const int n = 20000000;
    _Atomic long a = 0;
    volatile long b = 0;
    double t = now_ns();
    for (int i = 0; i < n; i++) atomic_fetch_add_explicit(&a, 1, memory_order_relaxed);
    printf("lock xadd (Relaxed fetch_add)          %5.2f ns\n", (now_ns() - t) / n);
    t = now_ns();
    for (int i = 0; i < n; i++) {
        long expected = 0;
        atomic_compare_exchange_strong(&a, &expected, 1);  // a mutex's lock
        atomic_exchange(&a, 0);                            // and its unlock
    }
    printf("lock cmpxchg + xchg (a lock + unlock)  %5.2f ns\n", (now_ns() - t) / n);
    t = now_ns();
    for (int i = 0; i < n; i++) b = b + 1;
    printf("plain increment (volatile)             %5.2f ns\n", (now_ns() - t) / n);
    return 0;
}
