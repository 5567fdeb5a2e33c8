/*
 * Per-item times inside a DataLoader worker: each sample's __getitem__
 * (map-style) or __next__ (iterable), a dataset's __getitems__ (a batch at
 * once) and each collate_fn call, written to the items ring of a BatchLog
 * (csrc/batchlog.c) that the forked workers share with the main process.
 *
 * Three small C wrappers that traceml.worker_timing puts on a worker's
 * fetcher (torch/utils/data/_utils/fetch.py) when it makes it:
 *
 *   TimedDataset  the fetcher's `dataset`: mp_subscript times the real
 *                 dataset's item; every attribute is the real dataset's
 *                 (so torch's hasattr(dataset, "__getitems__") sees the
 *                 truth), __getitems__ itself comes back as a TimedCall.
 *   TimedIter     the iterable fetcher's `dataset_iter`: tp_iternext times
 *                 the real iterator's (Objects/enumobject.c's shape: the
 *                 inner tp_iternext, NULL passed straight through).
 *   TimedCall     collate_fn and __getitems__: a vectorcall that times the
 *                 call.
 *
 * On the hot path each reads this thread's CPU clock and the monotonic
 * clock before and after the call (the CPU clock first and last, so the
 * bookkeeping is not billed to the item) and claims one ring slot with an
 * atomic add.  Nothing allocates, nothing can raise: the user's own
 * exception (StopIteration included) passes through unchanged and writes
 * no record, and being C they add no frame to its traceback.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define NO_IMPORT_ARRAY
#define PY_ARRAY_UNIQUE_SYMBOL traceml_ARRAY_API
#include <numpy/arrayobject.h>

#include "compat.h"
#include "module.h"

/* The fields every wrapper shares, and the record of one timed call. */
typedef struct {
    PyObject *log;            /* the BatchLog (strong) */
    PyObject *inner;          /* what is wrapped (strong) */
    int32_t epoch;
    int32_t worker;
} tm_item_target;

static inline void
item_write(tm_item_target *t, int64_t cpu0, int64_t begin, int64_t end,
           int64_t cpu1, int64_t index, int32_t kind, int32_t count)
{
    tm_item_record rec;

    rec.begin_ns = begin;
    rec.end_ns = end;
    rec.cpu_ns = (cpu0 >= 0 && cpu1 >= cpu0) ? cpu1 - cpu0 : -1;
    rec.index = index;
    rec.epoch = t->epoch;
    rec.worker = t->worker;
    rec.kind = kind;
    rec.count = count;
    tm_batchlog_write_item(t->log, &rec);
}

/* The int a sample index holds (an int, or a NumPy integer through
   __index__), -1 for anything else.  Called after the item was made, with
   no exception set: a failed conversion is cleared, never raised. */
static int64_t
index_of(PyObject *key)
{
    long long v;
    int overflow = 0;

    if (PyLong_Check(key)) {
        v = PyLong_AsLongLongAndOverflow(key, &overflow);
        if (v == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return -1;
        }
        return overflow ? -1 : (int64_t)v;
    }
    if (PyIndex_Check(key) && !PyBool_Check(key)) {
        PyObject *i = PyNumber_Index(key);

        if (i == NULL) {
            PyErr_Clear();
            return -1;
        }
        v = PyLong_AsLongLongAndOverflow(i, &overflow);
        Py_DECREF(i);
        if (v == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return -1;
        }
        return overflow ? -1 : (int64_t)v;
    }
    return -1;
}

/* Parses (log, inner, epoch, worker) of a constructor; -1 with an error. */
static int
target_args(PyTypeObject *type, PyObject *args, PyObject *kwds,
            const char *fmt, char **kwlist, tm_item_target *t)
{
    tm_state *st = tm_state_of_type(type);
    int epoch, worker;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, fmt, kwlist,
                                     st->batchlog_type, &t->log, &t->inner,
                                     &epoch, &worker)) {
        return -1;
    }
    if (epoch < 0 || worker < 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): epoch and worker must be >= 0, got %d and %d",
                     type->tp_name, epoch, worker);
        return -1;
    }
    t->epoch = epoch;
    t->worker = worker;
    return 0;
}

