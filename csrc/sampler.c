/*
 * The /proc sampler thread.  See sampler.h.
 *
 * Each tick: take the watched set (applying a pending one), read every
 * process's stat, io and schedstat with pread on descriptors kept open,
 * then, under the lock, push the readings into the ring and check the
 * fetch in progress against stuck_after_ns.  The reads happen outside the
 * lock, so Python copying the ring never waits on the file system.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "sampler.h"

static const char *const file_names[TM_NFILES] = {"stat", "io", "schedstat"};

int
tm_sampler_init(tm_sampler *s)
{
    pthread_condattr_t attr;

    memset(s, 0, sizeof(*s));
    if (pthread_mutex_init(&s->lock, NULL) != 0) {
        return -1;
    }
    if (pthread_condattr_init(&attr) != 0) {
        return -1;
    }
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (pthread_cond_init(&s->wake, &attr) != 0) {
        pthread_condattr_destroy(&attr);
        return -1;
    }
    pthread_condattr_destroy(&attr);
    return 0;
}

static void
close_procs(tm_watched *procs, size_t n)
{
    size_t i;
    int f;

    for (i = 0; i < n; i++) {
        for (f = 0; f < TM_NFILES; f++) {
            if (procs[i].fd[f] >= 0) {
                close(procs[i].fd[f]);
                procs[i].fd[f] = -1;
            }
        }
    }
}

static void
open_proc(tm_watched *w, int pid, int role)
{
    char path[64];
    int f;

    w->pid = pid;
    w->role = role;
    w->exited_ns = 0;
    for (f = 0; f < TM_NFILES; f++) {
        snprintf(path, sizeof(path), "/proc/%d/%s", pid, file_names[f]);
        w->fd[f] = open(path, O_RDONLY | O_CLOEXEC);
        w->err[f] = w->fd[f] < 0 ? errno : 0;
    }
}

/* Read a whole /proc file from offset 0; -1 with errno on failure. */
static ssize_t
read_file(int fd, char *buf, size_t size)
{
    ssize_t n = pread(fd, buf, size - 1, 0);

    if (n >= 0) {
        buf[n] = '\0';
    }
    return n;
}

/*
 * Fields of /proc/PID/stat after the command name, which may itself hold
 * spaces and parentheses: parse after the last ')'.  The first field after
 * it is field 3 (state).
 */
static int
parse_stat(const char *buf, tm_sample *out)
{
    const char *p = strrchr(buf, ')');
    int field = 3;

    if (p == NULL) {
        return -1;
    }
    p++;
    while (*p != '\0') {
        while (*p == ' ') {
            p++;
        }
        if (*p == '\0' || *p == '\n') {
            break;
        }
        switch (field) {
            case 3:
                out->state = (unsigned char)*p;
                break;
            case 10:
                out->minflt = strtoll(p, NULL, 10);
                break;
            case 12:
                out->majflt = strtoll(p, NULL, 10);
                break;
            case 14:
                out->utime_ticks = strtoll(p, NULL, 10);
                break;
            case 15:
                out->stime_ticks = strtoll(p, NULL, 10);
                break;
            case 22:
                out->starttime = strtoll(p, NULL, 10);
                return 0;
            default:
                break;
        }
        while (*p != '\0' && *p != ' ') {
            p++;
        }
        field++;
    }
    return -1;
}

static int
parse_io(const char *buf, tm_sample *out)
{
    const char *rchar = strstr(buf, "rchar:");
    const char *read_bytes = strstr(buf, "read_bytes:");

    if (rchar == NULL || read_bytes == NULL) {
        return -1;
    }
    out->rchar = strtoll(rchar + 6, NULL, 10);
    out->read_bytes = strtoll(read_bytes + 11, NULL, 10);
    return 0;
}

