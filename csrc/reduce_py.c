/*
 * The reducers' NumPy face: every reducer of reduce.c as a module function
 * taking NumPy arrays (or anything that converts) and returning NumPy
 * arrays, numbers or dicts.  One argument parser (parse_args) serves them
 * all: positional or keyword, each argument converted by its kind, with
 * errors that name the function and the argument.  Knows nothing of the
 * store, the recorders or the sampler.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define NO_IMPORT_ARRAY
#define PY_ARRAY_UNIQUE_SYMBOL traceml_ARRAY_API
#include <numpy/arrayobject.h>

#include <string.h>

#include "reduce.h"

/* ------------------------------------------------------------------ */
/* the argument parser                                                */

typedef enum {
    ARG_INTS,      /* 1-D int64 array (integer and bool arrays convert) */
    ARG_MASK,      /* 1-D bool array */
    ARG_INT,       /* an int that fits int64 (no bool) */
    ARG_QS,        /* a number or 1-D sequence of numbers, as float64 */
} arg_kind;

typedef struct {
    const char *name;
    arg_kind kind;
    int optional;  /* may be omitted or None */
} arg_spec;

typedef struct {
    PyArrayObject *arr;   /* ARG_INTS, ARG_MASK, ARG_QS; NULL if omitted */
    int64_t value;        /* ARG_INT */
} arg_value;

#define MAX_ARGS 4

static PyArrayObject *
bad_ints(const char *func, const char *arg, PyObject *obj)
{
    PyErr_Format(PyExc_TypeError,
                 "%s(): %s must be a 1-D array of integers, got %.200s",
                 func, arg, Py_TYPE(obj)->tp_name);
    return NULL;
}

/*
 * A 1-D, C-contiguous int64 array from obj.  Integer and bool arrays
 * convert when the cast is safe; floats, objects and uint64 are refused
 * rather than truncated.  An empty sequence of any type is an empty int64
 * array.
 */
static PyArrayObject *
ints_arg(PyObject *obj, const char *func, const char *arg)
{
    PyArrayObject *raw, *arr;
    npy_intp zero = 0;

    if (PyArray_Check(obj)) {
        /* Inspected as it is: one conversion below at most (a strided
           int32 column of 10M records would otherwise be copied twice). */
        raw = (PyArrayObject *)Py_NewRef(obj);
    }
    else {
        raw = (PyArrayObject *)PyArray_FROM_OF(obj, NPY_ARRAY_CARRAY_RO);
    }
    if (raw == NULL) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError)) {
            return NULL;
        }
        PyErr_Clear();
        return bad_ints(func, arg, obj);
    }
    if (PyArray_NDIM(raw) == 0 && !PyArray_Check(obj)) {
        Py_DECREF(raw);
        return bad_ints(func, arg, obj);
    }
    if (PyArray_NDIM(raw) != 1) {
        PyErr_Format(PyExc_ValueError, "%s(): %s must be 1-D, got %d "
                     "dimensions", func, arg, PyArray_NDIM(raw));
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
    if (arr == NULL && !PyErr_ExceptionMatches(PyExc_MemoryError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "%s(): %s must convert to int64 without loss, got "
                     "dtype %R", func, arg, PyArray_DESCR(raw));
    }
    Py_DECREF(raw);
    return arr;
}

/* A 1-D bool array from obj (bool dtype only; empty: any dtype). */
static PyArrayObject *
mask_arg(PyObject *obj, const char *func, const char *arg)
{
    PyArrayObject *raw;
    npy_intp zero = 0;

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
    if (PyArray_NDIM(raw) != 1
            || (PyArray_SIZE(raw) > 0 && !PyArray_ISBOOL(raw))) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): %s must be a 1-D bool array, got %d-D dtype %R",
                     func, arg, PyArray_NDIM(raw), PyArray_DESCR(raw));
        Py_DECREF(raw);
        return NULL;
    }
    if (!PyArray_ISBOOL(raw)) {
        Py_DECREF(raw);
        return (PyArrayObject *)PyArray_ZEROS(1, &zero, NPY_BOOL, 0);
    }
    return raw;
}

