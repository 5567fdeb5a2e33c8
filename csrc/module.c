/*
 * traceml._core: the module state and its life.  Multi-phase
 * initialisation (PEP 489): every piece of state lives in tm_state, none in
 * file-level globals.  This file creates the types and the default
 * recorder, gathers the other rooms' method tables, and resets the state
 * in a forked child; the arithmetic, the store, the probes, the iterator
 * and the sampler live in their own files (see module.h).
 *
 * The module can be freed: the at-fork hook holds only a weak reference
 * to it, and the cycle module -> default recorder -> its type -> module is
 * visible to the garbage collector through tm_traverse.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL traceml_ARRAY_API
#include <numpy/arrayobject.h>

#include "module.h"

static inline tm_state *
get_state(PyObject *module)
{
    return (tm_state *)PyModule_GetState(module);
}

/* The module (borrowed) that defined type or one of its bases (a Python
   subclass of Recorder has no module of its own); NULL with an error. */
PyObject *
tm_module_of_type(PyTypeObject *type)
{
    PyTypeObject *t;

    for (t = type; t != NULL; t = t->tp_base) {
        PyObject *module;

        if (!PyType_HasFeature(t, Py_TPFLAGS_HEAPTYPE)) {
            continue;
        }
        module = PyType_GetModule(t);
        if (module == NULL) {
            PyErr_Clear();
            continue;
        }
        if (PyModule_GetDef(module) == &tm_module_def) {
            return module;
        }
    }
    PyErr_Format(PyExc_TypeError, "%.200s is not a traceml._core type",
                 type->tp_name);
    return NULL;
}

/* Its state. */
tm_state *
tm_state_of_type(PyTypeObject *type)
{
    PyObject *module = tm_module_of_type(type);

    return module != NULL ? get_state(module) : NULL;
}

static PyObject *
mod_clock_ns(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t now = tm_clock_ns();

    (void)module;
    (void)args;
    if (nargs != 0) {
        PyErr_Format(PyExc_TypeError,
                     "traceml.clock_ns() takes no arguments (%zd given)",
                     nargs);
        return NULL;
    }
    return PyLong_FromLongLong(now);
}

/* ------------------------------------------------------------------ */
/* fork                                                               */

/*
 * In a forked child (a DataLoader worker, os.fork()): every recorder's
 * record is the parent's, not the child's to report, so each starts
 * empty; the sampler thread does not exist there, so its state starts over.
 */
static void
after_fork_child(tm_state *st)
{
    tm_recorder *rec;

    for (rec = st->recorders; rec != NULL; rec = rec->next) {
        tm_recorder_after_fork(rec);
    }
    if (st->sampler_ok) {
        st->sampler_ok = tm_sampler_after_fork(&st->sampler) == 0;
    }
    st->forks_begun = 0;
    st->fork_generation++;
}

/*
 * Before fork(), in the parent: no /proc reading of the sampler's starts
 * until the fork is done, and the one under way is waited for
 * (tm_sampler_fork_begin), so that the child is not copied while a
 * watched thread's file is open for a moment (procfs.c): it would keep
 * that descriptor, which nothing in it knows of.  No lock is held across
 * the fork: the other fork hooks run Python code, and threads that take
 * the sampler's lock hold the GIL.
 */
static void
before_fork(tm_state *st)
{
    if (st->sampler_ok) {
        Py_BEGIN_ALLOW_THREADS
        tm_sampler_fork_begin(&st->sampler);
        Py_END_ALLOW_THREADS
        st->forks_begun++;
    }
}

/* After fork(), in the parent (the fork done or failed). */
static void
after_fork_parent(tm_state *st)
{
    if (st->forks_begun > 0) {
        st->forks_begun--;
        tm_sampler_fork_done(&st->sampler);
    }
}

enum { TM_FORK_BEFORE, TM_FORK_PARENT, TM_FORK_CHILD };

/* The registered hooks: self is a weak reference to the module. */
static PyObject *
fork_hook(PyObject *weak_module, int when)
{
    PyObject *module;

#if PY_VERSION_HEX >= 0x030D0000
    if (PyWeakref_GetRef(weak_module, &module) < 0) {
        return NULL;
    }
#else
    module = PyWeakref_GetObject(weak_module);   /* borrowed */
    module = module == Py_None ? NULL : Py_NewRef(module);
#endif
    if (module != NULL) {
        tm_state *st = get_state(module);

        if (when == TM_FORK_BEFORE) {
            before_fork(st);
        }
        else if (when == TM_FORK_PARENT) {
            after_fork_parent(st);
        }
        else {
            after_fork_child(st);
        }
        Py_DECREF(module);
    }
    Py_RETURN_NONE;
}

