/*
 * traceml._core.Recorder: one recording's store, probes and test clock,
 * and its store bindings (snapshot, store_info, reset).  The probes'
 * logic is in probes.c, the loop's iterator in wrap.c.  Knows nothing of
 * reducers or of /proc.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define NO_IMPORT_ARRAY
#define PY_ARRAY_UNIQUE_SYMBOL traceml_ARRAY_API
#include <numpy/arrayobject.h>

#include <string.h>

#include "module.h"

static void
link_recorder(tm_state *st, tm_recorder *rec)
{
    rec->prev = NULL;
    rec->next = st->recorders;
    if (st->recorders != NULL) {
        st->recorders->prev = rec;
    }
    st->recorders = rec;
}

static void
unlink_recorder(tm_recorder *rec)
{
    if (rec->prev != NULL) {
        rec->prev->next = rec->next;
    }
    else if (rec->st->recorders == rec) {
        rec->st->recorders = rec->next;
    }
    if (rec->next != NULL) {
        rec->next->prev = rec->prev;
    }
    rec->prev = rec->next = NULL;
}

static void
clear_test_clock(tm_recorder *rec)
{
    PyMem_RawFree(rec->clock.values);
    memset(&rec->clock, 0, sizeof(rec->clock));
}

/* Called in a forked child: the parent's record is not the child's. */
void
tm_recorder_after_fork(tm_recorder *rec)
{
    tm_store_free(&rec->store);
    tm_store_clear(&rec->store);
    tm_probes_clear(&rec->probes);
    /* The parent's thread's schedstat: not this process's to keep open. */
    tm_thread_clocks_close(&rec->probe_clocks);
}

static PyObject *
recorder_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    tm_state *st;
    tm_recorder *self;
    PyObject *module;

    if ((args != NULL && PyTuple_GET_SIZE(args) != 0)
            || (kwds != NULL && PyDict_GET_SIZE(kwds) != 0)) {
        PyErr_SetString(PyExc_TypeError, "Recorder() takes no arguments");
        return NULL;
    }
    module = tm_module_of_type(type);
    if (module == NULL) {
        return NULL;
    }
    st = (tm_state *)PyModule_GetState(module);
    self = (tm_recorder *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->module = Py_NewRef(module);
    self->st = st;
    if (++st->next_recorder_id == 0) {
        st->next_recorder_id = 1;
    }
    self->id = st->next_recorder_id;
    tm_store_init(&self->store);
    tm_probes_clear(&self->probes);
    tm_thread_clocks_init(&self->probe_clocks);
    link_recorder(st, self);
    return (PyObject *)self;
}

static int
recorder_traverse(tm_recorder *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->module);
    Py_VISIT(self->gpu_begin);
    Py_VISIT(self->gpu_done);
    return 0;
}

/* Leave the module's list and the sampler's events, once. */
static void
detach_recorder(tm_recorder *self)
{
    if (self->st == NULL) {
        return;
    }
    unlink_recorder(self);
    if (self->st->sampler_ok) {
        tm_sampler_forget(&self->st->sampler, self->id);
    }
    self->st = NULL;
}

/* A garbage cycle through the recorder (at interpreter exit, say): leave
   the module before letting go of it, since the module may be freed
   before this object is. */
static int
recorder_clear(tm_recorder *self)
{
    detach_recorder(self);
    Py_CLEAR(self->gpu_begin);
    Py_CLEAR(self->gpu_done);
    Py_CLEAR(self->module);
    return 0;
}