static int
int_arg(PyObject *obj, const char *func, const char *arg, int64_t *out)
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

/* Percentile ranks: a number or a 1-D sequence, each in [0, 100]. */
static PyArrayObject *
qs_arg(PyObject *obj, const char *func, const char *arg)
{
    PyArrayObject *q;
    const double *qv;
    npy_intp j, n;

    q = (PyArrayObject *)PyArray_FROMANY(obj, NPY_FLOAT64, 0, 1,
                                         NPY_ARRAY_CARRAY_RO
                                         | NPY_ARRAY_FORCECAST);
    if (q == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_MemoryError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         "%s(): %s must be a number or a 1-D sequence of "
                         "numbers in [0, 100]", func, arg);
        }
        return NULL;
    }
    qv = (const double *)PyArray_DATA(q);
    n = PyArray_SIZE(q);
    for (j = 0; j < n; j++) {
        if (!(qv[j] >= 0.0 && qv[j] <= 100.0)) {
            PyObject *bad = PyFloat_FromDouble(qv[j]);

            if (bad != NULL) {
                PyErr_Format(PyExc_ValueError,
                             "%s(): %s must be in [0, 100], got %R", func,
                             arg, bad);
                Py_DECREF(bad);
            }
            Py_DECREF(q);
            return NULL;
        }
    }
    return q;
}

static void
release_args(arg_value *out, int nspec)
{
    int i;

    for (i = 0; i < nspec; i++) {
        Py_CLEAR(out[i].arr);
    }
}

/*
 * Parse a METH_FASTCALL | METH_KEYWORDS call against spec.  Every
 * argument may come by position or by name.  On failure: -1, an exception
 * naming func and the argument, nothing left to release.
 */
static int
parse_args(const char *func, const arg_spec *spec, int nspec,
           PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
           arg_value *out)
{
    PyObject *given[MAX_ARGS] = {NULL};
    Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    Py_ssize_t i;
    int k;

    memset(out, 0, (size_t)nspec * sizeof(*out));
    if (nargs > nspec) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %d arguments "
                     "(%zd given)", func, nspec, nargs);
        return -1;
    }
    for (i = 0; i < nargs; i++) {
        given[i] = args[i];
    }
    for (i = 0; i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);

        for (k = 0; k < nspec; k++) {
            if (PyUnicode_CompareWithASCIIString(key, spec[k].name) == 0) {
                break;
            }
        }
        if (k == nspec) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword "
                         "argument %R", func, key);
            return -1;
        }
        if (given[k] != NULL) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for "
                         "argument '%s'", func, spec[k].name);
            return -1;
        }
        given[k] = args[nargs + i];
    }
    for (k = 0; k < nspec; k++) {
        PyObject *obj = given[k];

        if (obj == NULL || (spec[k].optional && obj == Py_None)) {
            if (!spec[k].optional) {
                PyErr_Format(PyExc_TypeError, "%s() missing required "
                             "argument '%s'", func, spec[k].name);
                goto fail;
            }
            continue;
        }
        switch (spec[k].kind) {
            case ARG_INTS:
                out[k].arr = ints_arg(obj, func, spec[k].name);
                break;
            case ARG_MASK:
                out[k].arr = mask_arg(obj, func, spec[k].name);
                break;
            case ARG_QS:
                out[k].arr = qs_arg(obj, func, spec[k].name);
                break;
            case ARG_INT:
                if (int_arg(obj, func, spec[k].name, &out[k].value) < 0) {
                    goto fail;
                }
                continue;
        }
        if (out[k].arr == NULL) {
            goto fail;
        }
    }
    return 0;

fail:
    release_args(out, nspec);
    return -1;
}

