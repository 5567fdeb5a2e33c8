/*
 * traceml._core: module state, the method table, and the NumPy bindings of
 * the reducers.  Multi-phase initialisation (PEP 489): every piece of
 * state lives in tm_state, none in file-level globals.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <string.h>

#include "clock.h"
#include "module.h"
#include "reduce.h"

static inline tm_state *
get_state(PyObject *module)
{
    return (tm_state *)PyModule_GetState(module);
}

/* ------------------------------------------------------------------ */
/* the sampler's life: it runs while a watched wrapped loop is active    */

int
tm_loop_started(tm_state *st)
{
    if (!st->sampler_ok || !st->sampling) {
        return -1;
    }
    if (tm_sampler_start(&st->sampler, st->period_ns, st->stuck_after_ns,
                         st->sampler_capacity) < 0) {
        return -1;   /* no thread: timing goes on without counters */
    }
    st->active_loops++;
    return 0;
}

void
tm_loop_ended(tm_state *st)
{
    if (st->active_loops > 0 && --st->active_loops == 0) {
        tm_sampler_stop(&st->sampler);
    }
}

/* ------------------------------------------------------------------ */
/* recording                                                          */

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

static PyObject *
mod_reset(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    tm_state *st = get_state(module);

    tm_store_clear(&st->store);
    tm_probes_clear(&st->probes);
    if (st->sampler_ok) {
        /* A loop still running keeps its sampler, on an empty ring. */
        if (st->active_loops == 0) {
            tm_sampler_stop(&st->sampler);
        }
        tm_sampler_clear(&st->sampler);
    }
    Py_RETURN_NONE;
}

static PyObject *
mod_after_fork_child(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    tm_state *st = get_state(module);

    /* The child's copy of the parent's record is not the child's to
       report: free it and start a new generation. */
    tm_store_free(&st->store);
    tm_store_clear(&st->store);
    tm_probes_clear(&st->probes);
    if (st->sampler_ok) {
        tm_sampler_after_fork(&st->sampler);
    }
    st->active_loops = 0;
    st->fork_generation++;
    Py_RETURN_NONE;
}

static PyObject *
mod_set_capacity_limit(PyObject *module, PyObject *arg)
{
    tm_state *st = get_state(module);
    size_t limit = SIZE_MAX;

    if (arg != Py_None) {
        Py_ssize_t n = PyNumber_AsSsize_t(arg, PyExc_OverflowError);

        if (n == -1 && PyErr_Occurred()) {
            return NULL;
        }
        if (n < 0) {
            PyErr_SetString(PyExc_ValueError, "limit must be >= 0 or None");
            return NULL;
        }
        limit = (size_t)n;
    }
    if (st->store.len != 0) {
        PyErr_SetString(PyExc_RuntimeError,
                        "the capacity limit can only be set on an empty "
                        "store: call reset() first");
        return NULL;
    }
    tm_store_free(&st->store);
    st->store.cap_limit = limit;
    Py_RETURN_NONE;
}

static PyObject *
mod_truncate(PyObject *module, PyObject *arg)
{
    tm_state *st = get_state(module);
    Py_ssize_t n = PyNumber_AsSsize_t(arg, PyExc_OverflowError);

    if (n == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (n < 0 || (size_t)n > st->store.len) {
        PyErr_Format(PyExc_ValueError,
                     "_truncate(): n must be in [0, %zd], got %zd",
                     (Py_ssize_t)st->store.len, n);
        return NULL;
    }
    st->store.len = (size_t)n;
    Py_RETURN_NONE;
}

static PyObject *
mod_snapshot(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    tm_state *st = get_state(module);
    npy_intp n = (npy_intp)st->store.len;
    PyObject *arr;

    Py_INCREF(st->record_dtype);
    arr = PyArray_NewFromDescr(&PyArray_Type,
                               (PyArray_Descr *)st->record_dtype, 1, &n,
                               NULL, NULL, 0, NULL);
    if (arr == NULL) {
        return NULL;
    }
    if (n > 0) {
        memcpy(PyArray_DATA((PyArrayObject *)arr), st->store.records,
               (size_t)n * sizeof(tm_record));
    }
    return arr;
}

static PyObject *
mod_snapshot_delivery(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    tm_state *st = get_state(module);
    npy_intp n = (npy_intp)st->store.len;
    PyArrayObject *rank, *worker;
    npy_intp i;

    if (st->store.delivery == NULL) {
        Py_RETURN_NONE;
    }
    rank = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_INT32);
    worker = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_INT32);
    if (rank == NULL || worker == NULL) {
        Py_XDECREF(rank);
        Py_XDECREF(worker);
        return NULL;
    }
    for (i = 0; i < n; i++) {
        ((int32_t *)PyArray_DATA(rank))[i] = st->store.delivery[i].rank;
        ((int32_t *)PyArray_DATA(worker))[i] = st->store.delivery[i].worker;
    }
    return Py_BuildValue("(NN)", rank, worker);
}

static PyObject *
mod_store_info(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    tm_state *st = get_state(module);
    tm_probes *p = &st->probes;

    return Py_BuildValue(
        "{s:n,s:n,s:n,s:K,s:O,s:O,s:K,s:O,s:{s:K,s:K,s:K,s:K,s:K}}",
        "steps", (Py_ssize_t)st->store.len,
        "capacity", (Py_ssize_t)st->store.cap,
        "record_bytes", (Py_ssize_t)sizeof(tm_record),
        "dropped_steps", (unsigned long long)st->store.dropped,
        "out_of_memory", st->store.oom ? Py_True : Py_False,
        "delivery_lost", st->store.delivery_lost ? Py_True : Py_False,
        "generation", (unsigned long long)st->store.generation,
        "probe_step_open", p->open ? Py_True : Py_False,
        "misuse",
        "step_begin_while_open", (unsigned long long)p->begin_while_open,
        "fetch_done_without_step", (unsigned long long)p->fetch_without_step,
        "fetch_done_repeated", (unsigned long long)p->fetch_repeated,
        "step_end_without_step", (unsigned long long)p->end_without_step,
        "step_end_without_fetch", (unsigned long long)p->end_without_fetch);
}

/* ------------------------------------------------------------------ */
/* the sampler                                                        */

