/*
 * traceml._core.BatchLog: per-batch production times, written by DataLoader
 * worker processes, read by the main process.
 *
 * A log is one anonymous shared mapping (MAP_SHARED | MAP_ANONYMOUS) made
 * in the main process before the workers start; forked workers inherit it,
 * so both sides address the same pages.  Nothing crosses a pipe and nothing
 * is pickled: the log needs the fork start method (spawn and forkserver
 * children do not inherit the mapping; traceml.worker_timing says so).
 *
 * Layout: a header (the count of claimed slots, and the epoch the owner
 * announces before each iter()) and `capacity` slots.  A worker measures a
 * fetch with fetch_begin() and fetch_end(epoch, worker, seq): the latter
 * claims the next slot with one atomic add on the shared count, writes the
 * record, then publishes it by storing its claim number + 1 in the slot's
 * `ready` word (release).  The owner's drain() copies the records from its
 * cursor on: a slot whose ready word is its claim number + 1 is copied (and
 * checked again after the copy, as a lap may overwrite it meanwhile); a
 * larger one was overwritten by a later lap (counted in `lost`); a smaller
 * one is still being written, and the drain stops there.  Slots claimed
 * more than `capacity` ahead of the cursor are lost by construction.
 *
 * Cost in a worker: two clock reads at each end (CLOCK_MONOTONIC through
 * the vDSO; the thread's CPU clock, a system call) and one atomic add: a
 * few microseconds per batch at most, against batches that take
 * milliseconds to make.  The main process pays nothing per step.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define NO_IMPORT_ARRAY
#define PY_ARRAY_UNIQUE_SYMBOL traceml_ARRAY_API
#include <numpy/arrayobject.h>

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "compat.h"
#include "module.h"
#include "procfs.h"

#define TM_BATCHLOG_DEFAULT_CAPACITY (1u << 16)
#define TM_BATCHLOG_MAX_CAPACITY (1u << 24)
/* 2**18 items (samples and collate calls): 14.7 MB of address space, a few
   epochs of a 100k-sample dataset between two drains (each iter() drains). */
#define TM_ITEMLOG_DEFAULT_CAPACITY (1u << 18)

typedef struct {
    uint64_t claimed;         /* slots claimed so far (atomic add) */
    int64_t epoch;            /* the owner's announced epoch (atomic) */
    uint64_t capacity;
    uint64_t reserved[5];     /* the header fills one cache line */
} tm_batchlog_header;

/* One slot in the shared mapping. */
typedef struct {
    uint64_t ready;           /* claim number + 1 once written */
    tm_batch_record rec;
} tm_batchlog_slot;

/* The items ring (samples, iterable items, collate calls; csrc/itemlog.c
   writes them): its own header and slots after the batches', claimed and
   published the same way. */
typedef struct {
    uint64_t claimed;
    uint64_t capacity;
    uint64_t reserved[6];
} tm_itemlog_header;

typedef struct {
    uint64_t ready;
    tm_item_record rec;
} tm_itemlog_slot;

typedef struct {
    PyObject_HEAD
    tm_state *st;
    tm_batchlog_header *hdr;  /* the shared mapping; NULL once unmapped */
    tm_batchlog_slot *slots;
    size_t map_bytes;
    uint64_t capacity;
    uint64_t cursor;          /* the owner has drained up to this claim */
    uint64_t lost;            /* records overwritten before the drain */
    tm_itemlog_header *items_hdr;  /* inside the same mapping */
    tm_itemlog_slot *item_slots;
    uint64_t item_capacity;
    uint64_t item_cursor;
    uint64_t items_lost;
    pid_t owner;              /* the process that made the log */
    /* A worker's open fetch (private to each process after fork). */
    int open;
    int64_t open_begin_ns;
    int64_t open_cpu_ns;
    /* A worker's open garbage collection (gc_begin() to gc_end()). */
    int gc_open;
    int64_t gc_begin_ns;
    int64_t gc_cpu_ns;
} tm_batchlog;

