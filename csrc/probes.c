/*
 * The hand-placed probes: step_begin(), fetch_done(), step_end(), as
 * methods of a Recorder and as module functions that record into the
 * default recorder (bound to a DefaultProbes object that holds it).
 *
 * The clock is read first, so that argument checking and bookkeeping are
 * not billed to the user's step.  A probe never raises inside the loop
 * (only a call with arguments is refused): misuse is counted in the
 * recorder and reported, and a step is written to the store only once it
 * is closed, so misuse never touches earlier records.  Knows nothing of
 * iterators or reducers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "module.h"

void
tm_probes_clear(tm_probes *probes)
{
    memset(probes, 0, sizeof(*probes));
}

/* Call a CUDA-event hook (traceml.gpu): hook() or hook(begin_ns).  The
   hooks catch every Exception themselves (a failing event source turns
   itself off), so what reaches here is a KeyboardInterrupt or the like,
   or a MemoryError making the argument: returned as -1 with the error
   set, for the caller to raise. */
int
tm_gpu_call(PyObject *hook, int64_t begin_ns, int with_arg)
{
    PyObject *arg, *res;

    if (!with_arg) {
        res = PyObject_CallNoArgs(hook);
    }
    else {
        arg = PyLong_FromLongLong((long long)begin_ns);
        if (arg == NULL) {
            return -1;
        }
        res = PyObject_CallOneArg(hook, arg);
        Py_DECREF(arg);
    }
    if (res == NULL) {
        return -1;
    }
    Py_DECREF(res);
    return 0;
}

static PyObject *
refuse_args(const char *name, Py_ssize_t nargs)
{
    PyErr_Format(PyExc_TypeError,
                 "traceml.%s() takes no arguments (%zd given)", name, nargs);
    return NULL;
}

/* The clocked step just closed gets its fetch's clocks and its body's,
   read now, where it was pushed (the store's length was `before`) and its
   fetch was done. */
static TM_COLD void
add_probe_clock(tm_recorder *rec, size_t before)
{
    tm_probes *p = &rec->probes;
    int64_t cpu, runq;
    int moved;

    p->clocked = 0;
    if (!p->fetched || rec->store.len == before) {
        return;
    }
    moved = tm_thread_clocks_read(&rec->probe_clocks, &cpu, &runq);
    tm_store_add_clock(&rec->store, rec->store.len - 1, p->fetch_cpu_ns,
                       p->fetch_runq_ns, tm_clock_delta(p->done_cpu_ns, cpu, moved),
                       tm_clock_delta(p->done_runq_ns, runq, moved),
                       p->fetch_others_cpu_ns);
}

/* Close the open step at now.  A step without fetch_done() waited 0 ns
   (its misuse is counted by the probe that closed it) and has no clocks.
   Inlined: step_end() runs it every step. */
TM_HOT_INLINE void
close_step(tm_recorder *rec, int64_t now, uint16_t flags)
{
    tm_probes *p = &rec->probes;
    int64_t fetch_done_ns = p->fetch_done_ns;
    size_t before = rec->store.len;

    if (!p->fetched) {
        flags |= TM_FLAG_NO_FETCH;
        fetch_done_ns = p->begin_ns;
    }
    tm_store_push(&rec->store, p->begin_ns, fetch_done_ns, now, 0, 0, flags,
                  -1, -1, -1, 0);
    if (TM_UNLIKELY(p->clocked)) {
        add_probe_clock(rec, before);
    }
    p->open = 0;
    p->fetched = 0;
}

/* The step beginning is clocked (its index is p->clock_k): read its
   starting clocks, and count down to the next k with TM_PROBE_CLOCKED(k). */
static TM_COLD void
begin_clocked(tm_recorder *rec)
{
    tm_probes *p = &rec->probes;
    uint64_t next = p->clock_k + 1;

    while (!TM_PROBE_CLOCKED(next)) {
        next++;
    }
    p->clock_in = next - p->clock_k - 1;
    p->clock_k = next;
    p->clocked = 1;
    (void)tm_thread_clocks_read(&rec->probe_clocks, &p->begin_cpu_ns,
                                &p->begin_runq_ns);
    p->begin_proc_ns = tm_process_cpu_ns();
    p->begin_sampler_ns = tm_rec_sampler_cpu_ns(rec, &p->begin_sampler_clock);
}

