/*
 * traceml._core.WaitHistogram: running input-wait quantiles for the live
 * line, from a recorder's store, in O(1) per step.
 *
 * A log-linear histogram (the layout of HdrHistogram with 5 bits of
 * precision): a wait v < 64 ns has a bucket of its own; above, the bucket
 * is the position of v's highest set bit and the 5 bits after it, so each
 * bucket spans 1/32 of its lower bound.  A quantile is read as the middle
 * of the bucket holding the order statistic, so it is within 1/64 (1.6%)
 * of that order statistic (exact below 64 ns); 1,920 buckets cover int64.
 *
 * It never reads the steps as they are recorded: feed(recorder, source)
 * adds the records the store gained since the last call (the live line
 * calls it a few times a second), so the loop pays nothing per step and
 * each step is counted once.  A reset of the store (its generation
 * changes) starts the histogram over.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <string.h>

#include "compat.h"
#include "module.h"

#define TM_HIST_SUB_BITS 5
#define TM_HIST_SUB (1 << TM_HIST_SUB_BITS)            /* 32 */
#define TM_HIST_EXACT (2 * TM_HIST_SUB)                /* 64: exact below */
#define TM_HIST_BUCKETS (TM_HIST_EXACT + (63 - TM_HIST_SUB_BITS) * TM_HIST_SUB)

typedef struct {
    PyObject_HEAD
    uint64_t counts[TM_HIST_BUCKETS];
    uint64_t n;
    int64_t wait_total_ns;
    int64_t step_total_ns;
    size_t next;              /* the store index fed up to */
    uint64_t generation;      /* the store generation fed from */
} tm_waithist;

/* The bucket of a non-negative value. */
static inline int
bucket_of(uint64_t v)
{
    int msb;

    if (v < TM_HIST_EXACT) {
        return (int)v;
    }
    msb = 63 - __builtin_clzll(v);    /* >= 6 */
    return TM_HIST_EXACT + (msb - (TM_HIST_SUB_BITS + 1)) * TM_HIST_SUB
           + (int)((v >> (msb - TM_HIST_SUB_BITS)) & (TM_HIST_SUB - 1));
}

/* The lowest value of a bucket and its width. */
static void
bucket_span(int b, double *low, double *width)
{
    int msb, sub;

    if (b < TM_HIST_EXACT) {
        *low = (double)b;
        *width = 1.0;
        return;
    }
    msb = (b - TM_HIST_EXACT) / TM_HIST_SUB + TM_HIST_SUB_BITS + 1;
    sub = (b - TM_HIST_EXACT) % TM_HIST_SUB;
    *width = ldexp(1.0, msb - TM_HIST_SUB_BITS);
    *low = ldexp(1.0, msb) + sub * *width;
}

static void
hist_clear(tm_waithist *self)
{
    memset(self->counts, 0, sizeof(self->counts));
    self->n = 0;
    self->wait_total_ns = 0;
    self->step_total_ns = 0;
}

static PyObject *
waithist_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {NULL};

    if (!PyArg_ParseTupleAndKeywords(args, kwds, ":WaitHistogram", kwlist)) {
        return NULL;
    }
    /* tp_alloc zeroes the object: counts, totals and the cursor. */
    return type->tp_alloc(type, 0);
}

static void
waithist_dealloc(PyObject *op)
{
    PyTypeObject *type = Py_TYPE(op);

    type->tp_free(op);
    Py_DECREF(type);
}

static PyObject *
waithist_feed(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    tm_waithist *self = (tm_waithist *)op;
    tm_state *st;
    tm_recorder *rec;
    tm_store *store;
    long source;
    size_t i;
    uint64_t added = 0;

    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError,
                     "feed() takes 2 arguments (recorder, source), got %zd", nargs);
        return NULL;
    }
    st = tm_state_of_type(Py_TYPE(op));
    if (st == NULL) {
        return NULL;
    }
    if (!PyObject_TypeCheck(args[0], st->recorder_type)) {
        PyErr_Format(PyExc_TypeError, "feed(): recorder must be a traceml Recorder, got %.100s",
                     Py_TYPE(args[0])->tp_name);
        return NULL;
    }
    source = PyLong_AsLong(args[1]);
    if (source == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (source < -1 || source > UINT16_MAX) {
        PyErr_Format(PyExc_ValueError,
                     "feed(): source must be -1 (all) or 0 to 65535, got %ld", source);
        return NULL;
    }
    rec = (tm_recorder *)args[0];
    store = &rec->store;
    if (store->generation != self->generation || self->next > store->len) {
        hist_clear(self);     /* the store was reset: start over */
        self->generation = store->generation;
        self->next = 0;
    }
    for (i = self->next; i < store->len; i++) {
        const tm_record *r = &store->records[i];
        int64_t wait = r->fetch_done_ns - r->begin_ns;

        if (source >= 0 && r->source != (uint16_t)source) {
            continue;
        }
        self->counts[bucket_of(wait > 0 ? (uint64_t)wait : 0)]++;
        self->n++;
        self->wait_total_ns += wait;
        self->step_total_ns += r->end_ns - r->begin_ns;
        added++;
    }
    self->next = store->len;
    return PyLong_FromUnsignedLongLong(added);
}

