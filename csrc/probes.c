/*
 * The hand-placed probes: step_begin(), fetch_done(), step_end().
 *
 * The clock is read first, so that argument checking and bookkeeping are
 * not billed to the user's step.  A probe never raises inside the loop
 * (only a call with arguments is refused): misuse is counted in the module
 * state and reported, and a step is written to the store only once it is
 * closed, so misuse never touches earlier records.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "clock.h"
#include "module.h"

void
tm_probes_clear(tm_probes *probes)
{
    memset(probes, 0, sizeof(*probes));
}

static PyObject *
refuse_args(const char *name, Py_ssize_t nargs)
{
    PyErr_Format(PyExc_TypeError,
                 "traceml.%s() takes no arguments (%zd given)", name, nargs);
    return NULL;
}

/* Close the open step at now.  A step without fetch_done() waited 0 ns. */
static void
close_step(tm_state *st, int64_t now, uint16_t flags)
{
    tm_probes *p = &st->probes;
    int64_t fetch_done_ns = p->fetch_done_ns;

    if (!p->fetched) {
        p->end_without_fetch++;
        flags |= TM_FLAG_NO_FETCH;
        fetch_done_ns = p->begin_ns;
    }
    tm_store_push(&st->store, p->begin_ns, fetch_done_ns, now, 0, 0, flags,
                  -1, -1);
    p->open = 0;
    p->fetched = 0;
}

PyObject *
tm_step_begin(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t now = tm_clock_ns();
    tm_state *st;

    (void)args;
    if (nargs != 0) {
        return refuse_args("step_begin", nargs);
    }
    st = PyModule_GetState(module);
    if (st->probes.open) {
        st->probes.begin_while_open++;
        close_step(st, now, TM_FLAG_IMPLICIT_END);
    }
    st->probes.open = 1;
    st->probes.fetched = 0;
    st->probes.begin_ns = now;
    Py_RETURN_NONE;
}

PyObject *
tm_fetch_done(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t now = tm_clock_ns();
    tm_state *st;

    (void)args;
    if (nargs != 0) {
        return refuse_args("fetch_done", nargs);
    }
    st = PyModule_GetState(module);
    if (!st->probes.open) {
        st->probes.fetch_without_step++;
        Py_RETURN_NONE;
    }
    if (st->probes.fetched) {
        st->probes.fetch_repeated++;
    }
    st->probes.fetched = 1;
    st->probes.fetch_done_ns = now;
    Py_RETURN_NONE;
}

PyObject *
tm_step_end(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t now = tm_clock_ns();
    tm_state *st;

    (void)args;
    if (nargs != 0) {
        return refuse_args("step_end", nargs);
    }
    st = PyModule_GetState(module);
    if (!st->probes.open) {
        st->probes.end_without_step++;
        Py_RETURN_NONE;
    }
    close_step(st, now, 0);
    Py_RETURN_NONE;
}