static PyObject *
batchlog_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"capacity", "items", NULL};
    Py_ssize_t capacity = TM_BATCHLOG_DEFAULT_CAPACITY;
    Py_ssize_t items = TM_ITEMLOG_DEFAULT_CAPACITY;
    tm_batchlog *self;
    size_t bytes, batch_bytes;
    void *map;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|nn:BatchLog", kwlist,
                                     &capacity, &items)) {
        return NULL;
    }
    if (capacity < 1 || capacity > TM_BATCHLOG_MAX_CAPACITY) {
        PyErr_Format(PyExc_ValueError,
                     "BatchLog(): capacity must be 1 to %u records, got %zd",
                     (unsigned)TM_BATCHLOG_MAX_CAPACITY, capacity);
        return NULL;
    }
    if (items < 1 || items > TM_BATCHLOG_MAX_CAPACITY) {
        PyErr_Format(PyExc_ValueError,
                     "BatchLog(): items must be 1 to %u records, got %zd",
                     (unsigned)TM_BATCHLOG_MAX_CAPACITY, items);
        return NULL;
    }
    batch_bytes = sizeof(tm_batchlog_header)
                  + (size_t)capacity * sizeof(tm_batchlog_slot);
    bytes = batch_bytes + sizeof(tm_itemlog_header)
            + (size_t)items * sizeof(tm_itemlog_slot);
    self = (tm_batchlog *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->st = tm_state_of_type(type);
    /* Pages are touched only as slots are written: a log the workers
       never fill costs address space, not memory. */
    map = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        Py_DECREF(self);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    self->hdr = (tm_batchlog_header *)map;
    self->slots = (tm_batchlog_slot *)((char *)map + sizeof(tm_batchlog_header));
    self->map_bytes = bytes;
    self->capacity = (uint64_t)capacity;
    self->hdr->capacity = (uint64_t)capacity;
    self->items_hdr = (tm_itemlog_header *)((char *)map + batch_bytes);
    self->item_slots = (tm_itemlog_slot *)((char *)self->items_hdr
                                           + sizeof(tm_itemlog_header));
    self->item_capacity = (uint64_t)items;
    self->items_hdr->capacity = (uint64_t)items;
    self->owner = getpid();
    return (PyObject *)self;
}

static void
batchlog_dealloc(PyObject *op)
{
    tm_batchlog *self = (tm_batchlog *)op;
    PyTypeObject *type = Py_TYPE(op);

    if (self->hdr != NULL) {
        munmap(self->hdr, self->map_bytes);
        self->hdr = NULL;
    }
    type->tp_free(op);
    Py_DECREF(type);
}

static PyObject *
batchlog_fetch_begin(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    tm_batchlog *self = (tm_batchlog *)op;

    self->open_cpu_ns = tm_process_cpu_ns();
    self->open_begin_ns = tm_clock_ns();
    self->open = 1;
    Py_RETURN_NONE;
}

/* An int argument ``name`` of method ``fn`` in [lo, hi]; -1 with an
   error. */
static int
method_int_arg(const char *fn, PyObject *arg, const char *name, long long lo,
               long long hi, long long *out)
{
    long long v;

    if (!PyLong_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "%s(): %s must be an int, got %.100s",
                     fn, name, Py_TYPE(arg)->tp_name);
        return -1;
    }
    v = PyLong_AsLongLong(arg);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (v < lo || v > hi) {
        PyErr_Format(PyExc_ValueError, "%s(): %s must be %lld to %lld, got %lld",
                     fn, name, lo, hi, v);
        return -1;
    }
    *out = v;
    return 0;
}

/* An int argument of fetch_end() in [lo, hi]; -1 with an error. */
static int
int_arg(PyObject *arg, const char *name, long long lo, long long hi,
        long long *out)
{
    return method_int_arg("fetch_end", arg, name, lo, hi, out);
}

/* Claim a slot and publish one record (cpu_ns, runq_ns: the batch's
   own, -1 unknown). */
