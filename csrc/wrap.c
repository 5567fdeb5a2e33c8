/*
 * traceml._core.WrapIter: the iterator one epoch of traceml.wrap() returns.
 *
 * It forwards to the inner iterator's tp_iternext, as enumerate does, and
 * stamps the clock around it.  Step i runs from the call that fetches
 * batch i to the call that fetches batch i + 1; the step is written to the
 * store when that next call starts, or when the loop ends: by exhaustion,
 * by close(), or when the iterator is released (a `break`, or an exception
 * in the loop body unwinding the frame).  The first step of an epoch
 * begins when iter() of the wrapped iterable was called, so it carries the
 * epoch's start-up (DataLoader worker processes).
 *
 * Delivery (track=True, for a multiprocessing DataLoader iterator): after
 * each fetch, and after its clock is read, the iterator's `_task_info`
 * (sampler rank -> (worker_id,) or (worker_id, data)) is compared with the
 * one seen after the previous fetch: the rank that left is the batch just
 * delivered, its worker the one that held it.  Anything unexpected turns
 * tracking off for this iterator; the steps then read rank -1.
 *
 * Watch (watch=(main pid, worker pids...)): the iterator adds a watch
 * entry to the sampler for its processes and its own fetch slot, and
 * removes it when the loop ends.  While a fetch is in progress its start,
 * step and the oldest undelivered rank are published in the slot, and the
 * sampler records a fetch that waits longer than stuck_after.
 *
 * Raise (on_raise=callable): each exception other than StopIteration that
 * the inner iterator raises (a KeyboardInterrupt too: Ctrl-C in a fetch
 * that hangs) is shown to on_raise(exception, batches delivered before
 * it, ns the fetch had waited) before it passes on unchanged, so that the
 * report can say where the loop ended, how long that fetch had waited, or
 * which fetches it went on past.
 *
 * Bytes: on sampled batches (see TM_BYTES_*) the delivered batch's tensor
 * and NumPy array bytes are summed, walking tuples, lists and dict values;
 * sizes only, nothing is copied.  Hand-over of large batches (collate,
 * shared memory) costs per byte, so the report can put the wait beside them.
 *
 * Transparency: while it holds the inner iterator, len(), __length_hint__,
 * bool() and reads of attributes the type does not define (dunders aside)
 * are the inner iterator's, and repr() names it: code that treats what
 * iter(loader) returned as torch's iterator runs unchanged.
 *
 * Re-entrancy: reading `_task_info` runs Python code (a property could even
 * call next() on this very iterator), so no pointer into the task buffers
 * is held across it; the buffers are read only once it has returned.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define NO_IMPORT_ARRAY
#define PY_ARRAY_UNIQUE_SYMBOL traceml_ARRAY_API
#include <numpy/arrayobject.h>

#include <unistd.h>

#include "compat.h"
#include "module.h"

__thread int tm_clocked_fetch = 0;
#include "procfs.h"

/* Bytes per batch are measured on the first TM_BYTES_FIRST batches of an
   epoch and on every TM_BYTES_EVERY-th after: a batch's size rarely
   changes, and a tensor's nbytes costs a call into torch (about 50-100 ns),
   which on every batch would double wrap's cost over a DataLoader. */
#define TM_BYTES_FIRST 8
#define TM_BYTES_EVERY 64
/* How far a batch is walked: nesting depth and leaves looked at. */
#define TM_BYTES_DEPTH 4
#define TM_BYTES_LEAVES 256

typedef struct {
    int64_t rank;
    int32_t worker;
    int32_t has_data;
} tm_task;

typedef struct {
    PyObject_HEAD
    /* The fields every step reads or writes come first, together, the
       fetch slot last among them: a real DataLoader's __next__ evicts
       them between two steps, so each extra cache line they span is a
       miss a step (benchmarks/README.md, "The DataLoader path"). */
    PyObject *inner;           /* the timed iterator; NULL once released */
    tm_recorder *rec;          /* the recorder its steps go to (owned) */
    PyObject *gpu_begin;       /* CUDA-event hooks (traceml.gpu), or NULL: */
    PyObject *gpu_done;        /* begin() before each fetch's clock read,
                                  done(begin_ns) once a batch is handed over */
    uint64_t generation;       /* store generation the open step began in */
    int64_t begin_ns;          /* the open step */
    int64_t fetch_done_ns;
    int64_t epoch_begin_ns;    /* iter() of the wrapped iterable began */
    int64_t open_bytes;        /* the open step's batch bytes, or -1 */
    int32_t open_tensors;      /* the tensors and arrays holding them */
    unsigned long long steps;  /* batches delivered in this epoch */
    int32_t open_rank;         /* the open step's delivery, or -1 */
    int32_t open_worker;
    int epoch;
    int source;
    int open;
    int track;                 /* delivery tracking on */
    int watching;              /* has a watch entry in the sampler */
    int32_t oldest_worker;
    int64_t oldest_rank;       /* lowest rank still being produced, or -1 */
    tm_fetch_slot slot;        /* the fetch in progress, for the sampler */
    /* Read once an epoch, or only with delivery tracking on. */
    uint64_t watch_handle;
    uint64_t fork_generation;  /* st->fork_generation when it was added */
    PyObject *owner;           /* held until dealloc: keeps the source in
                                  use (traceml.wrapping._Lease), or NULL */
    PyObject *task_info;       /* the inner iterator's _task_info, held:
                                  torch changes it in place, so a fetch
                                  reads it without an attribute lookup */
    tm_task *tasks;            /* outstanding tasks after the last fetch */
    Py_ssize_t ntasks;
    Py_ssize_t tasks_cap;
    tm_task *scratch;
    Py_ssize_t scratch_cap;
    PyObject *weakrefs;        /* a live line follows the loop by weakref */
    PyObject *on_raise;        /* called at each exception, or NULL */
    /* The open step's fetch clocks (TM_CLOCKED steps only; -1: unread),
       its body's (known when the next fetch is clocked too), and the
       readings at the end of the last clocked fetch (-1: the last fetch
       was not clocked). */
    int64_t open_cpu_ns;
    int64_t open_runq_ns;
    int64_t open_body_cpu_ns;
    int64_t open_body_runq_ns;
    int64_t open_others_cpu_ns;
    int64_t last_cpu_ns;
    int64_t last_runq_ns;
    tm_thread_clocks clocks;   /* the fetching thread's */
} tm_wrapiter;