static void
recorder_dealloc(tm_recorder *self)
{
    PyTypeObject *tp = Py_TYPE(self);

    PyObject_GC_UnTrack(self);
    (void)recorder_clear(self);
    tm_store_free(&self->store);
    tm_thread_clocks_close(&self->probe_clocks);
    clear_test_clock(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* Methods that need the module state refuse once the recorder was
   cleared by the garbage collector (only reachable from a finaliser). */
static int
cleared(tm_recorder *self)
{
    if (self->st != NULL) {
        return 0;
    }
    PyErr_SetString(PyExc_RuntimeError,
                    "this traceml Recorder was cleared by the garbage collector");
    return 1;
}

/* ------------------------------------------------------------------ */
/* methods                                                            */

static PyObject *
rec_step_begin(tm_recorder *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    return tm_probe_step_begin(self, nargs);
}

static PyObject *
rec_fetch_done(tm_recorder *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    return tm_probe_fetch_done(self, nargs);
}

static PyObject *
rec_step_end(tm_recorder *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    return tm_probe_step_end(self, nargs);
}

static PyObject *
rec_abandon_step(tm_recorder *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    return tm_probe_abandon_step(self, nargs);
}

static PyObject *
rec_clock_ns(tm_recorder *self, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromLongLong(tm_rec_clock(self));
}

static PyObject *
rec_reset(tm_recorder *self, PyObject *Py_UNUSED(ignored))
{
    tm_store_clear(&self->store);
    tm_probes_clear(&self->probes);
    if (self->st != NULL && self->st->sampler_ok) {
        tm_sampler_forget(&self->st->sampler, self->id);
    }
    Py_RETURN_NONE;
}

static PyObject *
rec_snapshot(tm_recorder *self, PyObject *Py_UNUSED(ignored))
{
    npy_intp n = (npy_intp)self->store.len;
    PyObject *arr;

    if (cleared(self)) {
        return NULL;
    }
    Py_INCREF(self->st->record_dtype);
    arr = PyArray_NewFromDescr(&PyArray_Type,
                               (PyArray_Descr *)self->st->record_dtype, 1,
                               &n, NULL, NULL, 0, NULL);
    if (arr == NULL) {
        return NULL;
    }
    if (n > 0) {
        memcpy(PyArray_DATA((PyArrayObject *)arr), self->store.records,
               (size_t)n * sizeof(tm_record));
    }
    return arr;
}

#define TM_LENT_CAPSULE "traceml._core.lent_records"

static void
lent_capsule_destructor(PyObject *capsule)
{
    tm_lent *lent = PyCapsule_GetPointer(capsule, TM_LENT_CAPSULE);

    if (lent != NULL) {
        tm_lent_release(lent);
    }
}

/*
 * A read-only array over the store's own records, no copy.  The array's
 * base, a capsule, holds the store's block (tm_lent): the store does not
 * move or overwrite the block while it is lent, so the view shows the
 * same records for as long as it lives, whatever the recorder does
 * meanwhile (grow, reset, fork); appends write past its end.
 */
static PyObject *
rec_snapshot_view(tm_recorder *self, PyObject *Py_UNUSED(ignored))
{
    npy_intp n = (npy_intp)self->store.len;
    PyArray_Descr *descr;
    tm_lent *lent;

    if (cleared(self)) {
        return NULL;
    }
    descr = (PyArray_Descr *)self->st->record_dtype;
    PyObject *capsule, *arr;

    if (n == 0) {
        Py_INCREF(descr);
        return PyArray_NewFromDescr(&PyArray_Type, descr, 1, &n, NULL, NULL,
                                    0, NULL);
    }
    lent = tm_store_lend(&self->store);
    if (lent == NULL) {
        return PyErr_NoMemory();
    }
    capsule = PyCapsule_New(lent, TM_LENT_CAPSULE, lent_capsule_destructor);
    if (capsule == NULL) {
        tm_lent_release(lent);
        return NULL;
    }
    Py_INCREF(descr);
    /* flags 0: not writeable (contiguity is worked out by NumPy). */
    arr = PyArray_NewFromDescr(&PyArray_Type, descr, 1, &n, NULL,
                               lent->records, 0, NULL);
    if (arr == NULL) {
        Py_DECREF(capsule);
        return NULL;
    }
    /* Steals the capsule reference, even on failure. */
    if (PyArray_SetBaseObject((PyArrayObject *)arr, capsule) < 0) {
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}

static PyObject *
rec_snapshot_delivery(tm_recorder *self, PyObject *Py_UNUSED(ignored))
{
    npy_intp n = (npy_intp)self->store.len;
    PyArrayObject *rank, *worker, *bytes, *tensors;
    int32_t *r, *w, *t;
    int64_t *b;
    npy_intp i;
    size_t k;

    if (self->store.delivery == NULL && self->store.nbytes == 0) {
        Py_RETURN_NONE;
    }
    rank = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_INT32);
    worker = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_INT32);
    bytes = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_INT64);
    tensors = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_INT32);
    if (rank == NULL || worker == NULL || bytes == NULL || tensors == NULL) {
        Py_XDECREF(rank);
        Py_XDECREF(worker);
        Py_XDECREF(bytes);
        Py_XDECREF(tensors);
        return NULL;
    }
    r = (int32_t *)PyArray_DATA(rank);
    w = (int32_t *)PyArray_DATA(worker);
    b = (int64_t *)PyArray_DATA(bytes);
    t = (int32_t *)PyArray_DATA(tensors);
    for (i = 0; i < n; i++) {
        r[i] = self->store.delivery != NULL ? self->store.delivery[i].rank : -1;
        w[i] = self->store.delivery != NULL ? self->store.delivery[i].worker : -1;
        b[i] = -1;
        t[i] = -1;
    }
    for (k = 0; k < self->store.nbytes; k++) {
        int64_t step = self->store.bytes[k].step;

        if (step >= 0 && step < (int64_t)n) {
            b[step] = self->store.bytes[k].bytes;
            t[step] = (int32_t)self->store.bytes[k].tensors;
        }
    }
    return Py_BuildValue("(NNNN)", rank, worker, bytes, tensors);
}

