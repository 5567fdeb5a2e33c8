/*
 * What the translation units of traceml._core share: the module state and
 * the entry points module.c puts in its method table.
 */
#ifndef TRACEML_MODULE_H
#define TRACEML_MODULE_H

#include "sampler.h"
#include "store.h"

/* The probes' open step and the count of each documented misuse. */
typedef struct {
    int64_t begin_ns;
    int64_t fetch_done_ns;
    int open;
    int fetched;
    uint64_t begin_while_open;
    uint64_t fetch_without_step;
    uint64_t fetch_repeated;
    uint64_t end_without_step;
    uint64_t end_without_fetch;
} tm_probes;

typedef struct {
    tm_store store;
    tm_probes probes;
    tm_sampler sampler;
    int sampler_ok;            /* tm_sampler_init succeeded */
    int sampling;              /* configure(sampler=...) */
    int64_t period_ns;
    int64_t stuck_after_ns;
    size_t sampler_capacity;
    int active_loops;          /* wrapped loops the sampler serves */
    uint64_t fork_generation;  /* bumped in every forked child */
    PyTypeObject *wrapiter_type;
    PyObject *record_dtype;    /* numpy.dtype of one tm_record */
    PyObject *sample_dtype;    /* numpy.dtype of one tm_sample */
    PyObject *str_task_info;   /* interned "_task_info" */
} tm_state;

/* A wrapped loop starts / ends: the sampler runs while any is active. */
int tm_loop_started(tm_state *st);
void tm_loop_ended(tm_state *st);

void tm_probes_clear(tm_probes *probes);

PyObject *tm_step_begin(PyObject *module, PyObject *const *args,
                        Py_ssize_t nargs);
PyObject *tm_fetch_done(PyObject *module, PyObject *const *args,
                        Py_ssize_t nargs);
PyObject *tm_step_end(PyObject *module, PyObject *const *args,
                      Py_ssize_t nargs);

extern PyType_Spec tm_wrapiter_spec;

#endif  /* TRACEML_MODULE_H */