static void
target_set(tm_item_target *dst, const tm_item_target *src)
{
    dst->log = Py_NewRef(src->log);
    dst->inner = Py_NewRef(src->inner);
    dst->epoch = src->epoch;
    dst->worker = src->worker;
}

/* ------------------------------------------------------------------ */
/* TimedCall                                                           */

typedef struct {
    PyObject_HEAD
    tm_item_target t;
    int32_t kind;
    vectorcallfunc vectorcall;
} tm_timedcall;

static PyObject *
timedcall_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf,
                     PyObject *kwnames)
{
    tm_timedcall *self = (tm_timedcall *)op;
    int64_t cpu0, cpu1, begin, end;
    int32_t count = -1;
    PyObject *out;

    if (PyVectorcall_NARGS(nargsf) >= 1 && PyList_Check(args[0])) {
        Py_ssize_t n = PyList_GET_SIZE(args[0]);

        count = n > INT32_MAX ? -1 : (int32_t)n;
    }
    cpu0 = tm_thread_cpu_ns();
    begin = tm_clock_ns();
    out = PyObject_Vectorcall(self->t.inner, args, nargsf, kwnames);
    if (out != NULL) {
        end = tm_clock_ns();
        cpu1 = tm_thread_cpu_ns();
        item_write(&self->t, cpu0, begin, end, cpu1, -1, self->kind, count);
    }
    return out;
}

static int
kind_ok(long kind)
{
    return kind == TM_ITEM_GETITEMS || kind == TM_ITEM_COLLATE || kind == TM_ITEM_INIT;
}

/* A new TimedCall of type `type`; NULL with an error. */
static PyObject *
timedcall_make(PyTypeObject *type, const tm_item_target *t, int32_t kind)
{
    tm_timedcall *self = (tm_timedcall *)type->tp_alloc(type, 0);

    if (self == NULL) {
        return NULL;
    }
    target_set(&self->t, t);
    self->kind = kind;
    self->vectorcall = timedcall_vectorcall;
    return (PyObject *)self;
}

static PyObject *
timedcall_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"log", "fn", "epoch", "worker", "kind", NULL};
    tm_state *st = tm_state_of_type(type);
    tm_item_target t;
    int epoch, worker, kind = TM_ITEM_COLLATE;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!Oii|i:TimedCall", kwlist,
                                     st->batchlog_type, &t.log, &t.inner,
                                     &epoch, &worker, &kind)) {
        return NULL;
    }
    if (!PyCallable_Check(t.inner)) {
        PyErr_Format(PyExc_TypeError, "TimedCall(): fn must be callable, got %.100s",
                     Py_TYPE(t.inner)->tp_name);
        return NULL;
    }
    if (epoch < 0 || worker < 0) {
        PyErr_Format(PyExc_ValueError,
                     "TimedCall(): epoch and worker must be >= 0, got %d and %d",
                     epoch, worker);
        return NULL;
    }
    if (!kind_ok(kind)) {
        PyErr_Format(PyExc_ValueError,
                     "TimedCall(): kind must be ITEM_GETITEMS, ITEM_COLLATE or ITEM_INIT, "
                     "got %d",
                     kind);
        return NULL;
    }
    t.epoch = epoch;
    t.worker = worker;
    return timedcall_make(type, &t, (int32_t)kind);
}

static int
item_traverse(PyObject *op, visitproc visit, void *arg)
{
    /* Every wrapper starts with PyObject_HEAD then its target. */
    tm_item_target *t = &((tm_timedcall *)op)->t;

    Py_VISIT(Py_TYPE(op));
    Py_VISIT(t->log);
    Py_VISIT(t->inner);
    return 0;
}

static int
item_clear(PyObject *op)
{
    tm_item_target *t = &((tm_timedcall *)op)->t;

    Py_CLEAR(t->log);
    Py_CLEAR(t->inner);
    return 0;
}

static void
item_dealloc(PyObject *op)
{
    PyTypeObject *type = Py_TYPE(op);

    PyObject_GC_UnTrack(op);
    (void)item_clear(op);
    type->tp_free(op);
    Py_DECREF(type);
}

static PyObject *
item_get_wrapped(PyObject *op, void *Py_UNUSED(closure))
{
    tm_item_target *t = &((tm_timedcall *)op)->t;

    if (t->inner == NULL) {
        PyErr_SetString(PyExc_AttributeError, "cleared");
        return NULL;
    }
    return Py_NewRef(t->inner);
}

