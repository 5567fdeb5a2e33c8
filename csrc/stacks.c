/*
 * traceml._core.StackLog: sampled Python stacks of the process making the
 * batches (a DataLoader worker, or the main process at num_workers=0),
 * written where the samples are taken, read by the main process.
 *
 * How a sample is taken.  start() arms ITIMER_PROF, which counts the
 * process's CPU time (every thread) and sends SIGPROF each `interval_us`
 * of it to the thread that was running.  The C handler (on_sigprof) is
 * async-signal-safe: it reads the clock, and
 *   - in the sampled thread (the one that called start(), the thread that
 *     runs the dataset), counts a pending tick and calls
 *     PyErr_SetInterruptEx(SIGPROF) (documented async-signal-safe), so
 *     that the interpreter runs the Python-level handler, _on_signal(),
 *     at its next bytecode boundary in that thread; _on_signal() walks the
 *     frame it is given with the public frame API (PyFrame_GetCode,
 *     PyFrame_GetLineNumber, PyFrame_GetBack) and writes one sample;
 *   - in any other thread (a helper thread decoding, the queue's feeder
 *     thread pickling a batch), writes a sample with no stack at once:
 *     its CPU is "outside the sampled thread".
 * Off CPU.  ITIMER_PROF never fires while the process sleeps, so a batch
 * that waits (a sleep, a read, a lock) draws no sample.  start() also
 * makes a POSIX timer on CLOCK_MONOTONIC aimed at the sampled thread
 * (SIGEV_THREAD_ID, SIGPROF, si_code SI_TIMER), armed by TimedFetch only
 * while a batch is made (tm_stacks_wall).  At each of its ticks the
 * handler reads the thread's CPU clock and its run-queue time
 * (/proc/thread-self/schedstat, kept open and re-read with pread): the
 * ticks' wall time since the last one that the thread spent neither on a
 * CPU nor waiting for one are off-CPU ticks, taken like the CPU ones and
 * written as samples of kind TM_STACK_KIND_OFF with the same stack: where
 * the batch slept, read or waited on a lock.  A thread runnable but
 * queued behind other programs is waiting for a core, not blocked: on a
 * busy host a spinning sampler read "100% of the slow batches' time off
 * CPU" before the queue was counted (helper 31B).  A
 * blocking call the tick interrupts (time.sleep, a read on a pipe) is
 * retried by Python after the handler (PEP 475); a C library that does
 * not retry on EINTR could see one, which TRACEML_STACKS=0 avoids.
 *
 * A tick that lands in C code (a decoder holding the GIL or not) is taken
 * when that code returns to Python, and so names the Python line that
 * called it.  Ticks that pile up before the handler runs are one sample
 * with that weight.  The handler is installed with SA_RESTART, so that a
 * read() in a C library of the dataset never sees EINTR.  start() leaves
 * the process alone (and says why) when a SIGPROF handler or an
 * ITIMER_PROF timer is already set.
 *
 * Where samples go.  Like BatchLog, one anonymous shared mapping made in
 * the main process before the workers fork: a header, a code table (one
 * entry per code object a process met: file, qualified name, first line;
 * claimed with an atomic add and published with a ready word) and a ring
 * of samples (time, pid, worker, weight, kind, depth and up to
 * TM_STACK_DEPTH (code, line) frames, innermost first).  Each process
 * maps its code objects to table entries in a dict of its own (keyed by
 * address, the code object held so the address is not reused).  drain()
 * copies the published samples from its cursor on, as BatchLog's does.
 *
 * Cost: one handler call per tick (a few microseconds per frame walked);
 * benchmarks/bench_stacks.py measures it against the same loader unsampled.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define NO_IMPORT_ARRAY
#define PY_ARRAY_UNIQUE_SYMBOL traceml_ARRAY_API
#include <numpy/arrayobject.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "compat.h"
#include "module.h"
#include "procfs.h"

#define TM_STACK_DEPTH 48
#define TM_STACK_DEFAULT_CAPACITY (1u << 14)
#define TM_STACK_MAX_CAPACITY (1u << 20)
#define TM_STACK_CODES 8192
#define TM_STACK_FILE_BYTES 192
#define TM_STACK_NAME_BYTES 112
#define TM_STACK_NO_CODE UINT32_MAX

/* Sample kinds. */
#define TM_STACK_KIND_STACK 0   /* the sampled thread's stack */
#define TM_STACK_KIND_OTHER 1   /* a tick in another thread: no stack */
#define TM_STACK_KIND_OFF 2     /* wall-clock ticks of the sampled thread off CPU */

typedef struct {
    uint64_t claimed;         /* samples claimed so far (atomic add) */
    uint64_t codes_claimed;   /* code table entries claimed */
    uint64_t capacity;
    uint64_t codes_full;      /* frames whose code found the table full */
    uint64_t started;         /* start()s that armed the timer, any process */
    uint64_t refused;         /* start()s that left their process alone */
    int64_t refused_why;      /* the last refusal's reason (REASONS) */
    uint64_t reserved[1];
} tm_stacks_header;

/* Why start() left a process alone, as the header stores it. */
static const char *const REASONS[] = {
    "",
    "a SIGPROF handler was already set",
    "an ITIMER_PROF timer was already set",
    "not started in the main thread",
    "a traceml stack sampler already runs in this process",
};
#define TM_STACK_WHY_HANDLER 1
#define TM_STACK_WHY_TIMER 2
#define TM_STACK_WHY_THREAD 3
#define TM_STACK_WHY_RUNNING 4

typedef struct {
    uint64_t ready;           /* claim number + 1 once written */
    int32_t firstlineno;
    char file[TM_STACK_FILE_BYTES];
    char name[TM_STACK_NAME_BYTES];
} tm_stacks_code;