static PyObject *
mod_sampler_config(PyObject *module, PyObject *args)
{
    tm_state *st = get_state(module);
    long long period_ns, stuck_ns;
    Py_ssize_t capacity;
    int enabled;

    if (!PyArg_ParseTuple(args, "LLnp:_sampler_config", &period_ns, &stuck_ns,
                          &capacity, &enabled)) {
        return NULL;
    }
    if (period_ns < 1000000 || stuck_ns < 0 || capacity < 16) {
        PyErr_SetString(PyExc_ValueError,
                        "_sampler_config(): period >= 1 ms, stuck_after >= 0, "
                        "capacity >= 16");
        return NULL;
    }
    st->period_ns = period_ns;
    st->stuck_after_ns = stuck_ns;
    st->sampler_capacity = (size_t)capacity;
    st->sampling = enabled;
    Py_RETURN_NONE;
}

static PyObject *
mod_sampler_watch(PyObject *module, PyObject *args)
{
    tm_state *st = get_state(module);
    PyObject *pids_obj, *roles_obj, *pids = NULL, *roles = NULL;
    int *pid_v = NULL, *role_v = NULL;
    Py_ssize_t n, i;
    PyObject *result = NULL;

    if (!PyArg_ParseTuple(args, "OO:_sampler_watch", &pids_obj, &roles_obj)) {
        return NULL;
    }
    pids = PySequence_Fast(pids_obj, "pids must be a sequence of ints");
    roles = pids ? PySequence_Fast(roles_obj, "roles must be a sequence of ints") : NULL;
    if (roles == NULL) {
        goto done;
    }
    n = PySequence_Fast_GET_SIZE(pids);
    if (PySequence_Fast_GET_SIZE(roles) != n) {
        PyErr_SetString(PyExc_ValueError, "pids and roles differ in length");
        goto done;
    }
    pid_v = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    role_v = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    if (pid_v == NULL || role_v == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (i = 0; i < n; i++) {
        long p = PyLong_AsLong(PySequence_Fast_GET_ITEM(pids, i));
        long r = PyLong_AsLong(PySequence_Fast_GET_ITEM(roles, i));

        if ((p == -1 || r == -1) && PyErr_Occurred()) {
            goto done;
        }
        if (p <= 0 || p > INT32_MAX || r < -1 || r > INT32_MAX) {
            PyErr_Format(PyExc_ValueError, "bad pid %ld or role %ld", p, r);
            goto done;
        }
        pid_v[i] = (int)p;
        role_v[i] = (int)r;
    }
    if (!st->sampler_ok || tm_sampler_watch(&st->sampler, pid_v, role_v,
                                            (size_t)n) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    result = Py_NewRef(Py_None);

done:
    Py_XDECREF(pids);
    Py_XDECREF(roles);
    PyMem_Free(pid_v);
    PyMem_Free(role_v);
    return result;
}

static PyArrayObject *
new_samples(tm_state *st, npy_intp n)
{
    Py_INCREF(st->sample_dtype);
    return (PyArrayObject *)PyArray_NewFromDescr(
        &PyArray_Type, (PyArray_Descr *)st->sample_dtype, 1, &n, NULL, NULL,
        0, NULL);
}

static PyObject *
mod_sampler_samples(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    tm_state *st = get_state(module);
    npy_intp n = st->sampler_ok ? (npy_intp)tm_sampler_len(&st->sampler) : 0;
    PyArrayObject *arr = new_samples(st, n);
    PyArrayObject *part;
    npy_intp got;

    if (arr == NULL || n == 0) {
        return (PyObject *)arr;
    }
    got = (npy_intp)tm_sampler_copy(&st->sampler,
                                    (tm_sample *)PyArray_DATA(arr), (size_t)n);
    if (got == n) {
        return (PyObject *)arr;
    }
    /* The ring was cleared meanwhile: hand back only what was copied. */
    part = new_samples(st, got);
    if (part != NULL) {
        memcpy(PyArray_DATA(part), PyArray_DATA(arr),
               (size_t)got * sizeof(tm_sample));
    }
    Py_DECREF(arr);
    return (PyObject *)part;
}

static PyObject *
mod_sampler_stuck(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    tm_state *st = get_state(module);
    tm_stuck ev[TM_MAX_STUCK];
    size_t n, i;
    PyObject *list;

    n = st->sampler_ok ? tm_sampler_copy_stuck(&st->sampler, ev, TM_MAX_STUCK) : 0;
    list = PyList_New((Py_ssize_t)n);
    if (list == NULL) {
        return NULL;
    }
    for (i = 0; i < n; i++) {
        char state[2] = {(char)ev[i].state, '\0'};
        PyObject *d = Py_BuildValue(
            "{s:L,s:L,s:L,s:L,s:i,s:i,s:L,s:L,s:i,s:i,s:s,s:L,s:L}",
            "since_ns", (long long)ev[i].since_ns,
            "detected_ns", (long long)ev[i].detected_ns,
            "last_ns", (long long)ev[i].last_ns,
            "ended_ns", (long long)ev[i].ended_ns,
            "source", (int)ev[i].source, "epoch", (int)ev[i].epoch,
            "step", (long long)ev[i].step,
            "oldest_rank", (long long)ev[i].oldest_rank,
            "worker", (int)ev[i].worker, "pid", (int)ev[i].pid,
            "state", ev[i].state ? state : "",
            "cpu_ticks_at_since", (long long)ev[i].cpu_ticks_at_since,
            "cpu_ticks_last", (long long)ev[i].cpu_ticks_last);

        if (d == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, d);
    }
    return list;
}

static PyObject *
errno_text(int err)
{
    if (err == 0) {
        return Py_NewRef(Py_None);
    }
    return PyUnicode_FromFormat("%s (errno %d)", strerror(err), err);
}

static PyObject *
mod_sampler_info(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    tm_state *st = get_state(module);
    tm_sampler *s = &st->sampler;
    tm_watched procs[256];
    size_t n = 0, i;
    PyObject *plist, *result;
    int running = 0;
    unsigned long long ticks = 0, overwritten = 0;
    long long busy = 0, run = 0;
    Py_ssize_t len = 0, cap = 0;

    if (st->sampler_ok) {
        n = tm_sampler_copy_procs(s, procs, 256);
        pthread_mutex_lock(&s->lock);
        running = s->running;
        ticks = s->ticks;
        overwritten = s->overwritten;
        busy = s->busy_ns;
        run = s->run_ns + (s->running ? tm_clock_ns() - s->started_ns : 0);
        len = (Py_ssize_t)s->len;
        cap = (Py_ssize_t)s->cap;
        pthread_mutex_unlock(&s->lock);
    }
    plist = PyList_New((Py_ssize_t)n);
    if (plist == NULL) {
        return NULL;
    }
    for (i = 0; i < n; i++) {
        PyObject *d = Py_BuildValue(
            "{s:i,s:i,s:L,s:{s:N,s:N,s:N}}",
            "pid", procs[i].pid, "role", procs[i].role,
            "exited_ns", (long long)procs[i].exited_ns, "errors",
            "stat", errno_text(procs[i].err[TM_FILE_STAT]),
            "io", errno_text(procs[i].err[TM_FILE_IO]),
            "schedstat", errno_text(procs[i].err[TM_FILE_SCHEDSTAT]));

        if (d == NULL) {
            Py_DECREF(plist);
            return NULL;
        }
        PyList_SET_ITEM(plist, (Py_ssize_t)i, d);
    }
    result = Py_BuildValue(
        "{s:O,s:O,s:d,s:d,s:n,s:K,s:d,s:d,s:n,s:n,s:K,s:i,s:N}",
        "enabled", st->sampling ? Py_True : Py_False,
        "running", running ? Py_True : Py_False,
        "period_s", (double)st->period_ns * 1e-9,
        "stuck_after_s", (double)st->stuck_after_ns * 1e-9,
        "capacity", (Py_ssize_t)st->sampler_capacity,
        "ticks", ticks, "busy_s", (double)busy * 1e-9,
        "run_s", (double)run * 1e-9, "samples", len, "ring", cap,
        "overwritten", overwritten, "active_loops", st->active_loops,
        "procs", plist);
    return result;
}

/* ------------------------------------------------------------------ */
/* argument conversion for the reducers                               */

/*
 * A 1-D, C-contiguous int64 array from obj, or NULL with a TypeError or
 * ValueError naming the argument.  Integer and bool arrays convert when the
 * cast is safe; floats, objects and uint64 are refused rather than
 * truncated.  An empty sequence of any type is an empty int64 array.
 */
static PyArrayObject *
int64_arg(PyObject *obj, const char *func, const char *arg)
{
    PyArrayObject *raw;
    PyArrayObject *arr;
    npy_intp zero = 0;

    raw = (PyArrayObject *)PyArray_FROM_OF(obj, NPY_ARRAY_CARRAY_RO);
    if (raw == NULL) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError)) {
            return NULL;
        }
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "%s(): %s must be a 1-D array of integers, got %.200s",
                     func, arg, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    if (PyArray_NDIM(raw) == 0 && !PyArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): %s must be a 1-D array of integers, got %.200s",
                     func, arg, Py_TYPE(obj)->tp_name);
        Py_DECREF(raw);
        return NULL;
    }
    if (PyArray_NDIM(raw) != 1) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): %s must be 1-D, got %d dimensions",
                     func, arg, PyArray_NDIM(raw));
        Py_DECREF(raw);
        return NULL;
    }
    if (PyArray_SIZE(raw) == 0) {
        Py_DECREF(raw);
        return (PyArrayObject *)PyArray_ZEROS(1, &zero, NPY_INT64, 0);
    }
    if (!PyArray_ISINTEGER(raw) && !PyArray_ISBOOL(raw)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): %s must hold integers (int64 nanoseconds or "
                     "counts), got dtype %R", func, arg, PyArray_DESCR(raw));
        Py_DECREF(raw);
        return NULL;
    }
    arr = (PyArrayObject *)PyArray_FROM_OTF((PyObject *)raw, NPY_INT64,
                                            NPY_ARRAY_CARRAY_RO);
    if (arr == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_MemoryError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         "%s(): %s must convert to int64 without loss, got "
                         "dtype %R", func, arg, PyArray_DESCR(raw));
        }
        Py_DECREF(raw);
        return NULL;
    }
    Py_DECREF(raw);
    return arr;
}