static PyGetSetDef timedcall_getset[] = {
    {"__wrapped__", item_get_wrapped, NULL, "The callable it times.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef timedcall_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(tm_timedcall, vectorcall),
     Py_READONLY, NULL},
    {"kind", Py_T_INT, offsetof(tm_timedcall, kind), Py_READONLY,
     "ITEM_GETITEMS, ITEM_COLLATE or ITEM_INIT: the kind of its records."},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(timedcall_doc,
"TimedCall(log, fn, epoch, worker, kind=ITEM_COLLATE)\n--\n\n"
"In a DataLoader worker: a callable that calls fn(*args, **kwargs) and, when\n"
"it returns, writes one item record (kind, the length of a list first\n"
"argument as count, wall begin and end, the thread's CPU) to the BatchLog\n"
"log.  Exceptions pass through unchanged.  Raises TypeError or ValueError\n"
"on bad arguments.");

static PyType_Slot timedcall_slots[] = {
    {Py_tp_doc, (void *)timedcall_doc},
    {Py_tp_new, timedcall_new},
    {Py_tp_dealloc, item_dealloc},
    {Py_tp_traverse, item_traverse},
    {Py_tp_clear, item_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_members, timedcall_members},
    {Py_tp_getset, timedcall_getset},
    {0, NULL},
};

static PyType_Spec timedcall_spec = {
    .name = "traceml._core.TimedCall",
    .basicsize = sizeof(tm_timedcall),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE
             | Py_TPFLAGS_HAVE_VECTORCALL,
    .slots = timedcall_slots,
};

/* ------------------------------------------------------------------ */
/* TimedDataset                                                        */

typedef struct {
    PyObject_HEAD
    tm_item_target t;
    tm_state *st;
} tm_timeddataset;

static PyObject *
timeddataset_subscript(PyObject *op, PyObject *key)
{
    tm_timeddataset *self = (tm_timeddataset *)op;
    int64_t cpu0, cpu1, begin, end;
    PyObject *item;

    cpu0 = tm_thread_cpu_ns();
    begin = tm_clock_ns();
    item = PyObject_GetItem(self->t.inner, key);
    if (item != NULL) {
        end = tm_clock_ns();
        cpu1 = tm_thread_cpu_ns();
        item_write(&self->t, cpu0, begin, end, cpu1, index_of(key),
                   TM_ITEM_GETITEM, 1);
    }
    return item;
}

static Py_ssize_t
timeddataset_length(PyObject *op)
{
    return PyObject_Size(((tm_timeddataset *)op)->t.inner);
}

/* Every attribute is the real dataset's, except that __getitems__ comes
   back timed (a TimedCall; the untimed one when that cannot be made). */
static PyObject *
timeddataset_getattro(PyObject *op, PyObject *name)
{
    tm_timeddataset *self = (tm_timeddataset *)op;
    PyObject *attr;
    PyObject *timed;

    if (PyUnicode_Check(name)
            && PyUnicode_CompareWithASCIIString(name, "__wrapped__") == 0) {
        return Py_NewRef(self->t.inner);
    }
    attr = PyObject_GetAttr(self->t.inner, name);
    if (attr == NULL || !PyUnicode_Check(name)
            || PyUnicode_CompareWithASCIIString(name, "__getitems__") != 0
            || !PyCallable_Check(attr)) {
        return attr;
    }
    {
        tm_item_target t = self->t;

        t.inner = attr;
        timed = timedcall_make(self->st->timedcall_type, &t, TM_ITEM_GETITEMS);
    }
    if (timed == NULL) {
        PyErr_Clear();       /* out of memory: the call goes untimed */
        return attr;
    }
    Py_DECREF(attr);
    return timed;
}

static int
timeddataset_setattro(PyObject *op, PyObject *name, PyObject *value)
{
    return PyObject_SetAttr(((tm_timeddataset *)op)->t.inner, name, value);
}

static PyObject *
timeddataset_repr(PyObject *op)
{
    return PyObject_Repr(((tm_timeddataset *)op)->t.inner);
}

static PyObject *
timeddataset_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"log", "dataset", "epoch", "worker", NULL};
    tm_item_target t;
    tm_timeddataset *self;

    if (target_args(type, args, kwds, "O!Oii:TimedDataset", kwlist, &t) < 0) {
        return NULL;
    }
    self = (tm_timeddataset *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    target_set(&self->t, &t);
    self->st = tm_state_of_type(type);
    return (PyObject *)self;
}