typedef struct {
    uint32_t code;            /* index in the code table, or TM_STACK_NO_CODE */
    int32_t line;             /* the line running, -1 unknown */
} tm_stacks_frame;

typedef struct {
    uint64_t ready;
    int64_t t_ns;             /* tm_clock_ns() at the (first) tick */
    int32_t pid;
    int32_t worker;           /* the DataLoader worker id; -1 the main process */
    int32_t weight;           /* ticks this sample stands for */
    int16_t kind;
    int16_t depth;
    tm_stacks_frame frames[TM_STACK_DEPTH];
} tm_stacks_slot;

typedef struct {
    PyObject_HEAD
    tm_stacks_header *hdr;    /* the shared mapping; NULL once unmapped */
    tm_stacks_code *codes;
    tm_stacks_slot *slots;
    size_t map_bytes;
    uint64_t capacity;
    uint64_t cursor;          /* the owner has drained up to this claim */
    uint64_t lost;
    pid_t owner;
    /* The sampling process's own (private after fork). */
    PyObject *code_index;     /* {id(code): (index, code)} */
    pid_t index_pid;          /* the process code_index belongs to */
    PyObject *old_handler;    /* signal.getsignal(SIGPROF) before start() */
    int worker;
    int taken_over;           /* stop() found another SIGPROF handler */
    uint64_t handler_errors;  /* _on_signal() calls that failed (cleared) */
} tm_stacks;

/*
 * What the C handler reads: plain data, never a Python object.  Signals
 * are per process, so one sampler runs in a process at a time.
 */
static struct {
    tm_stacks_header *hdr;    /* NULL: not sampling */
    tm_stacks_slot *slots;
    uint64_t capacity;
    pid_t tid;                /* the sampled thread */
    pid_t pid;
    int32_t worker;
    int pending;              /* ticks in the sampled thread not yet taken */
    int64_t pending_t_ns;
    struct sigaction saved;   /* the C handler before ours (Python's) */
    /* The wall-clock timer of the sampled thread (off-CPU ticks). */
    timer_t wall_timer;
    int wall_made;            /* wall_timer exists in process `pid` */
    int64_t wall_interval_ns;
    int64_t wall_cpu_ns;      /* the thread's CPU clock at the last wall tick */
    int runq_fd;              /* its schedstat, open in process `pid`; -1 none */
    int64_t wall_runq_ns;     /* its run-queue time at the last wall tick, -1 unknown */
    int64_t wall_off_ns;      /* wall time off CPU not yet counted as ticks */
    int pending_off;          /* off-CPU ticks not yet taken */
    int64_t pending_off_t_ns;
} tm_active = {.runq_fd = -1, .wall_runq_ns = -1};

static pid_t
current_tid(void)
{
    return (pid_t)syscall(SYS_gettid);
}

/* Claim a slot; its ready word cleared, to be published by publish(). */
static tm_stacks_slot *
claim_slot(tm_stacks_header *hdr, tm_stacks_slot *slots, uint64_t capacity,
           uint64_t *claim)
{
    tm_stacks_slot *slot;

    *claim = __atomic_fetch_add(&hdr->claimed, 1, __ATOMIC_RELAXED);
    slot = &slots[*claim % capacity];
    __atomic_store_n(&slot->ready, 0, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    return slot;
}

static void
publish(tm_stacks_slot *slot, uint64_t claim)
{
    __atomic_store_n(&slot->ready, claim + 1, __ATOMIC_RELEASE);
}

/* The calling thread's CPU clock in ns, -1 unknown (clock_gettime is
   async-signal-safe). */
static int64_t
thread_cpu_ns(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) {
        return -1;
    }
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The sampled thread's run-queue time in ns (schedstat's second field),
   -1 unknown; tm_schedstat_read is async-signal-safe. */
static int64_t
thread_runq_ns(void)
{
    int64_t cpu_ns, runq_ns;

    if (tm_active.runq_fd < 0
            || tm_schedstat_read(tm_active.runq_fd, &cpu_ns, &runq_ns) != 0) {
        return -1;
    }
    return runq_ns;
}

/* A wall-clock tick (and its overruns) in the sampled thread: the ticks
   it spent neither on a CPU nor queued for one since the last one are
   counted off CPU. */
static void
on_wall_tick(int sig, const siginfo_t *info, int64_t now)
{
    int64_t cpu = thread_cpu_ns();
    int64_t last = __atomic_exchange_n(&tm_active.wall_cpu_ns, cpu, __ATOMIC_ACQ_REL);
    int64_t runq = thread_runq_ns();
    int64_t last_runq = __atomic_exchange_n(&tm_active.wall_runq_ns, runq, __ATOMIC_ACQ_REL);
    int64_t interval = tm_active.wall_interval_ns;
    int ticks = 1 + (info->si_overrun > 0 ? info->si_overrun : 0);
    int off = ticks;

    if (cpu >= 0 && last >= 0 && interval > 0) {
        /* The wall time since the last tick the thread neither ran nor
           waited for a core, carried from tick to tick (a tick that lands
           late sees more than its interval, the next one less: rounding
           each alone counted a half-busy thread off CPU in a third of its
           ticks), at most one interval of credit. */
        int64_t busy = cpu - last;
        int64_t balance = tm_active.wall_off_ns;

        if (runq >= 0 && last_runq >= 0 && runq >= last_runq) {
            busy += runq - last_runq;
        }
        balance += (int64_t)ticks * interval - busy;
        if (balance < -interval) {
            balance = -interval;
        }
        off = balance > 0 ? (int)(balance / interval) : 0;
        tm_active.wall_off_ns = balance - (int64_t)off * interval;
    }
    if (off <= 0) {
        return;   /* on CPU: ITIMER_PROF samples that */
    }
    if (__atomic_fetch_add(&tm_active.pending_off, off, __ATOMIC_ACQ_REL) == 0) {
        __atomic_store_n(&tm_active.pending_off_t_ns, now, __ATOMIC_RELEASE);
    }
    PyErr_SetInterruptEx(sig);
}