static PyObject *
rec_snapshot_fetch_clocks(tm_recorder *self, PyObject *Py_UNUSED(ignored))
{
    npy_intp n = (npy_intp)self->store.nclocks;
    PyObject *out[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    int64_t *col[6];
    npy_intp i;
    int k;

    for (k = 0; k < 6; k++) {
        out[k] = PyArray_SimpleNew(1, &n, NPY_INT64);
        if (out[k] == NULL) {
            for (k = 0; k < 6; k++) {
                Py_XDECREF(out[k]);
            }
            return NULL;
        }
        col[k] = (int64_t *)PyArray_DATA((PyArrayObject *)out[k]);
    }
    for (i = 0; i < n; i++) {
        const tm_fetch_clock *c = &self->store.clocks[i];

        col[0][i] = c->step;
        col[1][i] = c->cpu_ns;
        col[2][i] = c->runq_ns;
        col[3][i] = c->body_cpu_ns;
        col[4][i] = c->body_runq_ns;
        col[5][i] = c->others_cpu_ns;
    }
    return Py_BuildValue("(NNNNNN)", out[0], out[1], out[2], out[3], out[4],
                         out[5]);
}

static PyObject *
rec_store_info(tm_recorder *self, PyObject *Py_UNUSED(ignored))
{
    tm_probes *p = &self->probes;
    tm_store *s = &self->store;

    return Py_BuildValue(
        "{s:n,s:n,s:n,s:K,s:O,s:O,s:K,s:O,s:K,s:K,s:{s:K,s:K,s:K,s:K,s:K}}",
        "steps", (Py_ssize_t)s->len,
        "capacity", (Py_ssize_t)s->cap,
        "record_bytes", (Py_ssize_t)sizeof(tm_record),
        "dropped_steps", (unsigned long long)s->dropped,
        "out_of_memory", s->oom ? Py_True : Py_False,
        "delivery_lost", s->delivery_lost ? Py_True : Py_False,
        "generation", (unsigned long long)s->generation,
        "probe_step_open", p->open ? Py_True : Py_False,
        "test_clock_overrun", (unsigned long long)self->clock.overrun,
        "steps_abandoned", (unsigned long long)p->abandoned,
        "misuse",
        "step_begin_while_open", (unsigned long long)p->begin_while_open,
        "fetch_done_without_step", (unsigned long long)p->fetch_without_step,
        "fetch_done_repeated", (unsigned long long)p->fetch_repeated,
        "step_end_without_step", (unsigned long long)p->end_without_step,
        "step_end_without_fetch", (unsigned long long)p->end_without_fetch);
}

static PyObject *
rec_set_capacity_limit(tm_recorder *self, PyObject *arg)
{
    size_t limit = SIZE_MAX;

    if (arg != Py_None) {
        Py_ssize_t n = PyNumber_AsSsize_t(arg, PyExc_OverflowError);

        if (n == -1 && PyErr_Occurred()) {
            return NULL;
        }
        if (n < 0) {
            PyErr_SetString(PyExc_ValueError,
                            "_set_capacity_limit(): limit must be >= 0 or "
                            "None");
            return NULL;
        }
        limit = (size_t)n;
    }
    if (self->store.len != 0) {
        PyErr_SetString(PyExc_RuntimeError,
                        "the capacity limit can only be set on an empty "
                        "store: call reset() first");
        return NULL;
    }
    tm_store_free(&self->store);
    self->store.cap_limit = limit;
    Py_RETURN_NONE;
}

/* Testing hook: None for the real clock, or a sequence of int64 values
   that each later clock read returns in turn (the last one repeats). */
static PyObject *
rec_set_test_clock(tm_recorder *self, PyObject *arg)
{
    PyObject *seq;
    Py_ssize_t n, i;
    int64_t *values;

    if (arg == Py_None) {
        clear_test_clock(self);
        Py_RETURN_NONE;
    }
    seq = PySequence_Fast(arg, "_set_test_clock(): values must be a "
                               "sequence of ints or None");
    if (seq == NULL) {
        return NULL;
    }
    n = PySequence_Fast_GET_SIZE(seq);
    if (n == 0) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError,
                        "_set_test_clock(): values must not be empty");
        return NULL;
    }
    values = PyMem_RawMalloc((size_t)n * sizeof(int64_t));
    if (values == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (i = 0; i < n; i++) {
        long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));

        if (v == -1 && PyErr_Occurred()) {
            PyMem_RawFree(values);
            Py_DECREF(seq);
            return NULL;
        }
        values[i] = (int64_t)v;
    }
    Py_DECREF(seq);
    clear_test_clock(self);
    self->clock.values = values;
    self->clock.n = (size_t)n;
    Py_RETURN_NONE;
}

