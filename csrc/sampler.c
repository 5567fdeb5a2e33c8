/*
 * The /proc sampler thread, its ring, the watch union and the stuck
 * watch.  See sampler.h.
 *
 * The thread starts with the first watch entry and then lives until
 * tm_sampler_shutdown() (configure(sampler=False), module free): while no
 * entry is left it parks on `wake` and samples nothing.  Each tick, under
 * the lock, it reads every process of the union, pushes the readings into
 * the ring and checks each entry's fetch slot against stuck_after_ns.
 * The lock is held across the reads (a few pread() calls per process, and
 * per other thread of it a few more, up to TM_MAX_THREADS: microseconds
 * each): in exchange the union can change under the lock alone, and the
 * thread never allocates.
 */
#include <Python.h>

#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "sampler.h"

int
tm_sampler_init(tm_sampler *s)
{
    pthread_condattr_t attr;

    memset(s, 0, sizeof(*s));
    /* The defaults of traceml.configure(), here alone.  20 ms: a few
       pread() calls per process each tick, and a few more per other
       thread of it, keep the thread under 1% of one CPU (0.3% measured
       reading the main threads alone, benchmarks/bench_sampler.py; every
       thread costs 1.5-1.9 times that, benchmarks/README.md) while a
       stall of 100 ms still spans several readings.  30 s: a choice with no
       measured source, six times the common "> 5 s stall" convention.
       131072 readings: the last ~9 minutes of a main process and 4
       workers at 20 ms. */
    s->enabled = 1;
    s->period_ns = TM_DEFAULT_PERIOD_NS;
    s->stuck_after_ns = TM_DEFAULT_STUCK_AFTER_NS;
    s->memory_period_ns = TM_DEFAULT_MEMORY_PERIOD_NS;
    s->capacity = TM_DEFAULT_CAPACITY;
    s->host_fd = -1;
    if (pthread_mutex_init(&s->lock, NULL) != 0) {
        return -1;
    }
    if (pthread_condattr_init(&attr) != 0) {
        pthread_mutex_destroy(&s->lock);
        return -1;
    }
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (pthread_cond_init(&s->wake, &attr) != 0) {
        pthread_condattr_destroy(&attr);
        pthread_mutex_destroy(&s->lock);
        return -1;
    }
    pthread_condattr_destroy(&attr);
    return 0;
}

/* ------------------------------------------------------------------ */
/* the thread                                                         */

static void
ring_push(tm_sampler *s, const tm_sample *sample)
{
    if (s->cap == 0) {
        return;
    }
    s->ring[s->head] = *sample;
    s->head = (s->head + 1) % s->cap;
    if (s->len < s->cap) {
        s->len++;
    }
    else {
        s->overwritten++;
    }
}

/* utime + stime of pid in the latest reading at or before t, or unknown. */
static int64_t
cpu_ticks_at(const tm_sampler *s, int pid, int64_t t)
{
    size_t k;

    for (k = 0; k < s->len; k++) {
        const tm_sample *r = &s->ring[(s->head + s->cap - 1 - k) % s->cap];

        if (r->pid == pid && r->t_ns <= t && r->utime_ticks != TM_UNKNOWN) {
            return r->utime_ticks + r->stime_ticks;
        }
    }
    return TM_UNKNOWN;
}

