/*
 * The /proc sampler: a thread of its own, never holding the GIL, that
 * reads the counters of the main process and of the watched worker
 * processes at a fixed period into a bounded ring, and watches the fetch in
 * progress so that a loader stuck for too long is recorded.
 *
 * It knows nothing of Python.  All shared state is guarded by `lock`.
 */
#ifndef TRACEML_SAMPLER_H
#define TRACEML_SAMPLER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define TM_UNKNOWN INT64_C(-1)

/* Which /proc file a counter comes from (index into the error arrays). */
enum { TM_FILE_STAT = 0, TM_FILE_IO = 1, TM_FILE_SCHEDSTAT = 2, TM_NFILES = 3 };

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
} tm_sample;

typedef struct {
    int pid;
    int role;
    int fd[TM_NFILES];       /* kept open: pread re-reads, and a recycled
                                PID cannot slip in behind an open fd */
    int err[TM_NFILES];      /* errno of the failed open or read, else 0 */
    int64_t exited_ns;       /* first failed read of stat, else 0 */
} tm_watched;

/* A fetch that has waited longer than stuck_after_ns. */
typedef struct {
    int64_t since_ns;        /* the fetch began */
    int64_t detected_ns;
    int64_t last_ns;         /* last check while still waiting */
    int64_t ended_ns;        /* the fetch returned (0: still waiting) */
    int32_t source;
    int32_t epoch;
    int64_t step;            /* index of the awaited batch in its epoch */
    int64_t oldest_rank;     /* lowest undelivered sampler rank, or -1 */
    int32_t worker;          /* worker holding it, or -1 */
    int32_t pid;             /* that worker's pid, or 0 */
    int32_t state;           /* its /proc state at the last check */
    int32_t pad;
    int64_t cpu_ticks_at_since;  /* utime + stime when the fetch began */
    int64_t cpu_ticks_last;      /* ... at the last check (TM_UNKNOWN) */
} tm_stuck;

#define TM_MAX_STUCK 64

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    int running;             /* the thread exists */
    int stop;                /* asked to stop */
    int64_t period_ns;
    int64_t stuck_after_ns;
    /* the ring */
    tm_sample *ring;
    size_t cap;
    size_t head;             /* next write */
    size_t len;
    uint64_t overwritten;
    uint64_t ticks;          /* sampling rounds done */
    int64_t busy_ns;         /* thread CPU time spent sampling */
    int64_t started_ns;      /* the thread last started */
    int64_t run_ns;          /* wall time the thread has run, finished runs */
    /* the processes: procs is owned by the thread while it runs; a new
       set from tm_sampler_watch() waits in pending until the next tick */
    tm_watched *procs;
    size_t nprocs;
    tm_watched *pending;
    size_t npending;
    int has_pending;
    /* the fetch in progress, written by the loop under a seqlock (no
       mutex on the hot path), read by the thread */
    uint64_t fetch_seq;      /* odd while being written */
    int64_t fetch_since_ns;  /* 0: no fetch in progress */
    int32_t fetch_source;
    int32_t fetch_epoch;
    int64_t fetch_step;
    int64_t fetch_oldest_rank;
    int32_t fetch_worker;
    /* stuck fetches */
    tm_stuck stuck[TM_MAX_STUCK];
    size_t nstuck;
    int stuck_open;          /* stuck[nstuck - 1] is still waiting */
} tm_sampler;

int tm_sampler_init(tm_sampler *s);
void tm_sampler_free(tm_sampler *s);
void tm_sampler_after_fork(tm_sampler *s);
int tm_sampler_start(tm_sampler *s, int64_t period_ns, int64_t stuck_after_ns,
                     size_t capacity);
void tm_sampler_stop(tm_sampler *s);
int tm_sampler_watch(tm_sampler *s, const int *pids, const int *roles,
                     size_t n);
void tm_sampler_clear(tm_sampler *s);
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
tm_watch_publish(tm_sampler *s, int64_t since_ns, int32_t source,
                 int32_t epoch, int64_t step, int64_t oldest_rank,
                 int32_t worker)
{
    uint64_t seq = __atomic_load_n(&s->fetch_seq, __ATOMIC_RELAXED);

    __atomic_store_n(&s->fetch_seq, seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&s->fetch_source, source, __ATOMIC_RELAXED);
    __atomic_store_n(&s->fetch_epoch, epoch, __ATOMIC_RELAXED);
    __atomic_store_n(&s->fetch_step, step, __ATOMIC_RELAXED);
    __atomic_store_n(&s->fetch_oldest_rank, oldest_rank, __ATOMIC_RELAXED);
    __atomic_store_n(&s->fetch_worker, worker, __ATOMIC_RELAXED);
    __atomic_store_n(&s->fetch_since_ns, since_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&s->fetch_seq, seq + 2, __ATOMIC_RELEASE);
}

static inline void
tm_watch_begin(tm_sampler *s, int64_t since_ns, int32_t source,
               int32_t epoch, int64_t step, int64_t oldest_rank,
               int32_t worker)
{
    tm_watch_publish(s, since_ns, source, epoch, step, oldest_rank, worker);
}

static inline void
tm_watch_end(tm_sampler *s)
{
    uint64_t seq = __atomic_load_n(&s->fetch_seq, __ATOMIC_RELAXED);

    __atomic_store_n(&s->fetch_seq, seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&s->fetch_since_ns, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->fetch_seq, seq + 2, __ATOMIC_RELEASE);
}

#endif  /* TRACEML_SAMPLER_H */