static void
batchlog_write(tm_batchlog *self, int64_t begin_ns, int64_t end_ns,
               int64_t cpu_ns, int64_t runq_ns, int32_t epoch, int32_t worker,
               int64_t seq)
{
    uint64_t claim;
    tm_batchlog_slot *slot;

    if (self->hdr == NULL) {
        return;
    }
    claim = __atomic_fetch_add(&self->hdr->claimed, 1, __ATOMIC_RELAXED);
    slot = &self->slots[claim % self->capacity];
    /* Unpublish first, so that a drain racing this lap sees a slot in
       progress rather than the old record under a new claim. */
    __atomic_store_n(&slot->ready, 0, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    slot->rec.begin_ns = begin_ns;
    slot->rec.end_ns = end_ns;
    slot->rec.cpu_ns = cpu_ns;
    slot->rec.runq_ns = runq_ns;
    slot->rec.seq = seq;
    slot->rec.epoch = epoch;
    slot->rec.worker = worker;
    __atomic_store_n(&slot->ready, claim + 1, __ATOMIC_RELEASE);
}

/* Claim an item slot and publish *rec (csrc/itemlog.c's proxies, in a
   worker).  Never fails and never touches Python state: the hot path of
   every sample. */
void
tm_batchlog_write_item(PyObject *log, const tm_item_record *rec)
{
    tm_batchlog *self = (tm_batchlog *)log;
    uint64_t claim;
    tm_itemlog_slot *slot;

    if (self->items_hdr == NULL) {
        return;
    }
    claim = __atomic_fetch_add(&self->items_hdr->claimed, 1, __ATOMIC_RELAXED);
    slot = &self->item_slots[claim % self->item_capacity];
    __atomic_store_n(&slot->ready, 0, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    slot->rec = *rec;
    __atomic_store_n(&slot->ready, claim + 1, __ATOMIC_RELEASE);
}

static PyObject *
batchlog_fetch_end(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    tm_batchlog *self = (tm_batchlog *)op;
    long long epoch, worker, seq;

    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError,
                     "fetch_end() takes 3 arguments (epoch, worker, seq), got %zd",
                     nargs);
        return NULL;
    }
    if (int_arg(args[0], "epoch", 0, INT32_MAX, &epoch) < 0
            || int_arg(args[1], "worker", 0, INT32_MAX, &worker) < 0
            || int_arg(args[2], "seq", 0, INT64_MAX, &seq) < 0) {
        return NULL;
    }
    if (!self->open || self->hdr == NULL) {
        Py_RETURN_FALSE;
    }
    self->open = 0;
    {
        int64_t end_ns = tm_clock_ns();
        int64_t cpu_ns = tm_process_cpu_ns();

        batchlog_write(self, self->open_begin_ns, end_ns,
                       (cpu_ns >= 0 && self->open_cpu_ns >= 0)
                       ? cpu_ns - self->open_cpu_ns : -1,
                       -1, (int32_t)epoch, (int32_t)worker, (int64_t)seq);
    }
    Py_RETURN_TRUE;
}

static PyObject *
batchlog_gc_begin(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    tm_batchlog *self = (tm_batchlog *)op;

    self->gc_cpu_ns = tm_thread_cpu_ns();
    self->gc_begin_ns = tm_clock_ns();
    self->gc_open = 1;
    Py_RETURN_NONE;
}

/* One garbage collection in a worker, as an item record of kind
   TM_ITEM_GC (count: the generation collected; epoch: the owner's
   announced epoch). */
static PyObject *
batchlog_gc_end(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    tm_batchlog *self = (tm_batchlog *)op;
    long long worker, generation;
    tm_item_record rec;
    int64_t cpu1;

    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError,
                     "gc_end() takes 2 arguments (worker, generation), got %zd", nargs);
        return NULL;
    }
    if (method_int_arg("gc_end", args[0], "worker", 0, INT32_MAX, &worker) < 0
            || method_int_arg("gc_end", args[1], "generation", -1, INT32_MAX,
                              &generation) < 0) {
        return NULL;
    }
    if (!self->gc_open || self->hdr == NULL) {
        Py_RETURN_FALSE;
    }
    self->gc_open = 0;
    rec.end_ns = tm_clock_ns();
    cpu1 = tm_thread_cpu_ns();
    rec.begin_ns = self->gc_begin_ns;
    rec.cpu_ns = (self->gc_cpu_ns >= 0 && cpu1 >= self->gc_cpu_ns)
                 ? cpu1 - self->gc_cpu_ns : -1;
    rec.index = -1;
    rec.epoch = (int32_t)__atomic_load_n(&self->hdr->epoch, __ATOMIC_ACQUIRE);
    rec.worker = (int32_t)worker;
    rec.kind = TM_ITEM_GC;
    rec.count = (int32_t)generation;
    tm_batchlog_write_item(op, &rec);
    Py_RETURN_TRUE;
}

