/*
 * The /proc sampler: one thread per process, never holding the GIL, that
 * reads the counters of every watched process at a fixed period into a
 * bounded ring, and checks each watched loop's fetch in progress so that a
 * loader stuck for too long is recorded.
 *
 * What it samples is a union: every live wrapped loop adds a watch entry
 * (its recorder, its main process and worker PIDs, its fetch slot) when it
 * starts and removes it when it ends; the sampler reads each PID of the
 * union once per tick, whichever loops share it.  Readings carry the PID,
 * so each report reads its own processes.
 *
 * It knows nothing of Python and never allocates on its thread: the union
 * is rebuilt by the caller of add/remove (with the GIL), under `lock`.
 * Memory comes from PyMem_Raw* so that tracemalloc sees it.  /proc parsing
 * is in procfs.h.
 */
#ifndef TRACEML_SAMPLER_H
#define TRACEML_SAMPLER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "nvml.h"
#include "procfs.h"

/* Most processes sampled at once, and most kept for sampler_info() after
   they leave the union; past these, entries are counted as dropped. */
#define TM_MAX_PROCS 1024
#define TM_MAX_RETIRED 4096
/* The defaults of traceml.configure(), here alone (their reasons are at
   tm_sampler_init in sampler.c). */
#define TM_DEFAULT_PERIOD_NS INT64_C(20000000)
/* Every TM_DEFAULT_MEMORY_PERIOD_NS a round also reads each process's
   smaps_rollup (PSS and unshared memory).  The kernel walks the page
   tables for it: 6.6 ms for a process that imported torch, measured here
   (benchmarks/README.md), against 1-5 us for each other file.  At 10 s,
   five such processes cost 0.3% of one CPU. */
#define TM_DEFAULT_MEMORY_PERIOD_NS INT64_C(10000000000)
#define TM_DEFAULT_STUCK_AFTER_NS INT64_C(30000000000)
/* The longest a fork waits for the reading under way (a tick's reads take
   tens to hundreds of microseconds; smaps_rollup of a large process some
   milliseconds). */
#define TM_FORK_WAIT_NS INT64_C(100000000)
#define TM_DEFAULT_CAPACITY ((size_t)1 << 17)
/* The ring's bounds: 120 bytes a reading, so at most 120 MiB. */
#define TM_RING_MIN 16
#define TM_RING_MAX ((size_t)1 << 20)

/*
 * The fetch in progress of one loop, written by that loop (holding the GIL)
 * under a seqlock with no locked instructions, read by the sampler thread.
 */
typedef struct {
    uint64_t seq;            /* odd while being written */
    int64_t since_ns;        /* 0: no fetch in progress */
    int32_t source;
    int32_t epoch;
    int64_t step;
    int64_t oldest_rank;
    int32_t worker;
    int32_t pad;
} tm_fetch_slot;

/* A fetch that has waited longer than stuck_after_ns. */
typedef struct {
    int64_t since_ns;        /* the fetch began */
    int64_t detected_ns;
    int64_t last_ns;         /* last check while still waiting */
    int64_t ended_ns;        /* the fetch returned (0: still waiting) */
    uint32_t recorder;       /* the recorder whose loop it is */
    int32_t source;
    int32_t epoch;
    int32_t worker;          /* worker holding it, or -1 */
    int64_t step;            /* index of the awaited batch in its epoch */
    int64_t oldest_rank;     /* lowest undelivered sampler rank, or -1 */
    int32_t pid;             /* that worker's pid, or 0 */
    int32_t state;           /* its /proc state at the last check */
    int64_t cpu_ticks_at_since;  /* utime + stime when the fetch began */
    int64_t cpu_ticks_last;      /* ... at the last check (TM_UNKNOWN) */
} tm_stuck;

#define TM_MAX_STUCK 64

/* The sampler's buffers, for the testing hook inject_alloc. */
enum {
    TM_BUF_RING = 1,
    TM_BUF_TABLES = 2,
};

