/*
 * The sampler's Python face: its settings, its readings as a NumPy array,
 * its stuck events and its state as dicts.  The thread, the ring and the
 * union are in sampler.c; /proc parsing in procfs.c.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define NO_IMPORT_ARRAY
#define PY_ARRAY_UNIQUE_SYMBOL traceml_ARRAY_API
#include <numpy/arrayobject.h>

#include <string.h>

#include "module.h"

/* Most processes sampler_info() lists (watched now, then those that left). */
#define TM_INFO_PROCS 4096

int
tm_build_sample_dtype(tm_state *st)
{
    st->sample_dtype = tm_struct_dtype(
        Py_BuildValue(
            "[(ss)(ss)(ss)(ss)(ss)(ss)(ss)(ss)(ss)(ss)(ss)(ss)(ss)(ss)"
            "(ss)(ss)(ss)]",
            "t_ns", "<i8", "pid", "<i4", "role", "<i4",
            "utime_ticks", "<i8", "stime_ticks", "<i8", "minflt", "<i8",
            "majflt", "<i8", "starttime", "<i8", "read_bytes", "<i8",
            "rchar", "<i8", "cpu_ns", "<i8", "runq_ns", "<i8",
            "state", "<i4", "threads", "<i4", "rss_bytes", "<i8",
            "pss_bytes", "<i8", "uss_bytes", "<i8"),
        sizeof(tm_sample), "tm_sample");
    if (st->sample_dtype == NULL) {
        return -1;
    }
    st->gpu_util_dtype = tm_struct_dtype(
        Py_BuildValue("[(ss)(ss)(ss)]", "t_ns", "<i8", "driver_us", "<i8",
                      "util_pct", "<f8"),
        sizeof(tm_gpu_sample), "tm_gpu_sample");
    return st->gpu_util_dtype != NULL ? 0 : -1;
}

static tm_state *
state_of(PyObject *module)
{
    return (tm_state *)PyModule_GetState(module);
}

static PyObject *
mod_sampler_config(PyObject *module, PyObject *args)
{
    tm_state *st = state_of(module);
    long long period_ns, stuck_ns, memory_ns;
    Py_ssize_t capacity;
    int enabled;

    if (!PyArg_ParseTuple(args, "LLnpL:_sampler_config", &period_ns,
                          &stuck_ns, &capacity, &enabled, &memory_ns)) {
        return NULL;
    }
    if (period_ns < 1000000 || stuck_ns < 0 || capacity < TM_RING_MIN
            || (size_t)capacity > TM_RING_MAX || memory_ns < 0) {
        PyErr_Format(PyExc_ValueError,
                     "_sampler_config(): period >= 1 ms, stuck_after >= 0, "
                     "capacity in [%d, %zu], memory period >= 0", TM_RING_MIN,
                     (size_t)TM_RING_MAX);
        return NULL;
    }
    if (!st->sampler_ok) {
        Py_RETURN_NONE;   /* sampler_info() says why */
    }
    tm_sampler_configure(&st->sampler, enabled, period_ns, stuck_ns,
                         (size_t)capacity, memory_ns);
    Py_RETURN_NONE;
}

static PyObject *
mod_sampler_settings(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    tm_state *st = state_of(module);
    tm_sampler *s = &st->sampler;
    int enabled = 0;
    long long period = 0, stuck = 0, memory = 0;
    Py_ssize_t capacity = 0;

    if (st->sampler_ok) {
        pthread_mutex_lock(&s->lock);
        enabled = s->enabled;
        period = s->period_ns;
        stuck = s->stuck_after_ns;
        memory = s->memory_period_ns;
        capacity = (Py_ssize_t)s->capacity;
        pthread_mutex_unlock(&s->lock);
    }
    return Py_BuildValue("{s:O,s:d,s:d,s:n,s:d}",
                         "sampler", enabled ? Py_True : Py_False,
                         "sampler_period_s", (double)period / 1e9,
                         "stuck_after_s", (double)stuck / 1e9,
                         "sampler_capacity", capacity,
                         "memory_period_s", (double)memory / 1e9);
}