static PyObject *
batchlog_drain(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    tm_batchlog *self = (tm_batchlog *)op;
    uint64_t claimed, first, i;
    npy_intp n = 0, cap_out;
    PyArrayObject *out;
    tm_batch_record *dst;

    if (self->hdr == NULL || getpid() != self->owner) {
        PyErr_SetString(PyExc_RuntimeError,
                        "BatchLog.drain(): only the process that made the log drains it");
        return NULL;
    }
    claimed = __atomic_load_n(&self->hdr->claimed, __ATOMIC_ACQUIRE);
    first = self->cursor;
    if (claimed - first > self->capacity) {
        self->lost += claimed - self->capacity - first;
        first = claimed - self->capacity;
    }
    cap_out = (npy_intp)(claimed - first);
    Py_INCREF(self->st->batch_record_dtype);
    out = (PyArrayObject *)PyArray_SimpleNewFromDescr(
        1, &cap_out, (PyArray_Descr *)self->st->batch_record_dtype);
    if (out == NULL) {
        return NULL;
    }
    dst = (tm_batch_record *)PyArray_DATA(out);
    for (i = first; i < claimed; i++) {
        tm_batchlog_slot *slot = &self->slots[i % self->capacity];
        uint64_t ready = __atomic_load_n(&slot->ready, __ATOMIC_ACQUIRE);

        if (ready < i + 1) {
            break;  /* still being written: drain it next time */
        }
        if (ready == i + 1) {
            memcpy(&dst[n], &slot->rec, sizeof(tm_batch_record));
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            if (__atomic_load_n(&slot->ready, __ATOMIC_RELAXED) == i + 1) {
                n++;
                continue;
            }
        }
        self->lost++;  /* a later lap took the slot */
    }
    self->cursor = i;
    if (n == cap_out) {
        return (PyObject *)out;
    }
    /* Fewer were ready than claimed: a view of the first n. */
    {
        PyObject *head = PySequence_GetSlice((PyObject *)out, 0, n);

        Py_DECREF(out);
        return head;
    }
}

static PyObject *
batchlog_drain_items(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    tm_batchlog *self = (tm_batchlog *)op;
    uint64_t claimed, first, i;
    npy_intp n = 0, cap_out;
    PyArrayObject *out;
    tm_item_record *dst;

    if (self->hdr == NULL || getpid() != self->owner) {
        PyErr_SetString(PyExc_RuntimeError,
                        "BatchLog.drain_items(): only the process that made the log drains it");
        return NULL;
    }
    claimed = __atomic_load_n(&self->items_hdr->claimed, __ATOMIC_ACQUIRE);
    first = self->item_cursor;
    if (claimed - first > self->item_capacity) {
        self->items_lost += claimed - self->item_capacity - first;
        first = claimed - self->item_capacity;
    }
    cap_out = (npy_intp)(claimed - first);
    Py_INCREF(self->st->item_record_dtype);
    out = (PyArrayObject *)PyArray_SimpleNewFromDescr(
        1, &cap_out, (PyArray_Descr *)self->st->item_record_dtype);
    if (out == NULL) {
        return NULL;
    }
    dst = (tm_item_record *)PyArray_DATA(out);
    for (i = first; i < claimed; i++) {
        tm_itemlog_slot *slot = &self->item_slots[i % self->item_capacity];
        uint64_t ready = __atomic_load_n(&slot->ready, __ATOMIC_ACQUIRE);

        if (ready < i + 1) {
            break;
        }
        if (ready == i + 1) {
            memcpy(&dst[n], &slot->rec, sizeof(tm_item_record));
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            if (__atomic_load_n(&slot->ready, __ATOMIC_RELAXED) == i + 1) {
                n++;
                continue;
            }
        }
        self->items_lost++;
    }
    self->item_cursor = i;
    if (n == cap_out) {
        return (PyObject *)out;
    }
    {
        PyObject *head = PySequence_GetSlice((PyObject *)out, 0, n);

        Py_DECREF(out);
        return head;
    }
}