/* The step just pushed (the last record) gets its clocks, when they were
   read: its fetch's, and its body's where the fetch that closes it was
   clocked too (body_clocks). */
static TM_COLD void
add_clock(tm_wrapiter *self)
{
    tm_store *store = &self->rec->store;

    if (self->open_cpu_ns >= 0 && store->len > 0) {
        tm_store_add_clock(store, store->len - 1, self->open_cpu_ns,
                           self->open_runq_ns, self->open_body_cpu_ns,
                           self->open_body_runq_ns, self->open_others_cpu_ns);
    }
    /* Read once: a clocked step followed by an unclocked fetch has none. */
    self->open_body_cpu_ns = -1;
    self->open_body_runq_ns = -1;
}

/* Before a clocked fetch: its starting clocks, and the open step's body
   (from the last clocked fetch's end to now) for add_clock, unknown where
   another thread fetched then or a clock was unreadable.  Where the last
   fetch was not clocked, last_* are an older fetch's: the open step is
   then not clocked either, and add_clock never reads its body. */
static TM_COLD void
body_clocks(tm_wrapiter *self, int64_t *cpu_ns, int64_t *runq_ns)
{
    int moved = tm_thread_clocks_read(&self->clocks, cpu_ns, runq_ns);

    self->open_body_cpu_ns = tm_clock_delta(self->last_cpu_ns, *cpu_ns, moved);
    self->open_body_runq_ns = tm_clock_delta(self->last_runq_ns, *runq_ns, moved);
}

TM_HOT_INLINE void
close_open_step(tm_wrapiter *self, int64_t now)
{
    unsigned long long pos;
    size_t before;

    if (!self->open) {
        return;
    }
    self->open = 0;
    if (TM_UNLIKELY(self->generation != self->rec->store.generation)) {
        /* It began before a reset() or a fork: no recording's step. */
        return;
    }
    pos = self->steps - 1 < TM_FLAG_POS_MAX ? self->steps - 1 : TM_FLAG_POS_MAX;
    before = self->rec->store.len;
    tm_store_push(&self->rec->store, self->begin_ns, self->fetch_done_ns, now,
                  (int32_t)self->epoch, (uint16_t)self->source,
                  (uint16_t)((pos << TM_FLAG_POS_SHIFT)
                             | (pos == 0 ? TM_FLAG_EPOCH_START : 0)),
                  self->open_rank, self->open_worker, self->open_bytes,
                  self->open_tensors);
    if (TM_UNLIKELY(TM_CLOCKED(self->steps - 1))
            && self->rec->store.len > before) {
        add_clock(self);
    }
}

/* Close the open step, if any, at the current clock (read only then: a
   test clock's values are not spent on nothing). */
static void
close_open_step_now(tm_wrapiter *self)
{
    /* No next fetch: the body's clocks are unknown. */
    self->open_body_cpu_ns = -1;
    self->open_body_runq_ns = -1;
    if (self->open) {
        close_open_step(self, tm_rec_clock(self->rec));
    }
}

/* Let go of the inner iterator and of what was read from it. */
static void
release_inner(tm_wrapiter *self)
{
    Py_CLEAR(self->inner);
    Py_CLEAR(self->task_info);
}

/* The loop this iterator serves has ended (idempotent). */
static void
end_loop(tm_wrapiter *self)
{
    tm_state *st = self->rec->st;

    if (self->watching && st == NULL) {
        /* The recorder was cleared in a garbage cycle with the module's
           teardown under way: nothing of the sampler is ours to touch. */
        self->watching = 0;
    }
    if (self->watching) {
        self->watching = 0;
        /* An iterator inherited through fork() was watched by the parent's
           sampler, not by this process's: nothing to remove here. */
        if (self->fork_generation == st->fork_generation) {
            tm_sampler_watch_remove(&st->sampler, self->watch_handle);
        }
    }
}

