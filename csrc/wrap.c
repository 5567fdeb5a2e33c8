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
 * epoch's start-up (DataLoader worker processes) and is flagged for the
 * report to set apart.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "clock.h"
#include "module.h"

typedef struct {
    PyObject_HEAD
    PyObject *inner;           /* the timed iterator; NULL once released */
    tm_store *store;           /* in the module state, which the type owns */
    uint64_t generation;       /* store generation the open step began in */
    int64_t epoch_begin_ns;    /* iter() of the wrapped iterable began */
    int64_t begin_ns;          /* the open step */
    int64_t fetch_done_ns;
    unsigned long long steps;  /* batches delivered in this epoch */
    int epoch;
    int source;
    int open;
} tm_wrapiter;

/*
 * Write the open step, ending at now.  A step that began before a reset()
 * (or before a fork) belongs to no recording and is not written.
 */
static void
close_open_step(tm_wrapiter *self, int64_t now)
{
    if (!self->open) {
        return;
    }
    self->open = 0;
    if (self->generation != self->store->generation) {
        return;
    }
    tm_store_push(self->store, self->begin_ns, self->fetch_done_ns, now,
                  (int32_t)self->epoch, (uint16_t)self->source,
                  self->steps == 1 ? TM_FLAG_EPOCH_START : 0);
}

static PyObject *
wrapiter_next(tm_wrapiter *self)
{
    int64_t call_ns = tm_clock_ns();
    int64_t done_ns;
    PyObject *inner = self->inner;
    PyObject *item;

    close_open_step(self, call_ns);
    if (inner == NULL) {
        return NULL;
    }
    /* The inner __next__ may run code that releases us or our iterator. */
    Py_INCREF(inner);
    item = Py_TYPE(inner)->tp_iternext(inner);
    done_ns = tm_clock_ns();
    if (item == NULL) {
        if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_StopIteration)) {
            /* Exhausted: release the inner iterator now, so that a
               DataLoader shuts its workers down at the end of the loop. */
            PyErr_Clear();
            if (self->inner == inner) {
                Py_CLEAR(self->inner);
            }
        }
        Py_DECREF(inner);
        return NULL;
    }
    Py_DECREF(inner);
    self->begin_ns = self->steps == 0 ? self->epoch_begin_ns : call_ns;
    self->fetch_done_ns = done_ns;
    self->generation = self->store->generation;
    self->open = 1;
    self->steps++;
    return item;
}

static PyObject *
wrapiter_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"iterator", "source", "epoch", "epoch_begin_ns",
                             NULL};
    PyObject *inner;
    int source;
    int epoch;
    long long epoch_begin_ns;
    tm_state *st;
    tm_wrapiter *self;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OiiL:WrapIter", kwlist,
                                     &inner, &source, &epoch,
                                     &epoch_begin_ns)) {
        return NULL;
    }
    if (!PyIter_Check(inner)) {
        PyErr_Format(PyExc_TypeError,
                     "WrapIter(): iterator must be an iterator, got %.200s",
                     Py_TYPE(inner)->tp_name);
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
    st = PyType_GetModuleState(type);
    if (st == NULL) {
        return NULL;
    }
    self = (tm_wrapiter *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->inner = Py_NewRef(inner);
    self->store = &st->store;
    self->generation = st->store.generation;
    self->epoch_begin_ns = epoch_begin_ns;
    self->epoch = epoch;
    self->source = source;
    return (PyObject *)self;
}

static PyObject *
wrapiter_close(tm_wrapiter *self, PyObject *Py_UNUSED(ignored))
{
    close_open_step(self, tm_clock_ns());
    Py_CLEAR(self->inner);
    Py_RETURN_NONE;
}

static int
wrapiter_traverse(tm_wrapiter *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->inner);
    return 0;
}

static int
wrapiter_clear(tm_wrapiter *self)
{
    Py_CLEAR(self->inner);
    return 0;
}

static void
wrapiter_dealloc(tm_wrapiter *self)
{
    PyTypeObject *tp = Py_TYPE(self);

    PyObject_GC_UnTrack(self);
    close_open_step(self, tm_clock_ns());
    Py_CLEAR(self->inner);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyMethodDef wrapiter_methods[] = {
    {"close", (PyCFunction)wrapiter_close, METH_NOARGS,
     "close()\n--\n\n"
     "End the open step now and release the inner iterator (a DataLoader\n"
     "iterator then shuts its workers down).  Use it when you keep the\n"
     "iterator in a variable and leave the loop early.  Idempotent."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef wrapiter_members[] = {
    {"inner", T_OBJECT, offsetof(tm_wrapiter, inner), READONLY,
     "The timed inner iterator, or None once exhausted or closed."},
    {"epoch", T_INT, offsetof(tm_wrapiter, epoch), READONLY,
     "Epoch index of this iterator (0-based, per wrapped iterable)."},
    {"source", T_INT, offsetof(tm_wrapiter, source), READONLY,
     "Source id that tags this iterator's steps in the store."},
    {"steps", T_ULONGLONG, offsetof(tm_wrapiter, steps), READONLY,
     "Batches delivered so far in this epoch."},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(wrapiter_doc,
"WrapIter(iterator, source, epoch, epoch_begin_ns)\n--\n\n"
"One epoch of a wrapped iterable: yields the inner iterator's items and\n"
"records one step per item.  Made by traceml.wrap(); not for direct use.");

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
    {0, NULL},
};

PyType_Spec tm_wrapiter_spec = {
    .name = "traceml._core.WrapIter",
    .basicsize = sizeof(tm_wrapiter),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC
             | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = wrapiter_slots,
};
