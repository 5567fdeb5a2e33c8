/*
 * NVML GPU utilisation: loading the library, reading the driver's samples
 * into a ring.  See nvml.h.
 */
#define _GNU_SOURCE
#include <Python.h>

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "nvml.h"

static void
copy_text(char *dst, const char *src)
{
    snprintf(dst, TM_NVML_TEXT, "%s", src != NULL ? src : "");
}

/* "nvmlX: <NVML's own words> (NVML error N)". */
static void
nvml_error(const tm_nvml_lib *lib, const char *func, tm_nvmlReturn_t r,
           char *why, size_t whylen)
{
    const char *text = lib->error_string != NULL ? lib->error_string(r) : NULL;

    snprintf(why, whylen, "%s: %s (NVML error %d)", func,
             text != NULL ? text : "no description", (int)r);
}

void
tm_nvml_close(tm_nvml_lib *lib)
{
    if (lib->lib == NULL) {
        return;
    }
    if (lib->initialised && lib->shutdown != NULL) {
        lib->shutdown();
    }
    dlclose(lib->lib);
    memset(lib, 0, sizeof(*lib));
}

/* dlsym into a function pointer without the object/function pointer cast
   C99 leaves undefined (the POSIX idiom). */
static int
find(tm_nvml_lib *lib, const char *name, void *fn, const char *library,
     char *why, size_t whylen)
{
    void *sym;

    dlerror();
    sym = dlsym(lib->lib, name);
    if (sym == NULL) {
        snprintf(why, whylen, "%s not found in %s", name, library);
        return -1;
    }
    memcpy(fn, &sym, sizeof(sym));
    return 0;
}

int
tm_nvml_open(tm_nvml_lib *out, const char *library, const char *uuid,
             char *why, size_t whylen)
{
    tm_nvmlReturn_t (*by_uuid)(const char *, tm_nvmlDevice_t *) = NULL;
    tm_nvmlReturn_t r;

    memset(out, 0, sizeof(*out));
    out->lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (out->lib == NULL) {
        const char *err = dlerror();

        snprintf(why, whylen, "%s could not be loaded: %s", library,
                 err != NULL ? err : "no reason given");
        return -1;
    }
    /* nvmlErrorString is optional: only the words of errors need it. */
    if (find(out, "nvmlErrorString", &out->error_string, library, why,
             whylen) < 0) {
        out->error_string = NULL;
    }
    if (find(out, "nvmlInit_v2", &out->init, library, why, whylen) < 0
            || find(out, "nvmlShutdown", &out->shutdown, library, why,
                    whylen) < 0
            || find(out, "nvmlDeviceGetHandleByUUID", &by_uuid, library, why,
                    whylen) < 0
            || find(out, "nvmlDeviceGetSamples", &out->samples, library, why,
                    whylen) < 0) {
        tm_nvml_close(out);
        return -1;
    }
    r = out->init();
    if (r != TM_NVML_SUCCESS) {
        nvml_error(out, "nvmlInit_v2", r, why, whylen);
        tm_nvml_close(out);
        return -1;
    }
    out->initialised = 1;
    r = by_uuid(uuid, &out->device);
    if (r != TM_NVML_SUCCESS) {
        char call[TM_NVML_TEXT];

        snprintf(call, sizeof(call), "nvmlDeviceGetHandleByUUID(%.120s)",
                 uuid);
        nvml_error(out, call, r, why, whylen);
        tm_nvml_close(out);
        return -1;
    }
    return 0;
}

static int64_t
read_clock(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + (int64_t)ts.tv_nsec;
}

/* CLOCK_REALTIME minus CLOCK_MONOTONIC, ns: the wall clock read between
   two monotonic reads, the tightest bracket of three (see nvml.h). */