/* A consistent copy of a fetch slot (the seqlock's reader side). */
static void
read_slot(const tm_fetch_slot *f, tm_fetch_slot *out)
{
    uint64_t seq;

    do {
        seq = __atomic_load_n(&f->seq, __ATOMIC_ACQUIRE);
        out->since_ns = __atomic_load_n(&f->since_ns, __ATOMIC_RELAXED);
        out->source = __atomic_load_n(&f->source, __ATOMIC_RELAXED);
        out->epoch = __atomic_load_n(&f->epoch, __ATOMIC_RELAXED);
        out->step = __atomic_load_n(&f->step, __ATOMIC_RELAXED);
        out->oldest_rank = __atomic_load_n(&f->oldest_rank, __ATOMIC_RELAXED);
        out->worker = __atomic_load_n(&f->worker, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
    } while ((seq & 1) || seq != __atomic_load_n(&f->seq, __ATOMIC_ACQUIRE));
}

/* With the lock held, after this tick's readings are in the ring. */
static void
check_stuck(tm_sampler *s, tm_watch_entry *e, int64_t now)
{
    tm_fetch_slot f;
    tm_stuck *ev;
    size_t i;

    if (e->slot == NULL) {
        return;
    }
    read_slot(e->slot, &f);
    if (e->stuck_open) {
        ev = &s->stuck[e->stuck_open - 1];
        if (f.since_ns != ev->since_ns) {
            ev->ended_ns = now;   /* returned within the last period */
            e->stuck_open = 0;
        }
    }
    if (f.since_ns == 0 || s->stuck_after_ns <= 0
            || now - f.since_ns < s->stuck_after_ns) {
        return;
    }
    if (!e->stuck_open) {
        if (s->nstuck == TM_MAX_STUCK) {
            return;
        }
        ev = &s->stuck[s->nstuck++];
        memset(ev, 0, sizeof(*ev));
        ev->since_ns = f.since_ns;
        ev->detected_ns = now;
        ev->recorder = e->recorder;
        ev->source = f.source;
        ev->epoch = f.epoch;
        ev->step = f.step;
        ev->oldest_rank = f.oldest_rank;
        ev->worker = f.worker;
        ev->cpu_ticks_at_since = TM_UNKNOWN;
        ev->cpu_ticks_last = TM_UNKNOWN;
        for (i = 0; i < e->n; i++) {
            if (f.worker >= 0 && e->roles[i] == f.worker) {
                ev->pid = e->pids[i];
            }
        }
        if (ev->pid != 0) {
            ev->cpu_ticks_at_since = cpu_ticks_at(s, ev->pid, f.since_ns);
        }
        e->stuck_open = (int)s->nstuck;
    }
    ev = &s->stuck[e->stuck_open - 1];
    ev->last_ns = now;
    for (i = 0; i < s->nprocs; i++) {
        const tm_sample *r = &s->readings[i];

        if (r->pid == ev->pid && r->t_ns == now
                && r->utime_ticks != TM_UNKNOWN) {
            ev->state = r->state;
            ev->cpu_ticks_last = r->utime_ticks + r->stime_ticks;
            if (ev->cpu_ticks_at_since == TM_UNKNOWN) {
                /* No reading before the fetch began: count from now on. */
                ev->cpu_ticks_at_since = ev->cpu_ticks_last;
            }
        }
    }
}

static int64_t
thread_cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

static void
deadline_after(int64_t t_ns, struct timespec *out)
{
    out->tv_sec = (time_t)(t_ns / 1000000000);
    out->tv_nsec = (long)(t_ns % 1000000000);
}

static void *
sampler_main(void *arg)
{
    tm_sampler *s = arg;
    int self_tid = tm_thread_id();
    clockid_t cpu_clock;

    /* This thread's CPU clock, for clocked fetches to leave out
       (tm_rec_sampler_cpu_ns); unset again before the thread ends. */
    if (pthread_getcpuclockid(pthread_self(), &cpu_clock) == 0) {
        __atomic_store_n(&s->cpu_clock, cpu_clock, __ATOMIC_RELAXED);
        __atomic_store_n(&s->cpu_clock_set, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_lock(&s->lock);
    while (!s->stop) {
        int64_t now, cpu0;
        struct timespec deadline;
        size_t i;
        int deep;

        if (s->nentries == 0) {
            pthread_cond_wait(&s->wake, &s->lock);
            continue;
        }
        now = tm_clock_ns();
        cpu0 = thread_cpu_ns();
        deep = s->memory_period_ns > 0
               && (s->last_memory_ns == 0
                   || now - s->last_memory_ns >= s->memory_period_ns);
        if (deep) {
            s->last_memory_ns = now;
        }
        /* Dekker's handshake with tm_sampler_fork_begin: either this
           sees the fork and reads nothing this tick, or the fork sees
           `reading` and waits for the reads to end. */
        __atomic_store_n(&s->reading, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&s->forking, __ATOMIC_SEQ_CST) == 0) {
            for (i = 0; i < s->nprocs; i++) {
                if (tm_proc_sample(&s->procs[i], &s->threads[i], now,
                                   &s->readings[i], deep, self_tid)) {
                    ring_push(s, &s->readings[i]);
                }
            }
            if (s->host_fd >= 0) {
                tm_sample host;

                if (tm_host_sample(s->host_fd, now, &host) == 0) {
                    ring_push(s, &host);
                }
                else {
                    s->host_errno = errno != 0 ? errno : EIO;
                    close(s->host_fd);
                    s->host_fd = -1;
                }
            }
        }
        __atomic_store_n(&s->reading, 0, __ATOMIC_SEQ_CST);
        for (i = 0; i < s->nentries; i++) {
            check_stuck(s, &s->entries[i], now);
        }
        tm_nvml_tick(&s->nvml, now, 0);
        s->ticks++;
        s->busy_ns += thread_cpu_ns() - cpu0;
        deadline_after(now + s->period_ns, &deadline);
        while (!s->stop && s->nentries > 0
               && pthread_cond_timedwait(&s->wake, &s->lock, &deadline)
                  != ETIMEDOUT) {
        }
    }
    pthread_mutex_unlock(&s->lock);
    __atomic_store_n(&s->cpu_clock_set, 0, __ATOMIC_RELEASE);
    return NULL;
}

/* ------------------------------------------------------------------ */
/* the union                                                          */

/* Index of pid in procs[0..n), or -1. */
static Py_ssize_t
find_pid(const tm_watched *procs, size_t n, int pid)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (procs[i].pid == pid) {
            return (Py_ssize_t)i;
        }
    }
    return -1;
}