/* An optional array argument must match the first one's length. */
static int
same_length(const char *func, const arg_spec *spec, arg_value *out, int k)
{
    npy_intp n = PyArray_SIZE(out[0].arr);

    if (out[k].arr == NULL || PyArray_SIZE(out[k].arr) == n) {
        return 0;
    }
    PyErr_Format(PyExc_ValueError,
                 "%s(): %s must have the length of %s (%zd), got %zd", func,
                 spec[k].name, spec[0].name, (Py_ssize_t)n,
                 (Py_ssize_t)PyArray_SIZE(out[k].arr));
    return -1;
}

static inline const int64_t *
i64(PyArrayObject *arr)
{
    return arr != NULL ? (const int64_t *)PyArray_DATA(arr) : NULL;
}

static inline size_t
len_of(PyArrayObject *arr)
{
    return (size_t)PyArray_SIZE(arr);
}

#define PARSE(func, spec, out)                                             \
    parse_args(func, spec, (int)(sizeof(spec) / sizeof(spec[0])), args,    \
               nargs, kwnames, out)

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

static const arg_spec x_spec[] = {{"x", ARG_INTS, 0}};
static const arg_spec gaps_spec[] = {{"gaps", ARG_INTS, 0}};

/* summary() and totals(): count, sum, mean, min, max of x, and std when
   with_std (the second pass totals() leaves out). */