/* The C-level SIGPROF handler: async-signal-safe (atomics, the clocks,
   gettid, PyErr_SetInterruptEx). */
static void
on_sigprof(int sig, siginfo_t *info, void *uctx)
{
    int saved_errno = errno;
    tm_stacks_header *hdr = __atomic_load_n(&tm_active.hdr, __ATOMIC_ACQUIRE);

    (void)uctx;
    if (hdr != NULL && getpid() == tm_active.pid) {
        int64_t now = tm_clock_ns();

        if (info != NULL && info->si_code == SI_TIMER) {
            /* The wall timer: aimed at the sampled thread only. */
            if (current_tid() == tm_active.tid) {
                on_wall_tick(sig, info, now);
            }
        }
        else if (current_tid() == tm_active.tid) {
            if (__atomic_fetch_add(&tm_active.pending, 1, __ATOMIC_ACQ_REL) == 0) {
                __atomic_store_n(&tm_active.pending_t_ns, now, __ATOMIC_RELEASE);
            }
            PyErr_SetInterruptEx(sig);
        }
        else {
            uint64_t claim;
            tm_stacks_slot *slot = claim_slot(hdr, tm_active.slots,
                                              tm_active.capacity, &claim);

            slot->t_ns = now;
            slot->pid = (int32_t)tm_active.pid;
            slot->worker = tm_active.worker;
            slot->weight = 1;
            slot->kind = TM_STACK_KIND_OTHER;
            slot->depth = 0;
            publish(slot, claim);
        }
    }
    errno = saved_errno;
}

/* traceml's SIGPROF action: on_sigprof, restartable system calls (a C
   library in the dataset never sees EINTR), on the alternate stack where
   one is set. */
static void
our_action(struct sigaction *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sa_sigaction = on_sigprof;
    sa->sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa->sa_mask);
}

static int
is_ours(const struct sigaction *sa)
{
    return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == on_sigprof;
}

/* Copy the tail of a UTF-8 string into dst (n bytes, NUL-terminated):
   a long path keeps its file name. */
static void
copy_tail(char *dst, size_t n, const char *src, Py_ssize_t len)
{
    const char *from = src;

    if ((size_t)len >= n) {
        from = src + len - (Py_ssize_t)(n - 1);
        while ((*from & 0xC0) == 0x80) {  /* not inside a character */
            from++;
        }
    }
    len -= (Py_ssize_t)(from - src);
    memcpy(dst, from, (size_t)len);
    dst[len] = '\0';
}

static int
copy_str_attr(PyObject *code, const char *attr, const char *fallback,
              char *dst, size_t n)
{
    PyObject *s = PyObject_GetAttrString(code, attr);
    const char *utf8;
    Py_ssize_t len;

    if (s == NULL && fallback != NULL) {
        PyErr_Clear();
        s = PyObject_GetAttrString(code, fallback);
    }
    if (s == NULL) {
        return -1;
    }
    if (!PyUnicode_Check(s)) {
        Py_DECREF(s);
        dst[0] = '\0';
        return 0;
    }
    utf8 = PyUnicode_AsUTF8AndSize(s, &len);
    if (utf8 == NULL) {
        Py_DECREF(s);
        return -1;
    }
    copy_tail(dst, n, utf8, len);
    Py_DECREF(s);
    return 0;
}

/* The code table index of `code` (a new entry on first sight); -1 with an
   error set. */
static long long
code_index_of(tm_stacks *self, PyObject *code)
{
    PyObject *key, *got;
    uint64_t claim;
    tm_stacks_code *entry;
    long long idx;

    key = PyLong_FromVoidPtr(code);
    if (key == NULL) {
        return -1;
    }
    got = PyDict_GetItemWithError(self->code_index, key);  /* borrowed */
    if (got != NULL) {
        idx = PyLong_AsLongLong(PyTuple_GET_ITEM(got, 0));
        Py_DECREF(key);
        return idx;
    }
    if (PyErr_Occurred()) {
        Py_DECREF(key);
        return -1;
    }
    claim = __atomic_fetch_add(&self->hdr->codes_claimed, 1, __ATOMIC_RELAXED);
    if (claim >= TM_STACK_CODES) {
        __atomic_fetch_add(&self->hdr->codes_full, 1, __ATOMIC_RELAXED);
        idx = TM_STACK_NO_CODE;
    }
    else {
        PyObject *first;

        entry = &self->codes[claim];
        if (copy_str_attr(code, "co_filename", NULL, entry->file,
                          sizeof(entry->file)) < 0
                || copy_str_attr(code, "co_qualname", "co_name", entry->name,
                                 sizeof(entry->name)) < 0) {
            Py_DECREF(key);
            return -1;
        }
        first = PyObject_GetAttrString(code, "co_firstlineno");
        entry->firstlineno = -1;
        if (first != NULL) {
            entry->firstlineno = (int32_t)PyLong_AsLong(first);
            Py_DECREF(first);
        }
        PyErr_Clear();
        __atomic_store_n(&entry->ready, claim + 1, __ATOMIC_RELEASE);
        idx = (long long)claim;
    }
    {
        PyObject *value = Py_BuildValue("(LO)", idx, code);
        int rc = value != NULL ? PyDict_SetItem(self->code_index, key, value) : -1;

        Py_XDECREF(value);
        Py_DECREF(key);
        if (rc < 0) {
            return -1;
        }
    }
    return idx;
}

/* One sample of the sampled thread: `weight` ticks of `kind` at `t_ns`,
   with its stack (`depth` frames, innermost first). */