/* A 1-D bool array from obj (bool dtype only), or NULL with an error. */
static PyArrayObject *
mask_arg(PyObject *obj, const char *func, const char *arg)
{
    PyArrayObject *raw;

    raw = (PyArrayObject *)PyArray_FROM_OF(obj, NPY_ARRAY_CARRAY_RO);
    if (raw == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_MemoryError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         "%s(): %s must be a 1-D bool array, got %.200s",
                         func, arg, Py_TYPE(obj)->tp_name);
        }
        return NULL;
    }
    if (PyArray_NDIM(raw) != 1 || (PyArray_SIZE(raw) > 0
                                   && !PyArray_ISBOOL(raw))) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): %s must be a 1-D bool array, got %d-D dtype %R",
                     func, arg, PyArray_NDIM(raw), PyArray_DESCR(raw));
        Py_DECREF(raw);
        return NULL;
    }
    if (!PyArray_ISBOOL(raw)) {
        npy_intp zero = 0;

        Py_DECREF(raw);
        return (PyArrayObject *)PyArray_ZEROS(1, &zero, NPY_BOOL, 0);
    }
    return raw;
}

static int
int64_scalar_arg(PyObject *obj, const char *func, const char *arg,
                 int64_t *out)
{
    long long v;

    if (PyBool_Check(obj) || !PyIndex_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s(): %s must be an int, got %.200s",
                     func, arg, Py_TYPE(obj)->tp_name);
        return -1;
    }
    v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_OverflowError, "%s(): %s must fit in int64",
                     func, arg);
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

/* The optional epoch argument: an int64 array of length n, or *out = NULL
   for None.  -1 with an error naming the argument otherwise. */
static int
epoch_arg(PyObject *obj, npy_intp n, const char *func, const char *other,
          PyArrayObject **out)
{
    *out = NULL;
    if (obj == Py_None) {
        return 0;
    }
    *out = int64_arg(obj, func, "epoch");
    if (*out == NULL) {
        return -1;
    }
    if (PyArray_SIZE(*out) != n) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): epoch must have the length of %s (%zd), got %zd",
                     func, other, (Py_ssize_t)n, (Py_ssize_t)PyArray_SIZE(*out));
        Py_CLEAR(*out);
        return -1;
    }
    return 0;
}

