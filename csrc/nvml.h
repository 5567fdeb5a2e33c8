/*
 * GPU utilisation from NVML, read on the sampler thread (see sampler.h).
 *
 * libnvidia-ml is loaded at run time with dlopen() (no build-time
 * dependency on a CUDA toolkit or driver): the library path comes from the
 * caller (traceml.gpu passes "libnvidia-ml.so.1"; the tests a fake built
 * from tests/fake_nvml.c).  The few NVML types and prototypes used are
 * declared here from NVIDIA's documented API (nvml.h of the NVML API
 * reference: nvmlInit_v2, nvmlShutdown, nvmlErrorString,
 * nvmlDeviceGetHandleByUUID, nvmlDeviceGetSamples).
 *
 * What is read: nvmlDeviceGetSamples(NVML_GPU_UTILIZATION_SAMPLES,
 * last_seen, ...), the driver's own timestamped samples, each the percent
 * of the driver's sample window (between 1/6 s and 1 s depending on the
 * product) during which a kernel ran on the GPU.  Reading them every
 * period_ns (0.5 s by default, traceml.gpu) loses none while the driver's
 * buffer holds them, and each keeps its own timestamp; polling
 * nvmlDeviceGetUtilizationRates at the sampler's 20 ms period instead
 * would give the same smoothed value over and over, stamped with the time
 * of the poll.  The resolution is the driver's window: an input wait
 * shorter than it cannot be told apart.
 *
 * Timestamps: NVML stamps samples with the wall clock (CLOCK_REALTIME, us).
 * Each read converts them to traceml's clock (CLOCK_MONOTONIC ns) with the
 * offset between the two clocks taken at that read: the tightest of three
 * bracketed readings (error at most half the bracket, well under a
 * microsecond unless the thread is preempted in all three), plus whatever
 * NTP slewed the wall clock between the sample and the read (at most
 * 500 ppm: 0.25 ms over a 0.5 s period).  A step of the wall clock
 * (settimeofday) between a sample and its read misplaces that read's
 * samples by the step.
 *
 * Everything fails soft: no library, a missing symbol or an NVML error
 * leaves the state TM_NVML_UNAVAILABLE with the reason in `error`; the
 * sampler's timing and /proc readings are never affected.
 *
 * No Python here: memory from PyMem_Raw* (tracemalloc sees it); the
 * sampler's lock guards every field of tm_nvml (the thread reads it under
 * that lock); tm_nvml_open() runs with no lock and no GIL.
 */
#ifndef TRACEML_NVML_H
#define TRACEML_NVML_H

#include <stddef.h>
#include <stdint.h>

/* --- the part of NVML's API used (values as in NVIDIA's nvml.h) --------- */
typedef int tm_nvmlReturn_t;
typedef struct tm_nvmlDevice_st *tm_nvmlDevice_t;
typedef union {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    unsigned short usVal;
} tm_nvmlValue_t;
typedef struct {
    unsigned long long timeStamp;   /* CPU timestamp, us of the wall clock */
    tm_nvmlValue_t sampleValue;
} tm_nvmlSample_t;

#define TM_NVML_SUCCESS 0
#define TM_NVML_ERROR_NOT_FOUND 6       /* GetSamples: no sample since */
#define TM_NVML_GPU_UTILIZATION_SAMPLES 1
enum {
    TM_NVML_VALUE_TYPE_DOUBLE = 0,
    TM_NVML_VALUE_TYPE_UNSIGNED_INT = 1,
    TM_NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
    TM_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
    TM_NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
    TM_NVML_VALUE_TYPE_SIGNED_INT = 5,
    TM_NVML_VALUE_TYPE_UNSIGNED_SHORT = 6,
};

/* --- traceml's side ------------------------------------------------------ */

/* One driver sample. */
typedef struct {
    int64_t t_ns;            /* its timestamp on traceml's clock */
    int64_t driver_us;       /* the driver's own (wall clock, us) */
    double util_pct;         /* percent of the window a kernel ran */
} tm_gpu_sample;