static void
write_sample(tm_stacks *self, int64_t t_ns, int weight, int kind,
             const tm_stacks_frame *frames, int depth)
{
    uint64_t claim;
    tm_stacks_slot *slot = claim_slot(self->hdr, self->slots, self->capacity, &claim);

    slot->t_ns = t_ns;
    slot->pid = (int32_t)tm_active.pid;
    slot->worker = tm_active.worker;
    slot->weight = weight;
    slot->kind = (int16_t)kind;
    memcpy(slot->frames, frames, (size_t)depth * sizeof(frames[0]));
    slot->depth = (int16_t)depth;
    publish(slot, claim);
}

/* _on_signal(signum, frame): the Python-level SIGPROF handler.  Never
   raises: an error is counted and cleared, so the user's code it
   interrupts never sees it. */
static PyObject *
stacks_on_signal(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    tm_stacks *self = (tm_stacks *)op;
    PyObject *frame;
    int ticks, off, failed = 0;
    int64_t t_ns, off_t_ns;
    tm_stacks_frame frames[TM_STACK_DEPTH];
    int depth = 0;

    if (__atomic_load_n(&tm_active.hdr, __ATOMIC_ACQUIRE) != self->hdr
            || self->hdr == NULL || getpid() != tm_active.pid) {
        Py_RETURN_NONE;
    }
    ticks = __atomic_exchange_n(&tm_active.pending, 0, __ATOMIC_ACQ_REL);
    off = __atomic_exchange_n(&tm_active.pending_off, 0, __ATOMIC_ACQ_REL);
    if (ticks <= 0 && off <= 0) {
        Py_RETURN_NONE;  /* a trip with no tick of ours */
    }
    t_ns = __atomic_load_n(&tm_active.pending_t_ns, __ATOMIC_ACQUIRE);
    off_t_ns = __atomic_load_n(&tm_active.pending_off_t_ns, __ATOMIC_ACQUIRE);
    if (self->code_index == NULL || self->index_pid != getpid()) {
        /* Inherited across fork, the dict stays valid (the same code
           objects at the same addresses); made here only when missing. */
        if (self->code_index == NULL) {
            self->code_index = PyDict_New();
            if (self->code_index == NULL) {
                goto error;
            }
        }
        self->index_pid = getpid();
    }
    frame = (nargs >= 2 && PyFrame_Check(args[1])) ? args[1] : NULL;
    Py_XINCREF(frame);
    while (frame != NULL && depth < TM_STACK_DEPTH) {
        PyCodeObject *code = PyFrame_GetCode((PyFrameObject *)frame);
        long long idx = code_index_of(self, (PyObject *)code);
        PyFrameObject *back;

        Py_DECREF(code);
        if (idx < 0) {
            /* The stack so far is still written. */
            failed = 1;
            break;
        }
        frames[depth].code = (uint32_t)idx;
        frames[depth].line = PyFrame_GetLineNumber((PyFrameObject *)frame);
        depth++;
        back = PyFrame_GetBack((PyFrameObject *)frame);
        Py_DECREF(frame);
        frame = (PyObject *)back;
    }
    Py_XDECREF(frame);
    if (ticks > 0) {
        write_sample(self, t_ns, ticks, TM_STACK_KIND_STACK, frames, depth);
    }
    if (off > 0) {
        write_sample(self, off_t_ns, off, TM_STACK_KIND_OFF, frames, depth);
    }
    if (!failed) {
        Py_RETURN_NONE;
    }

error:
    PyErr_Clear();
    self->handler_errors++;
    Py_RETURN_NONE;
}

static PyObject *
stacks_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"capacity", NULL};
    Py_ssize_t capacity = TM_STACK_DEFAULT_CAPACITY;
    tm_stacks *self;
    size_t bytes;
    void *map;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|n:StackLog", kwlist,
                                     &capacity)) {
        return NULL;
    }
    if (capacity < 1 || capacity > TM_STACK_MAX_CAPACITY) {
        PyErr_Format(PyExc_ValueError,
                     "StackLog(): capacity must be 1 to %u samples, got %zd",
                     (unsigned)TM_STACK_MAX_CAPACITY, capacity);
        return NULL;
    }
    bytes = sizeof(tm_stacks_header) + TM_STACK_CODES * sizeof(tm_stacks_code)
            + (size_t)capacity * sizeof(tm_stacks_slot);
    self = (tm_stacks *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    /* Pages are touched only as they are written. */
    map = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        Py_DECREF(self);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    self->hdr = (tm_stacks_header *)map;
    self->codes = (tm_stacks_code *)((char *)map + sizeof(tm_stacks_header));
    self->slots = (tm_stacks_slot *)((char *)self->codes
                                     + TM_STACK_CODES * sizeof(tm_stacks_code));
    self->map_bytes = bytes;
    self->capacity = (uint64_t)capacity;
    self->hdr->capacity = (uint64_t)capacity;
    self->owner = getpid();
    self->worker = -1;
    return (PyObject *)self;
}

static int
stacks_traverse(PyObject *op, visitproc visit, void *arg)
{
    tm_stacks *self = (tm_stacks *)op;

    Py_VISIT(Py_TYPE(op));
    Py_VISIT(self->code_index);
    Py_VISIT(self->old_handler);
    return 0;
}

static int
stacks_clear(PyObject *op)
{
    tm_stacks *self = (tm_stacks *)op;

    Py_CLEAR(self->code_index);
    Py_CLEAR(self->old_handler);
    return 0;
}