static int64_t
wall_minus_monotonic(void)
{
    int64_t best_gap = INT64_MAX, offset = 0;
    int i;

    for (i = 0; i < 3; i++) {
        int64_t m0 = read_clock(CLOCK_MONOTONIC);
        int64_t w = read_clock(CLOCK_REALTIME);
        int64_t m1 = read_clock(CLOCK_MONOTONIC);

        if (m1 - m0 < best_gap) {
            best_gap = m1 - m0;
            offset = w - (m0 + (m1 - m0) / 2);
        }
    }
    return offset;
}

int
tm_nvml_is(const tm_nvml *n, const char *library, const char *uuid)
{
    return n->state == TM_NVML_ON && strcmp(n->library, library) == 0
           && strcmp(n->uuid, uuid) == 0;
}

int
tm_nvml_install(tm_nvml *n, tm_nvml_lib *lib, const char *library,
                const char *uuid, const char *why, int64_t period_ns,
                tm_nvml_lib *old)
{
    *old = n->lib;
    memset(&n->lib, 0, sizeof(n->lib));
    if (strcmp(n->uuid, uuid) != 0) {
        /* Another device: its readings would be taken for this one's. */
        n->head = 0;
        n->len = 0;
        n->overwritten = 0;
        n->dropped = 0;
        n->reads = 0;
    }
    copy_text(n->library, library);
    copy_text(n->uuid, uuid);
    n->period_ns = period_ns;
    n->last_read_ns = 0;
    if (lib->lib != NULL && n->ring == NULL) {
        n->ring = PyMem_RawCalloc(TM_NVML_RING, sizeof(tm_gpu_sample));
        if (n->ring == NULL) {
            /* lib stays the caller's to close. */
            n->state = TM_NVML_UNAVAILABLE;
            copy_text(n->error, "the readings' ring could not be allocated");
            return -1;
        }
    }
    if (lib->lib == NULL) {
        n->state = TM_NVML_UNAVAILABLE;
        copy_text(n->error, why);
        return 0;
    }
    n->lib = *lib;
    memset(lib, 0, sizeof(*lib));
    n->state = TM_NVML_ON;
    n->error[0] = '\0';
    /* Samples the driver took before now are not this run's. */
    n->last_seen_us = (unsigned long long)(read_clock(CLOCK_REALTIME) / 1000);
    return 0;
}

void
tm_nvml_stop(tm_nvml *n, tm_nvml_lib *old)
{
    *old = n->lib;
    memset(&n->lib, 0, sizeof(n->lib));
    n->state = TM_NVML_OFF;
}

static void
push(tm_nvml *n, const tm_gpu_sample *s)
{
    n->ring[n->head] = *s;
    n->head = (n->head + 1) % TM_NVML_RING;
    if (n->len < TM_NVML_RING) {
        n->len++;
    }
    else {
        n->overwritten++;
    }
}

/* A sample's value as a double, by NVML's value type; NAN if unknown. */
static double
value_of(int type, const tm_nvmlValue_t *v)
{
    switch (type) {
    case TM_NVML_VALUE_TYPE_DOUBLE:
        return v->dVal;
    case TM_NVML_VALUE_TYPE_UNSIGNED_INT:
        return (double)v->uiVal;
    case TM_NVML_VALUE_TYPE_UNSIGNED_LONG:
        return (double)v->ulVal;
    case TM_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
        return (double)v->ullVal;
    case TM_NVML_VALUE_TYPE_SIGNED_LONG_LONG:
        return (double)v->sllVal;
    case TM_NVML_VALUE_TYPE_SIGNED_INT:
        return (double)v->siVal;
    case TM_NVML_VALUE_TYPE_UNSIGNED_SHORT:
        return (double)v->usVal;
    default:
        return NAN;
    }
}

/* An NVML error on the thread: stop reading, say why; readings stay. */
static void
fail(tm_nvml *n, const char *func, tm_nvmlReturn_t r)
{
    nvml_error(&n->lib, func, r, n->error, sizeof(n->error));
    n->state = TM_NVML_UNAVAILABLE;
}

/* Take one batch's samples (count of them, of NVML's value type) into
   the ring; the number taken, or -1 (unavailable: an unknown type). */
