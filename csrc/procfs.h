/*
 * Reading one process's counters from /proc: stat, io and schedstat,
 * through descriptors kept open and re-read with pread.  Pure C, no
 * Python, no locks, no threads: the sampler decides when to call it.
 */
#ifndef TRACEML_PROCFS_H
#define TRACEML_PROCFS_H

#include <stdint.h>

#define TM_UNKNOWN INT64_C(-1)

/* Which /proc file a counter comes from (index into the error arrays). */
enum {
    TM_FILE_STAT = 0, TM_FILE_IO = 1, TM_FILE_SCHEDSTAT = 2,
    TM_FILE_SMAPS = 3,       /* smaps_rollup: read only on "deep" readings */
    TM_NFILES = 4
};

/* One reading of one process.  Counters are cumulative; TM_UNKNOWN where
   the file could not be read (the reason is kept per watched process). */
typedef struct {
    int64_t t_ns;            /* clock_ns() of the reading */
    int32_t pid;
    int32_t role;            /* -1: the main process; else the worker id */
    int64_t utime_ticks;     /* /proc/PID/stat fields 14, 15 (all threads) */
    int64_t stime_ticks;
    int64_t minflt;          /* field 10 */
    int64_t majflt;          /* field 12 */
    int64_t starttime;       /* field 22, clock ticks after boot */
    int64_t read_bytes;      /* /proc/PID/io: bytes fetched from storage */
    int64_t rchar;           /* bytes read by read(2) and the like */
    int64_t cpu_ns;          /* /proc/PID/schedstat: on-CPU ns (main thread) */
    int64_t runq_ns;         /* run-queue wait ns (main thread) */
    int32_t state;           /* field 3 as a character, 0 if unknown */
    int32_t pad;
    int64_t rss_bytes;       /* /proc/PID/stat field 24 times the page size */
    int64_t pss_bytes;       /* /proc/PID/smaps_rollup Pss, deep readings only */
    int64_t uss_bytes;       /* ... Private_Clean + Private_Dirty (unshared) */
} tm_sample;

/* A watched process. */
typedef struct {
    int pid;
    int role;
    int fd[TM_NFILES];       /* kept open: pread re-reads, and a recycled
                                PID cannot slip in behind an open fd */
    int err[TM_NFILES];      /* errno of the failed open or read, else 0 */
    int64_t exited_ns;       /* first failed read of stat, else 0 */
} tm_watched;

/* Open pid's files into w (a failed open keeps its errno in w->err). */
void tm_proc_open(tm_watched *w, int pid, int role);
/* Close w's descriptors (their errors stay). */
void tm_proc_close(tm_watched *w);
/* Read w into out at now; smaps_rollup too when deep (the kernel walks
   the process's page tables for it: far dearer than the rest, so the
   sampler asks for it on a fraction of its rounds).  A file that fails is
   closed, its errno kept; a failed stat marks the process as exited.
   Returns 1 if any counter was read. */
int tm_proc_sample(tm_watched *w, int64_t now, tm_sample *out, int deep);

/* The calling thread's /proc/thread-self/schedstat, opened for
   tm_schedstat_read (-1 with errno set when it cannot be: a kernel without
   CONFIG_SCHED_INFO has no such file).  The descriptor names the thread
   that opened it, also in a forked child: open it in the thread to read. */
int tm_schedstat_open_thread(void);
/* Re-read it: on-CPU and run-queue wait ns of that thread.  Returns 0, or
   -1 with errno set. */
int tm_schedstat_read(int fd, int64_t *cpu_ns, int64_t *runq_ns);

#endif  /* TRACEML_PROCFS_H */
