/*
 * Reading one process's counters from /proc: stat, io and schedstat,
 * through descriptors kept open and re-read with pread, and the schedstat
 * and state of each of its other threads under /proc/PID/task.  Pure C, no
 * Python, no locks, no threads, no allocation: the sampler decides when to
 * call it.
 */
#ifndef TRACEML_PROCFS_H
#define TRACEML_PROCFS_H

#include <stdint.h>

#define TM_UNKNOWN INT64_C(-1)

/* Which /proc file a counter comes from (index into the error arrays). */
enum {
    TM_FILE_STAT = 0, TM_FILE_IO = 1, TM_FILE_SCHEDSTAT = 2,
    TM_FILE_SMAPS = 3,       /* smaps_rollup: read only on "deep" readings */
    TM_FILE_TASK = 4,        /* the directory /proc/PID/task */
    TM_NFILES = 5
};

/*
 * Most threads of one process read on one reading, the leader included:
 * past it the others are left out of cpu_ns and runq_ns and of the state
 * (counted in tm_watched.threads_skipped).  It bounds a reading's system
 * calls: a process of one thread costs its three pread() calls; one of
 * more threads adds lseek() and getdents64() on its task directory, and
 * per other thread openat/read/close of its schedstat, and of its stat
 * while no thread is found running (not for a thread asleep whose
 * schedstat has not moved since the reading before).
 */
#define TM_MAX_THREADS 64

/* One reading of one process.  Counters are cumulative; TM_UNKNOWN where
   the file could not be read (the reason is kept per watched process).

   cpu_ns and runq_ns sum /proc/PID/task/TID/schedstat over the threads
   (/proc/PID/schedstat holds the leader alone; the sampler's own thread
   is left out of them, and of state, in its process): the first reading
   sums each thread's own totals, later ones add each thread's growth
   since the reading before, so that a thread that exits takes nothing
   back.  What
   they miss: a thread's last moments between the reading before and its
   exit, a thread that lived and died between two readings, and the
   threads past TM_MAX_THREADS (a thread first seen while some were left
   out counts from then on).  utime_ticks and stime_ticks count every
   thread, dead ones too, at clock-tick resolution. */
typedef struct {
    int64_t t_ns;            /* clock_ns() of the reading */
    int32_t pid;
    int32_t role;            /* -1: the main process; TM_ROLE_HOST: the
                                whole host (tm_host_sample); else the
                                worker id */
    int64_t utime_ticks;     /* /proc/PID/stat fields 14, 15 (all threads) */
    int64_t stime_ticks;
    int64_t minflt;          /* field 10 */
    int64_t majflt;          /* field 12 */
    int64_t starttime;       /* field 22, clock ticks after boot */
    int64_t read_bytes;      /* /proc/PID/io: bytes fetched from storage */
    int64_t rchar;           /* bytes read by read(2) and the like */
    int64_t cpu_ns;          /* schedstat: on-CPU ns, every thread read */
    int64_t runq_ns;         /* run-queue wait ns, every thread read */
    int32_t state;           /* R if any thread read is running or
                                runnable, else D if any is in D, else the
                                leader's (stat field 3); 0 if unknown */
    int32_t threads;         /* threads in cpu_ns and runq_ns (at most
                                TM_MAX_THREADS), 0 if unknown */
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
    int64_t exited_ns;       /* clock at the first failed read of stat,
                                else 0 */
    uint64_t threads_skipped;  /* threads left out of readings, summed over
                                  the readings (stat's thread count past
                                  TM_MAX_THREADS, or past those read) */
} tm_watched;

/* The threads of a watched process at its last reading (the leader
   first), whose growth the next reading adds to the totals.  Kept beside
   tm_watched, not in it: tm_watched is copied into the sampler's list of
   processes that left. */
typedef struct {
    int32_t n;               /* threads in tid[] */
    int32_t primed;          /* the totals hold a first reading */
    int32_t complete;        /* that walk saw every thread: a TID new to
                                the next one was born since */
    int32_t pad;
    int64_t cpu_total;       /* what the readings carry as cpu_ns */
    int64_t runq_total;      /* ... as runq_ns */
    int32_t tid[TM_MAX_THREADS];
    int64_t cpu_ns[TM_MAX_THREADS];
    int64_t runq_ns[TM_MAX_THREADS];
    uint32_t slices[TM_MAX_THREADS];   /* schedstat field 3: times run */
    char state[TM_MAX_THREADS];        /* its stat state, 0 if not read */
} tm_threads;

/* Open pid's files into w (a failed open keeps its errno in w->err), and
   empty t (NULL: none). */