static long
take(tm_nvml *n, unsigned int count, int type, int64_t offset,
     unsigned long long *newest)
{
    unsigned int i;
    long taken = 0;

    for (i = 0; i < count; i++) {
        const tm_nvmlSample_t *smp = &n->batch[i];
        tm_gpu_sample out;

        if (smp->timeStamp <= n->last_seen_us
                || smp->timeStamp > (unsigned long long)INT64_MAX / 1000) {
            continue;
        }
        out.util_pct = value_of(type, &smp->sampleValue);
        if (isnan(out.util_pct)) {
            snprintf(n->error, sizeof(n->error),
                     "nvmlDeviceGetSamples: unknown value type %d", type);
            n->state = TM_NVML_UNAVAILABLE;
            return -1;
        }
        out.driver_us = (int64_t)smp->timeStamp;
        out.t_ns = out.driver_us * 1000 - offset;
        push(n, &out);
        taken++;
        if (smp->timeStamp > *newest) {
            *newest = smp->timeStamp;
        }
    }
    return taken;
}

void
tm_nvml_tick(tm_nvml *n, int64_t now, int force)
{
    unsigned int announced = 0, count, round, rounds;
    unsigned long long newest;
    uint64_t got = 0;
    int type = -1;
    int64_t offset;
    tm_nvmlReturn_t r;

    if (n->state != TM_NVML_ON
            || (!force && n->last_read_ns != 0
                && now - n->last_read_ns < n->period_ns)) {
        return;
    }
    n->last_read_ns = now;
    n->reads++;
    /* First the count (samples NULL), then the samples, as NVML asks. */
    r = n->lib.samples(n->lib.device, TM_NVML_GPU_UTILIZATION_SAMPLES,
                       n->last_seen_us, &type, &announced, NULL);
    if (r == TM_NVML_ERROR_NOT_FOUND || (r == TM_NVML_SUCCESS
                                         && announced == 0)) {
        return;   /* no sample since last_seen_us */
    }
    if (r != TM_NVML_SUCCESS) {
        fail(n, "nvmlDeviceGetSamples", r);
        return;
    }
    offset = wall_minus_monotonic();
    /* In batches: each asks for the samples after the newest taken, so a
       driver that returns the oldest first gives the rest to the next
       batch; one that returns the newest first loses the older ones,
       counted in `dropped`. */
    rounds = announced / TM_NVML_BATCH + 2;
    for (round = 0; round < rounds; round++) {
        long taken;

        count = TM_NVML_BATCH;
        r = n->lib.samples(n->lib.device, TM_NVML_GPU_UTILIZATION_SAMPLES,
                           n->last_seen_us, &type, &count, n->batch);
        if (r == TM_NVML_ERROR_NOT_FOUND) {
            break;
        }
        if (r != TM_NVML_SUCCESS) {
            fail(n, "nvmlDeviceGetSamples", r);
            return;
        }
        if (count > TM_NVML_BATCH) {
            count = TM_NVML_BATCH;   /* a library that ignores the bound */
        }
        newest = n->last_seen_us;
        taken = take(n, count, type, offset, &newest);
        if (taken < 0) {
            return;
        }
        got += (uint64_t)taken;
        n->last_seen_us = newest;
        if (count < TM_NVML_BATCH || taken == 0) {
            break;
        }
    }
    if (got < announced) {
        n->dropped += announced - got;
    }
}

size_t
tm_nvml_copy(const tm_nvml *n, tm_gpu_sample *out, size_t max)
{
    size_t k, m = n->len < max ? n->len : max;

    for (k = 0; k < m; k++) {
        out[k] = n->ring[(n->head + TM_NVML_RING - m + k) % TM_NVML_RING];
    }
    return m;
}

void
tm_nvml_release(tm_nvml *n, int in_child)
{
    if (!in_child) {
        tm_nvml_close(&n->lib);
    }
    PyMem_RawFree(n->ring);
    memset(n, 0, sizeof(*n));
}