static PyObject *
fork_before_hook(PyObject *weak_module, PyObject *Py_UNUSED(ignored))
{
    return fork_hook(weak_module, TM_FORK_BEFORE);
}

static PyObject *
fork_parent_hook(PyObject *weak_module, PyObject *Py_UNUSED(ignored))
{
    return fork_hook(weak_module, TM_FORK_PARENT);
}

static PyObject *
fork_child_hook(PyObject *weak_module, PyObject *Py_UNUSED(ignored))
{
    return fork_hook(weak_module, TM_FORK_CHILD);
}

static PyMethodDef fork_hook_defs[] = {
    {"_before_fork", fork_before_hook, METH_NOARGS,
     "Hold the sampler's /proc readings until the fork is done (registered "
     "at import; holds the module weakly)."},
    {"_after_fork_parent", fork_parent_hook, METH_NOARGS,
     "Let the sampler's /proc readings go on after a fork."},
    {"_after_fork_child", fork_child_hook, METH_NOARGS,
     "Start empty recordings in a forked child (registered at import; holds "
     "the module weakly)."},
};

static int
register_fork_handler(PyObject *module)
{
    PyObject *os = NULL, *reg = NULL, *weak = NULL;
    PyObject *hooks[3] = {NULL, NULL, NULL};
    PyObject *kwargs = NULL, *empty = NULL, *res = NULL;
    int rc = -1, k;

    os = PyImport_ImportModule("os");
    if (os == NULL) {
        goto done;
    }
    reg = PyObject_GetAttrString(os, "register_at_fork");
    if (reg == NULL) {
        /* No fork on this platform: nothing to guard. */
        PyErr_Clear();
        rc = 0;
        goto done;
    }
    weak = PyWeakref_NewRef(module, NULL);
    if (weak == NULL) {
        goto done;
    }
    for (k = 0; k < 3; k++) {
        hooks[k] = PyCFunction_New(&fork_hook_defs[k], weak);
        if (hooks[k] == NULL) {
            goto done;
        }
    }
    empty = PyTuple_New(0);
    if (empty == NULL) {
        goto done;
    }
    kwargs = Py_BuildValue("{s:O,s:O,s:O}", "before", hooks[0],
                           "after_in_parent", hooks[1],
                           "after_in_child", hooks[2]);
    if (kwargs == NULL) {
        goto done;
    }
    res = PyObject_Call(reg, empty, kwargs);
    if (res != NULL) {
        rc = 0;
    }

done:
    Py_XDECREF(os);
    Py_XDECREF(reg);
    Py_XDECREF(weak);
    for (k = 0; k < 3; k++) {
        Py_XDECREF(hooks[k]);
    }
    Py_XDECREF(kwargs);
    Py_XDECREF(empty);
    Py_XDECREF(res);
    return rc;
}

/* ------------------------------------------------------------------ */
/* the module                                                         */

/* A NumPy dtype from a list of (name, format) fields (stolen), checked to
   be the size of the C struct it mirrors; NULL with an error. */
PyObject *
tm_struct_dtype(PyObject *fields, size_t size, const char *ctype)
{
    PyArray_Descr *descr = NULL;

    if (fields == NULL) {
        return NULL;
    }
    if (!PyArray_DescrConverter(fields, &descr)) {
        Py_DECREF(fields);
        return NULL;
    }
    Py_DECREF(fields);
    if (PyDataType_ELSIZE(descr) != (npy_intp)size) {
        Py_DECREF(descr);
        PyErr_Format(PyExc_SystemError, "the dtype does not match %s", ctype);
        return NULL;
    }
    return (PyObject *)descr;
}