/*
 * Where SIGPROF's C-level action is SIG_DFL (end the process), leave ours
 * installed instead: idle, it does nothing.  A tick generated before the
 * timer stopped can still arrive after stop() (valgrind queues signals and
 * delivers them at its own safe points; the smoke run under memcheck died
 * of "Profiling timer expired" so): it must find a handler.  Python's own
 * table still reads SIG_DFL (signal.getsignal), and the next
 * signal.signal() of anyone replaces ours.
 */
static void
keep_idle_handler(void)
{
    struct sigaction cur, ours;

    if (sigaction(SIGPROF, NULL, &cur) != 0 || (cur.sa_flags & SA_SIGINFO)
            || cur.sa_handler != SIG_DFL) {
        return;
    }
    our_action(&ours);
    sigaction(SIGPROF, &ours, NULL);
}

/*
 * Disarm the timer and put the C handler back (no Python call).  A tick
 * generated before the timer stopped may still be pending (valgrind holds
 * signals back, and a process-directed signal waits for a thread to take
 * it): with SIGPROF blocked in this thread, the timer is stopped and any
 * pending SIGPROF taken with sigtimedwait() before the old handler (often
 * SIG_DFL, which would end the process) comes back.
 */
static int
disarm(tm_stacks *self)
{
    if (tm_active.hdr != NULL && tm_active.hdr == self->hdr
            && tm_active.pid == getpid()) {
        struct itimerval off;
        struct timespec now = {0, 0};
        sigset_t prof, was;
        struct sigaction cur;

        if (sigaction(SIGPROF, NULL, &cur) == 0 && !is_ours(&cur)) {
            /* Someone installed their own SIGPROF handler since start()
               (a profiler): the timer and the handler are theirs now. */
            __atomic_store_n(&tm_active.hdr, NULL, __ATOMIC_RELEASE);
            return 1;
        }
        sigemptyset(&prof);
        sigaddset(&prof, SIGPROF);
        pthread_sigmask(SIG_BLOCK, &prof, &was);
        memset(&off, 0, sizeof(off));
        setitimer(ITIMER_PROF, &off, NULL);
        if (tm_active.wall_made) {
            timer_delete(tm_active.wall_timer);
            tm_active.wall_made = 0;
        }
        __atomic_store_n(&tm_active.hdr, NULL, __ATOMIC_RELEASE);
        if (tm_active.runq_fd >= 0) {
            close(tm_active.runq_fd);
            tm_active.runq_fd = -1;
        }
        while (sigtimedwait(&prof, NULL, &now) == SIGPROF) {
        }
        sigaction(SIGPROF, &tm_active.saved, NULL);
        keep_idle_handler();
        pthread_sigmask(SIG_SETMASK, &was, NULL);
    }
    return 0;
}

static void
stacks_dealloc(PyObject *op)
{
    tm_stacks *self = (tm_stacks *)op;
    PyTypeObject *type = Py_TYPE(op);

    PyObject_GC_UnTrack(op);
    (void)disarm(self);
    stacks_clear(op);
    if (self->hdr != NULL) {
        munmap(self->hdr, self->map_bytes);
        self->hdr = NULL;
    }
    type->tp_free(op);
    Py_DECREF(type);
}

/* signal.<name>(*args), a new reference or NULL; `args` (a new reference,
   or NULL with an error set) is consumed. */
static PyObject *
call_signal(const char *name, PyObject *args)
{
    PyObject *mod, *fn, *out;

    if (args == NULL) {
        return NULL;
    }
    mod = PyImport_ImportModule("signal");
    fn = mod != NULL ? PyObject_GetAttrString(mod, name) : NULL;
    Py_XDECREF(mod);
    out = fn != NULL ? PyObject_CallObject(fn, args) : NULL;
    Py_XDECREF(fn);
    Py_DECREF(args);
    return out;
}

/* start()'s answer when it leaves the process alone: the reason, counted
   in the shared header for the main process to read. */
static PyObject *
refuse(tm_stacks *self, int why)
{
    if (self->hdr != NULL) {
        __atomic_fetch_add(&self->hdr->refused, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&self->hdr->refused_why, (int64_t)why, __ATOMIC_RELEASE);
    }
    return PyUnicode_FromString(REASONS[why]);
}

/*
 * A stop() outside the main thread disarms the timer but cannot put the
 * Python-level handler back (signal.signal() refuses there): it leaves that
 * log's _on_signal, idle.  Given the handler signal.getsignal() returns, a
 * new reference to what that log found before its start() (None where it
 * was set outside Python), or NULL without an exception for any other
 * handler.
 */
static PyObject *
left_by_a_stop_elsewhere(PyObject *op, PyObject *prev)
{
    PyObject *owner;

    if (!PyCFunction_Check(prev)
            || PyCFunction_GetFunction(prev)
               != (PyCFunction)(void (*)(void))stacks_on_signal) {
        return NULL;
    }
    owner = PyCFunction_GetSelf(prev);
    if (owner == NULL || Py_TYPE(owner) != Py_TYPE(op)) {
        return NULL;
    }
    if (((tm_stacks *)owner)->old_handler != NULL) {
        return Py_NewRef(((tm_stacks *)owner)->old_handler);
    }
    return Py_NewRef(Py_None);
}