static inline const int64_t *
i64_data(PyArrayObject *arr)
{
    return (const int64_t *)PyArray_DATA(arr);
}

static inline size_t
arr_len(PyArrayObject *arr)
{
    return (size_t)PyArray_SIZE(arr);
}

/* ------------------------------------------------------------------ */
/* reducers                                                           */

/* The exact int128 sum as a Python int. */
static PyObject *
sum_to_pylong(const tm_summary *s)
{
    PyObject *hi, *lo, *shift, *shifted, *total;

    if ((s->sum_hi == 0 && s->sum_lo <= (uint64_t)INT64_MAX)
            || (s->sum_hi == -1 && s->sum_lo > (uint64_t)INT64_MAX)) {
        return PyLong_FromLongLong((long long)(int64_t)s->sum_lo);
    }
    hi = PyLong_FromLongLong(s->sum_hi);
    lo = PyLong_FromUnsignedLongLong(s->sum_lo);
    shift = PyLong_FromLong(64);
    if (hi == NULL || lo == NULL || shift == NULL) {
        Py_XDECREF(hi);
        Py_XDECREF(lo);
        Py_XDECREF(shift);
        return NULL;
    }
    shifted = PyNumber_Lshift(hi, shift);
    total = shifted != NULL ? PyNumber_Add(shifted, lo) : NULL;
    Py_XDECREF(shifted);
    Py_DECREF(hi);
    Py_DECREF(lo);
    Py_DECREF(shift);
    return total;
}

static PyObject *
mod_summary(PyObject *module, PyObject *x_obj)
{
    PyArrayObject *x;
    tm_summary s;
    PyObject *sum, *result;

    (void)module;
    x = int64_arg(x_obj, "summary", "x");
    if (x == NULL) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    tm_summarize(i64_data(x), arr_len(x), &s);
    Py_END_ALLOW_THREADS
    Py_DECREF(x);
    sum = sum_to_pylong(&s);
    if (sum == NULL) {
        return NULL;
    }
    if (s.count == 0) {
        result = Py_BuildValue("{s:n,s:N,s:d,s:O,s:O,s:d}",
                               "count", (Py_ssize_t)0, "sum", sum,
                               "mean", s.mean, "min", Py_None,
                               "max", Py_None, "std", s.std);
    }
    else {
        result = Py_BuildValue("{s:n,s:N,s:d,s:L,s:L,s:d}",
                               "count", (Py_ssize_t)s.count, "sum", sum,
                               "mean", s.mean, "min", (long long)s.min,
                               "max", (long long)s.max, "std", s.std);
    }
    return result;
}

static PyObject *
mod_percentiles(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyArrayObject *x;
    PyArrayObject *q;
    PyArrayObject *out;
    const double *qv;
    npy_intp nq, j;
    int scalar, rc;

    (void)module;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError,
                     "percentiles() takes 2 arguments (x, q), %zd given",
                     nargs);
        return NULL;
    }
    x = int64_arg(args[0], "percentiles", "x");
    if (x == NULL) {
        return NULL;
    }
    q = (PyArrayObject *)PyArray_FROMANY(args[1], NPY_FLOAT64, 0, 1,
                                         NPY_ARRAY_CARRAY_RO
                                         | NPY_ARRAY_FORCECAST);
    if (q == NULL) {
        Py_DECREF(x);
        if (!PyErr_ExceptionMatches(PyExc_MemoryError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError,
                            "percentiles(): q must be a number or a 1-D "
                            "sequence of numbers in [0, 100]");
        }
        return NULL;
    }
    scalar = PyArray_NDIM(q) == 0;
    nq = PyArray_SIZE(q);
    qv = (const double *)PyArray_DATA(q);
    for (j = 0; j < nq; j++) {
        if (!(qv[j] >= 0.0 && qv[j] <= 100.0)) {
            PyObject *bad = PyFloat_FromDouble(qv[j]);

            if (bad != NULL) {
                PyErr_Format(PyExc_ValueError,
                             "percentiles(): q must be in [0, 100], got %R",
                             bad);
                Py_DECREF(bad);
            }
            Py_DECREF(x);
            Py_DECREF(q);
            return NULL;
        }
    }
    out = (PyArrayObject *)PyArray_SimpleNew(1, &nq, NPY_FLOAT64);
    if (out == NULL) {
        Py_DECREF(x);
        Py_DECREF(q);
        return NULL;
    }
    /* Without the GIL another thread may write x meanwhile (so may one
       running NumPy code that releases the GIL, whatever we do): the
       selection is written to stay in bounds when x changes between its
       passes; the answer is then meaningless, never a memory error. */
    Py_BEGIN_ALLOW_THREADS
    rc = tm_percentiles(i64_data(x), arr_len(x), qv, (size_t)nq,
                        (double *)PyArray_DATA(out));
    Py_END_ALLOW_THREADS
    Py_DECREF(x);
    Py_DECREF(q);
    if (rc < 0) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    if (scalar) {
        PyObject *v = PyFloat_FromDouble(((double *)PyArray_DATA(out))[0]);

        Py_DECREF(out);
        return v;
    }
    return (PyObject *)out;
}

static PyObject *
mod_stall_mask(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyArrayObject *wait;
    PyArrayObject *mask;
    int64_t threshold;
    npy_intp n;

    (void)module;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError,
                     "stall_mask() takes 2 arguments (wait_ns, threshold_ns),"
                     " %zd given", nargs);
        return NULL;
    }
    if (int64_scalar_arg(args[1], "stall_mask", "threshold_ns",
                         &threshold) < 0) {
        return NULL;
    }
    wait = int64_arg(args[0], "stall_mask", "wait_ns");
    if (wait == NULL) {
        return NULL;
    }
    n = PyArray_SIZE(wait);
    mask = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_BOOL);
    if (mask != NULL) {
        tm_stall_mask(i64_data(wait), (size_t)n, threshold,
                      (uint8_t *)PyArray_DATA(mask));
    }
    Py_DECREF(wait);
    return (PyObject *)mask;
}