TM_HOT PyObject *
tm_probe_step_begin(tm_recorder *rec, Py_ssize_t nargs)
{
    int64_t now;
    tm_probes *p = &rec->probes;

    /* The CUDA event goes on the stream first, so that its cost is not
       billed to the step's input wait (one pointer test when off). */
    if (TM_UNLIKELY(rec->gpu_begin != NULL) && nargs == 0
        && tm_gpu_call(rec->gpu_begin, 0, 0) < 0) {
        return NULL;
    }
    now = tm_rec_clock(rec);
    if (TM_UNLIKELY(nargs != 0)) {
        return refuse_args("step_begin", nargs);
    }
    /* An open step ends here, as wrap's steps end at the next fetch:
       step_end() is optional once the step's fetch is done.  Before its
       fetch_done() it is misuse, and the step is recorded with no input
       wait. */
    if (TM_UNLIKELY(p->open)) {
        if (!p->fetched) {
            p->begin_while_open++;
        }
        close_step(rec, now, TM_FLAG_IMPLICIT_END);
    }
    p->open = 1;
    p->fetched = 0;
    p->begin_ns = now;
    if (TM_UNLIKELY(p->clock_in == 0)) {
        begin_clocked(rec);
    }
    else {
        p->clock_in--;
    }
    Py_RETURN_NONE;
}

/* A clocked step's first fetch_done(): its fetch's CPU and run-queue ns. */
static TM_COLD void
fetch_clocked(tm_recorder *rec)
{
    tm_probes *p = &rec->probes;
    int moved = tm_thread_clocks_read(&rec->probe_clocks, &p->done_cpu_ns,
                                      &p->done_runq_ns);
    int64_t proc = tm_process_cpu_ns();
    clockid_t sampler_clock = 0;
    int64_t sampler = tm_rec_sampler_cpu_ns(rec, &sampler_clock);

    p->fetch_cpu_ns = tm_clock_delta(p->begin_cpu_ns, p->done_cpu_ns, moved);
    p->fetch_runq_ns = tm_clock_delta(p->begin_runq_ns, p->done_runq_ns, moved);
    p->fetch_others_cpu_ns = tm_others_cpu_delta(
        p->begin_proc_ns, proc, p->fetch_cpu_ns,
        tm_sampler_cpu_delta(p->begin_sampler_ns, p->begin_sampler_clock, sampler,
                             sampler_clock));
    if (moved) {
        p->done_cpu_ns = p->done_runq_ns = -1;
    }
}

