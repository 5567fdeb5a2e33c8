/*
 * /proc parsing for one process.  See procfs.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "procfs.h"

static const char *const file_names[TM_NFILES] = {
    "stat", "io", "schedstat", "smaps_rollup", "task"};

static int64_t page_bytes;   /* sysconf(_SC_PAGESIZE), read on first open */

void
tm_proc_open(tm_watched *w, tm_threads *t, int pid, int role)
{
    char path[64];
    int f;

    if (page_bytes == 0) {
        long size = sysconf(_SC_PAGESIZE);

        page_bytes = size > 0 ? (int64_t)size : 4096;
    }
    w->pid = pid;
    w->role = role;
    w->exited_ns = 0;
    w->threads_skipped = 0;
    for (f = 0; f < TM_NFILES; f++) {
        snprintf(path, sizeof(path), "/proc/%d/%s", pid, file_names[f]);
        w->fd[f] = open(path, O_RDONLY | O_CLOEXEC
                              | (f == TM_FILE_TASK ? O_DIRECTORY : 0));
        w->err[f] = w->fd[f] < 0 ? errno : 0;
    }
    if (t != NULL) {
        memset(t, 0, sizeof(*t));
    }
}

void
tm_proc_close(tm_watched *w)
{
    int f;

    for (f = 0; f < TM_NFILES; f++) {
        if (w->fd[f] >= 0) {
            close(w->fd[f]);
            w->fd[f] = -1;
        }
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
 * it is field 3 (state).  Field 20, the number of threads, goes to
 * *threads.
 */
static int
parse_stat(const char *buf, tm_sample *out, int64_t *threads)
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
            case 20:
                *threads = strtoll(p, NULL, 10);
                break;
            case 22:
                out->starttime = strtoll(p, NULL, 10);
                break;
            case 24:
                out->rss_bytes = strtoll(p, NULL, 10) * page_bytes;
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

/* The kB value of "name:" in an smaps_rollup, in bytes; -1 if absent. */
static int64_t
smaps_field(const char *buf, const char *name)
{
    const char *p = strstr(buf, name);

    if (p == NULL) {
        return -1;
    }
    return strtoll(p + strlen(name), NULL, 10) * 1024;
}

static int
parse_smaps(const char *buf, tm_sample *out)
{
    int64_t clean = smaps_field(buf, "\nPrivate_Clean:");
    int64_t dirty = smaps_field(buf, "\nPrivate_Dirty:");

    out->pss_bytes = smaps_field(buf, "\nPss:");
    if (out->pss_bytes < 0 || clean < 0 || dirty < 0) {
        out->pss_bytes = TM_UNKNOWN;
        return -1;
    }
    out->uss_bytes = clean + dirty;
    return 0;
}

/* schedstat's first two fields, on-CPU and run-queue ns, as decimal
   digits separated by a space: a digit loop, no sscanf, so that
   tm_schedstat_read is async-signal-safe (the stack sampler's wall tick
   reads it in its handler).  -1 unless both fields are read, or where one
   would overflow int64. */
static int
parse_schedstat(const char *buf, tm_sample *out)
{
    int64_t field[2] = {0, 0};
    int f = 0, in_digits = 0;
    const char *c;

    for (c = buf; *c != '\0' && f < 2; c++) {
        if (*c >= '0' && *c <= '9') {
            if (field[f] > (INT64_MAX - (*c - '0')) / 10) {
                return -1;
            }
            field[f] = field[f] * 10 + (*c - '0');
            in_digits = 1;
        }
        else {
            f += in_digits;
            in_digits = 0;
        }
    }
    if (f + in_digits < 2) {
        return -1;
    }
    out->cpu_ns = field[0];
    out->runq_ns = field[1];
    return 0;
}

/* ------------------------------------------------------------------ */
/* the other threads: /proc/PID/task                                  */

/* The head of one getdents64 record (linux_dirent64); the name follows at
   d_name, NUL-terminated, and records are 8-byte aligned. */
struct tm_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[1];
};

/* The longest record a TID makes: a name of at most 10 digits and its NUL
   after the head, rounded up to 8 bytes (the kernel's own rounding). */
#define TM_DIRENT_MAX \
    ((offsetof(struct tm_dirent64, d_name) + 11 + 7) & ~(size_t)7)

/* Read a small file of the directory dir into buf, NUL-terminated: its
   length, or -1 with errno set.  The descriptor lives for this call only
   (a child forked meanwhile would inherit it: traceml's fork hooks hold
   the readings off across fork(), see tm_sampler_fork_begin). */
static ssize_t
read_at(int dir, const char *name, char *buf, size_t size)
{
    int fd = openat(dir, name, O_RDONLY | O_CLOEXEC);
    ssize_t n;
    int err;

    if (fd < 0) {
        return -1;
    }
    n = read(fd, buf, size - 1);
    err = errno;
    close(fd);
    if (n < 0) {
        errno = err;
        return -1;
    }
    buf[n] = '\0';
    return n;
}

/* The state (field 3) of a stat line, or 0. */
static int
stat_state(const char *buf)
{
    const char *p = strrchr(buf, ')');

    if (p == NULL) {
        return 0;
    }
    p++;
    while (*p == ' ') {
        p++;
    }
    return (unsigned char)*p;
}

/*
 * The TIDs of w's task directory other than the leader's and self_tid, at
 * most max, in the kernel's order: one lseek() and one getdents64() into
 * a buffer on the stack (room for ~128 records, more than max).
 * *complete is 0 when some may have been left out; *self_seen 1 when
 * self_tid was there.  Returns their number, or -1 with errno set.
 */
static int
list_threads(const tm_watched *w, int self_tid, int32_t *tids, int max,
             int *complete, int *self_seen)
{
    uint64_t raw[512];       /* 4 KiB, aligned as the records are */
    const char *buf = (const char *)raw;
    int fd = w->fd[TM_FILE_TASK];
    long got, off;
    int n = 0;

    *complete = 1;
    *self_seen = 0;
    if (lseek(fd, 0, SEEK_SET) < 0) {
        return -1;
    }
    got = syscall(SYS_getdents64, fd, raw, sizeof(raw));
    if (got < 0) {
        return -1;
    }
    /* The kernel stops filling at the first record that does not fit, so
       with room left for the longest one it stopped at the end. */
    if ((size_t)got + TM_DIRENT_MAX > sizeof(raw)) {
        *complete = 0;
    }
    for (off = 0; off < got; ) {
        unsigned short reclen;
        const char *name = buf + off + offsetof(struct tm_dirent64, d_name);
        char *end;
        long tid;

        memcpy(&reclen, buf + off + offsetof(struct tm_dirent64, d_reclen),
               sizeof(reclen));
        if (reclen == 0 || off + reclen > got) {
            break;
        }
        off += reclen;
        if (*name < '0' || *name > '9') {
            continue;        /* "." and ".." */
        }
        errno = 0;
        tid = strtol(name, &end, 10);
        if (*end != '\0' || errno != 0 || tid <= 0 || tid > INT32_MAX
                || tid == w->pid) {
            continue;
        }
        if (tid == self_tid) {
            *self_seen = 1;
            continue;
        }
        if (n == max) {
            *complete = 0;
            break;
        }
        tids[n++] = (int32_t)tid;
    }
    return n;
}

/* Index of tid in t, trying hint first (threads keep their order), or -1. */
static int
find_tid(const tm_threads *t, int32_t tid, int hint)
{
    int j;

    if (hint < t->n && t->tid[hint] == tid) {
        return hint;
    }
    for (j = 0; j < t->n; j++) {
        if (t->tid[j] == tid) {
            return j;
        }
    }
    return -1;
}

/* What a thread's counters add to the totals: its growth since t's
   reading (index j), all of it when it was born since, else nothing
   (never backwards: a TID reused between readings). */
static int64_t
growth(const tm_threads *t, int j, int64_t cur, int64_t before)
{
    if (!t->primed || (j < 0 && t->complete)) {
        return cur;
    }
    if (j < 0) {
        return 0;            /* it may have been left out before */
    }
    return cur > before ? cur - before : 0;
}

/*
 * With out holding the leader's readings (/proc/PID/stat and schedstat):
 * the other threads' schedstat and state, and the totals they make (see
 * tm_sample in procfs.h).  threads: stat's thread count (TM_UNKNOWN if
 * unread); self_tid: the calling thread (the sampler's), left out of its
 * own process: it runs while it reads, and its CPU and waits are
 * traceml's, not the process's work.  A process of one thread costs
 * nothing here.
 *
 * A thread's stat (its state) is read only while no thread is found
 * running, and not at all for a thread found asleep (S) whose schedstat
 * has not moved since: a sleeping thread changes state only by running,
 * which moves its schedstat, or by waking up, and a thread woken that has
 * not run since the reading before is the one state this misses.
 */
static void
read_threads(tm_watched *w, tm_threads *t, tm_sample *out, int64_t threads,
             int self_tid)
{
    int32_t tid[TM_MAX_THREADS], others[TM_MAX_THREADS - 1];
    int64_t cpu[TM_MAX_THREADS], runq[TM_MAX_THREADS];
    uint32_t slices[TM_MAX_THREADS];
    char state[TM_MAX_THREADS];
    int timed = out->cpu_ns != TM_UNKNOWN;   /* schedstat is readable */
    int running = out->state == 'R', dormant = out->state == 'D';
    int n = 1, m = 0, complete = 1, self_seen = 0, k, j;
    int dir = w->fd[TM_FILE_TASK];
    int64_t cpu_total, runq_total;

    if (threads != 1 && dir >= 0) {
        m = list_threads(w, self_tid, others, TM_MAX_THREADS - 1, &complete,
                         &self_seen);
        if (m < 0) {
            /* ENOENT, ESRCH: the process is going (stat says so); else
               the directory is kept closed, its errno kept. */
            if (errno != ENOENT && errno != ESRCH) {
                w->err[TM_FILE_TASK] = errno != 0 ? errno : EIO;
                close(dir);
                w->fd[TM_FILE_TASK] = -1;
            }
            m = 0;
            complete = 0;
        }
    }
    else if (threads != 1) {
        complete = 0;
    }
    if (threads > 1 + m + self_seen) {
        w->threads_skipped += (uint64_t)(threads - 1 - m - self_seen);
    }
    tid[0] = w->pid;
    cpu[0] = out->cpu_ns;
    runq[0] = out->runq_ns;
    slices[0] = 0;           /* unused: the leader's state is read anyway */
    state[0] = (char)out->state;
    j = find_tid(t, w->pid, 0);
    cpu_total = t->cpu_total + growth(t, j, cpu[0], j >= 0 ? t->cpu_ns[j] : 0);
    runq_total = t->runq_total
                 + growth(t, j, runq[0], j >= 0 ? t->runq_ns[j] : 0);
    for (k = 0; k < m; k++) {
        char name[32], buf[512];
        int len = snprintf(name, sizeof(name), "%d/", (int)others[k]);
        long long c = 0, q = 0, sl = 0;
        int st = 0;

        /* A thread that exits meanwhile fails to open or read (ENOENT,
           ESRCH): it is left out of this reading. */
        if (timed) {
            memcpy(name + len, "schedstat", sizeof("schedstat"));
            if (read_at(dir, name, buf, 128) <= 0
                    || sscanf(buf, "%lld %lld %lld", &c, &q, &sl) < 2) {
                continue;
            }
        }
        j = timed ? find_tid(t, others[k], n) : -1;
        if (j >= 0 && t->state[j] == 'S' && c == t->cpu_ns[j]
                && q == t->runq_ns[j] && (uint32_t)sl == t->slices[j]) {
            st = 'S';        /* asleep since the reading before */
        }
        else if (!running) {
            memcpy(name + len, "stat", sizeof("stat"));
            if (read_at(dir, name, buf, sizeof(buf)) > 0) {
                st = stat_state(buf);
            }
        }
        running |= st == 'R';
        dormant |= st == 'D';
        if (timed) {
            cpu_total += growth(t, j, c, j >= 0 ? t->cpu_ns[j] : 0);
            runq_total += growth(t, j, q, j >= 0 ? t->runq_ns[j] : 0);
            tid[n] = others[k];
            cpu[n] = c;
            runq[n] = q;
            slices[n] = (uint32_t)sl;
            state[n] = (char)st;
            n++;
        }
    }
    if (out->state != 0) {
        out->state = running ? 'R' : dormant ? 'D' : out->state;
    }
    if (!timed) {
        return;
    }
    t->primed = 1;
    t->n = n;
    t->complete = complete;
    t->cpu_total = cpu_total;
    t->runq_total = runq_total;
    memcpy(t->tid, tid, (size_t)n * sizeof(tid[0]));
    memcpy(t->cpu_ns, cpu, (size_t)n * sizeof(cpu[0]));
    memcpy(t->runq_ns, runq, (size_t)n * sizeof(runq[0]));
    memcpy(t->slices, slices, (size_t)n * sizeof(slices[0]));
    memcpy(t->state, state, (size_t)n);
    out->cpu_ns = cpu_total;
    out->runq_ns = runq_total;
    out->threads = n;
}

int
tm_proc_sample(tm_watched *w, tm_threads *t, int64_t now, tm_sample *out,
               int deep, int self_tid)
{
    char buf[2048];
    int f;
    int any = 0;
    int64_t threads = TM_UNKNOWN;

    memset(out, 0, sizeof(*out));
    out->t_ns = now;
    out->pid = w->pid;
    out->role = w->role;
    out->utime_ticks = out->stime_ticks = TM_UNKNOWN;
    out->minflt = out->majflt = out->starttime = TM_UNKNOWN;
    out->read_bytes = out->rchar = TM_UNKNOWN;
    out->cpu_ns = out->runq_ns = TM_UNKNOWN;
    out->rss_bytes = out->pss_bytes = out->uss_bytes = TM_UNKNOWN;
    for (f = 0; f < TM_NFILES; f++) {
        int ok;

        if (w->fd[f] < 0 || (f == TM_FILE_SMAPS && !deep)
                || f == TM_FILE_TASK) {
            continue;
        }
        errno = 0;
        ok = read_file(w->fd[f], buf, sizeof(buf)) > 0;
        if (ok) {
            ok = (f == TM_FILE_STAT ? parse_stat(buf, out, &threads)
                  : f == TM_FILE_IO ? parse_io(buf, out)
                  : f == TM_FILE_SMAPS ? parse_smaps(buf, out)
                  : parse_schedstat(buf, out)) == 0;
            if (!ok) {
                errno = EPROTO;
            }
        }
        if (ok) {
            any = 1;
            continue;
        }
        w->err[f] = errno != 0 ? errno : EIO;
        close(w->fd[f]);
        w->fd[f] = -1;
        if (f == TM_FILE_STAT && w->exited_ns == 0) {
            /* The clock now, not the tick's: the tick may have begun
               before a last batch that this process made and exited
               after (a tick that reads many threads takes a while). */
            w->exited_ns = tm_clock_ns();
        }
    }
    out->threads = out->cpu_ns != TM_UNKNOWN;
    if (t != NULL && (out->cpu_ns != TM_UNKNOWN || out->state != 0)) {
        read_threads(w, t, out, threads, self_tid);
    }
    return any;
}

int
tm_thread_id(void)
{
    return (int)syscall(SYS_gettid);
}

int
tm_schedstat_open_thread(void)
{
    return open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
}

int
tm_schedstat_read(int fd, int64_t *cpu_ns, int64_t *runq_ns)
{
    char buf[128];
    ssize_t got = pread(fd, buf, sizeof(buf) - 1, 0);
    tm_sample one;

    if (got <= 0) {
        if (got == 0) {
            errno = EPROTO;
        }
        return -1;
    }
    buf[got] = '\0';
    if (parse_schedstat(buf, &one) != 0) {
        errno = EPROTO;
        return -1;
    }
    *cpu_ns = one.cpu_ns;
    *runq_ns = one.runq_ns;
    return 0;
}

void
tm_thread_clocks_init(tm_thread_clocks *c)
{
    c->fd = -1;
    c->tid = 0;
}

int
tm_thread_clocks_read(tm_thread_clocks *c, int64_t *cpu_ns, int64_t *runq_ns)
{
    int64_t ignored;
    int tid = tm_thread_id();
    int moved = tid != c->tid;

    if (moved) {
        if (c->fd >= 0) {
            close(c->fd);
        }
        c->fd = tm_schedstat_open_thread();
        c->tid = tid;
    }
    *cpu_ns = tm_thread_cpu_ns();
    if (c->fd < 0 || tm_schedstat_read(c->fd, &ignored, runq_ns) != 0) {
        *runq_ns = -1;
    }
    return moved;
}

void
tm_thread_clocks_close(tm_thread_clocks *c)
{
    if (c->fd >= 0) {
        close(c->fd);
    }
    tm_thread_clocks_init(c);
}

/* ------------------------------------------------------------------ */
/* the host: /proc/stat                                               */

static int64_t tick_ns;      /* 1e9 / sysconf(_SC_CLK_TCK), read on open */

int
tm_host_open(void)
{
    if (tick_ns == 0) {
        long hz = sysconf(_SC_CLK_TCK);

        tick_ns = hz > 0 ? INT64_C(1000000000) / hz : INT64_C(10000000);
    }
    return open("/proc/stat", O_RDONLY | O_CLOEXEC);
}

int
tm_host_sample(int fd, int64_t now, tm_sample *out)
{
    /* The first line alone: "cpu" and ten counters, under 256 bytes. */
    char buf[512];
    long long v[8];
    ssize_t got = pread(fd, buf, sizeof(buf) - 1, 0);

    if (got <= 0) {
        if (got == 0) {
            errno = EPROTO;
        }
        return -1;
    }
    buf[got] = '\0';
    /* user nice system idle iowait irq softirq steal (guest time is
       inside user already) */
    if (strncmp(buf, "cpu ", 4) != 0
            || sscanf(buf + 4, "%lld %lld %lld %lld %lld %lld %lld %lld",
                      &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                      &v[7]) != 8) {
        errno = EPROTO;
        return -1;
    }
    memset(out, 0, sizeof(*out));
    out->t_ns = now;
    out->pid = 0;
    out->role = TM_ROLE_HOST;
    out->utime_ticks = (int64_t)(v[0] + v[1]);
    out->stime_ticks = (int64_t)(v[2] + v[5] + v[6] + v[7]);
    out->cpu_ns = (out->utime_ticks + out->stime_ticks) * tick_ns;
    out->minflt = out->majflt = out->starttime = TM_UNKNOWN;
    out->read_bytes = out->rchar = TM_UNKNOWN;
    out->runq_ns = TM_UNKNOWN;
    out->rss_bytes = out->pss_bytes = out->uss_bytes = TM_UNKNOWN;
    return 0;
}