PyDoc_STRVAR(timeddataset_doc,
"TimedDataset(log, dataset, epoch, worker)\n--\n\n"
"In a DataLoader worker: stands for a map-style dataset.  dataset[key]\n"
"is the real dataset's item; once it returns, one item record (the index\n"
"when key is an int, else -1; wall begin and end; the thread's CPU) goes\n"
"to the BatchLog log.  Every attribute is the dataset's own, except that\n"
"a callable __getitems__ is wrapped in a TimedCall (a batch at once: no\n"
"per-sample times); __wrapped__ is the dataset.  Exceptions pass through\n"
"unchanged.  Raises TypeError or ValueError on bad arguments.");

static PyType_Slot timeddataset_slots[] = {
    {Py_tp_doc, (void *)timeddataset_doc},
    {Py_tp_new, timeddataset_new},
    {Py_tp_dealloc, item_dealloc},
    {Py_tp_traverse, item_traverse},
    {Py_tp_clear, item_clear},
    {Py_tp_getattro, timeddataset_getattro},
    {Py_tp_setattro, timeddataset_setattro},
    {Py_tp_repr, timeddataset_repr},
    {Py_mp_subscript, timeddataset_subscript},
    {Py_mp_length, timeddataset_length},
    {0, NULL},
};

static PyType_Spec timeddataset_spec = {
    .name = "traceml._core.TimedDataset",
    .basicsize = sizeof(tm_timeddataset),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = timeddataset_slots,
};

/* ------------------------------------------------------------------ */
/* TimedIter                                                           */

typedef struct {
    PyObject_HEAD
    tm_item_target t;
    int64_t position;         /* items this iterator has given */
    int clocked_only;         /* time only inside a clocked fetch (wrap.c) */
    int count_lists;          /* count: a list item's length (index lists) */
} tm_timediter;

static PyObject *
timediter_next(PyObject *op)
{
    tm_timediter *self = (tm_timediter *)op;
    PyObject *inner = self->t.inner;
    int64_t cpu0, cpu1, begin, end;
    PyObject *item;

    if (self->clocked_only && tm_clocked_fetch == 0) {
        /* Outside the fetches whose clocks are read: nothing to time. */
        item = Py_TYPE(inner)->tp_iternext(inner);
        if (item != NULL) {
            self->position++;
        }
        return item;
    }
    cpu0 = tm_thread_cpu_ns();
    begin = tm_clock_ns();
    item = Py_TYPE(inner)->tp_iternext(inner);
    if (item != NULL) {
        int32_t count = 1;

        end = tm_clock_ns();
        cpu1 = tm_thread_cpu_ns();
        if (self->count_lists && PyList_Check(item)) {
            Py_ssize_t n = PyList_GET_SIZE(item);

            count = n > INT32_MAX ? -1 : (int32_t)n;
        }
        item_write(&self->t, cpu0, begin, end, cpu1, self->position++,
                   TM_ITEM_NEXT, count);
    }
    return item;
}

static PyObject *
timediter_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"log", "iterator", "epoch", "worker", NULL};
    tm_item_target t;
    tm_timediter *self;

    if (target_args(type, args, kwds, "O!Oii:TimedIter", kwlist, &t) < 0) {
        return NULL;
    }
    if (!PyIter_Check(t.inner)) {
        PyErr_Format(PyExc_TypeError, "TimedIter(): iterator must be an iterator, got %.100s",
                     Py_TYPE(t.inner)->tp_name);
        return NULL;
    }
    self = (tm_timediter *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    target_set(&self->t, &t);
    return (PyObject *)self;
}