static PyObject *
summarize(const char *name, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames, int with_std)
{
    arg_value a[1];
    tm_summary s;
    PyObject *sum, *out;

    if (PARSE(name, x_spec, a) < 0) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    tm_summarize(i64(a[0].arr), len_of(a[0].arr), with_std, &s);
    Py_END_ALLOW_THREADS
    release_args(a, 1);
    sum = sum_to_pylong(&s);
    if (sum == NULL) {
        return NULL;
    }
    if (s.count == 0) {
        out = Py_BuildValue("{s:n,s:N,s:d,s:O,s:O}", "count", (Py_ssize_t)0,
                            "sum", sum, "mean", s.mean, "min", Py_None,
                            "max", Py_None);
    }
    else {
        out = Py_BuildValue("{s:n,s:N,s:d,s:L,s:L}", "count", (Py_ssize_t)s.count,
                            "sum", sum, "mean", s.mean, "min", (long long)s.min,
                            "max", (long long)s.max);
    }
    if (out != NULL && with_std) {
        PyObject *std = PyFloat_FromDouble(s.std);

        if (std == NULL || PyDict_SetItemString(out, "std", std) < 0) {
            Py_XDECREF(std);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(std);
    }
    return out;
}

static PyObject *
mod_summary(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames)
{
    (void)module;
    return summarize("summary", args, nargs, kwnames, 1);
}

static PyObject *
mod_totals(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
           PyObject *kwnames)
{
    (void)module;
    return summarize("totals", args, nargs, kwnames, 0);
}

static PyObject *
mod_order_stats(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                PyObject *kwnames)
{
    static const arg_spec spec[] = {{"x", ARG_INTS, 0}, {"k", ARG_INTS, 0}};
    arg_value a[2];
    PyArrayObject *out;
    const int64_t *ks;
    npy_intp nk, n, j;
    int rc;

    (void)module;
    if (PARSE("order_stats", spec, a) < 0) {
        return NULL;
    }
    n = PyArray_SIZE(a[0].arr);
    nk = PyArray_SIZE(a[1].arr);
    ks = i64(a[1].arr);
    for (j = 0; j < nk; j++) {
        if (ks[j] < 0 || ks[j] >= n) {
            PyErr_Format(PyExc_ValueError,
                         "order_stats(): k must be in [0, len(x) - 1] = "
                         "[0, %zd], got %lld", (Py_ssize_t)(n - 1),
                         (long long)ks[j]);
            release_args(a, 2);
            return NULL;
        }
    }
    out = (PyArrayObject *)PyArray_SimpleNew(1, &nk, NPY_INT64);
    if (out == NULL) {
        release_args(a, 2);
        return NULL;
    }
    /* Without the GIL: see percentiles. */
    Py_BEGIN_ALLOW_THREADS
    rc = tm_order_stats(i64(a[0].arr), (size_t)n, ks, (size_t)nk,
                        (int64_t *)PyArray_DATA(out));
    Py_END_ALLOW_THREADS
    release_args(a, 2);
    if (rc < 0) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    return (PyObject *)out;
}

static PyObject *
mod_percentiles(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                PyObject *kwnames)
{
    static const arg_spec spec[] = {{"x", ARG_INTS, 0}, {"q", ARG_QS, 0}};
    arg_value a[2];
    PyArrayObject *out;
    npy_intp nq;
    int scalar, rc;

    (void)module;
    if (PARSE("percentiles", spec, a) < 0) {
        return NULL;
    }
    scalar = PyArray_NDIM(a[1].arr) == 0;
    nq = PyArray_SIZE(a[1].arr);
    out = (PyArrayObject *)PyArray_SimpleNew(1, &nq, NPY_FLOAT64);
    if (out == NULL) {
        release_args(a, 2);
        return NULL;
    }
    /* Without the GIL another thread may write x meanwhile (so may one
       running NumPy code that releases the GIL, whatever we do): the
       selection is written to stay in bounds when x changes between its
       passes; the answer is then meaningless, never a memory error. */
    Py_BEGIN_ALLOW_THREADS
    rc = tm_percentiles(i64(a[0].arr), len_of(a[0].arr),
                        (const double *)PyArray_DATA(a[1].arr), (size_t)nq,
                        (double *)PyArray_DATA(out));
    Py_END_ALLOW_THREADS
    release_args(a, 2);
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
mod_stall_mask(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames)
{
    static const arg_spec spec[] = {{"wait_ns", ARG_INTS, 0},
                                    {"threshold_ns", ARG_INT, 0}};
    arg_value a[2];
    PyArrayObject *mask;
    npy_intp n;

    (void)module;
    if (PARSE("stall_mask", spec, a) < 0) {
        return NULL;
    }
    n = PyArray_SIZE(a[0].arr);
    mask = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_BOOL);
    if (mask != NULL) {
        tm_stall_mask(i64(a[0].arr), (size_t)n, a[1].value,
                      (uint8_t *)PyArray_DATA(mask));
    }
    release_args(a, 2);
    return (PyObject *)mask;
}

static PyObject *
mod_stall_gaps(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames)
{
    static const arg_spec spec[] = {{"mask", ARG_MASK, 0},
                                    {"epoch", ARG_INTS, 1}};
    arg_value a[2];
    PyArrayObject *gaps;
    npy_intp n, ngaps, room;

    (void)module;
    if (PARSE("stall_gaps", spec, a) < 0) {
        return NULL;
    }
    if (same_length("stall_gaps", spec, a, 1) < 0) {
        release_args(a, 2);
        return NULL;
    }
    n = PyArray_SIZE(a[0].arr);
    /* At most stalls - 1 gaps: room for that many, then shrink (a long
       run's mask is mostly False, so this is far less than n). */
    {
        const uint8_t *m = (const uint8_t *)PyArray_DATA(a[0].arr);
        npy_intp i;

        room = 0;
        for (i = 0; i < n; i++) {
            room += m[i] != 0;
        }
    }
    gaps = (PyArrayObject *)PyArray_SimpleNew(1, &room, NPY_INT64);
    if (gaps == NULL) {
        release_args(a, 2);
        return NULL;
    }
    ngaps = (npy_intp)tm_stall_gaps((const uint8_t *)PyArray_DATA(a[0].arr),
                                    i64(a[1].arr), (size_t)n,
                                    (int64_t *)PyArray_DATA(gaps),
                                    (size_t)room);
    release_args(a, 2);
    if (ngaps < room) {
        PyArrayObject *part = (PyArrayObject *)PyArray_SimpleNew(1, &ngaps,
                                                                 NPY_INT64);

        if (part != NULL) {
            memcpy(PyArray_DATA(part), PyArray_DATA(gaps),
                   (size_t)ngaps * sizeof(int64_t));
        }
        Py_DECREF(gaps);
        gaps = part;
    }
    return (PyObject *)gaps;
}

/* values and counts of the distinct gaps, or -1 with an error set. */
static int
histogram_of(PyArrayObject *gaps, PyArrayObject **values,
             PyArrayObject **counts)
{
    npy_intp n = PyArray_SIZE(gaps);
    npy_intp dims[1];
    const int64_t *g = i64(gaps);
    size_t nbins;
    npy_intp i;

    for (i = 0; i < n; i++) {
        if (g[i] < 1) {
            PyErr_Format(PyExc_ValueError,
                         "gaps must be >= 1 (steps between stalls), found "
                         "%lld at index %zd", (long long)g[i], (Py_ssize_t)i);
            return -1;
        }
    }
    /* Room for n bins; the first nbins are kept. */
    dims[0] = n;
    *values = (PyArrayObject *)PyArray_SimpleNew(1, dims, NPY_INT64);
    *counts = (PyArrayObject *)PyArray_SimpleNew(1, dims, NPY_INT64);
    if (*values == NULL || *counts == NULL) {
        Py_CLEAR(*values);
        Py_CLEAR(*counts);
        return -1;
    }
    if (tm_gap_histogram(g, (size_t)n, (int64_t *)PyArray_DATA(*values),
                         (int64_t *)PyArray_DATA(*counts), &nbins) < 0) {
        Py_CLEAR(*values);
        Py_CLEAR(*counts);
        PyErr_NoMemory();
        return -1;
    }
    dims[0] = (npy_intp)nbins;
    {
        PyArray_Dims shape = {dims, 1};
        PyObject *v = PyArray_Resize(*values, &shape, 0, NPY_CORDER);
        PyObject *c = v != NULL ? PyArray_Resize(*counts, &shape, 0,
                                                 NPY_CORDER) : NULL;

        Py_XDECREF(v);
        Py_XDECREF(c);
        if (c == NULL) {
            Py_CLEAR(*values);
            Py_CLEAR(*counts);
            return -1;
        }
    }
    return 0;
}

static PyObject *
mod_gap_histogram(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames)
{
    arg_value a[1];
    PyArrayObject *values, *counts;
    int rc;

    (void)module;
    if (PARSE("gap_histogram", gaps_spec, a) < 0) {
        return NULL;
    }
    rc = histogram_of(a[0].arr, &values, &counts);
    release_args(a, 1);
    if (rc < 0) {
        return NULL;
    }
    return Py_BuildValue("(NN)", values, counts);
}

/* The modal gap of gaps as a Python int, or None without gaps. */
static PyObject *
modal_of(PyArrayObject *gaps)
{
    PyArrayObject *values, *counts;
    PyObject *result;

    if (histogram_of(gaps, &values, &counts) < 0) {
        return NULL;
    }
    if (PyArray_SIZE(values) == 0) {
        result = Py_NewRef(Py_None);
    }
    else {
        size_t b = tm_modal_bin(i64(counts), (size_t)PyArray_SIZE(values));

        result = PyLong_FromLongLong(i64(values)[b]);
    }
    Py_DECREF(values);
    Py_DECREF(counts);
    return result;
}

static PyObject *
mod_modal_gap(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames)
{
    arg_value a[1];
    PyObject *result;

    (void)module;
    if (PARSE("modal_gap", gaps_spec, a) < 0) {
        return NULL;
    }
    result = modal_of(a[0].arr);
    release_args(a, 1);
    return result;
}

static PyObject *
mod_cadence_match(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames)
{
    static const arg_spec spec[] = {{"gaps", ARG_INTS, 0},
                                    {"num_workers", ARG_INT, 0}};
    arg_value a[2];
    PyObject *modal;
    double fraction;
    int64_t k;

    (void)module;
    if (PARSE("cadence_match", spec, a) < 0) {
        return NULL;
    }
    k = a[1].value;
    if (k < 1) {
        release_args(a, 2);
        PyErr_Format(PyExc_ValueError,
                     "cadence_match(): num_workers must be >= 1 (use 1 for a "
                     "loader without workers), got %lld", (long long)k);
        return NULL;
    }
    modal = modal_of(a[0].arr);
    fraction = tm_multiple_fraction(i64(a[0].arr), len_of(a[0].arr), k);
    release_args(a, 2);
    if (modal == NULL) {
        return NULL;
    }
    return Py_BuildValue("{s:O,s:d,s:O}", "modal_gap", modal,
                         "multiple_fraction", fraction, "modal_matches",
                         (modal != Py_None && PyLong_AsLongLong(modal) == k)
                         ? Py_True : Py_False);
}

static PyObject *
mod_autocorr(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames)
{
    static const arg_spec spec[] = {{"x", ARG_INTS, 0}, {"lag", ARG_INT, 0}};
    arg_value a[2];
    double r;

    (void)module;
    if (PARSE("autocorr", spec, a) < 0) {
        return NULL;
    }
    if (a[1].value < 1) {
        release_args(a, 2);
        PyErr_Format(PyExc_ValueError, "autocorr(): lag must be >= 1, got "
                     "%lld", (long long)a[1].value);
        return NULL;
    }
    r = tm_autocorr(i64(a[0].arr), len_of(a[0].arr), (size_t)a[1].value);
    release_args(a, 2);
    return PyFloat_FromDouble(r);
}

static PyObject *
mod_overtaking(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames)
{
    static const arg_spec spec[] = {{"ranks", ARG_INTS, 0},
                                    {"epoch", ARG_INTS, 1}};
    arg_value a[2];
    PyArrayObject *mask;
    npy_intp n;
    int64_t count;

    (void)module;
    if (PARSE("overtaking", spec, a) < 0) {
        return NULL;
    }
    if (same_length("overtaking", spec, a, 1) < 0) {
        release_args(a, 2);
        return NULL;
    }
    n = PyArray_SIZE(a[0].arr);
    mask = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_BOOL);
    if (mask == NULL) {
        release_args(a, 2);
        return NULL;
    }
    count = tm_overtaking(i64(a[0].arr), i64(a[1].arr), (size_t)n,
                          (uint8_t *)PyArray_DATA(mask));
    release_args(a, 2);
    if (count < 0) {
        Py_DECREF(mask);
        return PyErr_NoMemory();
    }
    return (PyObject *)mask;
}