static int
reserve(tm_task **buf, Py_ssize_t *cap, Py_ssize_t n)
{
    tm_task *grown;

    if (n <= *cap) {
        return 0;
    }
    grown = PyMem_Realloc(*buf, (size_t)n * sizeof(tm_task));
    if (grown == NULL) {
        return -1;
    }
    *buf = grown;
    *cap = n;
    return 0;
}

/* The task table to read: the held one, or (refresh) inner._task_info
   looked up again and held.  A new reference, or NULL. */
static PyObject *
task_table(tm_wrapiter *self, int refresh)
{
    PyObject *inner = self->inner;
    PyObject *info;

    if (!refresh && self->task_info != NULL) {
        return Py_NewRef(self->task_info);
    }
    if (inner == NULL) {
        return NULL;
    }
    Py_INCREF(inner);
    info = PyObject_GetAttr(inner, self->rec->st->str_task_info);
    Py_DECREF(inner);
    if (info == NULL) {
        PyErr_Clear();
        return NULL;
    }
    Py_XSETREF(self->task_info, Py_NewRef(info));
    return info;
}

/* Read the task table into scratch, sorted by rank; -1 if not usable.
   The attribute lookup (refresh), the one call into Python, comes first:
   the task buffers are only touched once it has returned. */
static int
read_tasks(tm_wrapiter *self, int refresh, Py_ssize_t *n_out)
{
    PyObject *info = task_table(self, refresh);
    PyObject *key, *value;
    Py_ssize_t pos = 0, n = 0, i, j;

    if (info == NULL) {
        return -1;
    }
    if (!PyDict_Check(info)
            || reserve(&self->scratch, &self->scratch_cap,
                       PyDict_GET_SIZE(info)) < 0) {
        Py_DECREF(info);
        return -1;
    }
    /* Only ints and tuples are accepted: converting anything else could run
       Python code (__index__) that changes the dict under PyDict_Next. */
    while (PyDict_Next(info, &pos, &key, &value)) {
        long long rank;
        long worker;

        if (n == self->scratch_cap || !PyLong_Check(key) || !PyTuple_Check(value)
                || PyTuple_GET_SIZE(value) < 1
                || !PyLong_Check(PyTuple_GET_ITEM(value, 0))) {
            Py_DECREF(info);
            return -1;
        }
        rank = PyLong_AsLongLong(key);
        worker = PyLong_AsLong(PyTuple_GET_ITEM(value, 0));
        if ((rank == -1 || worker == -1) && PyErr_Occurred()) {
            PyErr_Clear();
            Py_DECREF(info);
            return -1;
        }
        if (rank < 0 || worker < 0 || worker > INT32_MAX) {
            Py_DECREF(info);
            return -1;
        }
        self->scratch[n].rank = rank;
        self->scratch[n].worker = (int32_t)worker;
        self->scratch[n].has_data = PyTuple_GET_SIZE(value) >= 2;
        n++;
    }
    Py_DECREF(info);
    /* Insertion order is send order: already sorted but for rare cases. */
    for (i = 1; i < n; i++) {
        tm_task t = self->scratch[i];

        for (j = i - 1; j >= 0 && self->scratch[j].rank > t.rank; j--) {
            self->scratch[j + 1] = self->scratch[j];
        }
        self->scratch[j + 1] = t;
    }
    *n_out = n;
    return 0;
}

static void
note_oldest(tm_wrapiter *self)
{
    Py_ssize_t i;

    self->oldest_rank = -1;
    self->oldest_worker = -1;
    for (i = 0; i < self->ntasks; i++) {
        if (!self->tasks[i].has_data) {
            self->oldest_rank = self->tasks[i].rank;
            self->oldest_worker = self->tasks[i].worker;
            return;
        }
    }
}

/* scratch (n tasks, just read) becomes the task table. */
static void
adopt_scratch(tm_wrapiter *self, Py_ssize_t n)
{
    tm_task *swap = self->tasks;
    Py_ssize_t swap_cap = self->tasks_cap;

    self->tasks = self->scratch;
    self->tasks_cap = self->scratch_cap;
    self->scratch = swap;
    self->scratch_cap = swap_cap;
    self->ntasks = n;
    note_oldest(self);
}

/* Take the task table as it stands (at creation). */
static void
take_tasks(tm_wrapiter *self)
{
    Py_ssize_t n;

    if (read_tasks(self, 1, &n) < 0) {
        self->track = 0;
        return;
    }
    adopt_scratch(self, n);
}

/* After a fetch: which rank left the task table, and from which worker
   (kept out of the step's line: a loader without workers never calls it). */
static TM_NOINLINE void
track_delivery(tm_wrapiter *self)
{
    tm_task *before;
    Py_ssize_t nbefore;
    Py_ssize_t n, i, j;
    int64_t rank = -1;
    int32_t worker = -1;
    int refresh;

    self->open_rank = -1;
    self->open_worker = -1;
    /* The held table first; when no rank left it, it may have been
       replaced by another object: look the attribute up again. */
    for (refresh = 0; refresh <= 1 && rank < 0; refresh++) {
        if (read_tasks(self, refresh, &n) < 0) {
            self->track = 0;
            return;
        }
        /* Only now: read_tasks may have run Python code that re-entered
           this iterator and swapped or reallocated the buffers. */
        before = self->tasks;
        nbefore = self->ntasks;
        /* Both sorted: ranks in before that are not in after have left.
           The delivered one is the highest (lower ones were skipped, e.g.
           an exhausted IterableDataset worker's). */
        for (i = 0, j = 0; i < nbefore;) {
            if (j < n && self->scratch[j].rank < before[i].rank) {
                j++;
            }
            else if (j < n && self->scratch[j].rank == before[i].rank) {
                i++;
                j++;
            }
            else {
                rank = before[i].rank;
                worker = before[i].worker;
                i++;
            }
        }
    }
    if (rank >= 0 && rank <= INT32_MAX) {
        self->open_rank = (int32_t)rank;
        self->open_worker = worker;
    }
    adopt_scratch(self, n);
}