/* A 1-D int32 array of n values from obj (None: NULL, nothing to hold). */
static int
int32_column(PyObject *obj, npy_intp n, const char *what, PyArrayObject **out)
{
    *out = NULL;
    if (obj == NULL || obj == Py_None) {
        return 0;
    }
    *out = (PyArrayObject *)PyArray_FROMANY(obj, NPY_INT32, 1, 1,
                                            NPY_ARRAY_CARRAY_RO
                                            | NPY_ARRAY_FORCECAST);
    if (*out == NULL) {
        return -1;
    }
    if (PyArray_SIZE(*out) != n) {
        PyErr_Format(PyExc_ValueError, "_append_records(): %s must have one "
                     "value per record", what);
        Py_CLEAR(*out);
        return -1;
    }
    return 0;
}

/* Testing hook: append the records of a RECORD_DTYPE array as if their
   steps had just closed (each through tm_store_push, so growth and drops
   behave as in a loop), with each step's delivered batch rank and worker
   when given, so that tests and benchmarks make long runs without timing
   them step by step. */
static PyObject *
rec_append_records(tm_recorder *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"records", "rank", "worker", NULL};
    PyObject *obj, *rank_obj = NULL, *worker_obj = NULL;
    PyArrayObject *arr, *rank = NULL, *worker = NULL;
    const tm_record *r;
    const int32_t *rk, *wk;
    npy_intp n, i;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|OO:_append_records",
                                     kwlist, &obj, &rank_obj, &worker_obj)) {
        return NULL;
    }
    if (cleared(self)) {
        return NULL;
    }
    Py_INCREF(self->st->record_dtype);
    arr = (PyArrayObject *)PyArray_FromAny(
        obj, (PyArray_Descr *)self->st->record_dtype, 1, 1,
        NPY_ARRAY_CARRAY_RO, NULL);
    if (arr == NULL) {
        return NULL;
    }
    n = PyArray_SIZE(arr);
    if (int32_column(rank_obj, n, "rank", &rank) < 0
            || int32_column(worker_obj, n, "worker", &worker) < 0) {
        Py_XDECREF(rank);
        Py_DECREF(arr);
        return NULL;
    }
    r = (const tm_record *)PyArray_DATA(arr);
    rk = rank != NULL ? (const int32_t *)PyArray_DATA(rank) : NULL;
    wk = worker != NULL ? (const int32_t *)PyArray_DATA(worker) : NULL;
    for (i = 0; i < n; i++) {
        tm_store_push(&self->store, r[i].begin_ns, r[i].fetch_done_ns,
                      r[i].end_ns, r[i].epoch, r[i].source, r[i].flags,
                      rk != NULL ? rk[i] : -1, wk != NULL ? wk[i] : -1, -1, 0);
    }
    Py_XDECREF(rank);
    Py_XDECREF(worker);
    Py_DECREF(arr);
    Py_RETURN_NONE;
}

/* The probes' CUDA-event hooks (traceml.gpu): two callables, or None and
   None to turn them off. */