static PyObject *
mod_log_otsu(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames)
{
    arg_value a[1];
    tm_otsu o;
    int rc;

    (void)module;
    if (PARSE("log_otsu", x_spec, a) < 0) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = tm_log_otsu(i64(a[0].arr), len_of(a[0].arr), &o);
    Py_END_ALLOW_THREADS
    release_args(a, 1);
    if (rc < 0) {
        return PyErr_NoMemory();
    }
    return Py_BuildValue("{s:d,s:d,s:d,s:d,s:n}",
                         "threshold_ns", o.threshold, "eta", o.eta,
                         "lower_mean_ns", o.lower_mean,
                         "upper_mean_ns", o.upper_mean,
                         "upper_count", (Py_ssize_t)o.upper_count);
}

static PyObject *
mod_residue_counts(PyObject *module, PyObject *const *args,
                   Py_ssize_t nargs, PyObject *kwnames)
{
    static const arg_spec spec[] = {{"position", ARG_INTS, 0},
                                    {"period", ARG_INT, 0},
                                    {"tested", ARG_MASK, 0},
                                    {"stalled", ARG_MASK, 0}};
    arg_value a[4];
    PyArrayObject *fetches = NULL, *stalls = NULL;
    npy_intp n, dims[1];
    int64_t last = -1;

    (void)module;
    if (PARSE("residue_counts", spec, a) < 0) {
        return NULL;
    }
    if (same_length("residue_counts", spec, a, 2) < 0
            || same_length("residue_counts", spec, a, 3) < 0) {
        release_args(a, 4);
        return NULL;
    }
    if (a[1].value < 1 || a[1].value > PY_SSIZE_T_MAX / 16) {
        PyErr_Format(PyExc_ValueError,
                     "residue_counts(): period must be a positive int, got "
                     "%lld", (long long)a[1].value);
        release_args(a, 4);
        return NULL;
    }
    n = PyArray_SIZE(a[0].arr);
    dims[0] = (npy_intp)a[1].value;
    fetches = (PyArrayObject *)PyArray_SimpleNew(1, dims, NPY_INT64);
    stalls = (PyArrayObject *)PyArray_SimpleNew(1, dims, NPY_INT64);
    if (fetches == NULL || stalls == NULL) {
        Py_XDECREF(fetches);
        Py_XDECREF(stalls);
        release_args(a, 4);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    tm_residue_counts(i64(a[0].arr), (const uint8_t *)PyArray_DATA(a[2].arr),
                      (const uint8_t *)PyArray_DATA(a[3].arr), (size_t)n,
                      a[1].value, (int64_t *)PyArray_DATA(fetches),
                      (int64_t *)PyArray_DATA(stalls), &last);
    Py_END_ALLOW_THREADS
    release_args(a, 4);
    return Py_BuildValue("(NNL)", (PyObject *)fetches, (PyObject *)stalls,
                         (long long)last);
}

/* ------------------------------------------------------------------ */
/* the table                                                          */

PyDoc_STRVAR(summary_doc,
"summary(x)\n--\n\nReturns dict.\n\n"
"count, sum (exact int), mean, min, max, std (population, ddof=0, as\n"
"numpy.std) of a 1-D integer array.  Empty input: count 0, sum 0, mean\n"
"and std NaN, min and max None.  Raises TypeError/ValueError naming x\n"
"when x is not a 1-D integer array.");

PyDoc_STRVAR(totals_doc,
"totals(x)\n--\n\nReturns dict.\n\n"
"count, sum (exact int), mean, min and max of a 1-D integer array: the\n"
"values summary(x) gives, in one pass over x (summary's second pass is\n"
"for std).  Empty input: count 0, sum 0, mean NaN, min and max None.\n"
"Raises TypeError/ValueError naming x when x is not a 1-D integer array.");

PyDoc_STRVAR(order_stats_doc,
"order_stats(x, k)\n--\n\nReturns ndarray[int64].\n\n"
"The k[j]-th smallest values of the 1-D integer array x (k: a 1-D\n"
"integer array of 0-based ranks, in any order; the result has its\n"
"shape), as numpy.partition(x, k)[k] gives them, found by selection without copying x (the percentiles'\n"
"histogram and quickselect).  x is not modified.  Raises ValueError when\n"
"a k is outside [0, len(x) - 1] (so always for empty x).");

PyDoc_STRVAR(percentiles_doc,
"percentiles(x, q)\n--\n\nReturns float or ndarray[float64].\n\n"
"Percentiles q (a number or 1-D sequence in [0, 100]) of the 1-D integer\n"
"array x by numpy.percentile's method=\"linear\", found by selection (a\n"
"histogram of the high bits, then quickselect in the buckets holding the\n"
"wanted ranks), not a full sort.  x is not modified.  Empty x gives NaN.\n"
"Raises ValueError naming q when q is outside [0, 100] or NaN.");

PyDoc_STRVAR(stall_mask_doc,
"stall_mask(wait_ns, threshold_ns)\n--\n\nReturns ndarray[bool].\n\n"
"True where wait_ns > threshold_ns (strictly).  Shape of wait_ns.");

PyDoc_STRVAR(stall_gaps_doc,
"stall_gaps(mask, epoch=None)\n--\n\nReturns ndarray[int64].\n\n"
"Steps between consecutive True entries of the 1-D bool mask.  With\n"
"epoch (int array, same length) a gap is only counted between two stalls\n"
"of the same epoch.  Length: stalls - 1 at most.");

PyDoc_STRVAR(gap_histogram_doc,
"gap_histogram(gaps)\n--\n\nReturns (values, counts).\n\n"
"The distinct gaps in ascending order and how often each occurs (two\n"
"int64 arrays of equal length).  Raises ValueError if a gap is < 1.");

PyDoc_STRVAR(modal_gap_doc,
"modal_gap(gaps)\n--\n\nReturns int or None.\n\n"
"The most frequent gap (the smallest on ties); None when gaps is empty.");

PyDoc_STRVAR(cadence_match_doc,
"cadence_match(gaps, num_workers)\n--\n\nReturns dict.\n\n"
"How well stall gaps follow a worker count k = num_workers (>= 1):\n"
"modal_gap, multiple_fraction (share of gaps that are multiples of k;\n"
"NaN without gaps) and modal_matches (modal gap == k).");

PyDoc_STRVAR(autocorr_doc,
"autocorr(x, lag)\n--\n\nReturns float.\n\n"
"Autocorrelation of the 1-D integer array x at lag (>= 1), as Box and\n"
"Jenkins estimate it: sum((x[t]-m)(x[t+lag]-m)) / sum((x[t]-m)**2) with\n"
"m the mean.  NaN when len(x) <= lag or x is constant.  Near 1 at the\n"
"stall period of a periodic input wait.");

PyDoc_STRVAR(overtaking_doc,
"overtaking(ranks, epoch=None)\n--\n\nReturns ndarray[bool].\n\n"
"Per delivery (ranks: each delivered batch's position in its epoch's\n"
"sampler order, -1 if unknown): True when some lower rank had not been\n"
"delivered yet, i.e. this batch overtook it.  With epoch (same length)\n"
"each epoch is judged on its own.  0 overtakes with in_order=True.");

PyDoc_STRVAR(log_otsu_doc,
"log_otsu(x)\n--\n\nReturns dict.\n\n"
"Otsu's (1979) two-class split of log(x) (values < 1 count as 1):\n"
"threshold_ns (geometric midpoint across the split), eta (between-class\n"
"share of the variance; a single Gaussian reaches at most 2/pi = 0.64),\n"
"lower_mean_ns and upper_mean_ns (geometric class means) and\n"
"upper_count.  NaN fields when x has fewer than two distinct values.\n"
"Exact, not approximated: over 65536 values a log-spaced histogram finds\n"
"the split (every split at a bin boundary exactly, and the few bins whose\n"
"inside could do better sorted and scanned), which is the split a full\n"
"sort finds; eta and the means may differ from it in the last bits only\n"
"(sums in another order).");

PyDoc_STRVAR(residue_counts_doc,
"residue_counts(position, period, tested, stalled)\n--\n\n"
"Returns (fetches, stalls, last).\n\n"
"Counts by residue mod period (an int >= 1) of the 1-D integer array\n"
"position, over the entries where the bool array tested is True and\n"
"position >= 0: fetches[r] (int64, shape (period,)) counts them at\n"
"residue r, stalls[r] those where the bool array stalled is True too;\n"
"last is their largest position (-1: none).  As numpy.bincount(position\n"
"[tested] % period) and the same over tested & stalled, in one pass\n"
"without copies.  tested and stalled have position's length.  Raises\n"
"ValueError naming period when it is below 1, and naming tested or\n"
"stalled on a length that differs.");

#define REDUCER(name, doc)                                                 \
    {#name, (PyCFunction)(void (*)(void))mod_##name,                       \
     METH_FASTCALL | METH_KEYWORDS, doc}

PyMethodDef tm_reduce_methods[] = {
    REDUCER(summary, summary_doc),
    REDUCER(totals, totals_doc),
    REDUCER(percentiles, percentiles_doc),
    REDUCER(order_stats, order_stats_doc),
    REDUCER(stall_mask, stall_mask_doc),
    REDUCER(stall_gaps, stall_gaps_doc),
    REDUCER(gap_histogram, gap_histogram_doc),
    REDUCER(modal_gap, modal_gap_doc),
    REDUCER(cadence_match, cadence_match_doc),
    REDUCER(autocorr, autocorr_doc),
    REDUCER(overtaking, overtaking_doc),
    REDUCER(log_otsu, log_otsu_doc),
    REDUCER(residue_counts, residue_counts_doc),
    {NULL, NULL, 0, NULL},
};