/* torch.Tensor, once torch has been imported by someone (we never import
   it), or NULL. */
static PyTypeObject *
tensor_type(tm_state *st)
{
    PyObject *torch, *tensor;

    if (st->tensor_type != NULL) {
        return (PyTypeObject *)st->tensor_type;
    }
    torch = PyImport_GetModule(st->str_torch);
    if (torch == NULL) {
        PyErr_Clear();
        return NULL;
    }
    tensor = PyObject_GetAttrString(torch, "Tensor");
    Py_DECREF(torch);
    if (tensor == NULL || !PyType_Check(tensor)) {
        PyErr_Clear();
        Py_XDECREF(tensor);
        return NULL;
    }
    st->tensor_type = tensor;
    return (PyTypeObject *)tensor;
}

/* Tensor and array bytes in obj (-1: none found), counting in *tensors
   the tensors and arrays that hold them.  Each object looked at is held
   while it is, since a tensor's nbytes may run Python code that changes
   the containers. */
static int64_t
batch_bytes(tm_state *st, PyObject *obj, int depth, int *leaves, int32_t *tensors)
{
    PyTypeObject *tensor;
    int64_t total = -1;

    if (--*leaves < 0) {
        return -1;
    }
    if (PyArray_Check(obj)) {
        ++*tensors;
        return (int64_t)PyArray_NBYTES((PyArrayObject *)obj);
    }
    tensor = tensor_type(st);
    if (tensor != NULL && PyObject_TypeCheck(obj, tensor)) {
        PyObject *n = PyObject_GetAttr(obj, st->str_nbytes);
        long long v = n != NULL ? PyLong_AsLongLong(n) : -1;

        Py_XDECREF(n);
        if (v < 0) {
            PyErr_Clear();
            return -1;
        }
        ++*tensors;
        return (int64_t)v;
    }
    if (depth >= TM_BYTES_DEPTH) {
        return -1;
    }
    if (PyTuple_Check(obj) || PyList_Check(obj) || PyDict_Check(obj)) {
        PyObject *items = PyDict_Check(obj) ? PyDict_Values(obj)
                                            : PySequence_Tuple(obj);
        Py_ssize_t i, n;

        if (items == NULL) {
            PyErr_Clear();
            return -1;
        }
        /* A snapshot (list or tuple) of the items: nbytes cannot change
           what is walked. */
        n = PySequence_Fast_GET_SIZE(items);
        for (i = 0; i < n && *leaves > 0; i++) {
            int64_t b = batch_bytes(st, PySequence_Fast_GET_ITEM(items, i),
                                    depth + 1, leaves, tensors);

            if (b >= 0) {
                total = (total < 0 ? 0 : total) + b;
            }
        }
        Py_DECREF(items);
    }
    return total;
}

/* The batch's bytes and, in *tensors, how many tensors and arrays hold
   them, on the steps that sample them (out of the step's line: most steps
   do not). */
static TM_COLD int64_t
sample_bytes(tm_wrapiter *self, PyObject *item, int32_t *tensors)
{
    int leaves = TM_BYTES_LEAVES;

    *tensors = 0;
    return batch_bytes(self->rec->st, item, 0, &leaves, tensors);
}

/* Show the exception being raised to on_raise and raise it on unchanged:
   a hook that fails is reported as unraisable, never in its place. */
static TM_COLD void
note_raise(tm_wrapiter *self, int64_t waited_ns)
{
    PyObject *hook = Py_NewRef(self->on_raise);
    PyObject *exc;
    PyObject *res;

    exc = PyErr_GetRaisedException();
    res = PyObject_CallFunction(hook, "OKL", exc != NULL ? exc : Py_None,
                                self->steps, (long long)waited_ns);
    if (res == NULL) {
        PyErr_WriteUnraisable(hook);
    }
    Py_XDECREF(res);
    Py_DECREF(hook);
    PyErr_SetRaisedException(exc);
}

/* The inner iterator returned NULL: exhausted (release it and end the
   loop) or raised (shown to on_raise with the fetch's wait, waited_ns,
   and passed on).  Drops the reference wrapiter_next took. */
static TM_COLD PyObject *
wrapiter_stopped(tm_wrapiter *self, PyObject *inner, int64_t waited_ns)
{
    if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_StopIteration)) {
        /* Exhausted: release the inner iterator now, so that a
           DataLoader shuts its workers down at the end of the loop. */
        PyErr_Clear();
        if (self->inner == inner) {
            release_inner(self);
        }
        end_loop(self);
    }
    else if (self->on_raise != NULL) {
        note_raise(self, waited_ns);
    }
    Py_DECREF(inner);
    return NULL;
}