void tm_proc_open(tm_watched *w, tm_threads *t, int pid, int role);
/* Close w's descriptors (their errors stay). */
void tm_proc_close(tm_watched *w);
/* Read w into out at now; smaps_rollup too when deep (the kernel walks
   the process's page tables for it: far dearer than the rest, so the
   sampler asks for it on a fraction of its rounds).  A file that fails is
   closed, its errno kept; a failed stat marks the process as exited.  A
   thread that vanishes during the walk of /proc/PID/task is left out of
   this reading, no error.  t carries the threads from one reading to the
   next (NULL: the leader alone, as /proc/PID/schedstat and stat say).
   self_tid is the calling thread's TID (tm_thread_id()), left out of its
   own process's figures: it runs while it reads, and its work is the
   sampler's.
   Returns 1 if any counter was read. */
int tm_proc_sample(tm_watched *w, tm_threads *t, int64_t now, tm_sample *out,
                   int deep, int self_tid);
/* The calling thread's TID (gettid). */
int tm_thread_id(void);

/* The calling thread's /proc/thread-self/schedstat, opened for
   tm_schedstat_read (-1 with errno set when it cannot be: a kernel without
   CONFIG_SCHED_INFO has no such file).  The descriptor names the thread
   that opened it, also in a forked child: open it in the thread to read. */
int tm_schedstat_open_thread(void);
/* Re-read it: on-CPU and run-queue wait ns of that thread.  Returns 0, or
   -1 with errno set.  Async-signal-safe (pread and a digit loop); a signal
   handler that calls it saves and restores errno. */
int tm_schedstat_read(int fd, int64_t *cpu_ns, int64_t *runq_ns);

/* One thread's fetch clocks: its CPU clock and its schedstat run-queue
   wait, for a loop's fetch (wrap.c) or a probe's (probes.c).  fd is the
   schedstat of thread tid (-1: none open; tid 0: never read). */
typedef struct {
    int fd;
    int tid;
} tm_thread_clocks;

/* The clocks before any read: set before the first tm_thread_clocks_read. */
void tm_thread_clocks_init(tm_thread_clocks *c);
/* The calling thread's CPU clock (ns, -1 when unreadable) and run-queue
   wait so far (ns, -1 when the kernel keeps none).  The schedstat file is
   the thread's own: opened again when another thread reads, or in a
   forked child (its thread has another TID).  Returns 1 when the thread
   is not the last read's (the two readings are not comparable), else 0. */
int tm_thread_clocks_read(tm_thread_clocks *c, int64_t *cpu_ns, int64_t *runq_ns);
/* Close the schedstat descriptor, if open (c is then as initialised). */
void tm_thread_clocks_close(tm_thread_clocks *c);

/* The growth of a clock between two readings (ns), -1 where either is
   unknown (-1), the clock went back, or the thread moved between them
   (`moved`: tm_thread_clocks_read's answer; 0 where both are one
   thread's by construction). */
static inline int64_t
tm_clock_delta(int64_t before, int64_t after, int moved)
{
    return (!moved && before >= 0 && after >= before) ? after - before : -1;
}

/* The CPU time of the process's other threads between two readings of
   the process's CPU clock (tm_process_cpu_ns, before and after), given
   the reading thread's own CPU time between them (`thread_ns`, a
   tm_clock_delta) and the CPU time of threads left out (`excluded_ns`:
   traceml's sampler's): at least 0 (the clocks are read a few ns apart),
   -1 where any of them is unknown. */
static inline int64_t
tm_others_cpu_delta(int64_t before, int64_t after, int64_t thread_ns,
                    int64_t excluded_ns)
{
    int64_t d;

    if (before < 0 || after < before || thread_ns < 0) {
        return -1;
    }
    d = after - before - thread_ns - (excluded_ns > 0 ? excluded_ns : 0);
    return d > 0 ? d : 0;
}

/* The role of the host's readings (pid 0): /proc/stat's first line, the
   CPU time of every core, whoever ran it. */
#define TM_ROLE_HOST (-2)

/* /proc/stat, opened for tm_host_sample (-1 with errno set when it cannot
   be). */
int tm_host_open(void);
/* Re-read it into out at now: pid 0, role TM_ROLE_HOST, cpu_ns the busy
   time of every core since boot (user, nice, system, irq, softirq and
   steal: every state but idle and iowait) at clock-tick resolution,
   utime_ticks user + nice, stime_ticks the rest of it; the other
   counters TM_UNKNOWN.  Steal counts as busy: a hypervisor's other
   guests took that time from this host's cores.  Returns 0, or -1 with
   errno set. */
int tm_host_sample(int fd, int64_t now, tm_sample *out);

#endif  /* TRACEML_PROCFS_H */