static PyGetSetDef timediter_getset[] = {
    {"__wrapped__", item_get_wrapped, NULL, "The iterator it times.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef timediter_members[] = {
    {"position", Py_T_LONGLONG, offsetof(tm_timediter, position), Py_READONLY,
     "Items given so far (the next item's position in this worker)."},
    {"clocked_only", Py_T_INT, offsetof(tm_timediter, clocked_only), 0,
     "Nonzero: time only the items given inside a fetch whose clocks the\n"
     "wrap iterator reads (the first 1024 of each epoch and two of every\n"
     "1021 after); the others are counted, not timed.  Default 0."},
    {"count_lists", Py_T_INT, offsetof(tm_timediter, count_lists), 0,
     "Nonzero: a list item's record counts its length (a sampler's index\n"
     "list: the batch's size), any other item 1.  Default 0: every item 1."},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(timediter_doc,
"TimedIter(log, iterator, epoch, worker)\n--\n\n"
"In a DataLoader worker (or, with clocked_only, over the main process's\n"
"sampler): an iterator over iterator's items; each item\n"
"given writes one item record (its position among the items this\n"
"iterator gave, from 0; wall begin and end; the thread's CPU) to the\n"
"BatchLog log.  The end and exceptions pass through unchanged.  Raises\n"
"TypeError or ValueError on bad arguments.");

static PyType_Slot timediter_slots[] = {
    {Py_tp_doc, (void *)timediter_doc},
    {Py_tp_new, timediter_new},
    {Py_tp_dealloc, item_dealloc},
    {Py_tp_traverse, item_traverse},
    {Py_tp_clear, item_clear},
    {Py_tp_iter, PyObject_SelfIter},
    {Py_tp_iternext, timediter_next},
    {Py_tp_members, timediter_members},
    {Py_tp_getset, timediter_getset},
    {0, NULL},
};

static PyType_Spec timediter_spec = {
    .name = "traceml._core.TimedIter",
    .basicsize = sizeof(tm_timediter),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = timediter_slots,
};

/* ------------------------------------------------------------------ */

static PyTypeObject *
add_one(PyObject *module, PyType_Spec *spec)
{
    PyTypeObject *type = (PyTypeObject *)PyType_FromModuleAndSpec(module, spec, NULL);

    if (type == NULL) {
        return NULL;
    }
    if (PyModule_AddType(module, type) < 0) {
        Py_DECREF(type);
        return NULL;
    }
    return type;
}

/* The module's item types, ITEM_RECORD_DTYPE and the ITEM_* kinds; the
   state holds the dtype and TimedCall.  -1 with an error. */
int
tm_itemlog_add(PyObject *module, tm_state *st)
{
    PyTypeObject *ds, *it;

    st->timedcall_type = add_one(module, &timedcall_spec);
    if (st->timedcall_type == NULL) {
        return -1;
    }
    ds = add_one(module, &timeddataset_spec);
    it = ds != NULL ? add_one(module, &timediter_spec) : NULL;
    Py_XDECREF(ds);       /* the module holds them */
    if (it == NULL) {
        return -1;
    }
    Py_DECREF(it);
    st->item_record_dtype = tm_struct_dtype(
        Py_BuildValue("[(ss)(ss)(ss)(ss)(ss)(ss)(ss)(ss)]",
                      "begin_ns", "<i8", "end_ns", "<i8", "cpu_ns", "<i8",
                      "index", "<i8", "epoch", "<i4", "worker", "<i4",
                      "kind", "<i4", "count", "<i4"),
        sizeof(tm_item_record), "tm_item_record");
    if (st->item_record_dtype == NULL) {
        return -1;
    }
    return (PyModule_AddObjectRef(module, "ITEM_RECORD_DTYPE", st->item_record_dtype) < 0
            || PyModule_AddIntConstant(module, "ITEM_GETITEM", TM_ITEM_GETITEM) < 0
            || PyModule_AddIntConstant(module, "ITEM_NEXT", TM_ITEM_NEXT) < 0
            || PyModule_AddIntConstant(module, "ITEM_GETITEMS", TM_ITEM_GETITEMS) < 0
            || PyModule_AddIntConstant(module, "ITEM_COLLATE", TM_ITEM_COLLATE) < 0
            || PyModule_AddIntConstant(module, "ITEM_GC", TM_ITEM_GC) < 0
            || PyModule_AddIntConstant(module, "ITEM_INIT", TM_ITEM_INIT) < 0)
           ? -1 : 0;
}