/* Readings kept: 16384, 45 minutes at the driver's fastest 1/6 s, 384 KiB;
   past it the oldest are overwritten and counted. */
#define TM_NVML_RING ((size_t)1 << 14)
/* Samples asked for in one call; a read makes as many calls as the
   driver announced samples. */
#define TM_NVML_BATCH 256
#define TM_NVML_TEXT 256

enum { TM_NVML_OFF = 0, TM_NVML_ON = 1, TM_NVML_UNAVAILABLE = 2 };

/* An opened library and device (lib NULL: none). */
typedef struct {
    void *lib;
    int initialised;         /* nvmlInit_v2 succeeded: shut down on close */
    tm_nvmlReturn_t (*init)(void);
    tm_nvmlReturn_t (*shutdown)(void);
    const char *(*error_string)(tm_nvmlReturn_t);
    tm_nvmlReturn_t (*samples)(tm_nvmlDevice_t, int, unsigned long long,
                               int *, unsigned int *, tm_nvmlSample_t *);
    tm_nvmlDevice_t device;
} tm_nvml_lib;

typedef struct {
    tm_nvml_lib lib;
    int state;               /* TM_NVML_OFF / ON / UNAVAILABLE */
    char error[TM_NVML_TEXT];    /* why unavailable, or why it stopped */
    char library[TM_NVML_TEXT];
    char uuid[TM_NVML_TEXT];
    int64_t period_ns;
    int64_t last_read_ns;
    unsigned long long last_seen_us;
    tm_gpu_sample *ring;
    size_t head;
    size_t len;
    uint64_t overwritten;    /* readings the ring dropped */
    uint64_t dropped;        /* announced by the driver, never returned */
    uint64_t reads;          /* nvmlDeviceGetSamples rounds */
    tm_nvmlSample_t batch[TM_NVML_BATCH];
} tm_nvml;

/* Load `library`, find its symbols, initialise NVML and find the device
   `uuid` into out, with no lock held (dlopen and nvmlInit can take a
   while).  0, or -1 with the reason in why (out closed again). */
int tm_nvml_open(tm_nvml_lib *out, const char *library, const char *uuid,
                 char *why, size_t whylen);
/* Shut NVML down (when it was initialised) and unload the library. */
void tm_nvml_close(tm_nvml_lib *lib);

/* With the sampler's lock held: whether n already reads `uuid` from
   `library`. */
int tm_nvml_is(const tm_nvml *n, const char *library, const char *uuid);
/* With the sampler's lock held: read from lib (taken over and zeroed,
   unless the ring could not be allocated: then -1, unavailable, and lib
   stays the caller's to close) or, when lib->lib is NULL, be unavailable
   for `why`.  *old gets what n held before, for the caller to close after
   unlocking.  Readings of another device are forgotten. */
int tm_nvml_install(tm_nvml *n, tm_nvml_lib *lib, const char *library,
                    const char *uuid, const char *why, int64_t period_ns,
                    tm_nvml_lib *old);
/* With the sampler's lock held: off; *old as above. */
void tm_nvml_stop(tm_nvml *n, tm_nvml_lib *old);
/* The sampler thread, lock held: read the new samples if period_ns has
   passed since the last read (or `force`: the last loop ends, and the
   thread will not tick again until the next one).  Never fails: an NVML
   error makes the state unavailable, with the reason. */
void tm_nvml_tick(tm_nvml *n, int64_t now, int force);
/* With the lock held: copy the readings, oldest first, up to max. */
size_t tm_nvml_copy(const tm_nvml *n, tm_gpu_sample *out, size_t max);
/* Free the ring; shut NVML down and unload it unless in a forked child
   (`in_child`: the driver's state is the parent's). */
void tm_nvml_release(tm_nvml *n, int in_child);

#endif  /* TRACEML_NVML_H */