static int
parse_schedstat(const char *buf, tm_sample *out)
{
    long long cpu, runq;

    if (sscanf(buf, "%lld %lld", &cpu, &runq) != 2) {
        return -1;
    }
    out->cpu_ns = cpu;
    out->runq_ns = runq;
    return 0;
}

/* Read one process into out; failed[f] gets the errno of a file that
   could not be read (0 if fine).  The process entry itself is only
   updated under the lock, by apply_failures(). */
static void
sample_proc(const tm_watched *w, int64_t now, tm_sample *out,
            int failed[TM_NFILES])
{
    char buf[2048];
    int f;

    memset(out, 0, sizeof(*out));
    out->t_ns = now;
    out->pid = w->pid;
    out->role = w->role;
    out->utime_ticks = out->stime_ticks = TM_UNKNOWN;
    out->minflt = out->majflt = out->starttime = TM_UNKNOWN;
    out->read_bytes = out->rchar = TM_UNKNOWN;
    out->cpu_ns = out->runq_ns = TM_UNKNOWN;
    for (f = 0; f < TM_NFILES; f++) {
        int ok;

        failed[f] = 0;
        if (w->fd[f] < 0) {
            continue;
        }
        errno = 0;
        ok = read_file(w->fd[f], buf, sizeof(buf)) > 0;
        if (ok) {
            ok = (f == TM_FILE_STAT ? parse_stat(buf, out)
                  : f == TM_FILE_IO ? parse_io(buf, out)
                  : parse_schedstat(buf, out)) == 0;
            if (!ok) {
                errno = EPROTO;
            }
        }
        if (!ok) {
            failed[f] = errno != 0 ? errno : EIO;
        }
    }
}

/* Under the lock: a file that failed is closed and its errno kept; a
   failed stat marks the process as exited. */
static void
apply_failures(tm_watched *w, int64_t now, const int failed[TM_NFILES])
{
    int f;

    for (f = 0; f < TM_NFILES; f++) {
        if (failed[f] == 0 || w->fd[f] < 0) {
            continue;
        }
        w->err[f] = failed[f];
        close(w->fd[f]);
        w->fd[f] = -1;
        if (f == TM_FILE_STAT && w->exited_ns == 0) {
            w->exited_ns = now;
        }
    }
}

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