/* Keep a process that left the union for sampler_info(), oldest out. */
static void
retire(tm_sampler *s, tm_watched *w)
{
    tm_proc_close(w);
    if (s->retired == NULL) {
        return;
    }
    if (s->nretired == TM_MAX_RETIRED) {
        memmove(s->retired, s->retired + 1,
                (TM_MAX_RETIRED - 1) * sizeof(tm_watched));
        s->nretired--;
    }
    s->retired[s->nretired++] = *w;
}

/* With the lock held: a zeroed buffer of the kind `which` (TM_BUF_*), or
   NULL (as if out of memory once after the testing hook
   _sampler_fail_next_alloc()). */
static void *
buffer_calloc(tm_sampler *s, int which, size_t n, size_t size)
{
    if (s->inject_alloc == which) {
        s->inject_alloc = 0;
        return NULL;
    }
    return PyMem_RawCalloc(n, size);
}

/* With the lock held: the union's arrays, allocated once (0, or -1 when
   memory ran out). */
static int
ensure_arrays(tm_sampler *s)
{
    if (s->procs == NULL) {
        s->procs = buffer_calloc(s, TM_BUF_TABLES, TM_MAX_PROCS,
                                 sizeof(tm_watched));
    }
    if (s->spare == NULL) {
        s->spare = buffer_calloc(s, TM_BUF_TABLES, TM_MAX_PROCS,
                                 sizeof(tm_watched));
    }
    if (s->readings == NULL) {
        s->readings = buffer_calloc(s, TM_BUF_TABLES, TM_MAX_PROCS,
                                    sizeof(tm_sample));
    }
    if (s->threads == NULL) {
        s->threads = buffer_calloc(s, TM_BUF_TABLES, TM_MAX_PROCS,
                                   sizeof(tm_threads));
    }
    if (s->spare_threads == NULL) {
        s->spare_threads = buffer_calloc(s, TM_BUF_TABLES, TM_MAX_PROCS,
                                         sizeof(tm_threads));
    }
    if (s->retired == NULL) {
        s->retired = buffer_calloc(s, TM_BUF_TABLES, TM_MAX_RETIRED,
                                   sizeof(tm_watched));
    }
    return (s->procs == NULL || s->spare == NULL || s->readings == NULL
            || s->retired == NULL || s->threads == NULL
            || s->spare_threads == NULL) ? -1 : 0;
}

/*
 * With the lock held: rebuild procs as the union of the entries' PIDs,
 * keeping the descriptors (and the thread tables) of PIDs already watched
 * and opening new ones (five open() calls a process, the costly part).
 * -1 when memory ran out (the old union stays).
 */