static PyObject *
mod_stall_gaps(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"mask", "epoch", NULL};
    PyObject *mask_obj;
    PyObject *epoch_obj = Py_None;
    PyArrayObject *mask;
    PyArrayObject *epoch = NULL;
    PyArrayObject *gaps;
    int64_t *scratch;
    npy_intp n, ngaps;

    (void)module;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:stall_gaps", kwlist,
                                     &mask_obj, &epoch_obj)) {
        return NULL;
    }
    mask = mask_arg(mask_obj, "stall_gaps", "mask");
    if (mask == NULL) {
        return NULL;
    }
    n = PyArray_SIZE(mask);
    if (epoch_arg(epoch_obj, n, "stall_gaps", "mask", &epoch) < 0) {
        Py_DECREF(mask);
        return NULL;
    }
    scratch = PyMem_RawMalloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    if (scratch == NULL) {
        Py_DECREF(mask);
        Py_XDECREF(epoch);
        return PyErr_NoMemory();
    }
    ngaps = (npy_intp)tm_stall_gaps((const uint8_t *)PyArray_DATA(mask),
                                    epoch != NULL ? i64_data(epoch) : NULL,
                                    (size_t)n, scratch);
    Py_DECREF(mask);
    Py_XDECREF(epoch);
    gaps = (PyArrayObject *)PyArray_SimpleNew(1, &ngaps, NPY_INT64);
    if (gaps != NULL) {
        memcpy(PyArray_DATA(gaps), scratch, (size_t)ngaps * sizeof(int64_t));
    }
    PyMem_RawFree(scratch);
    return (PyObject *)gaps;
}

/* values and counts of the distinct gaps, or -1 with an error set. */
static int
histogram_of(PyArrayObject *gaps, PyArrayObject **values,
             PyArrayObject **counts)
{
    npy_intp n = PyArray_SIZE(gaps);
    npy_intp dims[1];
    size_t nbins;
    const int64_t *g = i64_data(gaps);
    npy_intp i;
    int64_t *v;
    int64_t *c;

    for (i = 0; i < n; i++) {
        if (g[i] < 1) {
            PyErr_Format(PyExc_ValueError,
                         "gaps must be >= 1 (steps between stalls), found "
                         "%lld at index %zd", (long long)g[i], (Py_ssize_t)i);
            return -1;
        }
    }
    v = PyMem_RawMalloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    c = PyMem_RawMalloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    if (v == NULL || c == NULL || tm_gap_histogram(g, (size_t)n, v, c,
                                                   &nbins) < 0) {
        PyMem_RawFree(v);
        PyMem_RawFree(c);
        PyErr_NoMemory();
        return -1;
    }
    dims[0] = (npy_intp)nbins;
    *values = (PyArrayObject *)PyArray_SimpleNew(1, dims, NPY_INT64);
    *counts = (PyArrayObject *)PyArray_SimpleNew(1, dims, NPY_INT64);
    if (*values == NULL || *counts == NULL) {
        Py_XDECREF(*values);
        Py_XDECREF(*counts);
        PyMem_RawFree(v);
        PyMem_RawFree(c);
        return -1;
    }
    memcpy(PyArray_DATA(*values), v, nbins * sizeof(int64_t));
    memcpy(PyArray_DATA(*counts), c, nbins * sizeof(int64_t));
    PyMem_RawFree(v);
    PyMem_RawFree(c);
    return 0;
}

static PyObject *
mod_gap_histogram(PyObject *module, PyObject *gaps_obj)
{
    PyArrayObject *gaps;
    PyArrayObject *values;
    PyArrayObject *counts;

    (void)module;
    gaps = int64_arg(gaps_obj, "gap_histogram", "gaps");
    if (gaps == NULL) {
        return NULL;
    }
    if (histogram_of(gaps, &values, &counts) < 0) {
        Py_DECREF(gaps);
        return NULL;
    }
    Py_DECREF(gaps);
    return Py_BuildValue("(NN)", values, counts);
}

static PyObject *
mod_cadence_match(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyArrayObject *gaps;
    PyArrayObject *values;
    PyArrayObject *counts;
    int64_t k;
    double fraction;
    PyObject *modal;
    PyObject *matches;
    npy_intp nbins;

    (void)module;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError,
                     "cadence_match() takes 2 arguments (gaps, num_workers),"
                     " %zd given", nargs);
        return NULL;
    }
    if (int64_scalar_arg(args[1], "cadence_match", "num_workers", &k) < 0) {
        return NULL;
    }
    if (k < 1) {
        PyErr_Format(PyExc_ValueError,
                     "cadence_match(): num_workers must be >= 1 (use 1 for a "
                     "loader without workers), got %lld", (long long)k);
        return NULL;
    }
    gaps = int64_arg(args[0], "cadence_match", "gaps");
    if (gaps == NULL) {
        return NULL;
    }
    if (histogram_of(gaps, &values, &counts) < 0) {
        Py_DECREF(gaps);
        return NULL;
    }
    fraction = tm_multiple_fraction(i64_data(gaps), arr_len(gaps), k);
    nbins = PyArray_SIZE(values);
    if (nbins == 0) {
        modal = Py_NewRef(Py_None);
        matches = Py_NewRef(Py_False);
    }
    else {
        size_t b = tm_modal_bin(i64_data(counts), (size_t)nbins);
        int64_t mode = i64_data(values)[b];

        modal = PyLong_FromLongLong(mode);
        matches = PyBool_FromLong(mode == k);
    }
    Py_DECREF(gaps);
    Py_DECREF(values);
    Py_DECREF(counts);
    if (modal == NULL) {
        Py_DECREF(matches);
        return NULL;
    }
    return Py_BuildValue("{s:N,s:d,s:N}", "modal_gap", modal,
                         "multiple_fraction", fraction,
                         "modal_matches", matches);
}

