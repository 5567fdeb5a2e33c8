/*
 * A stand-in for libnvidia-ml.so.1, for tests/integration/test_nvml.py only: compiled
 * into the test's tmp_path and handed to traceml by path (traceml.gpu's
 * private _NVML_LIBRARY), so it is never found by the dynamic loader's
 * search and never picked up outside the tests.
 *
 * It serves the five NVML functions traceml uses, with NVML's documented
 * signatures and return codes, over a script the test writes through the
 * exported fake_nvml_* functions (called with ctypes on the same loaded
 * object: dlopen() of one path gives one handle):
 *
 *   fake_nvml_push(value)      the "driver" takes a sample now (wall clock,
 *                              us, as NVML stamps them); returns its stamp
 *   fake_nvml_push_at(t, v)    ... at a given stamp
 *   fake_nvml_fail(name, code) the named function returns the NVML error
 *                              code from now on (0: succeeds again)
 *   fake_nvml_set_uuid(uuid)   the one device's UUID
 *   fake_nvml_count(name)      how many times a function was called
 *   fake_nvml_reset()          forget the samples, failures and counts
 *
 * nvmlDeviceGetSamples returns the samples stamped after lastSeenTimeStamp
 * and not after now (a driver reveals only samples taken), NVML's
 * NOT_FOUND when there is none.  Built with -DFAKE_NVML_NO_SAMPLES it lacks
 * nvmlDeviceGetSamples, for the missing-symbol test.
 */
#include <pthread.h>
#include <string.h>
#include <sys/time.h>

#define MAX_SAMPLES 65536

typedef union {
    double dVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
} value_t;

typedef struct {
    unsigned long long timeStamp;
    value_t sampleValue;
} sample_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long stamps[MAX_SAMPLES];
static unsigned int values[MAX_SAMPLES];
static int nsamples;
static char uuid[128] = "GPU-00000000-fake-4000-8000-000000000000";
static int device_token;

enum { F_INIT, F_SHUTDOWN, F_HANDLE, F_SAMPLES, F_N };
static const char *const names[F_N] = {
    "nvmlInit_v2", "nvmlShutdown", "nvmlDeviceGetHandleByUUID",
    "nvmlDeviceGetSamples"};
static int fails[F_N];
static int counts[F_N];

static int
index_of(const char *name)
{
    int i;

    for (i = 0; i < F_N; i++) {
        if (strcmp(names[i], name) == 0) {
            return i;
        }
    }
    return -1;
}

static unsigned long long
now_us(void)
{
    struct timeval tv;

    gettimeofday(&tv, NULL);
    return (unsigned long long)tv.tv_sec * 1000000ULL
           + (unsigned long long)tv.tv_usec;
}

/* Count the call; the scripted error code, or 0. */
static int
enter(int f)
{
    int code;

    pthread_mutex_lock(&mu);
    counts[f]++;
    code = fails[f];
    pthread_mutex_unlock(&mu);
    return code;
}

/* --- NVML ------------------------------------------------------------- */

int
nvmlInit_v2(void)
{
    return enter(F_INIT);
}

int
nvmlShutdown(void)
{
    return enter(F_SHUTDOWN);
}

const char *
nvmlErrorString(int code)
{
    switch (code) {
    case 0: return "Success";
    case 3: return "Not Supported";
    case 6: return "Not Found";
    case 9: return "Driver Not Loaded";
    case 15: return "GPU is lost";
    default: return "Unknown Error";
    }
}

int
nvmlDeviceGetHandleByUUID(const char *want, void **device)
{
    int code = enter(F_HANDLE);

    if (code != 0) {
        return code;
    }
    if (strcmp(want, uuid) != 0) {
        return 6;   /* NVML_ERROR_NOT_FOUND */
    }
    *device = &device_token;
    return 0;
}

#ifndef FAKE_NVML_NO_SAMPLES
int
nvmlDeviceGetSamples(void *device, int type, unsigned long long last_seen,
                     int *value_type, unsigned int *count, sample_t *out)
{
    int code = enter(F_SAMPLES), i;
    unsigned int n = 0;
    unsigned long long now = now_us();

    if (code != 0) {
        return code;
    }
    if (device != &device_token || type != 1 || count == NULL
            || value_type == NULL) {
        return 2;   /* NVML_ERROR_INVALID_ARGUMENT */
    }
    *value_type = 1;   /* NVML_VALUE_TYPE_UNSIGNED_INT */
    pthread_mutex_lock(&mu);
    for (i = 0; i < nsamples; i++) {
        if (stamps[i] <= last_seen || stamps[i] > now) {
            continue;
        }
        if (out != NULL) {
            if (n == *count) {
                break;
            }
            memset(&out[n], 0, sizeof(out[n]));
            out[n].timeStamp = stamps[i];
            out[n].sampleValue.uiVal = values[i];
        }
        n++;
    }
    pthread_mutex_unlock(&mu);
    *count = n;
    return n == 0 ? 6 : 0;   /* NVML_ERROR_NOT_FOUND: none since */
}
#endif

/* --- the test's side ---------------------------------------------------- */

unsigned long long
fake_nvml_push_at(unsigned long long stamp, unsigned int value)
{
    pthread_mutex_lock(&mu);
    if (nsamples < MAX_SAMPLES) {
        stamps[nsamples] = stamp;
        values[nsamples] = value;
        nsamples++;
    }
    pthread_mutex_unlock(&mu);
    return stamp;
}

unsigned long long
fake_nvml_push(unsigned int value)
{
    return fake_nvml_push_at(now_us(), value);
}

int
fake_nvml_fail(const char *name, int code)
{
    int f = index_of(name);

    if (f < 0) {
        return -1;
    }
    pthread_mutex_lock(&mu);
    fails[f] = code;
    pthread_mutex_unlock(&mu);
    return 0;
}

void
fake_nvml_set_uuid(const char *text)
{
    pthread_mutex_lock(&mu);
    strncpy(uuid, text, sizeof(uuid) - 1);
    uuid[sizeof(uuid) - 1] = '\0';
    pthread_mutex_unlock(&mu);
}

int
fake_nvml_count(const char *name)
{
    int f = index_of(name), n;

    if (f < 0) {
        return -1;
    }
    pthread_mutex_lock(&mu);
    n = counts[f];
    pthread_mutex_unlock(&mu);
    return n;
}

void
fake_nvml_reset(void)
{
    pthread_mutex_lock(&mu);
    nsamples = 0;
    memset(fails, 0, sizeof(fails));
    memset(counts, 0, sizeof(counts));
    pthread_mutex_unlock(&mu);
}