static int
rebuild_union(tm_sampler *s)
{
    tm_watched *procs;
    tm_threads *threads;
    tm_threads *swap;
    size_t n = 0, e, i;

    if (ensure_arrays(s) < 0) {
        return -1;
    }
    procs = s->spare;
    threads = s->spare_threads;
    for (e = 0; e < s->nentries; e++) {
        const tm_watch_entry *w = &s->entries[e];

        for (i = 0; i < w->n; i++) {
            Py_ssize_t old;

            if (find_pid(procs, n, w->pids[i]) >= 0) {
                continue;
            }
            if (n == TM_MAX_PROCS) {
                s->dropped_watch++;
                continue;
            }
            old = find_pid(s->procs, s->nprocs, w->pids[i]);
            if (old >= 0) {
                procs[n] = s->procs[old];
                threads[n] = s->threads[old];
                s->procs[old].pid = 0;   /* carried over */
            }
            else {
                tm_proc_open(&procs[n], &threads[n], w->pids[i],
                             w->roles[i]);
            }
            n++;
        }
    }
    for (i = 0; i < s->nprocs; i++) {
        if (s->procs[i].pid != 0) {
            retire(s, &s->procs[i]);
        }
    }
    s->spare = s->procs;
    s->procs = procs;
    swap = s->threads;
    s->threads = threads;
    s->spare_threads = swap;
    s->nprocs = n;
    return 0;
}

/* With the lock held: a ring of the wanted capacity, 0 or an errno. */
static int
ensure_ring(tm_sampler *s)
{
    tm_sample *ring;

    if (s->ring != NULL && s->cap == s->capacity) {
        return 0;
    }
    ring = buffer_calloc(s, TM_BUF_RING, s->capacity, sizeof(tm_sample));
    if (ring == NULL) {
        return ENOMEM;
    }
    PyMem_RawFree(s->ring);
    s->ring = ring;
    s->cap = s->capacity;
    s->head = 0;
    s->len = 0;
    return 0;
}

/* With the lock held: the thread runs (0), or start_errno says why not
   (-1). */
static int
ensure_thread(tm_sampler *s)
{
    int err;

    if (s->thread_alive) {
        return 0;
    }
    s->stop = 0;
    err = s->inject_errno;
    s->inject_errno = 0;
    if (err == 0) {
        err = pthread_create(&s->thread, NULL, sampler_main, s);
    }
    if (err != 0) {
        s->start_errno = err;
        s->start_what = "thread start";
        return -1;
    }
    s->thread_alive = 1;
    s->start_errno = 0;
    s->start_what = NULL;
    return 0;
}

/* With the lock held: why this watch could not be added. */
static void
watch_failed(tm_sampler *s, int err, const char *what)
{
    s->start_errno = err;
    s->start_what = what;
}

int
tm_sampler_watch_add(tm_sampler *s, uint32_t recorder, tm_fetch_slot *slot,
                     const int *pids, const int *roles, size_t n,
                     uint64_t *handle)
{
    int *copy = PyMem_RawMalloc((n > 0 ? n : 1) * 2 * sizeof(int));
    tm_watch_entry *e;
    int err;

    pthread_mutex_lock(&s->lock);
    if (!s->enabled) {
        pthread_mutex_unlock(&s->lock);
        PyMem_RawFree(copy);
        return -1;
    }
    if (s->nentries == 0) {
        err = ensure_ring(s);
        if (err != 0) {
            watch_failed(s, err, "ring allocation");
            goto fail;
        }
        s->start_errno = 0;
        s->start_what = NULL;
    }
    /* Before the entry is added: a loop that no thread samples is not
       watched (no readings, no stuck watch), and says why. */
    if (ensure_thread(s) < 0) {
        goto fail;
    }
    if (copy == NULL) {
        watch_failed(s, ENOMEM, "watch entry allocation");
        goto fail;
    }
    if (s->nentries == s->entries_cap) {
        size_t cap = s->entries_cap ? 2 * s->entries_cap : 8;
        tm_watch_entry *grown = PyMem_RawRealloc(s->entries,
                                                 cap * sizeof(*grown));

        if (grown == NULL) {
            watch_failed(s, ENOMEM, "watch entry allocation");
            goto fail;
        }
        s->entries = grown;
        s->entries_cap = cap;
    }
    e = &s->entries[s->nentries++];
    memset(e, 0, sizeof(*e));
    e->handle = ++s->next_handle;
    e->recorder = recorder;
    e->slot = slot;
    e->pids = copy;
    e->roles = copy + n;
    e->n = n;
    if (n > 0) {
        memcpy(e->pids, pids, n * sizeof(int));
        memcpy(e->roles, roles, n * sizeof(int));
    }
    if (rebuild_union(s) < 0) {
        s->nentries--;
        watch_failed(s, ENOMEM, "process table allocation");
        goto fail;
    }
    if (s->nentries == 1) {
        s->started_ns = tm_clock_ns();
    }
    if (s->host_fd < 0 && s->host_errno == 0) {
        /* Under the lock, so never during a reading: the descriptor is
           O_CLOEXEC and read by pread alone. */
        s->host_fd = tm_host_open();
        if (s->host_fd < 0) {
            s->host_errno = errno != 0 ? errno : EIO;
        }
    }
    *handle = e->handle;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    return 0;

fail:
    s->dropped_watch++;
    pthread_mutex_unlock(&s->lock);
    PyMem_RawFree(copy);
    return -1;
}