static PyObject *
mod_modal_gap(PyObject *module, PyObject *gaps_obj)
{
    PyArrayObject *gaps;
    PyArrayObject *values;
    PyArrayObject *counts;
    PyObject *result;

    (void)module;
    gaps = int64_arg(gaps_obj, "modal_gap", "gaps");
    if (gaps == NULL) {
        return NULL;
    }
    if (histogram_of(gaps, &values, &counts) < 0) {
        Py_DECREF(gaps);
        return NULL;
    }
    if (PyArray_SIZE(values) == 0) {
        result = Py_NewRef(Py_None);
    }
    else {
        size_t b = tm_modal_bin(i64_data(counts),
                                (size_t)PyArray_SIZE(values));

        result = PyLong_FromLongLong(i64_data(values)[b]);
    }
    Py_DECREF(gaps);
    Py_DECREF(values);
    Py_DECREF(counts);
    return result;
}

static PyObject *
mod_autocorr(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyArrayObject *x;
    int64_t lag;
    double r;

    (void)module;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError,
                     "autocorr() takes 2 arguments (x, lag), %zd given",
                     nargs);
        return NULL;
    }
    if (int64_scalar_arg(args[1], "autocorr", "lag", &lag) < 0) {
        return NULL;
    }
    if (lag < 1) {
        PyErr_Format(PyExc_ValueError,
                     "autocorr(): lag must be >= 1, got %lld", (long long)lag);
        return NULL;
    }
    x = int64_arg(args[0], "autocorr", "x");
    if (x == NULL) {
        return NULL;
    }
    r = tm_autocorr(i64_data(x), arr_len(x), (size_t)lag);
    Py_DECREF(x);
    return PyFloat_FromDouble(r);
}

static PyObject *
mod_overtaking(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"ranks", "epoch", NULL};
    PyObject *ranks_obj, *epoch_obj = Py_None;
    PyArrayObject *ranks, *epoch = NULL, *mask;
    npy_intp n;
    int64_t count;

    (void)module;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:overtaking", kwlist,
                                     &ranks_obj, &epoch_obj)) {
        return NULL;
    }
    ranks = int64_arg(ranks_obj, "overtaking", "ranks");
    if (ranks == NULL) {
        return NULL;
    }
    n = PyArray_SIZE(ranks);
    if (epoch_arg(epoch_obj, n, "overtaking", "ranks", &epoch) < 0) {
        Py_DECREF(ranks);
        return NULL;
    }
    mask = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_BOOL);
    if (mask == NULL) {
        Py_DECREF(ranks);
        Py_XDECREF(epoch);
        return NULL;
    }
    count = tm_overtaking(i64_data(ranks), epoch ? i64_data(epoch) : NULL,
                          (size_t)n, (uint8_t *)PyArray_DATA(mask));
    Py_DECREF(ranks);
    Py_XDECREF(epoch);
    if (count < 0) {
        Py_DECREF(mask);
        return PyErr_NoMemory();
    }
    return (PyObject *)mask;
}

static PyObject *
mod_log_otsu(PyObject *module, PyObject *x_obj)
{
    PyArrayObject *x;
    tm_otsu o;
    int rc;

    (void)module;
    x = int64_arg(x_obj, "log_otsu", "x");
    if (x == NULL) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = tm_log_otsu(i64_data(x), arr_len(x), &o);
    Py_END_ALLOW_THREADS
    Py_DECREF(x);
    if (rc < 0) {
        return PyErr_NoMemory();
    }
    return Py_BuildValue("{s:d,s:d,s:d,s:d,s:n}",
                         "threshold_ns", o.threshold, "eta", o.eta,
                         "lower_mean_ns", o.lower_mean,
                         "upper_mean_ns", o.upper_mean,
                         "upper_count", (Py_ssize_t)o.upper_count);
}

/* ------------------------------------------------------------------ */
/* the module                                                         */

PyDoc_STRVAR(clock_ns_doc,
"clock_ns() -> int\n--\n\n"
"The clock every traceml timestamp comes from: CLOCK_MONOTONIC in\n"
"nanoseconds (int).  Use it to line your own timestamps up with\n"
"Report.steps.");

PyDoc_STRVAR(step_begin_doc,
"step_begin() -> None\n--\n\n"
"Open a step at the current clock_ns().  If a step is already open it is\n"
"closed first at the same instant (counted as misuse\n"
"'step_begin_while_open').  Never raises inside a loop.");

PyDoc_STRVAR(fetch_done_doc,
"fetch_done() -> None\n--\n\n"
"Mark that the open step's input has arrived: input wait is\n"
"fetch_done - step_begin.  Without an open step it is ignored (misuse\n"
"'fetch_done_without_step'); called twice in one step, the later call\n"
"counts ('fetch_done_repeated').");

PyDoc_STRVAR(step_end_doc,
"step_end() -> None\n--\n\n"
"Close the open step and record it.  Without an open step it is ignored\n"
"('step_end_without_step'); a step closed without fetch_done() is\n"
"recorded with zero input wait ('step_end_without_fetch').");

PyDoc_STRVAR(summary_doc,
"summary(x) -> dict\n--\n\n"
"count, sum (exact int), mean, min, max, std (population, ddof=0, as\n"
"numpy.std) of a 1-D integer array.  Empty input: count 0, sum 0, mean\n"
"and std NaN, min and max None.  Raises TypeError/ValueError naming x\n"
"when x is not a 1-D integer array.");

PyDoc_STRVAR(percentiles_doc,
"percentiles(x, q) -> float or ndarray[float64]\n--\n\n"
"Percentiles q (a number or 1-D sequence in [0, 100]) of the 1-D integer\n"
"array x by numpy.percentile's method=\"linear\", found by selection (a\n"
"histogram of the high bits, then quickselect in the buckets holding the\n"
"wanted ranks), not a full sort.  x is not modified.  Empty x gives NaN.\n"
"Raises ValueError naming q when q is outside [0, 100] or NaN.");

PyDoc_STRVAR(stall_mask_doc,
"stall_mask(wait_ns, threshold_ns) -> ndarray[bool]\n--\n\n"
"True where wait_ns > threshold_ns (strictly).  Shape of wait_ns.");

PyDoc_STRVAR(stall_gaps_doc,
"stall_gaps(mask, epoch=None) -> ndarray[int64]\n--\n\n"
"Steps between consecutive True entries of the 1-D bool mask.  With\n"
"epoch (int array, same length) a gap is only counted between two stalls\n"
"of the same epoch.  Length: stalls - 1 at most.");

PyDoc_STRVAR(gap_histogram_doc,
"gap_histogram(gaps) -> (values, counts)\n--\n\n"
"The distinct gaps in ascending order and how often each occurs (two\n"
"int64 arrays of equal length).  Raises ValueError if a gap is < 1.");