/* The step's path.  Its code is kept to a few straight cache lines: a
   real DataLoader's __next__ evicts them between the two clock reads, so
   each line it runs through costs a miss per step (benchmarks/README.md,
   "The DataLoader path"); the rare branches call out of line. */
static TM_HOT PyObject *
wrapiter_next(tm_wrapiter *self)
{
    int64_t call_ns;
    int64_t done_ns;
    int64_t cpu0 = -1, runq0 = -1, cpu1 = -1, runq1 = -1;
    int64_t proc0 = -1, proc1 = -1, sampler0 = -1, sampler1 = -1;
    clockid_t sampler_clock0 = 0, sampler_clock1 = 0;
    uint64_t generation;
    PyObject *inner;
    PyObject *item;
    int clocked;

    /* The step's CUDA event goes on the stream before the clock is read,
       so that its cost is billed to the previous step's compute, not to
       this fetch (one pointer test when off). */
    if (TM_UNLIKELY(self->gpu_begin != NULL) && self->inner != NULL
        && tm_gpu_call(self->gpu_begin, 0, 0) < 0) {
        return NULL;
    }
    call_ns = tm_rec_clock(self->rec);
    inner = self->inner;
    /* The step begins now, so it belongs to the recording of now: a reset()
       that the fetch itself runs (a dataset calling traceml.reset()) drops
       it, as a reset in the loop body drops the step open then. */
    generation = self->rec->store.generation;

    clocked = TM_CLOCKED(self->steps);
    if (TM_UNLIKELY(clocked)) {
        body_clocks(self, &cpu0, &runq0);
        proc0 = tm_process_cpu_ns();
        sampler0 = tm_rec_sampler_cpu_ns(self->rec, &sampler_clock0);
    }
    close_open_step(self, call_ns);
    if (TM_UNLIKELY(inner == NULL)) {
        return NULL;
    }
    if (TM_LIKELY(self->watching)) {
        tm_watch_begin(&self->slot, call_ns, self->source, self->epoch,
                       (int64_t)self->steps, self->oldest_rank,
                       self->oldest_worker);
    }
    /* The inner __next__ may run code that releases us or our iterator. */
    Py_INCREF(inner);
    tm_clocked_fetch += clocked;
    /* At num_workers=0 the batch is made inside this call: the stack
       sampler's wall-clock ticks run through it (a no-op unless this
       thread is sampled). */
    tm_stacks_wall(1);
    item = Py_TYPE(inner)->tp_iternext(inner);
    tm_stacks_wall(0);
    tm_clocked_fetch -= clocked;
    done_ns = tm_rec_clock(self->rec);
    if (TM_UNLIKELY(clocked)) {
        (void)tm_thread_clocks_read(&self->clocks, &cpu1, &runq1);
        proc1 = tm_process_cpu_ns();
        sampler1 = tm_rec_sampler_cpu_ns(self->rec, &sampler_clock1);
        self->last_cpu_ns = cpu1;
        self->last_runq_ns = runq1;
    }
    if (TM_LIKELY(self->watching)) {
        tm_watch_end(&self->slot);
    }
    if (TM_UNLIKELY(item == NULL)) {
        return wrapiter_stopped(self, inner,
                                done_ns - (self->steps != 0 ? call_ns
                                                            : self->epoch_begin_ns));
    }
    Py_DECREF(inner);
    self->begin_ns = TM_LIKELY(self->steps != 0) ? call_ns
                                                 : self->epoch_begin_ns;
    self->fetch_done_ns = done_ns;
    self->generation = generation;
    self->open = 1;
    self->steps++;
    if (TM_UNLIKELY(self->gpu_done != NULL)
        && tm_gpu_call(self->gpu_done, self->begin_ns, 1) < 0) {
        Py_DECREF(item);
        return NULL;
    }
    if (TM_UNLIKELY(clocked)) {
        self->open_cpu_ns = tm_clock_delta(cpu0, cpu1, 0);
        self->open_runq_ns = tm_clock_delta(runq0, runq1, 0);
        self->open_others_cpu_ns = tm_others_cpu_delta(proc0, proc1,
                                                       self->open_cpu_ns,
                                                       tm_sampler_cpu_delta(
                                                           sampler0, sampler_clock0,
                                                           sampler1, sampler_clock1));
    }
    self->open_bytes = -1;
    self->open_tensors = 0;
    if (TM_UNLIKELY(self->steps <= TM_BYTES_FIRST
                    || self->steps % TM_BYTES_EVERY == 0)) {
        self->open_bytes = sample_bytes(self, item, &self->open_tensors);
    }
    self->open_rank = -1;
    self->open_worker = -1;
    if (self->track && self->inner != NULL) {
        track_delivery(self);
    }
    return item;
}

/* Add a watch entry for the processes in `watch` (main process first, then
   worker 0, 1, ...).  A sampler that cannot watch never stops the timing:
   the report reads its reason from sampler_info(). */
