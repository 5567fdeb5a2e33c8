/*
 * What the translation units of traceml._core share: the module state, the
 * Recorder's layout, and the entry points each file gives module.c.
 *
 * Rooms: module.c (state, life, fork), recorder.c (the Recorder type and
 * its store bindings), probes.c (the probes), wrap.c (WrapIter),
 * sampler_py.c (the sampler's Python face), reduce_py.c (the reducers'
 * NumPy face); store.c, sampler.c, procfs.c and reduce.c know no Python
 * objects.
 */
#ifndef TRACEML_MODULE_H
#define TRACEML_MODULE_H

#include "clock.h"
#include "sampler.h"
#include "store.h"

/* One batch made in a DataLoader worker (traceml._core.BatchLog), as
   BATCH_RECORD_DTYPE gives it to NumPy. */
typedef struct {
    int64_t begin_ns;         /* clock_ns() when the worker began the batch */
    int64_t end_ns;           /* ... and when it was made */
    int64_t cpu_ns;           /* the worker process's CPU over it, every
                                 thread's; -1 unknown */
    int64_t runq_ns;          /* the fetching thread's wait for a core; -1 unknown */
    int64_t seq;              /* its number among the worker's batches of the epoch */
    int32_t epoch;            /* the owner's epoch when the fetcher was made */
    int32_t worker;           /* the DataLoader worker id */
} tm_batch_record;

/* One item a DataLoader worker timed inside a batch (csrc/itemlog.c): a
   sample's __getitem__ or __next__, a __getitems__ or a collate_fn call,
   as ITEM_RECORD_DTYPE gives it to NumPy.  Its batch is the BatchLog
   record of the same epoch and worker whose interval holds it. */
typedef struct {
    int64_t begin_ns;         /* clock_ns() when the call began */
    int64_t end_ns;           /* ... and when it returned */
    int64_t cpu_ns;           /* the worker thread's CPU over it; -1 unknown */
    int64_t index;            /* the sample index (map-style, -1 when not an
                                 int), the item's position in the worker
                                 (iterable), -1 (collate, __getitems__) */
    int32_t epoch;
    int32_t worker;
    int32_t kind;             /* TM_ITEM_* */
    int32_t count;            /* items in the call: 1 a sample, the list's
                                 length for __getitems__ and collate_fn,
                                 -1 unknown */
} tm_item_record;

#define TM_ITEM_GETITEM 0
#define TM_ITEM_NEXT 1
#define TM_ITEM_GETITEMS 2
#define TM_ITEM_COLLATE 3
#define TM_ITEM_GC 4              /* a garbage collection in the worker */
#define TM_ITEM_INIT 5            /* the loader's worker_init_fn, once a worker */

/* The probes' open step and the count of each documented misuse. */
typedef struct {
    int64_t begin_ns;
    int64_t fetch_done_ns;
    int open;
    int fetched;
    /* Which steps are clocked (TM_PROBE_CLOCKED of the step's index k
       since the recording began): the steps to begin before the next clocked one,
       counted down (step_begin() runs every step: no division there), and
       that one's k. */
    uint64_t clock_in;
    uint64_t clock_k;
    int clocked;
    uint64_t begin_while_open;
    uint64_t fetch_without_step;
    uint64_t fetch_repeated;
    uint64_t end_without_step;
    uint64_t end_without_fetch;
    uint64_t abandoned;       /* open steps dropped by abandon_step() */
    /* The open step's thread clocks (clocked steps only): read at
       step_begin() and at its first fetch_done(); its fetch's CPU and
       run-queue ns (-1 unknown) go to the store when it closes, with its
       body's from fetch_done() to the close. */
    int64_t begin_cpu_ns, begin_runq_ns;
    int64_t done_cpu_ns, done_runq_ns;
    int64_t fetch_cpu_ns, fetch_runq_ns;
    /* The process's CPU clock at step_begin() and the other threads' CPU
       time inside the fetch (tm_others_cpu_delta, -1 unknown). */
    int64_t begin_proc_ns, begin_sampler_ns, fetch_others_cpu_ns;
    clockid_t begin_sampler_clock;
} tm_probes;

typedef struct tm_state tm_state;

/* Testing hook: a clock that returns given values in turn. */
typedef struct {
    int64_t *values;          /* NULL: the real clock */
    size_t n;
    size_t next;
    uint64_t overrun;         /* reads past the end (the last value repeats) */
} tm_test_clock;

/*
 * traceml._core.Recorder: one recording.  It owns its store, its probes'
 * open step and misuse counts, and (through its live WrapIters) its watch
 * entries and fetch slots.  Python's traceml.Recorder subclasses it to add
 * the sources and the report.
 */
typedef struct tm_recorder {
    PyObject_HEAD
    /* The clock's test hook and the store's append fields are read by
       every step: they come first, side by side. */
    tm_test_clock clock;
    tm_store store;
    tm_probes probes;
    tm_thread_clocks probe_clocks;  /* the probing thread's (probes.c) */
    tm_state *st;             /* module state; NULL once cleared (below) */
    PyObject *module;         /* held, so that st outlives the recorder even
                                 when a garbage cycle clears the type first */
    uint32_t id;              /* unique in this process, never 0 */
    /* The probes' CUDA-event hooks (traceml.gpu): begin() is called before
       step_begin() reads the clock, done(begin_ns) after fetch_done() has
       read it.  NULL (the default): off, and the probes pay one pointer
       test each. */
    PyObject *gpu_begin;
    PyObject *gpu_done;
    struct tm_recorder *prev; /* the module's list of live recorders */
    struct tm_recorder *next;
} tm_recorder;