static PyObject *
mod_sampler_shutdown(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    tm_state *st = state_of(module);

    if (st->sampler_ok) {
        Py_BEGIN_ALLOW_THREADS
        tm_sampler_shutdown(&st->sampler);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

static PyObject *
mod_sampler_fail_next_start(PyObject *module, PyObject *arg)
{
    tm_state *st = state_of(module);
    long err = PyLong_AsLong(arg);

    if (err == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (err <= 0 || err > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError,
                        "_sampler_fail_next_start(): errno must be > 0");
        return NULL;
    }
    if (st->sampler_ok) {
        pthread_mutex_lock(&st->sampler.lock);
        st->sampler.inject_errno = (int)err;
        pthread_mutex_unlock(&st->sampler.lock);
    }
    Py_RETURN_NONE;
}

static PyObject *
mod_sampler_fail_next_alloc(PyObject *module, PyObject *arg)
{
    tm_state *st = state_of(module);
    int which;

    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError,
                        "_sampler_fail_next_alloc(): 'ring' or 'tables'");
        return NULL;
    }
    if (PyUnicode_CompareWithASCIIString(arg, "ring") == 0) {
        which = TM_BUF_RING;
    }
    else if (PyUnicode_CompareWithASCIIString(arg, "tables") == 0) {
        which = TM_BUF_TABLES;
    }
    else {
        PyErr_SetString(PyExc_ValueError,
                        "_sampler_fail_next_alloc(): 'ring' or 'tables'");
        return NULL;
    }
    if (st->sampler_ok) {
        pthread_mutex_lock(&st->sampler.lock);
        st->sampler.inject_alloc = which;
        pthread_mutex_unlock(&st->sampler.lock);
    }
    Py_RETURN_NONE;
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
    tm_state *st = state_of(module);
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
    /* Fewer readings than a moment ago (a fork, say): only those copied. */
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
    tm_state *st = state_of(module);
    tm_stuck ev[TM_MAX_STUCK];
    size_t n, i;
    PyObject *list;

    n = st->sampler_ok ? tm_sampler_copy_stuck(&st->sampler, ev, TM_MAX_STUCK)
                       : 0;
    list = PyList_New((Py_ssize_t)n);
    if (list == NULL) {
        return NULL;
    }
    for (i = 0; i < n; i++) {
        char state[2] = {(char)ev[i].state, '\0'};
        PyObject *d = Py_BuildValue(
            "{s:L,s:L,s:L,s:L,s:k,s:i,s:i,s:L,s:L,s:i,s:i,s:s,s:L,s:L}",
            "since_ns", (long long)ev[i].since_ns,
            "detected_ns", (long long)ev[i].detected_ns,
            "last_ns", (long long)ev[i].last_ns,
            "ended_ns", (long long)ev[i].ended_ns,
            "recorder", (unsigned long)ev[i].recorder,
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
procs_list(const tm_watched *procs, size_t n)
{
    PyObject *plist = PyList_New((Py_ssize_t)n);
    size_t i;

    if (plist == NULL) {
        return NULL;
    }
    for (i = 0; i < n; i++) {
        PyObject *d = Py_BuildValue(
            "{s:i,s:i,s:L,s:K,s:{s:N,s:N,s:N,s:N,s:N}}",
            "pid", procs[i].pid, "role", procs[i].role,
            "exited_ns", (long long)procs[i].exited_ns,
            "threads_skipped", (unsigned long long)procs[i].threads_skipped,
            "errors",
            "stat", errno_text(procs[i].err[TM_FILE_STAT]),
            "io", errno_text(procs[i].err[TM_FILE_IO]),
            "schedstat", errno_text(procs[i].err[TM_FILE_SCHEDSTAT]),
            "smaps_rollup", errno_text(procs[i].err[TM_FILE_SMAPS]),
            "task", errno_text(procs[i].err[TM_FILE_TASK]));

        if (d == NULL) {
            Py_DECREF(plist);
            return NULL;
        }
        PyList_SET_ITEM(plist, (Py_ssize_t)i, d);
    }
    return plist;
}

static PyObject *
mod_sampler_info(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    tm_state *st = state_of(module);
    tm_sampler *s = &st->sampler;
    tm_watched *procs;
    size_t n = 0;
    PyObject *plist, *error;
    int enabled = 0, sampling = 0;
    unsigned long long ticks = 0, overwritten = 0, dropped_watch = 0;
    long long busy = 0, run = 0, period = 0, stuck = 0;
    Py_ssize_t len = 0, cap = 0, capacity = 0, entries = 0, nprocs = 0;
    int start_errno = 0, host_errno = 0;
    const char *start_what = NULL;
    PyObject *host_error;

    procs = PyMem_Malloc(TM_INFO_PROCS * sizeof(tm_watched));
    if (procs == NULL) {
        return PyErr_NoMemory();
    }
    if (st->sampler_ok) {
        n = tm_sampler_copy_procs(s, procs, TM_INFO_PROCS);
        pthread_mutex_lock(&s->lock);
        enabled = s->enabled;
        sampling = s->thread_alive && s->nentries > 0;
        ticks = s->ticks;
        overwritten = s->overwritten;
        dropped_watch = s->dropped_watch;
        busy = s->busy_ns;
        run = s->run_ns + (s->nentries > 0 ? tm_clock_ns() - s->started_ns
                                           : 0);
        period = s->period_ns;
        stuck = s->stuck_after_ns;
        capacity = (Py_ssize_t)s->capacity;
        len = (Py_ssize_t)s->len;
        cap = (Py_ssize_t)s->cap;
        entries = (Py_ssize_t)s->nentries;
        nprocs = (Py_ssize_t)s->nprocs;
        start_errno = s->start_errno;
        start_what = s->start_what;
        host_errno = s->host_errno;
        pthread_mutex_unlock(&s->lock);
    }
    plist = procs_list(procs, n);
    PyMem_Free(procs);
    if (plist == NULL) {
        return NULL;
    }
    if (!st->sampler_ok) {
        error = PyUnicode_FromString("the sampler's lock could not be "
                                     "initialised");
    }
    else if (start_errno != 0) {
        error = PyUnicode_FromFormat("%s failed: %s (errno %d)",
                                     start_what ? start_what : "start",
                                     strerror(start_errno), start_errno);
    }
    else {
        error = Py_NewRef(Py_None);
    }
    if (error == NULL) {
        Py_DECREF(plist);
        return NULL;
    }
    host_error = host_errno == 0 ? Py_NewRef(Py_None)
        : PyUnicode_FromFormat("/proc/stat: %s (errno %d)",
                               strerror(host_errno), host_errno);
    if (host_error == NULL) {
        Py_DECREF(error);
        Py_DECREF(plist);
        return NULL;
    }
    return Py_BuildValue(
        "{s:O,s:O,s:d,s:d,s:n,s:K,s:d,s:d,s:n,s:n,s:K,s:K,s:n,s:n,s:N,s:N,"
        "s:N}",
        "enabled", enabled ? Py_True : Py_False,
        "running", sampling ? Py_True : Py_False,
        "period_s", (double)period * 1e-9,
        "stuck_after_s", (double)stuck / 1e9,
        "capacity", capacity,
        "ticks", ticks, "busy_s", (double)busy * 1e-9,
        "run_s", (double)run * 1e-9, "samples", len, "ring", cap,
        "overwritten", overwritten, "dropped_watch", dropped_watch,
        "active_loops", entries, "watched_procs", nprocs,
        "error", error, "host_error", host_error, "procs", plist);
}

/* ------------------------------------------------------------------ */
/* NVML GPU utilisation (nvml.c)                                      */

/* A str argument as UTF-8 that fits TM_NVML_TEXT and holds no NUL; NULL
   with an error naming it. */
static const char *
text_arg(PyObject *obj, const char *name)
{
    const char *text;
    Py_ssize_t size;

    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "_nvml_start(): %s must be a str, "
                     "not %.100s", name, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    text = PyUnicode_AsUTF8AndSize(obj, &size);
    if (text == NULL) {
        return NULL;
    }
    if (size == 0 || size >= TM_NVML_TEXT || strlen(text) != (size_t)size) {
        PyErr_Format(PyExc_ValueError, "_nvml_start(): %s must be 1 to %d "
                     "characters without NUL", name, TM_NVML_TEXT - 1);
        return NULL;
    }
    return text;
}

static PyObject *
mod_nvml_start(PyObject *module, PyObject *args)
{
    tm_state *st = state_of(module);
    PyObject *library_obj, *uuid_obj;
    const char *library, *uuid;
    char library_copy[TM_NVML_TEXT], uuid_copy[TM_NVML_TEXT];
    char why[TM_NVML_TEXT] = "";
    long long period_ns;
    tm_nvml_lib lib, old;
    int already;

    if (!PyArg_ParseTuple(args, "OOL:_nvml_start", &library_obj, &uuid_obj,
                          &period_ns)) {
        return NULL;
    }
    library = text_arg(library_obj, "library");
    uuid = library != NULL ? text_arg(uuid_obj, "uuid") : NULL;
    if (uuid == NULL) {
        return NULL;
    }
    if (period_ns < 1000000 || period_ns > INT64_C(3600000000000)) {
        PyErr_SetString(PyExc_ValueError,
                        "_nvml_start(): period_ns must be 1 ms to 1 hour");
        return NULL;
    }
    if (!st->sampler_ok) {
        Py_RETURN_NONE;   /* sampler_info() says why */
    }
    pthread_mutex_lock(&st->sampler.lock);
    already = tm_nvml_is(&st->sampler.nvml, library, uuid);
    if (already) {
        st->sampler.nvml.period_ns = period_ns;
    }
    pthread_mutex_unlock(&st->sampler.lock);
    if (already) {
        Py_RETURN_NONE;
    }
    /* Copies: the str objects' buffers are not to be read without the
       GIL. */
    snprintf(library_copy, sizeof(library_copy), "%s", library);
    snprintf(uuid_copy, sizeof(uuid_copy), "%s", uuid);
    Py_BEGIN_ALLOW_THREADS
    tm_nvml_open(&lib, library_copy, uuid_copy, why, sizeof(why));
    pthread_mutex_lock(&st->sampler.lock);
    tm_nvml_install(&st->sampler.nvml, &lib, library_copy, uuid_copy, why,
                    period_ns, &old);
    pthread_mutex_unlock(&st->sampler.lock);
    tm_nvml_close(&old);
    tm_nvml_close(&lib);    /* not taken: the ring could not be had */
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *
mod_nvml_stop(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    tm_state *st = state_of(module);
    tm_nvml_lib old;

    if (!st->sampler_ok) {
        Py_RETURN_NONE;
    }
    pthread_mutex_lock(&st->sampler.lock);
    tm_nvml_stop(&st->sampler.nvml, &old);
    pthread_mutex_unlock(&st->sampler.lock);
    Py_BEGIN_ALLOW_THREADS
    tm_nvml_close(&old);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *
mod_gpu_util_samples(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    tm_state *st = state_of(module);
    tm_gpu_sample *buf = NULL;
    PyArrayObject *arr;
    size_t len = 0;
    npy_intp n = 0;

    if (st->sampler_ok) {
        pthread_mutex_lock(&st->sampler.lock);
        len = st->sampler.nvml.len;
        pthread_mutex_unlock(&st->sampler.lock);
    }
    if (len > 0) {
        /* No Python allocation under the lock: a buffer, then the array. */
        buf = PyMem_Malloc(len * sizeof(tm_gpu_sample));
        if (buf == NULL) {
            return PyErr_NoMemory();
        }
        pthread_mutex_lock(&st->sampler.lock);
        n = (npy_intp)tm_nvml_copy(&st->sampler.nvml, buf, len);
        pthread_mutex_unlock(&st->sampler.lock);
    }
    Py_INCREF(st->gpu_util_dtype);
    arr = (PyArrayObject *)PyArray_NewFromDescr(
        &PyArray_Type, (PyArray_Descr *)st->gpu_util_dtype, 1, &n, NULL, NULL,
        0, NULL);
    if (arr != NULL && n > 0) {
        memcpy(PyArray_DATA(arr), buf, (size_t)n * sizeof(tm_gpu_sample));
    }
    PyMem_Free(buf);
    return (PyObject *)arr;
}

static PyObject *
mod_gpu_util_info(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    static const char *const states[] = {"off", "on", "unavailable"};
    tm_state *st = state_of(module);
    tm_nvml *n = &st->sampler.nvml;
    char error[TM_NVML_TEXT] = "", library[TM_NVML_TEXT] = "";
    char uuid[TM_NVML_TEXT] = "";
    int state = TM_NVML_OFF;
    long long period = 0;
    unsigned long long overwritten = 0, dropped = 0, reads = 0;
    Py_ssize_t len = 0;

    if (st->sampler_ok) {
        pthread_mutex_lock(&st->sampler.lock);
        state = n->state;
        memcpy(error, n->error, sizeof(error));
        memcpy(library, n->library, sizeof(library));
        memcpy(uuid, n->uuid, sizeof(uuid));
        period = n->period_ns;
        overwritten = n->overwritten;
        dropped = n->dropped;
        reads = n->reads;
        len = (Py_ssize_t)n->len;
        pthread_mutex_unlock(&st->sampler.lock);
    }
    else {
        state = TM_NVML_UNAVAILABLE;
        snprintf(error, sizeof(error), "the sampler's lock could not be "
                 "initialised");
    }
    return Py_BuildValue(
        "{s:s,s:z,s:z,s:z,s:d,s:n,s:n,s:K,s:K,s:K}",
        "state", states[state], "error", error[0] ? error : NULL,
        "library", library[0] ? library : NULL,
        "uuid", uuid[0] ? uuid : NULL, "period_s", (double)period * 1e-9,
        "readings", len, "ring", (Py_ssize_t)TM_NVML_RING,
        "overwritten", overwritten, "dropped", dropped, "reads", reads);
}

PyMethodDef tm_sampler_methods[] = {
    {"_sampler_config", mod_sampler_config, METH_VARARGS,
     "_sampler_config(period_ns, stuck_after_ns, capacity, enabled, memory_period_ns)"},
    {"_sampler_settings", mod_sampler_settings, METH_NOARGS,
     "The settings in force, in configure()'s names: sampler,\n"
     "sampler_period_s, stuck_after_s, sampler_capacity, memory_period_s.\n"
     "Their defaults\n"
     "live in sampler.c alone."},
    {"_sampler_shutdown", mod_sampler_shutdown, METH_NOARGS,
     "Stop and join the sampler thread (the GIL released meanwhile); the\n"
     "next watched loop starts a new one."},
    {"_sampler_fail_next_start", mod_sampler_fail_next_start, METH_O,
     "Testing hook: the next start of the sampler thread fails with this\n"
     "errno (after _sampler_shutdown(), the next watched loop's)."},
    {"_sampler_fail_next_alloc", mod_sampler_fail_next_alloc, METH_O,
     "Testing hook: the next allocation of the sampler's 'ring' (made when\n"
     "a watched loop starts and the capacity has changed) or of its process\n"
     "'tables' (made once, by the first watched loop of a process) fails\n"
     "as if memory had run out."},
    {"sampler_samples", mod_sampler_samples, METH_NOARGS,
     "sampler_samples()\n--\n\nReturns ndarray[SAMPLE_DTYPE].\n\n"
     "A copy of the sampler's ring, oldest reading first, every watched\n"
     "process.  Counters that could not be read are -1 (see\n"
     "sampler_info()['procs'][i]['errors']).  cpu_ns and runq_ns sum the\n"
     "schedstat of the process's threads (/proc/PID/task/*, at most 64 of\n"
     "them, `threads` in that reading; a thread's growth since the reading\n"
     "before, so they never go back when one exits); state is R when any\n"
     "of those threads runs or waits for a CPU, else D when any is in\n"
     "uninterruptible sleep, else the main thread's.  The sampler's own\n"
     "thread is left out of its process's figures.  Each round also reads\n"
     "the host as pid 0, role -2 (HOST_ROLE): /proc/stat's busy time of\n"
     "every core in cpu_ns (user, nice, system, irq, softirq and steal, at\n"
     "clock-tick resolution), its other counters -1."},
    {"sampler_stuck", mod_sampler_stuck, METH_NOARGS,
     "sampler_stuck()\n--\n\nReturns list[dict].\n\n"
     "Fetches that waited longer than stuck_after: since_ns, detected_ns,\n"
     "last_ns, ended_ns (0 while waiting), recorder (its id), source,\n"
     "epoch, step, oldest_rank, worker, pid, state, cpu_ticks_at_since,\n"
     "cpu_ticks_last."},
    {"sampler_info", mod_sampler_info, METH_NOARGS,
     "sampler_info()\n--\n\nReturns dict.\n\n"
     "enabled, running (sampling now), period_s, stuck_after_s, capacity,\n"
     "ticks, busy_s (the thread's own CPU time), run_s, samples, ring,\n"
     "overwritten (readings the ring dropped), dropped_watch (loops or\n"
     "processes that could not be watched), active_loops (watch entries),\n"
     "watched_procs, error (why the sampler could not run, or None),\n"
     "host_error (why /proc/stat could not be read, or None) and\n"
     "procs (pid, role, exited_ns, threads_skipped (threads past the 64\n"
     "a reading reads, summed over the readings), errors per file; watched\n"
     "now, then those that left, newest first)."},
    {"_nvml_start", mod_nvml_start, METH_VARARGS,
     "_nvml_start(library, uuid, period_ns): read the GPU utilisation of\n"
     "the NVML device `uuid` from `library` on the sampler thread every\n"
     "period_ns (a private hook of traceml.gpu, which names the library;\n"
     "the GIL is released while it loads).  Never raises for NVML: an\n"
     "unavailable library, symbol or device is in gpu_util_info()."},
    {"_nvml_stop", mod_nvml_stop, METH_NOARGS,
     "Stop reading NVML and unload it; the readings stay."},
    {"gpu_util_samples", mod_gpu_util_samples, METH_NOARGS,
     "gpu_util_samples()\n--\n\nReturns ndarray[GPU_UTIL_DTYPE].\n\n"
     "A copy of the NVML readings, oldest first: t_ns (the driver's\n"
     "timestamp on clock_ns()'s clock), driver_us (its own, wall clock\n"
     "microseconds), util_pct (percent of the driver's sample window\n"
     "during which a kernel ran)."},
    {"gpu_util_info", mod_gpu_util_info, METH_NOARGS,
     "gpu_util_info()\n--\n\nReturns dict.\n\n"
     "state ('off', 'on', 'unavailable'), error (why unavailable, or why\n"
     "reading stopped), library, uuid, period_s, readings (in the ring),\n"
     "ring (its size), overwritten (readings the ring dropped), dropped\n"
     "(samples the driver announced but never returned) and reads\n"
     "(rounds of nvmlDeviceGetSamples calls)."},
    {NULL, NULL, 0, NULL},
};