/* A q-quantile (0 <= q <= 1): the middle of the bucket holding the order
   statistic of rank round(q * (n - 1)). */
static double
hist_quantile(const tm_waithist *self, double q)
{
    uint64_t rank = (uint64_t)(q * (double)(self->n - 1) + 0.5);
    uint64_t seen = 0;
    int b;

    for (b = 0; b < TM_HIST_BUCKETS; b++) {
        seen += self->counts[b];
        if (seen > rank) {
            double low, width;

            bucket_span(b, &low, &width);
            return b < TM_HIST_EXACT ? low : low + width / 2.0;
        }
    }
    return 0.0;
}

static PyObject *
waithist_quantile(PyObject *op, PyObject *arg)
{
    tm_waithist *self = (tm_waithist *)op;
    double q = PyFloat_AsDouble(arg);

    if (q == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    if (!(q >= 0.0 && q <= 1.0)) {
        PyErr_Format(PyExc_ValueError, "quantile(): q must be in [0, 1], got %R", arg);
        return NULL;
    }
    if (self->n == 0) {
        Py_RETURN_NONE;
    }
    return PyFloat_FromDouble(hist_quantile(self, q));
}

static PyObject *
waithist_count_above(PyObject *op, PyObject *arg)
{
    tm_waithist *self = (tm_waithist *)op;
    long long v = PyLong_AsLongLong(arg);
    uint64_t above = 0;
    int b;

    if (v == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (v < 0) {
        return PyLong_FromUnsignedLongLong(self->n);
    }
    /* Buckets wholly above v; v's own bucket is not counted. */
    for (b = bucket_of((uint64_t)v) + 1; b < TM_HIST_BUCKETS; b++) {
        above += self->counts[b];
    }
    return PyLong_FromUnsignedLongLong(above);
}

static PyObject *
waithist_stats(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    tm_waithist *self = (tm_waithist *)op;

    return Py_BuildValue("{s:K,s:L,s:L}", "steps", (unsigned long long)self->n,
                         "wait_total_ns", (long long)self->wait_total_ns,
                         "step_total_ns", (long long)self->step_total_ns);
}

static PyMethodDef waithist_methods[] = {
    {"feed", (PyCFunction)(void (*)(void))waithist_feed, METH_FASTCALL,
     "feed(recorder, source)\n--\n\n"
     "Add the steps of source (-1: every source) that recorder's store "
     "gained since the last call; returns how many.  After a reset of the "
     "store it starts over.  Raises TypeError or ValueError on bad "
     "arguments."},
    {"quantile", waithist_quantile, METH_O,
     "quantile(q)\n--\n\n"
     "The q-quantile of the input waits fed (ns, float; None when empty), "
     "within 1/64 of the order statistic of rank round(q * (n - 1)) (exact "
     "under 64 ns).  Raises ValueError unless 0 <= q <= 1."},
    {"count_above", waithist_count_above, METH_O,
     "count_above(ns)\n--\n\n"
     "How many waits fed lie in buckets wholly above ns (so above ns; a "
     "wait within 1/32 above it may be left out)."},
    {"stats", waithist_stats, METH_NOARGS,
     "stats()\n--\n\n"
     "{steps, wait_total_ns, step_total_ns} of the steps fed."},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(waithist_doc,
"WaitHistogram()\n--\n\n"
"Running quantiles of a recorder's input waits for the live line: a\n"
"log-linear histogram of 1,920 buckets (1/32 of the value wide; exact\n"
"under 64 ns) fed from the store with feed(recorder, source).");

static PyType_Slot waithist_slots[] = {
    {Py_tp_doc, (void *)waithist_doc},
    {Py_tp_new, waithist_new},
    {Py_tp_dealloc, waithist_dealloc},
    {Py_tp_methods, waithist_methods},
    {0, NULL},
};

PyType_Spec tm_waithist_spec = {
    .name = "traceml._core.WaitHistogram",
    .basicsize = sizeof(tm_waithist),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = waithist_slots,
};
