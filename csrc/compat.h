/*
 * Version shims, in one place: the current CPython names, defined for the
 * older releases traceml supports (3.10, 3.11).
 */
#ifndef TRACEML_COMPAT_H
#define TRACEML_COMPAT_H

#include <Python.h>

#if PY_VERSION_HEX < 0x030C0000
#include <structmember.h>
#define Py_T_INT T_INT
#define Py_T_ULONGLONG T_ULONGLONG
#define Py_T_LONGLONG T_LONGLONG
#define Py_T_PYSSIZET T_PYSSIZET
#define Py_READONLY READONLY
#endif

/* The raised exception as one object (3.12's API), from the type, value
   and traceback triple of the releases before. */
#if PY_VERSION_HEX < 0x030C0000
static inline PyObject *
PyErr_GetRaisedException(void)
{
    PyObject *type, *value, *tb;

    PyErr_Fetch(&type, &value, &tb);
    if (type == NULL) {
        return NULL;
    }
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL) {
        PyException_SetTraceback(value, tb);
    }
    Py_DECREF(type);
    Py_XDECREF(tb);
    return value;
}

static inline void
PyErr_SetRaisedException(PyObject *exc)
{
    if (exc == NULL) {
        PyErr_Clear();
        return;
    }
    PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(exc)), exc,
                  PyException_GetTraceback(exc));
}
#endif

/* glibc before 2.35 names the thread of a SIGEV_THREAD_ID timer only
   through the union. */
#include <signal.h>
#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

#endif  /* TRACEML_COMPAT_H */