TM_HOT PyObject *
tm_probe_fetch_done(tm_recorder *rec, Py_ssize_t nargs)
{
    int64_t now = tm_rec_clock(rec);
    tm_probes *p = &rec->probes;

    if (TM_UNLIKELY(nargs != 0)) {
        return refuse_args("fetch_done", nargs);
    }
    if (TM_UNLIKELY(!p->open)) {
        p->fetch_without_step++;
        Py_RETURN_NONE;
    }
    if (p->fetched) {
        p->fetch_repeated++;
    }
    else if (TM_UNLIKELY(p->clocked)) {
        fetch_clocked(rec);
    }
    p->fetched = 1;
    p->fetch_done_ns = now;
    if (TM_UNLIKELY(rec->gpu_done != NULL)
        && tm_gpu_call(rec->gpu_done, p->begin_ns, 1) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

TM_HOT PyObject *
tm_probe_step_end(tm_recorder *rec, Py_ssize_t nargs)
{
    int64_t now = tm_rec_clock(rec);

    if (TM_UNLIKELY(nargs != 0)) {
        return refuse_args("step_end", nargs);
    }
    if (TM_UNLIKELY(!rec->probes.open)) {
        rec->probes.end_without_step++;
        Py_RETURN_NONE;
    }
    if (TM_UNLIKELY(!rec->probes.fetched)) {
        rec->probes.end_without_fetch++;
    }
    close_step(rec, now, 0);
    Py_RETURN_NONE;
}

/* Drop the open step unrecorded: the loop ended inside it (the fetch
   raised StopIteration).  Not misuse; without an open step, nothing. */
PyObject *
tm_probe_abandon_step(tm_recorder *rec, Py_ssize_t nargs)
{
    tm_probes *p = &rec->probes;

    if (nargs != 0) {
        return refuse_args("abandon_step", nargs);
    }
    if (p->open) {
        p->abandoned++;
        p->open = 0;
        p->fetched = 0;
        p->clocked = 0;
    }
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ */
/* module level: the default recorder                                  */

/* The module-level probes are bound to this object, not to the module: it
   holds the default recorder itself, so that a probe finds it with one
   load instead of a call of PyModule_GetState (a few ns of a ~30 ns
   probe; benchmarks/README.md, "The last two targets").
   It is the one holder of the default recorder: _set_default_recorder()
   swaps it.  NULL only once the module's state has been cleared, and then
   the probes do nothing. */
typedef struct {
    PyObject_HEAD
    tm_recorder *rec;   /* held */
} tm_default_probes;

static int
default_probes_traverse(tm_default_probes *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->rec);
    return 0;
}

static int
default_probes_clear(tm_default_probes *self)
{
    Py_CLEAR(self->rec);
    return 0;
}

static void
default_probes_dealloc(tm_default_probes *self)
{
    PyTypeObject *tp = Py_TYPE(self);

    PyObject_GC_UnTrack(self);
    default_probes_clear(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

#define DEFAULT_REC(self) (((tm_default_probes *)(self))->rec)

static TM_HOT PyObject *
mod_step_begin(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    if (TM_UNLIKELY(DEFAULT_REC(self) == NULL)) {
        Py_RETURN_NONE;
    }
    return tm_probe_step_begin(DEFAULT_REC(self), nargs);
}

static TM_HOT PyObject *
mod_fetch_done(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    if (TM_UNLIKELY(DEFAULT_REC(self) == NULL)) {
        Py_RETURN_NONE;
    }
    return tm_probe_fetch_done(DEFAULT_REC(self), nargs);
}

static TM_HOT PyObject *
mod_step_end(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    if (TM_UNLIKELY(DEFAULT_REC(self) == NULL)) {
        Py_RETURN_NONE;
    }
    return tm_probe_step_end(DEFAULT_REC(self), nargs);
}

static PyObject *
mod_abandon_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    if (DEFAULT_REC(self) == NULL) {
        Py_RETURN_NONE;
    }
    return tm_probe_abandon_step(DEFAULT_REC(self), nargs);
}

PyDoc_STRVAR(step_begin_doc,
"step_begin()\n--\n\n"
"Open a step at the current clock_ns(), in the default recorder.  If a\n"
"step is already open it is closed first at the same instant, flagged\n"
"FLAG_IMPLICIT_END: so step_end() is optional, and a loop of\n"
"step_begin(); batch = next(it); fetch_done(); train_step(batch)\n"
"records what wrap() records (each step ends where the next begins),\n"
"with two clock reads a step instead of three.  An open step whose\n"
"fetch_done() has not come is closed the same way, recorded with no\n"
"input wait, and counted as misuse 'step_begin_while_open'.  Never raises\n"
"inside a loop.");

PyDoc_STRVAR(fetch_done_doc,
"fetch_done()\n--\n\n"
"Mark that the open step's input has arrived: input wait is\n"
"fetch_done - step_begin.  Without an open step it is ignored (misuse\n"
"'fetch_done_without_step'); called twice in one step, the later call\n"
"counts ('fetch_done_repeated').");

PyDoc_STRVAR(step_end_doc,
"step_end()\n--\n\n"
"Close the open step and record it (optional: the next step_begin()\n"
"closes it too).  Without an open step it is ignored\n"
"('step_end_without_step'); a step closed without fetch_done() is\n"
"recorded with zero input wait ('step_end_without_fetch').");

PyDoc_STRVAR(abandon_step_doc,
"abandon_step()\n--\n\n"
"Drop the open step without recording it, for a loop that ends inside\n"
"a step: step_begin(); try: batch = next(it) except StopIteration:\n"
"abandon_step(); break.  Counted in the recorder's\n"
"store_info()['steps_abandoned'] (traceml._core.default_recorder() for\n"
"the module-level probes), not as misuse, and not noted in the report;\n"
"without an open step it does nothing.");

/* Pickled by name: a pickled traceml.step_begin (a bound method of this
   object) comes back as the module's own. */
static PyObject *
default_probes_reduce(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    (void)self;
    return PyUnicode_FromString("_default_probes");
}

/* The probes first: tm_probes_add() exports those to the module. */
#define N_PROBES 4
static PyMethodDef default_probes_methods[] = {
    {"abandon_step", (PyCFunction)(void (*)(void))mod_abandon_step,
     METH_FASTCALL, abandon_step_doc},
    {"step_begin", (PyCFunction)(void (*)(void))mod_step_begin,
     METH_FASTCALL, step_begin_doc},
    {"fetch_done", (PyCFunction)(void (*)(void))mod_fetch_done,
     METH_FASTCALL, fetch_done_doc},
    {"step_end", (PyCFunction)(void (*)(void))mod_step_end, METH_FASTCALL,
     step_end_doc},
    {"__reduce__", default_probes_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot default_probes_slots[] = {
    {Py_tp_doc, "The target the module-level probes are bound to: it "
                "holds the default recorder."},
    {Py_tp_traverse, default_probes_traverse},
    {Py_tp_clear, default_probes_clear},
    {Py_tp_dealloc, default_probes_dealloc},
    {Py_tp_methods, default_probes_methods},
    {0, NULL},
};

static PyType_Spec default_probes_spec = {
    .name = "traceml._core.DefaultProbes",
    .basicsize = sizeof(tm_default_probes),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC
             | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = default_probes_slots,
};

/* Make the probes' object, holding rec, and add it and the probes to the
   module. */
int
tm_probes_add(PyObject *module, tm_state *st, PyObject *rec)
{
    PyTypeObject *type;
    tm_default_probes *target;
    int i;

    type = (PyTypeObject *)PyType_FromModuleAndSpec(module,
                                                    &default_probes_spec,
                                                    NULL);
    if (type == NULL) {
        return -1;
    }
    target = PyObject_GC_New(tm_default_probes, type);
    Py_DECREF(type);  /* the instance holds it */
    if (target == NULL) {
        return -1;
    }
    target->rec = (tm_recorder *)Py_NewRef(rec);
    PyObject_GC_Track(target);
    st->default_probes = (PyObject *)target;
    if (PyModule_AddObjectRef(module, "_default_probes",
                              (PyObject *)target) < 0) {
        return -1;
    }
    for (i = 0; i < N_PROBES; i++) {
        const char *name = default_probes_methods[i].ml_name;
        PyObject *func = PyObject_GetAttrString((PyObject *)target, name);

        if (func == NULL || PyModule_AddObjectRef(module, name, func) < 0) {
            Py_XDECREF(func);
            return -1;
        }
        Py_DECREF(func);
    }
    return 0;
}

/* The default recorder (borrowed), or NULL once the state is cleared. */
PyObject *
tm_probes_default(tm_state *st)
{
    return st->default_probes != NULL
               ? (PyObject *)DEFAULT_REC(st->default_probes) : NULL;
}

/* Make rec (or NULL: none) the default recorder; returns the previous one
   (the reference the probes' object held), or NULL if none. */
PyObject *
tm_probes_swap_default(tm_state *st, PyObject *rec)
{
    PyObject *old;

    if (st->default_probes == NULL) {
        return NULL;
    }
    old = (PyObject *)DEFAULT_REC(st->default_probes);
    DEFAULT_REC(st->default_probes) = (tm_recorder *)Py_XNewRef(rec);
    return old;
}