void
tm_sampler_watch_remove(tm_sampler *s, uint64_t handle)
{
    size_t i;
    int64_t now = tm_clock_ns();

    pthread_mutex_lock(&s->lock);
    for (i = 0; i < s->nentries; i++) {
        tm_watch_entry *e = &s->entries[i];

        if (e->handle != handle) {
            continue;
        }
        if (e->stuck_open) {
            s->stuck[e->stuck_open - 1].ended_ns = now;
        }
        PyMem_RawFree(e->pids);
        s->entries[i] = s->entries[--s->nentries];
        if (s->nentries == 0) {
            /* Idle: nothing is sampled, and the union stays as it is, so
               that the next loop over the same processes (the next epoch)
               reopens nothing.  NVML's samples since the last tick are
               read now, for a report made before the next loop (one
               nvmlDeviceGetSamples call when on; one test when off). */
            s->run_ns += now - s->started_ns;
            tm_nvml_tick(&s->nvml, now, 1);
        }
        else if (rebuild_union(s) < 0) {
            /* Out of memory: keep sampling the old union, which still
               holds this entry's PIDs; better than losing the others. */
            s->dropped_watch++;
        }
        break;
    }
    pthread_mutex_unlock(&s->lock);
}

/* A recorder's reset: its stuck events go; other recorders' stay. */
void
tm_sampler_forget(tm_sampler *s, uint32_t recorder)
{
    size_t i, j, k = 0;

    pthread_mutex_lock(&s->lock);
    for (i = 0; i < s->nstuck; i++) {
        int keep = s->stuck[i].recorder != recorder;

        /* An entry's open event moves to its new index, or is gone. */
        for (j = 0; j < s->nentries; j++) {
            if (s->entries[j].stuck_open == (int)i + 1) {
                s->entries[j].stuck_open = keep ? (int)k + 1 : 0;
            }
        }
        if (keep) {
            s->stuck[k++] = s->stuck[i];
        }
    }
    s->nstuck = k;
    pthread_mutex_unlock(&s->lock);
}

/* ------------------------------------------------------------------ */
/* settings, life, copies                                             */