static PyObject *
batchlog_get_epoch(PyObject *op, void *Py_UNUSED(closure))
{
    tm_batchlog *self = (tm_batchlog *)op;

    if (self->hdr == NULL) {
        Py_RETURN_NONE;
    }
    return PyLong_FromLongLong(
        (long long)__atomic_load_n(&self->hdr->epoch, __ATOMIC_ACQUIRE));
}

static int
batchlog_set_epoch(PyObject *op, PyObject *value, void *Py_UNUSED(closure))
{
    tm_batchlog *self = (tm_batchlog *)op;
    long long v;

    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "BatchLog.epoch cannot be deleted");
        return -1;
    }
    if (!PyLong_Check(value)) {
        PyErr_Format(PyExc_TypeError, "BatchLog.epoch must be an int, got %.100s",
                     Py_TYPE(value)->tp_name);
        return -1;
    }
    v = PyLong_AsLongLong(value);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (v < 0 || v > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "BatchLog.epoch must be 0 to %d, got %lld",
                     INT32_MAX, v);
        return -1;
    }
    if (self->hdr != NULL) {
        __atomic_store_n(&self->hdr->epoch, (int64_t)v, __ATOMIC_RELEASE);
    }
    return 0;
}

static PyObject *
batchlog_get_claimed(PyObject *op, void *Py_UNUSED(closure))
{
    tm_batchlog *self = (tm_batchlog *)op;

    return PyLong_FromUnsignedLongLong(
        self->hdr == NULL ? 0
        : (unsigned long long)__atomic_load_n(&self->hdr->claimed, __ATOMIC_ACQUIRE));
}

