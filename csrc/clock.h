/*
 * The one clock traceml reads: monotonic nanoseconds as int64.
 *
 * CLOCK_MONOTONIC never jumps with wall-clock changes; on Linux it is read
 * through the vDSO without a system call (about 17 ns measured in C on the
 * 2-core build machine, see benchmarks/README.md).  int64 nanoseconds overflow after
 * about 292 years of uptime.
 */
#ifndef TRACEML_CLOCK_H
#define TRACEML_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t
tm_clock_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + (int64_t)ts.tv_nsec;
}

/* A CPU clock's time in ns, or -1 when it cannot be read. */
static inline int64_t
tm_cpu_clock_ns(clockid_t clock)
{
    struct timespec ts;

    if (clock_gettime(clock, &ts) != 0) {
        return -1;
    }
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + (int64_t)ts.tv_nsec;
}

/* The calling thread's CPU time in ns (CLOCK_THREAD_CPUTIME_ID, a system
   call here), or -1 when it cannot be read. */
static inline int64_t
tm_thread_cpu_ns(void)
{
    return tm_cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* The calling process's CPU time in ns, every thread's
   (CLOCK_PROCESS_CPUTIME_ID), or -1 when it cannot be read. */
static inline int64_t
tm_process_cpu_ns(void)
{
    return tm_cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

#endif  /* TRACEML_CLOCK_H */