static PyObject *
stacks_start(PyObject *op, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"worker", "interval_us", "wall", NULL};
    tm_stacks *self = (tm_stacks *)op;
    int worker = -1;
    int wall = 1;
    long interval_us = 5000;
    struct sigaction cur, ours;
    struct itimerval timer;
    PyObject *handler, *prev, *call_args;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|ilp:start", kwlist,
                                     &worker, &interval_us, &wall)) {
        return NULL;
    }
    if (worker < -1) {
        PyErr_Format(PyExc_ValueError,
                     "StackLog.start(): worker must be >= -1, got %d", worker);
        return NULL;
    }
    if (interval_us < 1000 || interval_us > 1000000) {
        PyErr_Format(PyExc_ValueError,
                     "StackLog.start(): interval_us must be 1000 to 1000000, got %ld",
                     interval_us);
        return NULL;
    }
    if (self->hdr == NULL) {
        return PyUnicode_FromString("the log is closed");
    }
    if (tm_active.hdr != NULL && tm_active.pid == getpid()) {
        return refuse(self, TM_STACK_WHY_RUNNING);
    }
    if (sigaction(SIGPROF, NULL, &cur) != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    prev = call_signal("getsignal", Py_BuildValue("(i)", SIGPROF));
    if (prev == NULL) {
        return NULL;
    }
    {
        PyObject *before = left_by_a_stop_elsewhere(op, prev);

        /* A handler of our own, inherited across fork or left idle by a
           stop() outside the main thread, is no one else's. */
        if (before != NULL) {
            Py_SETREF(prev, before);
        }
        else if (!is_ours(&cur) && ((cur.sa_flags & SA_SIGINFO)
                                    || (cur.sa_handler != SIG_DFL
                                        && cur.sa_handler != SIG_IGN))) {
            Py_DECREF(prev);
            return refuse(self, TM_STACK_WHY_HANDLER);
        }
    }
    if (getitimer(ITIMER_PROF, &timer) != 0) {
        Py_DECREF(prev);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (timer.it_value.tv_sec || timer.it_value.tv_usec
            || timer.it_interval.tv_sec || timer.it_interval.tv_usec) {
        Py_DECREF(prev);
        return refuse(self, TM_STACK_WHY_TIMER);
    }
    /* The Python-level handler, through which PyErr_SetInterruptEx()
       reaches _on_signal(); signal.signal() raises outside the main
       thread, which is said, not raised. */
    handler = PyObject_GetAttrString(op, "_on_signal");
    if (handler == NULL) {
        Py_DECREF(prev);
        return NULL;
    }
    call_args = Py_BuildValue("(iN)", SIGPROF, handler);
    if (call_args == NULL) {
        Py_DECREF(prev);
        return NULL;
    }
    {
        PyObject *r = call_signal("signal", call_args);

        if (r == NULL) {
            Py_DECREF(prev);
            if (PyErr_ExceptionMatches(PyExc_ValueError)) {
                PyErr_Clear();
                return refuse(self, TM_STACK_WHY_THREAD);
            }
            return NULL;
        }
        Py_DECREF(r);
    }
    Py_XSETREF(self->old_handler, prev);
    /* Ours over Python's C handler. */
    our_action(&ours);
    if (sigaction(SIGPROF, &ours, &tm_active.saved) != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (is_ours(&tm_active.saved)) {
        /* Inherited: put SIG_DFL back at stop(). */
        memset(&tm_active.saved, 0, sizeof(tm_active.saved));
        tm_active.saved.sa_handler = SIG_DFL;
    }
    self->worker = worker;
    tm_active.slots = self->slots;
    tm_active.capacity = self->capacity;
    if (tm_active.runq_fd >= 0) {
        /* Left open by a sampler in the parent before a fork. */
        close(tm_active.runq_fd);
    }
    /* This thread's run-queue time for the wall ticks; -1: a kernel
       without schedstat, where a wait for a core reads as off CPU. */
    tm_active.runq_fd = tm_schedstat_open_thread();
    tm_active.tid = current_tid();
    tm_active.pid = getpid();
    tm_active.worker = worker;
    __atomic_store_n(&tm_active.pending, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&tm_active.pending_off, 0, __ATOMIC_RELEASE);
    tm_active.wall_made = 0;
    if (wall) {
        /* The wall-clock timer, aimed at this thread, disarmed until a
           batch begins (tm_stacks_wall); without one (an old kernel, or
           wall=False), only CPU is sampled. */
        struct sigevent sev;

        memset(&sev, 0, sizeof(sev));
        sev.sigev_notify = SIGEV_THREAD_ID;
        sev.sigev_signo = SIGPROF;
        sev.sigev_notify_thread_id = tm_active.tid;
        tm_active.wall_interval_ns = (int64_t)interval_us * 1000;
        tm_active.wall_made = timer_create(CLOCK_MONOTONIC, &sev, &tm_active.wall_timer) == 0;
    }
    __atomic_store_n(&tm_active.hdr, self->hdr, __ATOMIC_RELEASE);
    timer.it_interval.tv_sec = interval_us / 1000000;
    timer.it_interval.tv_usec = interval_us % 1000000;
    timer.it_value = timer.it_interval;
    if (setitimer(ITIMER_PROF, &timer, NULL) != 0) {
        int e = errno;

        (void)disarm(self);
        errno = e;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    __atomic_fetch_add(&self->hdr->started, 1, __ATOMIC_RELAXED);
    Py_RETURN_NONE;
}

void
tm_stacks_wall(int on)
{
    struct itimerspec spec;

    /* wall_made first: without the timer (wall=False) a fetch pays two
       loads, not getpid() and gettid(). */
    if (__atomic_load_n(&tm_active.hdr, __ATOMIC_ACQUIRE) == NULL
            || !tm_active.wall_made || tm_active.pid != getpid()
            || current_tid() != tm_active.tid) {
        return;
    }
    memset(&spec, 0, sizeof(spec));
    if (on) {
        __atomic_store_n(&tm_active.wall_cpu_ns, thread_cpu_ns(), __ATOMIC_RELEASE);
        __atomic_store_n(&tm_active.wall_runq_ns, thread_runq_ns(), __ATOMIC_RELEASE);
        tm_active.wall_off_ns = 0;
        spec.it_interval.tv_sec = (time_t)(tm_active.wall_interval_ns / 1000000000);
        spec.it_interval.tv_nsec = (long)(tm_active.wall_interval_ns % 1000000000);
        spec.it_value = spec.it_interval;
    }
    (void)timer_settime(tm_active.wall_timer, 0, &spec, NULL);
}

static PyObject *
stacks_stop(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    tm_stacks *self = (tm_stacks *)op;
    int was = tm_active.hdr != NULL && tm_active.hdr == self->hdr
              && tm_active.pid == getpid();
    int taken = disarm(self);

    if (taken) {
        /* Not ours to restore: the handler in place is someone else's. */
        Py_CLEAR(self->old_handler);
        self->taken_over = 1;
    }
    if (was && self->old_handler != NULL) {
        PyObject *r;

        if (self->old_handler == Py_None) {
            /* Set outside Python: SIG_DFL is what Python can put back. */
            PyObject *mod = PyImport_ImportModule("signal");
            PyObject *dfl = mod != NULL ? PyObject_GetAttrString(mod, "SIG_DFL") : NULL;

            Py_XDECREF(mod);
            if (dfl == NULL) {
                return NULL;
            }
            Py_SETREF(self->old_handler, dfl);
        }
        {
            /* SIGPROF held off in this thread while Python puts its
               handler back (SIG_DFL, for a moment, at the C level) and
               the idle one goes in: a late tick waits for the latter. */
            sigset_t prof, mask;

            sigemptyset(&prof);
            sigaddset(&prof, SIGPROF);
            pthread_sigmask(SIG_BLOCK, &prof, &mask);
            r = call_signal("signal", Py_BuildValue("(iO)", SIGPROF, self->old_handler));
            keep_idle_handler();
            pthread_sigmask(SIG_SETMASK, &mask, NULL);
        }
        if (r == NULL) {
            return NULL;
        }
        Py_DECREF(r);
        Py_CLEAR(self->old_handler);
    }
    return PyBool_FromLong(was);
}

static PyObject *
stacks_drain(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    tm_stacks *self = (tm_stacks *)op;
    uint64_t claimed, first, i, ncodes;
    npy_intp dims[2];
    PyArrayObject *samples = NULL, *frames = NULL;
    PyObject *codes = NULL, *out;
    int64_t *srow;
    int32_t *frow;
    npy_intp n = 0, nf = 0, cap;

    if (self->hdr == NULL || getpid() != self->owner) {
        PyErr_SetString(PyExc_RuntimeError,
                        "StackLog.drain(): only the process that made the log drains it");
        return NULL;
    }
    claimed = __atomic_load_n(&self->hdr->claimed, __ATOMIC_ACQUIRE);
    first = self->cursor;
    if (claimed - first > self->capacity) {
        self->lost += claimed - self->capacity - first;
        first = claimed - self->capacity;
    }
    cap = (npy_intp)(claimed - first);
    dims[0] = cap;
    dims[1] = 6;
    samples = (PyArrayObject *)PyArray_ZEROS(2, dims, NPY_INT64, 0);
    dims[0] = cap * TM_STACK_DEPTH;
    dims[1] = 2;
    frames = (PyArrayObject *)PyArray_ZEROS(2, dims, NPY_INT32, 0);
    if (samples == NULL || frames == NULL) {
        goto fail;
    }
    srow = (int64_t *)PyArray_DATA(samples);
    frow = (int32_t *)PyArray_DATA(frames);
    for (i = first; i < claimed; i++) {
        tm_stacks_slot *slot = &self->slots[i % self->capacity];
        uint64_t ready = __atomic_load_n(&slot->ready, __ATOMIC_ACQUIRE);
        tm_stacks_slot copy;
        int d, depth;

        if (ready < i + 1) {
            break;
        }
        if (ready == i + 1) {
            memcpy(&copy, slot, sizeof(copy));
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            if (__atomic_load_n(&slot->ready, __ATOMIC_RELAXED) == i + 1) {
                depth = copy.depth < 0 ? 0
                        : (copy.depth > TM_STACK_DEPTH ? TM_STACK_DEPTH : copy.depth);
                srow[6 * n + 0] = copy.t_ns;
                srow[6 * n + 1] = copy.pid;
                srow[6 * n + 2] = copy.worker;
                srow[6 * n + 3] = copy.weight;
                srow[6 * n + 4] = copy.kind;
                srow[6 * n + 5] = depth;
                for (d = 0; d < depth; d++) {
                    frow[2 * nf + 0] = (int32_t)copy.frames[d].code;
                    frow[2 * nf + 1] = copy.frames[d].line;
                    nf++;
                }
                n++;
                continue;
            }
        }
        self->lost++;
    }
    self->cursor = i;
    ncodes = __atomic_load_n(&self->hdr->codes_claimed, __ATOMIC_ACQUIRE);
    if (ncodes > TM_STACK_CODES) {
        ncodes = TM_STACK_CODES;
    }
    codes = PyList_New(0);
    if (codes == NULL) {
        goto fail;
    }
    for (i = 0; i < ncodes; i++) {
        tm_stacks_code *c = &self->codes[i];
        PyObject *row;

        if (__atomic_load_n(&c->ready, __ATOMIC_ACQUIRE) != i + 1) {
            row = Py_None;
            Py_INCREF(row);
        }
        else {
            row = Py_BuildValue("(s#s#i)", c->file, (Py_ssize_t)strnlen(c->file, sizeof(c->file)),
                                c->name, (Py_ssize_t)strnlen(c->name, sizeof(c->name)),
                                (int)c->firstlineno);
            if (row == NULL) {
                /* Bytes that are not UTF-8 (a truncated name): replaced. */
                PyErr_Clear();
                row = Py_BuildValue("(ssi)", "?", "?", (int)c->firstlineno);
                if (row == NULL) {
                    goto fail;
                }
            }
        }
        if (PyList_Append(codes, row) < 0) {
            Py_DECREF(row);
            goto fail;
        }
        Py_DECREF(row);
    }
    {
        PyObject *s = PySequence_GetSlice((PyObject *)samples, 0, n);
        PyObject *f = PySequence_GetSlice((PyObject *)frames, 0, nf);

        if (s == NULL || f == NULL) {
            Py_XDECREF(s);
            Py_XDECREF(f);
            goto fail;
        }
        out = Py_BuildValue("(NNN)", s, f, codes);
    }
    Py_DECREF(samples);
    Py_DECREF(frames);
    return out;

fail:
    Py_XDECREF(samples);
    Py_XDECREF(frames);
    Py_XDECREF(codes);
    return NULL;
}

static PyObject *
stacks_info(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    tm_stacks *self = (tm_stacks *)op;

    if (self->hdr == NULL) {
        Py_RETURN_NONE;
    }
    int64_t why = __atomic_load_n(&self->hdr->refused_why, __ATOMIC_ACQUIRE);

    if (why < 0 || why >= (int64_t)(sizeof(REASONS) / sizeof(REASONS[0]))) {
        why = 0;
    }
    return Py_BuildValue(
        "{s:K,s:K,s:z,s:K,s:K,s:K,s:K,s:K,s:i,s:i,s:i}",
        "started", (unsigned long long)__atomic_load_n(&self->hdr->started, __ATOMIC_ACQUIRE),
        "refused", (unsigned long long)__atomic_load_n(&self->hdr->refused, __ATOMIC_ACQUIRE),
        "refused_why", why ? REASONS[why] : NULL,
        "claimed", (unsigned long long)__atomic_load_n(&self->hdr->claimed, __ATOMIC_ACQUIRE),
        "codes", (unsigned long long)__atomic_load_n(&self->hdr->codes_claimed, __ATOMIC_ACQUIRE),
        "codes_full", (unsigned long long)__atomic_load_n(&self->hdr->codes_full, __ATOMIC_ACQUIRE),
        "lost", (unsigned long long)self->lost,
        "handler_errors", (unsigned long long)self->handler_errors,
        "depth", TM_STACK_DEPTH,
        "running", tm_active.hdr == self->hdr && tm_active.pid == getpid(),
        "taken_over", self->taken_over);
}

static PyMethodDef stacks_methods[] = {
    {"start", (PyCFunction)(void (*)(void))stacks_start, METH_VARARGS | METH_KEYWORDS,
     "start(worker=-1, interval_us=5000, wall=True)\n--\n\n"
     "Sample this process's Python stacks every interval_us of its CPU\n"
     "time (ITIMER_PROF), tagging samples with `worker` (-1: the main\n"
     "process), and, with `wall`, while TimedFetch makes a batch, every\n"
     "interval_us of wall time that the calling thread spends off CPU\n"
     "(kind 2; arming it costs each fetch about 2.5 us).  Call it\n"
     "in the thread that makes the batches, which must\n"
     "be the process's main thread.  Returns None once sampling, else a\n"
     "str saying why it left the process alone (a SIGPROF handler or an\n"
     "ITIMER_PROF timer already set, not the main thread, another traceml\n"
     "sampler running).  Raises ValueError for a worker below -1 or an\n"
     "interval outside 1000-1000000 us."},
    {"stop", stacks_stop, METH_NOARGS,
     "stop()\n--\n\nDisarm the timer and restore SIGPROF's handlers, unless\n"
     "another SIGPROF handler was installed since start(): then both are\n"
     "its owner's and are left alone.  Returns whether this log was\n"
     "sampling in this process."},
    {"drain", stacks_drain, METH_NOARGS,
     "drain()\n--\n\nThe samples published since the last drain:\n"
     "(samples, frames, codes).  samples: int64 (n, 6), columns t_ns,\n"
     "pid, worker, weight (ticks), kind (0 a stack of the sampled thread,\n"
     "1 a tick in another thread), depth.  frames: int32 (sum(depth), 2),\n"
     "columns code (index into codes; 4294967295 as -1: table full) and\n"
     "line, each sample's frames innermost first.  codes: the code table,\n"
     "a list of (file, qualified name, first line) or None (unpublished).\n"
     "Only the process that made the log drains it (RuntimeError)."},
    {"info", stacks_info, METH_NOARGS,
     "info()\n--\n\nCounters over every process: started and refused\n"
     "start()s, refused_why (the last refusal's reason, or None), claimed\n"
     "samples, codes, codes_full (frames whose code found the table full),\n"
     "lost (overwritten before a drain); this process's handler_errors;\n"
     "depth (frames kept a sample); running (sampling in this process);\n"
     "taken_over (stop() found another SIGPROF handler in place, and left\n"
     "it and the timer alone)."},
    {"_on_signal", (PyCFunction)(void (*)(void))stacks_on_signal, METH_FASTCALL,
     "_on_signal(signum, frame)\n--\n\nThe Python-level SIGPROF handler."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot stacks_slots[] = {
    {Py_tp_doc, (void *)
     "StackLog(capacity=16384)\n--\n\n"
     "Sampled Python stacks of the processes that make the batches, in an\n"
     "anonymous shared mapping that forked DataLoader workers inherit.\n"
     "capacity: samples the ring holds before the oldest are overwritten\n"
     "(1 to 1048576; ValueError outside)."},
    {Py_tp_new, stacks_new},
    {Py_tp_dealloc, stacks_dealloc},
    {Py_tp_traverse, stacks_traverse},
    {Py_tp_clear, stacks_clear},
    {Py_tp_methods, stacks_methods},
    {0, NULL},
};

PyType_Spec tm_stacklog_spec = {
    .name = "traceml._core.StackLog",
    .basicsize = sizeof(tm_stacks),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = stacks_slots,
};