static PyObject *
rec_set_gpu_hooks(tm_recorder *self, PyObject *args)
{
    PyObject *begin, *done;

    if (!PyArg_ParseTuple(args, "OO:_set_gpu_hooks", &begin, &done)) {
        return NULL;
    }
    if (begin == Py_None && done == Py_None) {
        Py_CLEAR(self->gpu_begin);
        Py_CLEAR(self->gpu_done);
        Py_RETURN_NONE;
    }
    if (!PyCallable_Check(begin) || !PyCallable_Check(done)) {
        PyErr_SetString(PyExc_TypeError, "_set_gpu_hooks(): begin and done must "
                        "both be callables, or both None");
        return NULL;
    }
    Py_XSETREF(self->gpu_begin, Py_NewRef(begin));
    Py_XSETREF(self->gpu_done, Py_NewRef(done));
    Py_RETURN_NONE;
}

static PyObject *
rec_get_id(tm_recorder *self, void *Py_UNUSED(closure))
{
    return PyLong_FromUnsignedLong(self->id);
}

static PyMethodDef recorder_methods[] = {
    {"step_begin", (PyCFunction)(void (*)(void))rec_step_begin,
     METH_FASTCALL,
     "step_begin()\n--\n\n"
     "Open a step at this recorder's clock.  See traceml.step_begin."},
    {"fetch_done", (PyCFunction)(void (*)(void))rec_fetch_done,
     METH_FASTCALL,
     "fetch_done()\n--\n\n"
     "Mark the open step's input as arrived.  See traceml.fetch_done."},
    {"step_end", (PyCFunction)(void (*)(void))rec_step_end, METH_FASTCALL,
     "step_end()\n--\n\n"
     "Close and record the open step.  See traceml.step_end."},
    {"abandon_step", (PyCFunction)(void (*)(void))rec_abandon_step,
     METH_FASTCALL,
     "abandon_step()\n--\n\n"
     "Drop the open step unrecorded.  See traceml.abandon_step."},
    {"clock_ns", (PyCFunction)rec_clock_ns, METH_NOARGS,
     "clock_ns()\n--\n\nReturns int.\n\n"
     "The clock this recorder stamps steps with (CLOCK_MONOTONIC ns, or\n"
     "the test clock's next value)."},
    {"_reset_store", (PyCFunction)rec_reset, METH_NOARGS,
     "Discard the recorded steps, drop and misuse counts and this\n"
     "recorder's stuck events; close the probes' open step unrecorded."},
    {"snapshot", (PyCFunction)rec_snapshot, METH_NOARGS,
     "snapshot()\n--\n\nReturns ndarray[RECORD_DTYPE].\n\n"
     "A copy of every recorded step, in the order the steps closed."},
    {"snapshot_view", (PyCFunction)rec_snapshot_view, METH_NOARGS,
     "snapshot_view()\n--\n\nReturns ndarray[RECORD_DTYPE].\n\n"
     "Every recorded step so far, as snapshot() gives them, without a copy:\n"
     "a read-only array over the store's own memory.  It keeps showing\n"
     "the same steps for as long as it lives, whatever the recorder does\n"
     "meanwhile: while a view holds the store's block, the store does not\n"
     "move it (growing copies the records into a new block; the view keeps\n"
     "the old one, so memory can double while an old view lives) nor write\n"
     "over it (reset() starts a new block).  Raises MemoryError when the\n"
     "view's small bookkeeping cannot be allocated."},
    {"snapshot_delivery", (PyCFunction)rec_snapshot_delivery, METH_NOARGS,
     "snapshot_delivery()\n--\n\nReturns (rank, worker, bytes, tensors) or None.\n\n"
     "Per recorded step (parallel to snapshot()): the delivered batch's\n"
     "rank in its epoch's sampler order and the worker that produced it\n"
     "(int32, -1 where unknown), its tensor and array bytes (int64, -1\n"
     "where not measured: wrap measures the first 8 batches of an epoch\n"
     "and every 64th) and how many tensors and arrays hold them (int32,\n"
     "-1 where not measured; a walk of 4 levels of tuples, lists and dict\n"
     "values, 256 objects at most); None when no step carried any of these."},
    {"snapshot_fetch_clocks", (PyCFunction)rec_snapshot_fetch_clocks, METH_NOARGS,
     "snapshot_fetch_clocks()\n--\n\n"
     "Returns (step, cpu_ns, runq_ns, body_cpu_ns, body_runq_ns,\n"
     "others_cpu_ns).\n\n"
     "The steps whose clocks wrap read (the first 1024 fetches of each\n"
     "epoch, then two in a row every 1021), in step order: the step (index\n"
     "into snapshot()), the fetching thread's CPU time inside the fetch and\n"
     "its wait for a core inside it (schedstat's run-queue time), then the\n"
     "same two over the step's body, from the batch in hand to the next\n"
     "fetch, then the CPU time of the process's other threads inside the\n"
     "fetch (a thread holding the GIL, the pin-memory thread); int64 ns\n"
     "each, -1 where unreadable or, for the body, where the next fetch was\n"
     "not clocked.  The probes clock their steps the same way (the first\n"
     "1024, then two in a row every 8191)."},
    {"store_info", (PyCFunction)rec_store_info, METH_NOARGS,
     "store_info()\n--\n\nReturns dict.\n\n"
     "steps, capacity, record_bytes, dropped_steps, out_of_memory,\n"
     "delivery_lost, generation, probe_step_open, test_clock_overrun,\n"
     "steps_abandoned and the misuse counts."},
    {"_set_capacity_limit", (PyCFunction)rec_set_capacity_limit, METH_O,
     "Testing hook: cap the store at this many records (None: no cap)."},
    {"_append_records", (PyCFunction)(void (*)(void))rec_append_records,
     METH_VARARGS | METH_KEYWORDS,
     "_append_records(records, rank=None, worker=None)\n--\n\n"
     "Testing hook: append the records of a 1-D RECORD_DTYPE array (in\n"
     "order, as closed steps without batch sizes), with each step's\n"
     "delivered batch rank and worker (int32 arrays of the same length)\n"
     "when given."},
    {"_set_gpu_hooks", (PyCFunction)rec_set_gpu_hooks, METH_VARARGS,
     "_set_gpu_hooks(begin, done)\n--\n\n"
     "The probes' CUDA-event hooks (traceml.gpu): begin() before\n"
     "step_begin() reads the clock, done(begin_ns) after fetch_done();\n"
     "None, None: off.  Set by traceml.cuda_events()."},
    {"_set_test_clock", (PyCFunction)rec_set_test_clock, METH_O,
     "Testing hook: the clock returns these int64 values in turn (the\n"
     "last repeats; reads past the end count as test_clock_overrun);\n"
     "None restores CLOCK_MONOTONIC."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef recorder_getset[] = {
    {"id", (getter)rec_get_id, NULL,
     "This recorder's id, unique in the process (stuck events carry it).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(recorder_doc,
"Recorder()\n--\n\n"
"The C half of traceml.Recorder: a step store, the probes' open step and\n"
"misuse counts, and an optional test clock.  Use traceml.Recorder.");

static PyType_Slot recorder_slots[] = {
    {Py_tp_doc, (void *)recorder_doc},
    {Py_tp_new, recorder_new},
    {Py_tp_dealloc, recorder_dealloc},
    {Py_tp_traverse, recorder_traverse},
    {Py_tp_clear, recorder_clear},
    {Py_tp_methods, recorder_methods},
    {Py_tp_getset, recorder_getset},
    {0, NULL},
};

PyType_Spec tm_recorder_spec = {
    .name = "traceml._core.Recorder",
    .basicsize = sizeof(tm_recorder),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE,
    .slots = recorder_slots,
};

/* ------------------------------------------------------------------ */
/* the default recorder                                               */

static PyObject *
mod_default_recorder(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    PyObject *rec = tm_probes_default(PyModule_GetState(module));

    if (rec == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "default_recorder(): traceml._core has been torn down");
        return NULL;
    }
    return Py_NewRef(rec);
}

static PyObject *
mod_set_default_recorder(PyObject *module, PyObject *rec)
{
    tm_state *st = PyModule_GetState(module);
    PyObject *old;

    if (!PyObject_TypeCheck(rec, st->recorder_type)) {
        PyErr_Format(PyExc_TypeError,
                     "_set_default_recorder(): recorder must be a "
                     "traceml.Recorder, got %.200s", Py_TYPE(rec)->tp_name);
        return NULL;
    }
    old = tm_probes_swap_default(st, rec);
    return old != NULL ? old : Py_NewRef(Py_None);
}

PyMethodDef tm_recorder_module_methods[] = {
    {"default_recorder", mod_default_recorder, METH_NOARGS,
     "default_recorder()\n--\n\nReturns Recorder.\n\n"
     "The recorder the module-level probes, wrap() and report() use."},
    {"_set_default_recorder", mod_set_default_recorder, METH_O,
     "_set_default_recorder(rec) -> the previous default."},
    {NULL, NULL, 0, NULL},
};