static int
start_watch(tm_wrapiter *self, PyObject *watch)
{
    tm_state *st = self->rec->st;
    PyObject *seq;
    Py_ssize_t n, i;
    int *pids, *roles;
    int rc;

    seq = PySequence_Fast(watch, "WrapIter(): watch must be a sequence of "
                                 "PIDs (main process first) or None");
    if (seq == NULL) {
        return -1;
    }
    n = PySequence_Fast_GET_SIZE(seq);
    pids = PyMem_Malloc((size_t)(n > 0 ? n : 1) * 2 * sizeof(int));
    if (pids == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    roles = pids + n;
    for (i = 0; i < n; i++) {
        long pid = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));

        if (pid == -1 && PyErr_Occurred()) {
            goto fail;
        }
        if (pid <= 0 || pid > INT32_MAX) {
            PyErr_Format(PyExc_ValueError,
                         "WrapIter(): watch holds a bad PID %ld", pid);
            goto fail;
        }
        pids[i] = (int)pid;
        roles[i] = (int)i - 1;
    }
    Py_DECREF(seq);
    rc = st->sampler_ok
         ? tm_sampler_watch_add(&st->sampler, self->rec->id, &self->slot,
                                pids, roles, (size_t)n, &self->watch_handle)
         : -1;
    PyMem_Free(pids);
    if (rc == 0) {
        self->watching = 1;
        self->fork_generation = st->fork_generation;
    }
    return 0;

fail:
    Py_DECREF(seq);
    PyMem_Free(pids);
    return -1;
}

static PyObject *
wrapiter_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"iterator", "recorder", "source", "epoch",
                             "epoch_begin_ns", "track", "watch", "owner",
                             "gpu", "on_raise", NULL};
    PyObject *inner;
    PyObject *rec;
    int source;
    int epoch;
    long long epoch_begin_ns;
    int track = 0;
    PyObject *watch = Py_None;
    PyObject *owner = Py_None;
    PyObject *gpu = Py_None;
    PyObject *on_raise = Py_None;
    tm_state *st;
    tm_wrapiter *self;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOiiL|pOOOO:WrapIter", kwlist,
                                     &inner, &rec, &source, &epoch,
                                     &epoch_begin_ns, &track, &watch,
                                     &owner, &gpu, &on_raise)) {
        return NULL;
    }
    if (on_raise != Py_None && !PyCallable_Check(on_raise)) {
        PyErr_Format(PyExc_TypeError,
                     "WrapIter(): on_raise must be callable or None, got %.200s",
                     Py_TYPE(on_raise)->tp_name);
        return NULL;
    }
    st = PyType_GetModuleState(type);
    if (st == NULL) {
        return NULL;
    }
    if (!PyIter_Check(inner)) {
        PyErr_Format(PyExc_TypeError,
                     "WrapIter(): iterator must be an iterator, got %.200s",
                     Py_TYPE(inner)->tp_name);
        return NULL;
    }
    if (!PyObject_TypeCheck(rec, st->recorder_type)) {
        PyErr_Format(PyExc_TypeError,
                     "WrapIter(): recorder must be a traceml.Recorder, got "
                     "%.200s", Py_TYPE(rec)->tp_name);
        return NULL;
    }
    if (((tm_recorder *)rec)->st == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "WrapIter(): the recorder was cleared "
                        "by the garbage collector");
        return NULL;
    }
    if (source < 1 || source > UINT16_MAX) {
        PyErr_Format(PyExc_ValueError,
                     "WrapIter(): source must be in [1, %d], got %d",
                     UINT16_MAX, source);
        return NULL;
    }
    if (epoch < 0) {
        PyErr_Format(PyExc_ValueError,
                     "WrapIter(): epoch must be >= 0, got %d", epoch);
        return NULL;
    }
    self = (tm_wrapiter *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    tm_thread_clocks_init(&self->clocks);
    self->open_cpu_ns = -1;
    self->open_runq_ns = -1;
    self->open_body_cpu_ns = -1;
    self->open_body_runq_ns = -1;
    self->open_others_cpu_ns = -1;
    self->last_cpu_ns = -1;
    self->last_runq_ns = -1;
    self->inner = Py_NewRef(inner);
    self->rec = (tm_recorder *)Py_NewRef(rec);
    self->owner = owner != Py_None ? Py_NewRef(owner) : NULL;
    self->on_raise = on_raise != Py_None ? Py_NewRef(on_raise) : NULL;
    self->generation = self->rec->store.generation;
    self->epoch_begin_ns = epoch_begin_ns;
    self->epoch = epoch;
    self->source = source;
    self->open_rank = -1;
    self->open_worker = -1;
    self->open_bytes = -1;
    self->open_tensors = 0;
    self->oldest_rank = -1;
    self->oldest_worker = -1;
    self->track = track;
    if (gpu != Py_None) {
        self->gpu_begin = PyObject_GetAttrString(gpu, "begin");
        self->gpu_done = self->gpu_begin != NULL
                         ? PyObject_GetAttrString(gpu, "done") : NULL;
        if (self->gpu_done == NULL || !PyCallable_Check(self->gpu_begin)
            || !PyCallable_Check(self->gpu_done)) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "WrapIter(): gpu must have "
                                "callable begin() and done(begin_ns)");
            }
            Py_DECREF(self);
            return NULL;
        }
    }
    if (track) {
        take_tasks(self);
    }
    if (watch != Py_None && start_watch(self, watch) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static PyObject *
wrapiter_close(tm_wrapiter *self, PyObject *Py_UNUSED(ignored))
{
    close_open_step_now(self);
    release_inner(self);
    end_loop(self);
    Py_RETURN_NONE;
}

static int
wrapiter_traverse(tm_wrapiter *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->inner);
    Py_VISIT(self->rec);
    Py_VISIT(self->task_info);
    Py_VISIT(self->owner);
    Py_VISIT(self->gpu_begin);
    Py_VISIT(self->gpu_done);
    Py_VISIT(self->on_raise);
    return 0;
}