static int
build_record_dtype(tm_state *st)
{
    st->record_dtype = tm_struct_dtype(
        Py_BuildValue("[(ss)(ss)(ss)(ss)(ss)(ss)]",
                      "begin_ns", "<i8", "fetch_done_ns", "<i8",
                      "end_ns", "<i8", "epoch", "<i4",
                      "source", "<u2", "flags", "<u2"),
        sizeof(tm_record), "tm_record");
    if (st->record_dtype == NULL) {
        return -1;
    }
    st->batch_record_dtype = tm_struct_dtype(
        Py_BuildValue("[(ss)(ss)(ss)(ss)(ss)(ss)(ss)]",
                      "begin_ns", "<i8", "end_ns", "<i8", "cpu_ns", "<i8",
                      "runq_ns", "<i8", "seq", "<i8", "epoch", "<i4",
                      "worker", "<i4"),
        sizeof(tm_batch_record), "tm_batch_record");
    return st->batch_record_dtype != NULL ? 0 : -1;
}

static PyTypeObject *
add_type(PyObject *module, PyType_Spec *spec)
{
    PyTypeObject *type = (PyTypeObject *)PyType_FromModuleAndSpec(
        module, spec, NULL);

    if (type == NULL) {
        return NULL;
    }
    if (PyModule_AddType(module, type) < 0) {
        Py_DECREF(type);
        return NULL;
    }
    return type;
}

static int
add_constants(PyObject *module, tm_state *st)
{
    PyObject *stuck_default;
    int rc;

    if (PyModule_AddObjectRef(module, "RECORD_DTYPE", st->record_dtype) < 0
            || PyModule_AddObjectRef(module, "SAMPLE_DTYPE",
                                     st->sample_dtype) < 0
            || PyModule_AddObjectRef(module, "GPU_UTIL_DTYPE",
                                     st->gpu_util_dtype) < 0
            || PyModule_AddObjectRef(module, "BATCH_RECORD_DTYPE",
                                     st->batch_record_dtype) < 0) {
        return -1;
    }
    stuck_default = PyFloat_FromDouble((double)TM_DEFAULT_STUCK_AFTER_NS / 1e9);
    if (stuck_default == NULL) {
        return -1;
    }
    rc = (PyModule_AddIntConstant(module, "RECORD_BYTES",
                                    (long)sizeof(tm_record)) < 0
            || PyModule_AddIntConstant(module, "FLAG_EPOCH_START",
                                       TM_FLAG_EPOCH_START) < 0
            || PyModule_AddIntConstant(module, "FLAG_NO_FETCH",
                                       TM_FLAG_NO_FETCH) < 0
            || PyModule_AddIntConstant(module, "FLAG_IMPLICIT_END",
                                       TM_FLAG_IMPLICIT_END) < 0
            || PyModule_AddIntConstant(module, "FLAG_POS_SHIFT",
                                       TM_FLAG_POS_SHIFT) < 0
            || PyModule_AddIntConstant(module, "FLAG_POS_MAX",
                                       TM_FLAG_POS_MAX) < 0
            || PyModule_AddIntConstant(module, "SAMPLER_RING_MAX",
                                       (long)TM_RING_MAX) < 0
            || PyModule_AddIntConstant(module, "HOST_ROLE",
                                       TM_ROLE_HOST) < 0

            || PyModule_AddObjectRef(module, "DEFAULT_STUCK_AFTER_S",
                                     stuck_default) < 0) ? -1 : 0;
    Py_DECREF(stuck_default);
    return rc;
}

static int
tm_exec(PyObject *module)
{
    tm_state *st = get_state(module);

    st->sampler_ok = tm_sampler_init(&st->sampler) == 0;
    st->str_task_info = PyUnicode_InternFromString("_task_info");
    st->str_nbytes = PyUnicode_InternFromString("nbytes");
    st->str_torch = PyUnicode_InternFromString("torch");
    if (st->str_task_info == NULL || st->str_nbytes == NULL
            || st->str_torch == NULL) {
        return -1;
    }
    if (PyArray_ImportNumPyAPI() < 0) {
        return -1;
    }
    st->recorder_type = add_type(module, &tm_recorder_spec);
    if (st->recorder_type == NULL) {
        return -1;
    }
    st->wrapiter_type = add_type(module, &tm_wrapiter_spec);
    if (st->wrapiter_type == NULL) {
        return -1;
    }
    st->batchlog_type = add_type(module, &tm_batchlog_spec);
    if (st->batchlog_type == NULL) {
        return -1;
    }
    {
        PyTypeObject *timed = add_type(module, &tm_timedfetch_spec);
        PyTypeObject *hist = timed != NULL ? add_type(module, &tm_waithist_spec) : NULL;
        PyTypeObject *stacks = hist != NULL ? add_type(module, &tm_stacklog_spec) : NULL;

        Py_XDECREF(timed);  /* the module holds them */
        Py_XDECREF(hist);
        if (stacks == NULL) {
            return -1;
        }
        Py_DECREF(stacks);
    }
    if (build_record_dtype(st) < 0 || tm_build_sample_dtype(st) < 0
            || tm_itemlog_add(module, st) < 0
            || add_constants(module, st) < 0) {
        return -1;
    }
    if (PyModule_AddFunctions(module, tm_recorder_module_methods) < 0
            || PyModule_AddFunctions(module, tm_sampler_methods) < 0
            || PyModule_AddFunctions(module, tm_reduce_methods) < 0) {
        return -1;
    }
    /* Until traceml installs its own (a traceml.Recorder), the probes
       record into a plain one: they never find none. */
    {
        PyObject *rec = PyObject_CallNoArgs((PyObject *)st->recorder_type);
        int rc = rec != NULL ? tm_probes_add(module, st, rec) : -1;

        Py_XDECREF(rec);  /* the probes' object holds it */
        if (rc < 0) {
            return -1;
        }
    }
    return register_fork_handler(module);
}