/* One live loop's watch. */
typedef struct {
    uint64_t handle;
    uint32_t recorder;
    tm_fetch_slot *slot;     /* owned by the loop; NULL: no stuck watch */
    int *pids;
    int *roles;
    size_t n;
    int stuck_open;          /* 1 + index of its open stuck event, or 0 */
} tm_watch_entry;

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    int thread_alive;        /* the thread exists (it parks when idle) */
    int forking;             /* forks under way (tm_sampler_fork_begin):
                                no reading of /proc starts; atomic */
    int reading;             /* the thread is reading /proc; atomic */
    int stop;                /* asked to exit */
    /* settings */
    int enabled;
    int64_t period_ns;
    int64_t stuck_after_ns;
    int64_t memory_period_ns;  /* between smaps_rollup readings; 0: never */
    int64_t last_memory_ns;  /* clock of the last smaps_rollup round */
    size_t capacity;         /* wanted ring size, applied when idle */
    /* why the sampler could not run, 0 if it could: an errno */
    int start_errno;
    int inject_errno;        /* testing hook: the next thread start fails */
    int inject_alloc;        /* testing hook: the next allocation of the
                                ring (TM_BUF_RING) or of the process tables
                                (TM_BUF_TABLES) fails; 0: none */
    const char *start_what;  /* "ring allocation", "thread start", ... */
    /* the ring */
    tm_sample *ring;
    size_t cap;
    size_t head;             /* next write */
    size_t len;
    uint64_t overwritten;    /* readings dropped by the ring wrapping */
    uint64_t ticks;          /* sampling rounds done */
    int64_t busy_ns;         /* thread CPU time spent sampling */
    clockid_t cpu_clock;     /* the running thread's CPU clock ... (atomic) */
    int cpu_clock_set;       /* ... once this is 1 (atomic; 0 after a fork) */
    int64_t started_ns;      /* sampling last started (entries 0 -> 1) */
    int64_t run_ns;          /* wall time spent sampling, finished spans */
    /* the watch entries and their union */
    tm_watch_entry *entries;
    size_t nentries;
    size_t entries_cap;
    uint64_t next_handle;
    uint64_t dropped_watch;  /* entries or PIDs that could not be watched */
    tm_watched *procs;       /* the union, one per PID (TM_MAX_PROCS) */
    size_t nprocs;
    tm_watched *spare;       /* where the next union is built, then swapped */
    tm_threads *threads;     /* procs[i]'s threads at its last reading */
    tm_threads *spare_threads;  /* ... beside spare */
    tm_watched *retired;     /* processes that left the union, newest last */
    size_t nretired;
    tm_sample *readings;     /* one tick's readings, nprocs of them */
    /* stuck fetches */
    tm_stuck stuck[TM_MAX_STUCK];
    size_t nstuck;
    /* GPU utilisation (nvml.h): read on this thread's ticks while on;
       off (the default) it costs one test a tick. */
    /* /proc/stat for the host's readings (TM_ROLE_HOST), opened with the
       first watch; -1: not open, host_errno says why once tried */
    int host_fd;
    int host_errno;
    tm_nvml nvml;
} tm_sampler;

int tm_sampler_init(tm_sampler *s);
void tm_sampler_free(tm_sampler *s);
int tm_sampler_after_fork(tm_sampler *s);
/* Before fork(), in the parent, without the lock: no reading of /proc
   starts until tm_sampler_fork_done(), and the one under way is waited
   for, at most TM_FORK_WAIT_NS (a /proc read that hangs must not hang the
   fork).  A reading opens each watched thread's files for a moment, and a
   child forked then would keep that descriptor. */
void tm_sampler_fork_begin(tm_sampler *s);
void tm_sampler_fork_done(tm_sampler *s);
int tm_sampler_configure(tm_sampler *s, int enabled, int64_t period_ns,
                         int64_t stuck_after_ns, size_t capacity,
                         int64_t memory_period_ns);
void tm_sampler_shutdown(tm_sampler *s);
int tm_sampler_watch_add(tm_sampler *s, uint32_t recorder,
                         tm_fetch_slot *slot, const int *pids,
                         const int *roles, size_t n, uint64_t *handle);
void tm_sampler_watch_remove(tm_sampler *s, uint64_t handle);
void tm_sampler_forget(tm_sampler *s, uint32_t recorder);
size_t tm_sampler_len(tm_sampler *s);
size_t tm_sampler_copy(tm_sampler *s, tm_sample *out, size_t max);
size_t tm_sampler_copy_stuck(tm_sampler *s, tm_stuck *out, size_t max);
size_t tm_sampler_copy_procs(tm_sampler *s, tm_watched *out, size_t max);

/*
 * The loop's side of the stuck watch: a fetch begins / has returned.  One
 * writer (the loop, holding the GIL), so the seqlock needs no locked
 * instructions: the odd count is published before the fields by a release
 * fence, the even count after them by a release store.  On x86 these are
 * plain moves.
 */
static inline void
tm_watch_begin(tm_fetch_slot *f, int64_t since_ns, int32_t source,
               int32_t epoch, int64_t step, int64_t oldest_rank,
               int32_t worker)
{
    uint64_t seq = __atomic_load_n(&f->seq, __ATOMIC_RELAXED);

    __atomic_store_n(&f->seq, seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&f->source, source, __ATOMIC_RELAXED);
    __atomic_store_n(&f->epoch, epoch, __ATOMIC_RELAXED);
    __atomic_store_n(&f->step, step, __ATOMIC_RELAXED);
    __atomic_store_n(&f->oldest_rank, oldest_rank, __ATOMIC_RELAXED);
    __atomic_store_n(&f->worker, worker, __ATOMIC_RELAXED);
    __atomic_store_n(&f->since_ns, since_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&f->seq, seq + 2, __ATOMIC_RELEASE);
}

static inline void
tm_watch_end(tm_fetch_slot *f)
{
    uint64_t seq = __atomic_load_n(&f->seq, __ATOMIC_RELAXED);

    __atomic_store_n(&f->seq, seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&f->since_ns, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&f->seq, seq + 2, __ATOMIC_RELEASE);
}

#endif  /* TRACEML_SAMPLER_H */