/* The recorder and the owner are kept until dealloc, which still writes
   the open step under the owner's source; clearing the inner iterator is
   enough to break a cycle. */
static int
wrapiter_clear(tm_wrapiter *self)
{
    release_inner(self);
    Py_CLEAR(self->gpu_begin);
    Py_CLEAR(self->gpu_done);
    Py_CLEAR(self->on_raise);
    return 0;
}

static void
wrapiter_dealloc(tm_wrapiter *self)
{
    PyTypeObject *tp = Py_TYPE(self);

    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    close_open_step_now(self);
    end_loop(self);
    release_inner(self);
    Py_CLEAR(self->rec);
    Py_CLEAR(self->owner);
    Py_CLEAR(self->gpu_begin);
    Py_CLEAR(self->gpu_done);
    Py_CLEAR(self->on_raise);
    PyMem_Free(self->tasks);
    PyMem_Free(self->scratch);
    tm_thread_clocks_close(&self->clocks);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *
get_tracking(tm_wrapiter *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->track);
}

static PyObject *
get_inner(tm_wrapiter *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->inner != NULL ? self->inner : Py_None);
}

static PyObject *
get_recorder(tm_wrapiter *self, void *Py_UNUSED(closure))
{
    return Py_NewRef((PyObject *)self->rec);
}

static PyObject *
get_watching(tm_wrapiter *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->watching);
}

/* --- Transparency: the iterator its user sees is torch's ----------------

   len(), __length_hint__, bool(), attribute reads the type does not define
   and repr() answer as the inner iterator would, while it is held: a loop
   that reads len(it) (tqdm(iter(loader)), range(len(it))) or torch's
   private `_workers` off the iterator it got from iter() behaves the same
   with and without traceml.  None of it is on the step's path. */

/* The inner iterator, held (a new reference), or NULL once released. */
static PyObject *
held_inner(tm_wrapiter *self)
{
    return self->inner != NULL ? Py_NewRef(self->inner) : NULL;
}

/* len(): the inner iterator's, raising what it raises (TypeError "object of
   type 'generator' has no len()" where it has none).  Once the inner one is
   released (the loop ended, close()), a TypeError says so. */
static Py_ssize_t
wrapiter_length(tm_wrapiter *self)
{
    PyObject *inner = held_inner(self);
    Py_ssize_t n;

    if (inner == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "len() of a traceml wrap whose iterator was released "
                        "(the loop ended or close() was called)");
        return -1;
    }
    n = PyObject_Size(inner);
    Py_DECREF(inner);
    return n;
}

/* bool(): the inner iterator's truth (an iterator with a len() of 0 is
   false, as torch's is); true once released, as any object. */
static int
wrapiter_bool(tm_wrapiter *self)
{
    PyObject *inner = held_inner(self);
    int truth;

    if (inner == NULL) {
        return 1;
    }
    truth = PyObject_IsTrue(inner);
    Py_DECREF(inner);
    return truth;
}

/* __length_hint__(): operator.length_hint of the inner iterator (its len(),
   else its own __length_hint__); NotImplemented where it has neither, so
   that length_hint() falls back to its default; 0 once released (nothing
   more will come). */
static PyObject *
wrapiter_length_hint(tm_wrapiter *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *inner = held_inner(self);
    Py_ssize_t n;

    if (inner == NULL) {
        return PyLong_FromLong(0);
    }
    n = PyObject_LengthHint(inner, -1);
    Py_DECREF(inner);
    if (n < 0) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_NOTIMPLEMENTED;
    }
    return PyLong_FromSsize_t(n);
}

/* Whether `name` is a dunder ("__x__"): never forwarded, so that protocol
   probes (__dict__, __array__, __reduce_ex__ ...) see the WrapIter itself. */
static int
is_dunder(PyObject *name)
{
    Py_ssize_t n;

    if (!PyUnicode_Check(name)) {
        return 0;
    }
    n = PyUnicode_GetLength(name);
    return n >= 4 && PyUnicode_ReadChar(name, 0) == '_'
           && PyUnicode_ReadChar(name, 1) == '_'
           && PyUnicode_ReadChar(name, n - 1) == '_'
           && PyUnicode_ReadChar(name, n - 2) == '_';
}

/* Attribute reads: the type's own first (its methods, members, getsets);
   a name it does not have, and that is not a dunder, is read off the inner
   iterator while it is held (torch's `_workers`, `_num_workers`, ...).
   Only reads: setting or deleting an attribute still goes to the WrapIter,
   which has none to set. */