static int
tm_traverse(PyObject *module, visitproc visit, void *arg)
{
    tm_state *st = get_state(module);

    Py_VISIT(st->default_probes);
    Py_VISIT(st->recorder_type);
    Py_VISIT(st->wrapiter_type);
    Py_VISIT(st->batchlog_type);
    Py_VISIT(st->batch_record_dtype);
    Py_VISIT(st->item_record_dtype);
    Py_VISIT(st->timedcall_type);
    Py_VISIT(st->record_dtype);
    Py_VISIT(st->sample_dtype);
    Py_VISIT(st->gpu_util_dtype);
    Py_VISIT(st->tensor_type);
    return 0;
}

static int
tm_clear(PyObject *module)
{
    tm_state *st = get_state(module);

    Py_XDECREF(tm_probes_swap_default(st, NULL));
    Py_CLEAR(st->default_probes);
    Py_CLEAR(st->recorder_type);
    Py_CLEAR(st->wrapiter_type);
    Py_CLEAR(st->batchlog_type);
    Py_CLEAR(st->batch_record_dtype);
    Py_CLEAR(st->item_record_dtype);
    Py_CLEAR(st->timedcall_type);
    Py_CLEAR(st->record_dtype);
    Py_CLEAR(st->sample_dtype);
    Py_CLEAR(st->gpu_util_dtype);
    Py_CLEAR(st->str_task_info);
    Py_CLEAR(st->str_nbytes);
    Py_CLEAR(st->str_torch);
    Py_CLEAR(st->tensor_type);
    return 0;
}

/*
 * Every recorder and iterator holds its type, and the types hold the
 * module, so none is left when this runs.  The sampler thread is joined
 * with the GIL held: it never takes the GIL, so this cannot deadlock, and
 * it is signalled, so the join waits at most one round of /proc reads.
 */
static void
tm_free(void *module)
{
    tm_state *st = get_state((PyObject *)module);

    tm_clear((PyObject *)module);
    if (st->sampler_ok) {
        tm_sampler_free(&st->sampler);
        st->sampler_ok = 0;
    }
}

static PyMethodDef tm_methods[] = {
    {"clock_ns", (PyCFunction)(void (*)(void))mod_clock_ns, METH_FASTCALL,
     "clock_ns()\n--\n\nReturns int.\n\n"
     "The clock every traceml timestamp comes from: CLOCK_MONOTONIC in\n"
     "nanoseconds (int).  Use it to line your own timestamps up with\n"
     "Report.steps."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot tm_slots[] = {
    {Py_mod_exec, tm_exec},
#if PY_VERSION_HEX >= 0x030C0000
    /* NumPy does not support subinterpreters. */
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
    {0, NULL},
};

struct PyModuleDef tm_module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "traceml._core",
    .m_doc = "traceml's C core: the clock, the Recorder (step store and "
             "probes), the wrap iterator, the /proc sampler and the "
             "reducers.",
    .m_size = sizeof(tm_state),
    .m_methods = tm_methods,
    .m_slots = tm_slots,
    .m_traverse = tm_traverse,
    .m_clear = tm_clear,
    .m_free = tm_free,
};

PyMODINIT_FUNC
PyInit__core(void)
{
    return PyModuleDef_Init(&tm_module_def);
}