PyDoc_STRVAR(modal_gap_doc,
"modal_gap(gaps) -> int or None\n--\n\n"
"The most frequent gap (the smallest on ties); None when gaps is empty.");

PyDoc_STRVAR(cadence_match_doc,
"cadence_match(gaps, num_workers) -> dict\n--\n\n"
"How well stall gaps follow a worker count k = num_workers (>= 1):\n"
"modal_gap, multiple_fraction (share of gaps that are multiples of k;\n"
"NaN without gaps) and modal_matches (modal gap == k).");

PyDoc_STRVAR(autocorr_doc,
"autocorr(x, lag) -> float\n--\n\n"
"Autocorrelation of the 1-D integer array x at lag (>= 1), as Box and\n"
"Jenkins estimate it: sum((x[t]-m)(x[t+lag]-m)) / sum((x[t]-m)**2) with\n"
"m the mean.  NaN when len(x) <= lag or x is constant.  Near 1 at the\n"
"stall period of a periodic input wait.");

PyDoc_STRVAR(overtaking_doc,
"overtaking(ranks, epoch=None) -> ndarray[bool]\n--\n\n"
"Per delivery (ranks: each delivered batch's position in its epoch's\n"
"sampler order, -1 if unknown): True when some lower rank had not been\n"
"delivered yet, i.e. this batch overtook it.  With epoch (same length)\n"
"each epoch is judged on its own.  0 overtakes with in_order=True.");

PyDoc_STRVAR(log_otsu_doc,
"log_otsu(x) -> dict\n--\n\n"
"Otsu's (1979) two-class split of log(x) (values < 1 count as 1):\n"
"threshold_ns (geometric midpoint across the split), eta (between-class\n"
"share of the variance; a single Gaussian reaches at most 2/pi = 0.64),\n"
"lower_mean_ns and upper_mean_ns (geometric class means) and\n"
"upper_count.  NaN fields when x has fewer than two distinct values.");

static PyMethodDef tm_methods[] = {
    {"clock_ns", (PyCFunction)(void (*)(void))mod_clock_ns, METH_FASTCALL,
     clock_ns_doc},
    {"step_begin", (PyCFunction)(void (*)(void))tm_step_begin,
     METH_FASTCALL, step_begin_doc},
    {"fetch_done", (PyCFunction)(void (*)(void))tm_fetch_done,
     METH_FASTCALL, fetch_done_doc},
    {"step_end", (PyCFunction)(void (*)(void))tm_step_end, METH_FASTCALL,
     step_end_doc},
    {"reset", mod_reset, METH_NOARGS,
     "reset()\n--\n\nDiscard every recorded step, drop count and misuse "
     "count,\nand close the probes' open step without recording it."},
    {"snapshot", mod_snapshot, METH_NOARGS,
     "snapshot() -> ndarray[RECORD_DTYPE]\n--\n\n"
     "A copy of every recorded step, in the order the steps closed."},
    {"store_info", mod_store_info, METH_NOARGS,
     "store_info() -> dict\n--\n\n"
     "steps, capacity, record_bytes, dropped_steps, out_of_memory,\n"
     "generation, probe_step_open and the misuse counts."},
    {"snapshot_delivery", mod_snapshot_delivery, METH_NOARGS,
     "snapshot_delivery() -> (rank, worker) or None\n--\n\n"
     "Per recorded step (parallel to snapshot()): the delivered batch's rank\n"
     "in its epoch's sampler order and the worker that produced it (int32,\n"
     "-1 where unknown); None when no step carried delivery information."},
    {"_sampler_config", mod_sampler_config, METH_VARARGS,
     "_sampler_config(period_ns, stuck_after_ns, capacity, enabled)"},
    {"_sampler_watch", mod_sampler_watch, METH_VARARGS,
     "_sampler_watch(pids, roles): the processes to sample (role -1: the\n"
     "main process, else the DataLoader worker id)."},
    {"sampler_samples", mod_sampler_samples, METH_NOARGS,
     "sampler_samples() -> ndarray[SAMPLE_DTYPE]\n--\n\n"
     "A copy of the sampler's ring, oldest reading first.  Counters that\n"
     "could not be read are -1 (see sampler_info()['procs'][i]['errors'])."},
    {"sampler_stuck", mod_sampler_stuck, METH_NOARGS,
     "sampler_stuck() -> list[dict]\n--\n\n"
     "Fetches that waited longer than stuck_after: since_ns, detected_ns,\n"
     "last_ns, ended_ns (0 while waiting), source, epoch, step,\n"
     "oldest_rank, worker, pid, state, cpu_ticks_at_since, cpu_ticks_last."},
    {"sampler_info", mod_sampler_info, METH_NOARGS,
     "sampler_info() -> dict\n--\n\n"
     "enabled, running, period_s, stuck_after_s, capacity, ticks, busy_s\n"
     "(the thread's own CPU time), run_s, samples, ring, overwritten,\n"
     "active_loops and procs (pid, role, exited_ns, errors per file)."},
    {"_after_fork_child", mod_after_fork_child, METH_NOARGS,
     "Start an empty record in a forked child (registered at import)."},
    {"_truncate", mod_truncate, METH_O,
     "Drop every record after the first n (sweep() uses it to leave the\n"
     "recording as it found it)."},
    {"_set_capacity_limit", mod_set_capacity_limit, METH_O,
     "Testing hook: cap the store at this many records (None: no cap)."},
    {"summary", mod_summary, METH_O, summary_doc},
    {"percentiles", (PyCFunction)(void (*)(void))mod_percentiles,
     METH_FASTCALL, percentiles_doc},
    {"stall_mask", (PyCFunction)(void (*)(void))mod_stall_mask,
     METH_FASTCALL, stall_mask_doc},
    {"stall_gaps", (PyCFunction)(void (*)(void))mod_stall_gaps,
     METH_VARARGS | METH_KEYWORDS, stall_gaps_doc},
    {"gap_histogram", mod_gap_histogram, METH_O, gap_histogram_doc},
    {"modal_gap", mod_modal_gap, METH_O, modal_gap_doc},
    {"cadence_match", (PyCFunction)(void (*)(void))mod_cadence_match,
     METH_FASTCALL, cadence_match_doc},
    {"autocorr", (PyCFunction)(void (*)(void))mod_autocorr, METH_FASTCALL,
     autocorr_doc},
    {"overtaking", (PyCFunction)(void (*)(void))mod_overtaking,
     METH_VARARGS | METH_KEYWORDS, overtaking_doc},
    {"log_otsu", mod_log_otsu, METH_O, log_otsu_doc},
    {NULL, NULL, 0, NULL},
};