static PyObject *
wrapiter_getattro(tm_wrapiter *self, PyObject *name)
{
    PyObject *found = PyObject_GenericGetAttr((PyObject *)self, name);
    PyObject *inner;

    if (found != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError)
            || is_dunder(name)) {
        return found;
    }
    inner = held_inner(self);
    if (inner == NULL) {
        PyErr_Format(PyExc_AttributeError,
                     "'%.100s' object has no attribute '%U' (the iterator it "
                     "wrapped was released: the loop ended or close() was "
                     "called)", Py_TYPE(self)->tp_name, name);
        return NULL;
    }
    PyErr_Clear();
    found = PyObject_GetAttr(inner, name);
    Py_DECREF(inner);
    return found;
}

/* "<traceml wrap of <repr of the inner iterator>>". */
static PyObject *
wrapiter_repr(tm_wrapiter *self)
{
    PyObject *inner = held_inner(self);
    PyObject *text;
    int rc;

    if (inner == NULL) {
        return PyUnicode_FromString("<traceml wrap of a released iterator>");
    }
    rc = Py_ReprEnter((PyObject *)self);
    if (rc != 0) {
        Py_DECREF(inner);
        return rc > 0 ? PyUnicode_FromString("<traceml wrap of ...>") : NULL;
    }
    text = PyUnicode_FromFormat("<traceml wrap of %R>", inner);
    Py_ReprLeave((PyObject *)self);
    Py_DECREF(inner);
    return text;
}

static PyMethodDef wrapiter_methods[] = {
    {"close", (PyCFunction)wrapiter_close, METH_NOARGS,
     "close()\n--\n\n"
     "End the open step now and release the inner iterator (a DataLoader\n"
     "iterator then shuts its workers down).  Use it when you keep the\n"
     "iterator in a variable and leave the loop early.  Idempotent."},
    {"__length_hint__", (PyCFunction)wrapiter_length_hint, METH_NOARGS,
     "__length_hint__()\n--\n\n"
     "operator.length_hint() of the inner iterator (NotImplemented where it\n"
     "has none; 0 once it is released)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef wrapiter_members[] = {
    {"epoch", Py_T_INT, offsetof(tm_wrapiter, epoch), Py_READONLY,
     "Epoch index of this iterator (0-based, per wrapped iterable)."},
    {"source", Py_T_INT, offsetof(tm_wrapiter, source), Py_READONLY,
     "Source id that tags this iterator's steps in the store."},
    {"steps", Py_T_ULONGLONG, offsetof(tm_wrapiter, steps), Py_READONLY,
     "Batches delivered so far in this epoch."},
    {"__weaklistoffset__", Py_T_PYSSIZET, offsetof(tm_wrapiter, weakrefs),
     Py_READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef wrapiter_getset[] = {
    {"tracking", (getter)get_tracking, NULL,
     "Whether the delivered batches' ranks and workers are being recorded.",
     NULL},
    {"inner", (getter)get_inner, NULL,
     "The timed inner iterator, or None once exhausted or closed.", NULL},
    {"recorder", (getter)get_recorder, NULL,
     "The Recorder this iterator's steps go to.", NULL},
    {"watching", (getter)get_watching, NULL,
     "Whether the sampler watches this loop's processes and fetches now.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(wrapiter_doc,
"WrapIter(iterator, recorder, source, epoch, epoch_begin_ns, track=False,\n"
"         watch=None, owner=None, gpu=None, on_raise=None)\n--\n\n"
"One epoch of a wrapped iterable: yields the inner iterator's items and\n"
"records one step per item; holds `owner` (what keeps its source in use)\n"
"until it is freed.  Made by traceml.wrap(); not for direct use.\n\n"
"on_raise(exception, delivered, waited_ns) is called at each exception\n"
"the inner iterator raises (StopIteration aside; a KeyboardInterrupt\n"
"too), with the number of batches delivered before it and the ns that\n"
"fetch had waited; the exception then passes on unchanged.\n\n"
"While it holds the inner iterator, len(), __length_hint__, bool() and\n"
"reads of attributes it does not define (not dunders) are the inner\n"
"iterator's, so that code reading torch's iterator (len(it), it._workers)\n"
"runs unchanged.");

static PyType_Slot wrapiter_slots[] = {
    {Py_tp_doc, (void *)wrapiter_doc},
    {Py_tp_new, wrapiter_new},
    {Py_tp_dealloc, wrapiter_dealloc},
    {Py_tp_traverse, wrapiter_traverse},
    {Py_tp_clear, wrapiter_clear},
    {Py_tp_iter, PyObject_SelfIter},
    {Py_tp_iternext, wrapiter_next},
    {Py_tp_methods, wrapiter_methods},
    {Py_tp_members, wrapiter_members},
    {Py_tp_getset, wrapiter_getset},
    {Py_tp_getattro, wrapiter_getattro},
    {Py_tp_repr, wrapiter_repr},
    {Py_sq_length, wrapiter_length},
    {Py_nb_bool, wrapiter_bool},
    {0, NULL},
};

PyType_Spec tm_wrapiter_spec = {
    .name = "traceml._core.WrapIter",
    .basicsize = sizeof(tm_wrapiter),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC
             | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = wrapiter_slots,
};