static PyGetSetDef batchlog_getset[] = {
    {"epoch", batchlog_get_epoch, batchlog_set_epoch,
     "The epoch the owner announces (0 to 2**31 - 1): a worker reads it when "
     "it makes its fetcher, before the epoch's first fetch.", NULL},
    {"claimed", batchlog_get_claimed, NULL,
     "Slots claimed so far by every writer (records written or in progress).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef batchlog_members[] = {
    {"capacity", Py_T_ULONGLONG, offsetof(tm_batchlog, capacity), Py_READONLY,
     "Slots in the log; a record more than this many claims behind the "
     "newest is lost unless drained before."},
    {"lost", Py_T_ULONGLONG, offsetof(tm_batchlog, lost), Py_READONLY,
     "Records overwritten before drain() read them."},
    {"items", Py_T_ULONGLONG, offsetof(tm_batchlog, item_capacity), Py_READONLY,
     "Slots in the items ring (samples and collate calls)."},
    {"items_lost", Py_T_ULONGLONG, offsetof(tm_batchlog, items_lost), Py_READONLY,
     "Item records overwritten before drain_items() read them."},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef batchlog_methods[] = {
    {"fetch_begin", batchlog_fetch_begin, METH_NOARGS,
     "fetch_begin()\n--\n\n"
     "In a worker, just before a batch is made: reads the clock and this "
     "thread's CPU clock."},
    {"fetch_end", (PyCFunction)(void (*)(void))batchlog_fetch_end, METH_FASTCALL,
     "fetch_end(epoch, worker, seq)\n--\n\n"
     "In a worker, once the batch is made: writes one record (the epoch "
     "read at fetcher creation, the worker id, the batch's number among "
     "this worker's batches of the epoch from 0, the wall begin and end in "
     "clock_ns() nanoseconds, the thread's CPU ns).  Returns False when no "
     "fetch_begin() is open.  Raises TypeError or ValueError on a bad "
     "argument."},
    {"gc_begin", batchlog_gc_begin, METH_NOARGS,
     "gc_begin()\n--\n\n"
     "In a worker, as a garbage collection starts (a gc.callbacks entry): "
     "reads the clock and this thread's CPU clock."},
    {"gc_end", (PyCFunction)(void (*)(void))batchlog_gc_end, METH_FASTCALL,
     "gc_end(worker, generation)\n--\n\n"
     "In a worker, as that collection stops: writes one item record of kind "
     "ITEM_GC (begin and end in clock_ns() nanoseconds, the thread's CPU ns, "
     "index -1, count the generation).  Returns False when no gc_begin() is "
     "open.  Raises TypeError or ValueError on a bad argument."},
    {"drain", batchlog_drain, METH_NOARGS,
     "drain()\n--\n\n"
     "In the process that made the log: the records written since the last "
     "drain, as a NumPy array of BATCH_RECORD_DTYPE (begin_ns, end_ns, "
     "cpu_ns, runq_ns (-1: unknown), seq, epoch, worker), in claim order.  Raises "
     "RuntimeError in any other process."},
    {"drain_items", batchlog_drain_items, METH_NOARGS,
     "drain_items()\n--\n\n"
     "In the process that made the log: the item records (samples, "
     "iterable items, __getitems__ and collate calls; see TimedDataset) "
     "written since the last drain_items(), as a NumPy array of "
     "ITEM_RECORD_DTYPE, in claim order.  Raises RuntimeError in any "
     "other process."},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(batchlog_doc,
"BatchLog(capacity=65536, items=262144)\n--\n\n"
"A log of per-batch production times shared with forked DataLoader workers\n"
"(an anonymous shared mapping of 128 + 56 * capacity + 56 * items bytes,\n"
"pages touched only as written), and a second ring of per-item times\n"
"(samples and collate calls, written by TimedDataset, TimedIter and\n"
"TimedCall).  Workers call fetch_begin() and fetch_end(); the process\n"
"that made it calls drain() and drain_items().  Raises ValueError for a\n"
"capacity or items outside 1 to 2**24, OSError when the mapping fails.");

static PyType_Slot batchlog_slots[] = {
    {Py_tp_doc, (void *)batchlog_doc},
    {Py_tp_new, batchlog_new},
    {Py_tp_dealloc, batchlog_dealloc},
    {Py_tp_methods, batchlog_methods},
    {Py_tp_members, batchlog_members},
    {Py_tp_getset, batchlog_getset},
    {0, NULL},
};

PyType_Spec tm_batchlog_spec = {
    .name = "traceml._core.BatchLog",
    .basicsize = sizeof(tm_batchlog),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = batchlog_slots,
};

/* ------------------------------------------------------------------ */
/* TimedFetch: a worker's fetcher.fetch, timed into a log              */

typedef struct {
    PyObject_HEAD
    PyObject *log;            /* the BatchLog (strong) */
    PyObject *fetch;          /* the fetcher's own fetch (strong) */
    int32_t epoch;
    int32_t worker;
    int64_t seq;              /* batches made so far by this fetcher */
    int schedstat_fd;         /* this thread's schedstat; -1 not yet, -2 none */
    vectorcallfunc vectorcall;
} tm_timedfetch;

/* The worker process's CPU time, every thread's (its CPU clock:
   schedstat's on-CPU figure moves only at scheduler ticks and switches, so
   a batch shorter than a tick could read 0; every thread, so that work a
   dataset hands to its own threads counts as the batch's, as the cores it
   takes do), and the fetching thread's run-queue wait (schedstat, which
   the kernel adds to when the thread gets a core; opened on first use, in
   the thread that fetches; -1 when the kernel keeps none).  The process's
   CPU over a batch also holds its queue's feeder thread sending earlier
   batches: CPU the worker spends all the same. */
static void
timedfetch_clocks(tm_timedfetch *self, int64_t *cpu_ns, int64_t *runq_ns)
{
    int64_t ignored;

    if (self->schedstat_fd == -1) {
        self->schedstat_fd = tm_schedstat_open_thread();
        if (self->schedstat_fd < 0) {
            self->schedstat_fd = -2;
        }
    }
    *cpu_ns = tm_process_cpu_ns();
    if (self->schedstat_fd < 0
            || tm_schedstat_read(self->schedstat_fd, &ignored, runq_ns) != 0) {
        *runq_ns = -1;
    }
}

/* Calls the inner fetch; once it returns a batch, writes its record.  A
   fetch that raises (StopIteration at the end of an IterableDataset, an
   error in the dataset) is not a batch: nothing is written and the
   exception passes through untouched.  Being C, it adds no frame to the
   traceback the main process re-raises. */
static PyObject *
timedfetch_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf,
                      PyObject *kwnames)
{
    tm_timedfetch *self = (tm_timedfetch *)op;
    int64_t cpu0, runq0, cpu1, runq1, begin, end;
    PyObject *batch;

    timedfetch_clocks(self, &cpu0, &runq0);
    begin = tm_clock_ns();
    /* The stack sampler's wall-clock ticks run only while a batch is made:
       an idle worker is not woken. */
    tm_stacks_wall(1);
    batch = PyObject_Vectorcall(self->fetch, args, nargsf, kwnames);
    tm_stacks_wall(0);
    if (batch != NULL) {
        end = tm_clock_ns();
        timedfetch_clocks(self, &cpu1, &runq1);
        batchlog_write((tm_batchlog *)self->log, begin, end,
                       tm_clock_delta(cpu0, cpu1, 0), tm_clock_delta(runq0, runq1, 0),
                       self->epoch, self->worker, self->seq++);
    }
    return batch;
}

static PyObject *
timedfetch_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"log", "fetch", "epoch", "worker", NULL};
    PyObject *log, *fetch;
    int epoch, worker;
    tm_timedfetch *self;
    tm_state *st = tm_state_of_type(type);

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!Oii:TimedFetch", kwlist,
                                     st->batchlog_type, &log, &fetch,
                                     &epoch, &worker)) {
        return NULL;
    }
    if (!PyCallable_Check(fetch)) {
        PyErr_Format(PyExc_TypeError, "TimedFetch(): fetch must be callable, got %.100s",
                     Py_TYPE(fetch)->tp_name);
        return NULL;
    }
    if (epoch < 0 || worker < 0) {
        PyErr_Format(PyExc_ValueError,
                     "TimedFetch(): epoch and worker must be >= 0, got %d and %d",
                     epoch, worker);
        return NULL;
    }
    self = (tm_timedfetch *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->log = Py_NewRef(log);
    self->fetch = Py_NewRef(fetch);
    self->epoch = epoch;
    self->worker = worker;
    self->schedstat_fd = -1;
    self->vectorcall = timedfetch_vectorcall;
    return (PyObject *)self;
}