/* Called with the lock held, after this tick's readings are in the ring. */
static void
check_stuck(tm_sampler *s, int64_t now, const tm_sample *readings, size_t n)
{
    uint64_t seq;
    int64_t since, step, rank;
    int32_t source, epoch, worker;
    tm_stuck *ev;
    size_t i;

    do {
        seq = __atomic_load_n(&s->fetch_seq, __ATOMIC_ACQUIRE);
        since = __atomic_load_n(&s->fetch_since_ns, __ATOMIC_RELAXED);
        source = __atomic_load_n(&s->fetch_source, __ATOMIC_RELAXED);
        epoch = __atomic_load_n(&s->fetch_epoch, __ATOMIC_RELAXED);
        step = __atomic_load_n(&s->fetch_step, __ATOMIC_RELAXED);
        rank = __atomic_load_n(&s->fetch_oldest_rank, __ATOMIC_RELAXED);
        worker = __atomic_load_n(&s->fetch_worker, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
    } while ((seq & 1) || seq != __atomic_load_n(&s->fetch_seq, __ATOMIC_ACQUIRE));

    if (s->stuck_open) {
        ev = &s->stuck[s->nstuck - 1];
        if (since != ev->since_ns) {
            ev->ended_ns = now;   /* returned within the last period */
            s->stuck_open = 0;
        }
    }
    if (since == 0 || s->stuck_after_ns <= 0 || now - since < s->stuck_after_ns) {
        return;
    }
    if (!s->stuck_open) {
        if (s->nstuck == TM_MAX_STUCK) {
            return;
        }
        ev = &s->stuck[s->nstuck++];
        memset(ev, 0, sizeof(*ev));
        ev->since_ns = since;
        ev->detected_ns = now;
        ev->source = source;
        ev->epoch = epoch;
        ev->step = step;
        ev->oldest_rank = rank;
        ev->worker = worker;
        ev->cpu_ticks_at_since = TM_UNKNOWN;
        ev->cpu_ticks_last = TM_UNKNOWN;
        for (i = 0; i < s->nprocs; i++) {
            if (worker >= 0 && s->procs[i].role == worker) {
                ev->pid = s->procs[i].pid;
            }
        }
        if (ev->pid != 0) {
            ev->cpu_ticks_at_since = cpu_ticks_at(s, ev->pid, since);
        }
        s->stuck_open = 1;
    }
    ev = &s->stuck[s->nstuck - 1];
    ev->last_ns = now;
    for (i = 0; i < n; i++) {
        if (readings[i].pid == ev->pid && readings[i].utime_ticks != TM_UNKNOWN) {
            ev->state = readings[i].state;
            ev->cpu_ticks_last = readings[i].utime_ticks + readings[i].stime_ticks;
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

static void *
sampler_main(void *arg)
{
    tm_sampler *s = arg;
    tm_sample *readings = NULL;
    int (*failed)[TM_NFILES] = NULL;
    size_t readings_cap = 0;

    pthread_mutex_lock(&s->lock);
    while (!s->stop) {
        int64_t now = tm_clock_ns();
        int64_t cpu0 = thread_cpu_ns();
        int64_t deadline_ns;
        struct timespec deadline;
        size_t i, n;

        if (s->has_pending) {
            close_procs(s->procs, s->nprocs);
            free(s->procs);
            s->procs = s->pending;
            s->nprocs = s->npending;
            s->pending = NULL;
            s->npending = 0;
            s->has_pending = 0;
        }
        n = s->nprocs;
        if (n > readings_cap) {
            tm_sample *grown = realloc(readings, n * sizeof(tm_sample));
            int (*grown_failed)[TM_NFILES] = grown != NULL
                ? realloc(failed, n * sizeof(*failed)) : NULL;

            if (grown != NULL) {
                readings = grown;
            }
            if (grown_failed != NULL) {
                failed = grown_failed;
                readings_cap = n;
            }
        }
        if (n > readings_cap) {
            n = readings_cap;
        }
        /* Only this thread changes procs while it runs, and only under
           the lock: reading it unlocked here is safe. */
        pthread_mutex_unlock(&s->lock);
        for (i = 0; i < n; i++) {
            sample_proc(&s->procs[i], now, &readings[i], failed[i]);
        }
        pthread_mutex_lock(&s->lock);
        for (i = 0; i < n; i++) {
            apply_failures(&s->procs[i], now, failed[i]);
            if (readings[i].utime_ticks != TM_UNKNOWN
                    || readings[i].cpu_ns != TM_UNKNOWN
                    || readings[i].read_bytes != TM_UNKNOWN) {
                ring_push(s, &readings[i]);
            }
        }
        check_stuck(s, now, readings, n);
        s->ticks++;
        s->busy_ns += thread_cpu_ns() - cpu0;
        deadline_ns = now + s->period_ns;
        deadline.tv_sec = (time_t)(deadline_ns / 1000000000);
        deadline.tv_nsec = (long)(deadline_ns % 1000000000);
        while (!s->stop && !s->has_pending
               && pthread_cond_timedwait(&s->wake, &s->lock, &deadline) != ETIMEDOUT) {
        }
    }
    pthread_mutex_unlock(&s->lock);
    free(readings);
    free(failed);
    return NULL;
}

int
tm_sampler_start(tm_sampler *s, int64_t period_ns, int64_t stuck_after_ns,
                 size_t capacity)
{
    int rc = 0;

    pthread_mutex_lock(&s->lock);
    s->period_ns = period_ns;
    s->stuck_after_ns = stuck_after_ns;
    if (s->running) {
        pthread_mutex_unlock(&s->lock);
        return 0;
    }
    if (s->ring == NULL || s->cap != capacity) {
        tm_sample *ring = calloc(capacity > 0 ? capacity : 1, sizeof(tm_sample));

        if (ring == NULL) {
            pthread_mutex_unlock(&s->lock);
            return -1;
        }
        free(s->ring);
        s->ring = ring;
        s->cap = capacity;
        s->head = 0;
        s->len = 0;
    }
    s->stop = 0;
    s->started_ns = tm_clock_ns();
    if (pthread_create(&s->thread, NULL, sampler_main, s) != 0) {
        rc = -1;
    }
    else {
        s->running = 1;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

void
tm_sampler_stop(tm_sampler *s)
{
    pthread_mutex_lock(&s->lock);
    if (!s->running) {
        pthread_mutex_unlock(&s->lock);
        return;
    }
    s->stop = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    pthread_mutex_lock(&s->lock);
    s->running = 0;
    s->run_ns += tm_clock_ns() - s->started_ns;
    if (s->stuck_open) {
        s->stuck[s->nstuck - 1].ended_ns = tm_clock_ns();
        s->stuck_open = 0;
    }
    pthread_mutex_unlock(&s->lock);
}

int
tm_sampler_watch(tm_sampler *s, const int *pids, const int *roles, size_t n)
{
    tm_watched *procs = calloc(n > 0 ? n : 1, sizeof(tm_watched));
    size_t i;

    if (procs == NULL) {
        return -1;
    }
    for (i = 0; i < n; i++) {
        open_proc(&procs[i], pids[i], roles[i]);
    }
    pthread_mutex_lock(&s->lock);
    if (s->running) {
        if (s->has_pending) {
            close_procs(s->pending, s->npending);
            free(s->pending);
        }
        s->pending = procs;
        s->npending = n;
        s->has_pending = 1;
        pthread_cond_signal(&s->wake);
    }
    else {
        close_procs(s->procs, s->nprocs);
        free(s->procs);
        s->procs = procs;
        s->nprocs = n;
    }
    pthread_mutex_unlock(&s->lock);
    return 0;
}

void
tm_sampler_clear(tm_sampler *s)
{
    pthread_mutex_lock(&s->lock);
    s->head = 0;
    s->len = 0;
    s->overwritten = 0;
    s->ticks = 0;
    s->busy_ns = 0;
    s->run_ns = 0;
    s->started_ns = tm_clock_ns();
    s->nstuck = 0;
    s->stuck_open = 0;
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

size_t
tm_sampler_copy_procs(tm_sampler *s, tm_watched *out, size_t max)
{
    size_t n;
    const tm_watched *src;

    pthread_mutex_lock(&s->lock);
    src = s->has_pending ? s->pending : s->procs;
    n = s->has_pending ? s->npending : s->nprocs;
    n = n < max ? n : max;
    if (n > 0) {
        memcpy(out, src, n * sizeof(tm_watched));
    }
    pthread_mutex_unlock(&s->lock);
    return n;
}

void
tm_sampler_free(tm_sampler *s)
{
    tm_sampler_stop(s);
    close_procs(s->procs, s->nprocs);
    close_procs(s->pending, s->npending);
    free(s->procs);
    free(s->pending);
    free(s->ring);
    s->procs = s->pending = NULL;
    s->nprocs = s->npending = 0;
    s->ring = NULL;
    s->cap = s->len = s->head = 0;
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
}

/*
 * In a forked child the thread does not exist and the lock may have been
 * held by it at the fork: start over without touching either.  The child
 * is single-threaded here, so re-initialising is safe.
 */
void
tm_sampler_after_fork(tm_sampler *s)
{
    close_procs(s->procs, s->nprocs);
    close_procs(s->pending, s->npending);
    free(s->procs);
    free(s->pending);
    free(s->ring);
    tm_sampler_init(s);
}