struct tm_state {
    tm_sampler sampler;
    int sampler_ok;            /* tm_sampler_init succeeded */
    int forks_begun;           /* tm_sampler_fork_begin()s not yet done */
    uint64_t fork_generation;  /* bumped in every forked child */
    uint32_t next_recorder_id;
    tm_recorder *recorders;    /* live recorders (borrowed), for fork */
    PyObject *default_probes;  /* the module-level probes' object: holds the
                                  default recorder, which they record into */
    PyTypeObject *recorder_type;
    PyTypeObject *wrapiter_type;
    PyTypeObject *batchlog_type;
    PyObject *record_dtype;    /* numpy.dtype of one tm_record */
    PyObject *sample_dtype;    /* numpy.dtype of one tm_sample */
    PyObject *gpu_util_dtype;  /* numpy.dtype of one tm_gpu_sample */
    PyObject *batch_record_dtype;  /* numpy.dtype of one tm_batch_record */
    PyObject *item_record_dtype;   /* numpy.dtype of one tm_item_record */
    PyTypeObject *timedcall_type;  /* itemlog.c's, for __getitems__ */
    PyObject *str_task_info;   /* interned "_task_info" */
    PyObject *str_nbytes;      /* interned "nbytes" */
    PyObject *str_torch;       /* interned "torch" */
    PyObject *tensor_type;     /* torch.Tensor once torch is imported */
};

/* The clock a recorder's steps are stamped with. */
static inline int64_t
tm_rec_clock(tm_recorder *rec)
{
    tm_test_clock *c = &rec->clock;

    if (TM_LIKELY(c->values == NULL)) {
        return tm_clock_ns();
    }
    if (c->next < c->n) {
        return c->values[c->next++];
    }
    c->overrun++;
    return c->values[c->n - 1];
}

/* traceml's sampler thread's CPU clock: a clocked fetch takes that
   thread's CPU out of the process's other threads' (which are then the
   user's and torch's).  Reads its time (ns) and the clock it read into
   *clock; -1 without a running sampler thread. */
static inline int64_t
tm_rec_sampler_cpu_ns(tm_recorder *rec, clockid_t *clock)
{
    tm_state *st = rec->st;
    struct timespec ts;

    if (st == NULL || !st->sampler_ok
        || !__atomic_load_n(&st->sampler.cpu_clock_set, __ATOMIC_ACQUIRE)) {
        return -1;
    }
    *clock = __atomic_load_n(&st->sampler.cpu_clock, __ATOMIC_RELAXED);
    if (clock_gettime(*clock, &ts) != 0) {
        return -1;              /* the thread ended meanwhile */
    }
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

/* The sampler thread's CPU time between two tm_rec_sampler_cpu_ns
   readings (ns): where the thread started between them (no reading
   before, or another thread's clock), all of the new thread's CPU time;
   0 where there is no reading after. */
static inline int64_t
tm_sampler_cpu_delta(int64_t before, clockid_t before_clock, int64_t after,
                     clockid_t after_clock)
{
    if (after < 0) {
        return 0;
    }
    if (before < 0 || before_clock != after_clock) {
        return after;
    }
    return after >= before ? after - before : 0;
}

/* wrap.c: how many clocked fetches (TM_CLOCKED) this thread is inside.
   Per thread (a GCC thread-local, accepted under -std=c99): a TimedIter
   set to time only those (itemlog.c: the main process's sampler) reads
   it on every call at the cost of one load. */
extern __thread int tm_clocked_fetch;

/* module.c */
extern struct PyModuleDef tm_module_def;
tm_state *tm_state_of_type(PyTypeObject *type);
PyObject *tm_module_of_type(PyTypeObject *type);
PyObject *tm_struct_dtype(PyObject *fields, size_t size, const char *ctype);

/* recorder.c */
extern PyType_Spec tm_recorder_spec;
void tm_recorder_after_fork(tm_recorder *rec);
extern PyMethodDef tm_recorder_module_methods[];

/* probes.c: the probes of a recorder, and the module-level ones that use
   the default recorder */
void tm_probes_clear(tm_probes *probes);
PyObject *tm_probe_step_begin(tm_recorder *rec, Py_ssize_t nargs);
PyObject *tm_probe_fetch_done(tm_recorder *rec, Py_ssize_t nargs);
PyObject *tm_probe_step_end(tm_recorder *rec, Py_ssize_t nargs);
PyObject *tm_probe_abandon_step(tm_recorder *rec, Py_ssize_t nargs);
int tm_gpu_call(PyObject *hook, int64_t begin_ns, int with_arg);
int tm_probes_add(PyObject *module, tm_state *st, PyObject *rec);
PyObject *tm_probes_default(tm_state *st);
PyObject *tm_probes_swap_default(tm_state *st, PyObject *rec);

/* wrap.c */
extern PyType_Spec tm_wrapiter_spec;

/* batchlog.c */
extern PyType_Spec tm_batchlog_spec;
extern PyType_Spec tm_timedfetch_spec;
void tm_batchlog_write_item(PyObject *log, const tm_item_record *rec);

/* itemlog.c: TimedDataset, TimedIter, TimedCall and ITEM_RECORD_DTYPE */
int tm_itemlog_add(PyObject *module, tm_state *st);

/* stacks.c */
extern PyType_Spec tm_stacklog_spec;
/* Arm (on != 0) or stop the wall-clock timer of the thread this process
   samples, around one batch (TimedFetch).  A no-op where the process does
   not sample, has no wall timer, or the caller is another thread; never
   sets a Python error. */
void tm_stacks_wall(int on);

/* livehist.c */
extern PyType_Spec tm_waithist_spec;

/* sampler_py.c, reduce_py.c */
extern PyMethodDef tm_sampler_methods[];
extern PyMethodDef tm_reduce_methods[];
int tm_build_sample_dtype(tm_state *st);

#endif  /* TRACEML_MODULE_H */