static int
timedfetch_traverse(PyObject *op, visitproc visit, void *arg)
{
    tm_timedfetch *self = (tm_timedfetch *)op;

    Py_VISIT(Py_TYPE(op));
    Py_VISIT(self->log);
    Py_VISIT(self->fetch);
    return 0;
}

static int
timedfetch_clear(PyObject *op)
{
    tm_timedfetch *self = (tm_timedfetch *)op;

    Py_CLEAR(self->log);
    Py_CLEAR(self->fetch);
    return 0;
}

static void
timedfetch_dealloc(PyObject *op)
{
    PyTypeObject *type = Py_TYPE(op);

    PyObject_GC_UnTrack(op);
    if (((tm_timedfetch *)op)->schedstat_fd >= 0) {
        close(((tm_timedfetch *)op)->schedstat_fd);
    }
    (void)timedfetch_clear(op);
    type->tp_free(op);
    Py_DECREF(type);
}

static PyMemberDef timedfetch_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(tm_timedfetch, vectorcall),
     Py_READONLY, NULL},
    {"seq", Py_T_LONGLONG, offsetof(tm_timedfetch, seq), Py_READONLY,
     "Batches made so far through this fetch."},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(timedfetch_doc,
"TimedFetch(log, fetch, epoch, worker)\n--\n\n"
"In a DataLoader worker: a callable that calls fetch(*args) and, when it\n"
"returns a batch, writes its record (epoch, worker, its number from 0,\n"
"wall begin and end, the thread's CPU clock, and its run-queue wait from\n"
"/proc/thread-self/schedstat, -1 without it) to the BatchLog log.  Exceptions\n"
"pass through unchanged.  Raises TypeError or ValueError on bad arguments.");

static PyType_Slot timedfetch_slots[] = {
    {Py_tp_doc, (void *)timedfetch_doc},
    {Py_tp_new, timedfetch_new},
    {Py_tp_dealloc, timedfetch_dealloc},
    {Py_tp_traverse, timedfetch_traverse},
    {Py_tp_clear, timedfetch_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_members, timedfetch_members},
    {0, NULL},
};

PyType_Spec tm_timedfetch_spec = {
    .name = "traceml._core.TimedFetch",
    .basicsize = sizeof(tm_timedfetch),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE
             | Py_TPFLAGS_HAVE_VECTORCALL,
    .slots = timedfetch_slots,
};