int
tm_sampler_configure(tm_sampler *s, int enabled, int64_t period_ns,
                     int64_t stuck_after_ns, size_t capacity,
                     int64_t memory_period_ns)
{
    if (capacity < TM_RING_MIN || capacity > TM_RING_MAX) {
        return -1;
    }
    pthread_mutex_lock(&s->lock);
    s->enabled = enabled;
    s->period_ns = period_ns;
    s->stuck_after_ns = stuck_after_ns;
    s->capacity = capacity;
    s->memory_period_ns = memory_period_ns;
    s->last_memory_ns = 0;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

/* Stop and join the thread.  The caller may release the GIL around it:
   the thread never takes it. */
void
tm_sampler_shutdown(tm_sampler *s)
{
    pthread_t thread;

    pthread_mutex_lock(&s->lock);
    if (!s->thread_alive) {
        pthread_mutex_unlock(&s->lock);
        return;
    }
    s->stop = 1;
    thread = s->thread;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(thread, NULL);
    pthread_mutex_lock(&s->lock);
    s->thread_alive = 0;
    s->stop = 0;
    pthread_mutex_unlock(&s->lock);
}

size_t
tm_sampler_len(tm_sampler *s)
{
    size_t n;

    pthread_mutex_lock(&s->lock);
    n = s->len;
    pthread_mutex_unlock(&s->lock);
    return n;
}

size_t
tm_sampler_copy(tm_sampler *s, tm_sample *out, size_t max)
{
    size_t k, n;

    pthread_mutex_lock(&s->lock);
    n = s->len < max ? s->len : max;
    /* oldest first */
    for (k = 0; k < n; k++) {
        out[k] = s->ring[(s->head + s->cap - n + k) % s->cap];
    }
    pthread_mutex_unlock(&s->lock);
    return n;
}

size_t
tm_sampler_copy_stuck(tm_sampler *s, tm_stuck *out, size_t max)
{
    size_t n;

    pthread_mutex_lock(&s->lock);
    n = s->nstuck < max ? s->nstuck : max;
    if (n > 0) {
        memcpy(out, s->stuck, n * sizeof(tm_stuck));
    }
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* The processes watched now, then those that left, newest first, up to
   max in all. */
size_t
tm_sampler_copy_procs(tm_sampler *s, tm_watched *out, size_t max)
{
    size_t n = 0, i;

    pthread_mutex_lock(&s->lock);
    for (i = 0; i < s->nprocs && n < max; i++) {
        out[n++] = s->procs[i];
    }
    for (i = s->nretired; i > 0 && n < max; i--) {
        if (find_pid(out, n, s->retired[i - 1].pid) < 0) {
            out[n++] = s->retired[i - 1];
        }
    }
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* in_child: in a forked child, where NVML's state is the parent's. */
static void
release_memory(tm_sampler *s, int in_child)
{
    size_t i;

    tm_nvml_release(&s->nvml, in_child);
    if (s->host_fd >= 0) {
        close(s->host_fd);
        s->host_fd = -1;
    }
    for (i = 0; i < s->nprocs; i++) {
        tm_proc_close(&s->procs[i]);
    }
    for (i = 0; i < s->nentries; i++) {
        PyMem_RawFree(s->entries[i].pids);
    }
    PyMem_RawFree(s->entries);
    PyMem_RawFree(s->procs);
    PyMem_RawFree(s->spare);
    PyMem_RawFree(s->retired);
    PyMem_RawFree(s->readings);
    PyMem_RawFree(s->threads);
    PyMem_RawFree(s->spare_threads);
    PyMem_RawFree(s->ring);
}

void
tm_sampler_free(tm_sampler *s)
{
    tm_sampler_shutdown(s);
    release_memory(s, 0);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    memset(s, 0, sizeof(*s));
}

void
tm_sampler_fork_begin(tm_sampler *s)
{
    struct timespec pause = {0, 50000};
    int64_t until = tm_clock_ns() + TM_FORK_WAIT_NS;

    __atomic_add_fetch(&s->forking, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&s->reading, __ATOMIC_SEQ_CST)
           && tm_clock_ns() < until) {
        nanosleep(&pause, NULL);
    }
}

void
tm_sampler_fork_done(tm_sampler *s)
{
    __atomic_sub_fetch(&s->forking, 1, __ATOMIC_SEQ_CST);
}

/*
 * In a forked child the thread does not exist and the lock may have been
 * held by it at the fork: start over without touching either, keeping the
 * settings.  The child is single-threaded here, so this is safe.
 */
int
tm_sampler_after_fork(tm_sampler *s)
{
    int enabled = s->enabled;
    int64_t period_ns = s->period_ns;
    int64_t stuck_after_ns = s->stuck_after_ns;
    int64_t memory_period_ns = s->memory_period_ns;
    size_t capacity = s->capacity;

    release_memory(s, 1);
    if (tm_sampler_init(s) < 0) {
        return -1;
    }
    s->enabled = enabled;
    s->period_ns = period_ns;
    s->stuck_after_ns = stuck_after_ns;
    s->memory_period_ns = memory_period_ns;
    s->capacity = capacity;
    return 0;
}