static int
build_record_dtype(tm_state *st)
{
    PyObject *fields;
    PyArray_Descr *descr = NULL;

    fields = Py_BuildValue("[(ss)(ss)(ss)(ss)(ss)(ss)]",
                           "begin_ns", "<i8", "fetch_done_ns", "<i8",
                           "end_ns", "<i8", "epoch", "<i4",
                           "source", "<u2", "flags", "<u2");
    if (fields == NULL) {
        return -1;
    }
    if (!PyArray_DescrConverter(fields, &descr)) {
        Py_DECREF(fields);
        return -1;
    }
    Py_DECREF(fields);
    if (PyDataType_ELSIZE(descr) != (npy_intp)sizeof(tm_record)) {
        Py_DECREF(descr);
        PyErr_SetString(PyExc_SystemError,
                        "record dtype does not match tm_record");
        return -1;
    }
    st->record_dtype = (PyObject *)descr;
    return 0;
}

static int
register_fork_handler(PyObject *module)
{
    PyObject *os = NULL, *reg = NULL, *hook = NULL, *kwargs = NULL;
    PyObject *empty = NULL, *res = NULL;
    int rc = -1;

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
    hook = PyObject_GetAttrString(module, "_after_fork_child");
    empty = PyTuple_New(0);
    if (hook == NULL || empty == NULL) {
        goto done;
    }
    kwargs = Py_BuildValue("{s:O}", "after_in_child", hook);
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
    Py_XDECREF(hook);
    Py_XDECREF(kwargs);
    Py_XDECREF(empty);
    Py_XDECREF(res);
    return rc;
}

static int
build_sample_dtype(tm_state *st)
{
    PyObject *fields;
    PyArray_Descr *descr = NULL;

    fields = Py_BuildValue(
        "[(ss)(ss)(ss)(ss)(ss)(ss)(ss)(ss)(ss)(ss)(ss)(ss)(ss)(ss)]",
        "t_ns", "<i8", "pid", "<i4", "role", "<i4",
        "utime_ticks", "<i8", "stime_ticks", "<i8", "minflt", "<i8",
        "majflt", "<i8", "starttime", "<i8", "read_bytes", "<i8",
        "rchar", "<i8", "cpu_ns", "<i8", "runq_ns", "<i8",
        "state", "<i4", "pad", "<i4");
    if (fields == NULL) {
        return -1;
    }
    if (!PyArray_DescrConverter(fields, &descr)) {
        Py_DECREF(fields);
        return -1;
    }
    Py_DECREF(fields);
    if (PyDataType_ELSIZE(descr) != (npy_intp)sizeof(tm_sample)) {
        Py_DECREF(descr);
        PyErr_SetString(PyExc_SystemError, "sample dtype does not match tm_sample");
        return -1;
    }
    st->sample_dtype = (PyObject *)descr;
    return 0;
}

static int
tm_exec(PyObject *module)
{
    tm_state *st = get_state(module);

    tm_store_init(&st->store);
    tm_probes_clear(&st->probes);
    st->sampler_ok = tm_sampler_init(&st->sampler) == 0;
    st->sampling = 1;
    st->period_ns = INT64_C(20000000);          /* 20 ms */
    st->stuck_after_ns = INT64_C(30000000000);  /* 30 s */
    st->sampler_capacity = (size_t)1 << 17;     /* 131072 readings */
    st->str_task_info = PyUnicode_InternFromString("_task_info");
    if (st->str_task_info == NULL) {
        return -1;
    }
    if (PyArray_ImportNumPyAPI() < 0) {
        return -1;
    }
    st->wrapiter_type = (PyTypeObject *)PyType_FromModuleAndSpec(
        module, &tm_wrapiter_spec, NULL);
    if (st->wrapiter_type == NULL) {
        return -1;
    }
    if (PyModule_AddType(module, st->wrapiter_type) < 0) {
        return -1;
    }
    if (build_record_dtype(st) < 0 || build_sample_dtype(st) < 0) {
        return -1;
    }
    if (PyModule_AddObjectRef(module, "RECORD_DTYPE", st->record_dtype) < 0
            || PyModule_AddObjectRef(module, "SAMPLE_DTYPE", st->sample_dtype) < 0
            || PyModule_AddIntConstant(module, "RECORD_BYTES",
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
                                       TM_FLAG_POS_MAX) < 0) {
        return -1;
    }
    return register_fork_handler(module);
}

static int
tm_traverse(PyObject *module, visitproc visit, void *arg)
{
    tm_state *st = get_state(module);

    Py_VISIT(st->wrapiter_type);
    Py_VISIT(st->record_dtype);
    Py_VISIT(st->sample_dtype);
    return 0;
}

static int
tm_clear(PyObject *module)
{
    tm_state *st = get_state(module);

    Py_CLEAR(st->wrapiter_type);
    Py_CLEAR(st->record_dtype);
    Py_CLEAR(st->sample_dtype);
    Py_CLEAR(st->str_task_info);
    return 0;
}

static void
tm_free(void *module)
{
    tm_state *st = get_state((PyObject *)module);

    tm_clear((PyObject *)module);
    tm_store_free(&st->store);
    if (st->sampler_ok) {
        tm_sampler_free(&st->sampler);
        st->sampler_ok = 0;
    }
}

static PyModuleDef_Slot tm_slots[] = {
    {Py_mod_exec, tm_exec},
#if PY_VERSION_HEX >= 0x030C0000
    /* NumPy does not support subinterpreters. */
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
    {0, NULL},
};

static struct PyModuleDef tm_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "traceml._core",
    .m_doc = "traceml's C core: the clock, the step store, the probes, the "
             "wrap iterator and the reducers.",
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
    return PyModuleDef_Init(&tm_module);
}
