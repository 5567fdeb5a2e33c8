/*
 * /proc parsing for one process.  See procfs.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "procfs.h"

static const char *const file_names[TM_NFILES] = {
    "stat", "io", "schedstat", "smaps_rollup"};

static int64_t page_bytes;   /* sysconf(_SC_PAGESIZE), read on first open */

void
tm_proc_open(tm_watched *w, int pid, int role)
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
    for (f = 0; f < TM_NFILES; f++) {
        snprintf(path, sizeof(path), "/proc/%d/%s", pid, file_names[f]);
        w->fd[f] = open(path, O_RDONLY | O_CLOEXEC);
        w->err[f] = w->fd[f] < 0 ? errno : 0;
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

int
tm_proc_sample(tm_watched *w, int64_t now, tm_sample *out, int deep)
{
    char buf[2048];
    int f;
    int any = 0;

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

        if (w->fd[f] < 0 || (f == TM_FILE_SMAPS && !deep)) {
            continue;
        }
        errno = 0;
        ok = read_file(w->fd[f], buf, sizeof(buf)) > 0;
        if (ok) {
            ok = (f == TM_FILE_STAT ? parse_stat(buf, out)
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
            w->exited_ns = now;
        }
    }
    return any;
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
