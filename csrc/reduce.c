/*
 * Pure reducers over int64 arrays.  See reduce.h for the contracts.
 * Scratch memory comes from PyMem_Raw* (safe without the GIL, and seen by
 * tracemalloc); no Python object is touched.
 */
#include <Python.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reduce.h"

#ifndef __SIZEOF_INT128__
#error "traceml needs a compiler with __int128 for exact int64 sums"
#endif

#define TM_HIST_BITS 16
#define TM_HIST_SIZE ((size_t)1 << TM_HIST_BITS)
/* Below this many values a copy and quickselect beat three histogram passes. */
#define TM_SMALL_N 4096

/* ------------------------------------------------------------------ */
/* summary                                                            */

void
tm_summarize(const int64_t *x, size_t n, int with_std, tm_summary *out)
{
    __int128 sum = 0;
    __int128 shifted = 0;      /* sum of x[i] - x[0]: exact */
    int64_t lo = INT64_MAX;
    int64_t hi = INT64_MIN;
    long double mean_shift;
    long double ss = 0.0L;
    size_t i;

    for (i = 0; i < n; i++) {
        sum += x[i];
        shifted += (__int128)x[i] - x[0];
        if (x[i] < lo) {
            lo = x[i];
        }
        if (x[i] > hi) {
            hi = x[i];
        }
    }
    out->count = n;
    out->sum_hi = (int64_t)(sum >> 64);
    out->sum_lo = (uint64_t)sum;
    if (n == 0) {
        out->min = 0;
        out->max = 0;
        out->mean = NAN;
        out->std = NAN;
        return;
    }
    out->min = lo;
    out->max = hi;
    out->mean = (double)((long double)sum / (long double)n);
    if (!with_std) {
        out->std = NAN;
        return;
    }
    /* Deviations are taken from x[0], where they are exact (|x[i] - x[0]|
       < 2**64 fits the 64-bit long double mantissa), so rounding the mean
       of huge values does not leak into the variance. */
    mean_shift = (long double)shifted / (long double)n;
    for (i = 0; i < n; i++) {
        long double d = (long double)((__int128)x[i] - x[0]) - mean_shift;
        ss += d * d;
    }
    out->std = (double)sqrtl(ss / (long double)n);
}

/* ------------------------------------------------------------------ */
/* selection                                                          */

static int
cmp_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a;
    int64_t y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

static int
cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;

    return (x > y) - (x < y);
}

static int
cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a;
    size_t y = *(const size_t *)b;

    return (x > y) - (x < y);
}

/* Index of rank k in the ascending, distinct ranks (k is known present). */
static size_t
rank_index(const size_t *ranks, size_t nr, size_t k)
{
    size_t lo = 0;
    size_t hi = nr;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (ranks[mid] < k) {
            lo = mid + 1;
        }
        else {
            hi = mid;
        }
    }
    return lo;
}

static inline int64_t
median_of_3(int64_t a, int64_t b, int64_t c)
{
    if (a > b) {
        int64_t t = a;
        a = b;
        b = t;
    }
    if (b > c) {
        b = c;
    }
    return a > b ? a : b;
}

/*
 * Put the k-th smallest of a[lo..hi] at a[k], smaller ones left of it and
 * larger ones right of it (Hoare partitioning as in Wirth's FIND, with a
 * median-of-3 pivot).  After too many rounds, sort the rest: O(n log n)
 * worst case instead of quickselect's O(n^2).
 */
static void
select_kth(int64_t *a, ptrdiff_t lo, ptrdiff_t hi, ptrdiff_t k)
{
    int rounds = 0;
    int max_rounds = 64;
    ptrdiff_t span;

    for (span = hi - lo + 1; span > 1; span >>= 1) {
        max_rounds += 2;
    }
    while (lo < hi) {
        int64_t pivot;
        ptrdiff_t i = lo;
        ptrdiff_t j = hi;

        if (++rounds > max_rounds) {
            qsort(a + lo, (size_t)(hi - lo + 1), sizeof(int64_t), cmp_int64);
            return;
        }
        pivot = median_of_3(a[lo], a[lo + (hi - lo) / 2], a[hi]);
        do {
            while (a[i] < pivot) {
                i++;
            }
            while (pivot < a[j]) {
                j--;
            }
            if (i <= j) {
                int64_t t = a[i];
                a[i] = a[j];
                a[j] = t;
                i++;
                j--;
            }
        } while (i <= j);
        if (j < k) {
            lo = i;
        }
        if (k < i) {
            hi = j;
        }
    }
}

/*
 * Order statistics of x at the ascending, distinct ranks; values into vals.
 * Ranks falling in one slice are selected left to right, each search
 * starting just after the previous rank.
 */
static void
select_ranks_in_slice(int64_t *slice, ptrdiff_t len, const size_t *ranks,
                      size_t nr, size_t base, int64_t *vals)
{
    ptrdiff_t lo = 0;
    size_t r;

    for (r = 0; r < nr; r++) {
        ptrdiff_t k = (ptrdiff_t)(ranks[r] - base);

        select_kth(slice, lo, len - 1, k);
        vals[r] = slice[k];
        lo = k + 1;
    }
}

/* The histogram bucket of v; clamped, so that a value outside [lo, hi]
   (x changed between passes) cannot index past the histogram. */
static inline size_t
bucket_of(int64_t v, int64_t lo, unsigned shift)
{
    uint64_t b = ((uint64_t)v - (uint64_t)lo) >> shift;

    return b < TM_HIST_SIZE ? (size_t)b : TM_HIST_SIZE - 1;
}

/* Whether a gathered slice of len values holds every wanted rank. */
static inline int
slice_holds(size_t len, const size_t *ranks, size_t nr, size_t base)
{
    return nr > 0 && ranks[0] >= base && ranks[nr - 1] - base < len;
}

static int
select_ranks(const int64_t *x, size_t n, const size_t *ranks, size_t nr,
             int64_t *vals)
{
    int64_t lo = INT64_MAX;
    int64_t hi = INT64_MIN;
    uint64_t range;
    unsigned shift = 0;
    size_t *pos = NULL;        /* per bucket: count, then write offset */
    size_t *below = NULL;      /* per rank: values in lower buckets */
    size_t *bucket = NULL;     /* per rank: its bucket */
    size_t *start = NULL;      /* per rank: its bucket's slice in buf */
    int64_t *buf = NULL;
    size_t i, r, b, total, cum;
    int rc = -1;

    if (n <= TM_SMALL_N) {
        buf = PyMem_RawMalloc(n * sizeof(int64_t));
        if (buf == NULL) {
            return -1;
        }
        memcpy(buf, x, n * sizeof(int64_t));
        select_ranks_in_slice(buf, (ptrdiff_t)n, ranks, nr, 0, vals);
        PyMem_RawFree(buf);
        return 0;
    }
    for (i = 0; i < n; i++) {
        if (x[i] < lo) {
            lo = x[i];
        }
        if (x[i] > hi) {
            hi = x[i];
        }
    }
    if (lo == hi) {
        for (r = 0; r < nr; r++) {
            vals[r] = lo;
        }
        return 0;
    }
    range = (uint64_t)hi - (uint64_t)lo;
    while ((range >> shift) >= TM_HIST_SIZE) {
        shift++;
    }
    pos = PyMem_RawCalloc(TM_HIST_SIZE, sizeof(size_t));
    below = PyMem_RawMalloc(nr * sizeof(size_t));
    bucket = PyMem_RawMalloc(nr * sizeof(size_t));
    start = PyMem_RawMalloc(nr * sizeof(size_t));
    if (pos == NULL || below == NULL || bucket == NULL || start == NULL) {
        goto done;
    }
    for (i = 0; i < n; i++) {
        pos[bucket_of(x[i], lo, shift)]++;
    }
    /* One walk of the cumulative counts places every rank in its bucket. */
    cum = 0;
    r = 0;
    for (b = 0; b < TM_HIST_SIZE && r < nr; b++) {
        while (r < nr && ranks[r] < cum + pos[b]) {
            bucket[r] = b;
            below[r] = cum;
            r++;
        }
        cum += pos[b];
    }
    /* Give each wanted bucket a slice of buf. */
    total = 0;
    for (r = 0; r < nr; r++) {
        if (r > 0 && bucket[r] == bucket[r - 1]) {
            start[r] = start[r - 1];
        }
        else {
            start[r] = total;
            total += pos[bucket[r]];
        }
    }
    for (b = 0, r = 0; b < TM_HIST_SIZE; b++) {
        if (r < nr && bucket[r] == b) {
            pos[b] = start[r];
            while (r < nr && bucket[r] == b) {
                r++;
            }
        }
        else {
            pos[b] = SIZE_MAX;
        }
    }
    buf = PyMem_RawMalloc(total * sizeof(int64_t));
    if (buf == NULL) {
        goto done;
    }
    for (i = 0; i < n; i++) {
        size_t *slot = &pos[bucket_of(x[i], lo, shift)];

        /* *slot < total holds unless x changed since the histogram pass
           (a thread writing it without the GIL): then the answer is
           garbage, but every write stays inside buf. */
        if (*slot < total) {
            buf[(*slot)++] = x[i];
        }
    }
    /* After the gather, pos[b] is the end of bucket b's slice.  A slice
       still large (a heavy tail piles values into few buckets) is searched
       the same way again: its range is narrower, so its histogram is
       finer.  Each level divides the range by 2**16: at most 4 levels. */
    rc = 0;
    for (r = 0; r < nr && rc == 0;) {
        size_t g = r;
        size_t len;

        while (r < nr && bucket[r] == bucket[g]) {
            r++;
        }
        len = pos[bucket[g]] - start[g];
        if (!slice_holds(len, ranks + g, r - g, below[g])) {
            /* x changed under us (see the gather): no answer, no harm. */
            for (; g < r; g++) {
                vals[g] = lo;
            }
            continue;
        }
        if (len > TM_SMALL_N && len < n) {
            size_t base = below[g];
            size_t k;

            for (k = g; k < r; k++) {
                below[k] = ranks[k] - base;   /* ranks within the slice */
            }
            rc = select_ranks(buf + start[g], len, below + g, r - g, vals + g);
        }
        else {
            select_ranks_in_slice(buf + start[g], (ptrdiff_t)len,
                                  ranks + g, r - g, below[g], vals + g);
        }
    }

done:
    PyMem_RawFree(buf);
    PyMem_RawFree(pos);
    PyMem_RawFree(below);
    PyMem_RawFree(bucket);
    PyMem_RawFree(start);
    return rc;
}

int
tm_percentiles(const int64_t *x, size_t n, const double *q, size_t nq,
               double *out)
{
    size_t *ranks;
    int64_t *vals;
    size_t nr = 0;
    size_t j, r;
    int rc = 0;

    if (n == 0) {
        for (j = 0; j < nq; j++) {
            out[j] = NAN;
        }
        return 0;
    }
    ranks = PyMem_RawMalloc(2 * nq * sizeof(size_t));
    vals = PyMem_RawMalloc(2 * nq * sizeof(int64_t));
    if (ranks == NULL || vals == NULL) {
        PyMem_RawFree(ranks);
        PyMem_RawFree(vals);
        return -1;
    }
    /* The two neighbours of every virtual index, as numpy's "linear". */
    for (j = 0; j < nq; j++) {
        double h = (double)(n - 1) * (q[j] / 100.0);
        size_t k = (size_t)floor(h);

        if (k > n - 1) {
            k = n - 1;
        }
        ranks[nr++] = k;
        if (k + 1 < n) {
            ranks[nr++] = k + 1;
        }
    }
    qsort(ranks, nr, sizeof(size_t), cmp_size);
    for (r = 0, j = 0; r < nr; r++) {
        if (j == 0 || ranks[r] != ranks[j - 1]) {
            ranks[j++] = ranks[r];
        }
    }
    nr = j;
    if (select_ranks(x, n, ranks, nr, vals) < 0) {
        rc = -1;
        goto done;
    }
    for (j = 0; j < nq; j++) {
        double h = (double)(n - 1) * (q[j] / 100.0);
        double k = floor(h);
        double t = h - k;
        size_t kk = (size_t)k;
        size_t ia, ib;
        long double a, diff;

        if (kk >= n - 1) {
            kk = n - 1;
            t = 0.0;
        }
        ia = rank_index(ranks, nr, kk);
        ib = kk + 1 < n ? rank_index(ranks, nr, kk + 1) : ia;
        a = (long double)vals[ia];
        /* b - a exactly: the difference of two int64 fits in uint64. */
        diff = (long double)((uint64_t)vals[ib] - (uint64_t)vals[ia]);
        /* numpy's _lerp: from the nearer end, so t = 1 gives b exactly. */
        if (t >= 0.5) {
            out[j] = (double)((long double)vals[ib] - diff * (1.0L - t));
        }
        else {
            out[j] = (double)(a + diff * t);
        }
    }

done:
    PyMem_RawFree(ranks);
    PyMem_RawFree(vals);
    return rc;
}

int
tm_order_stats(const int64_t *x, size_t n, const int64_t *ks, size_t nk,
               int64_t *vals)
{
    size_t *ranks;
    int64_t *found;
    size_t nr = 0;
    size_t j, r;
    int rc = 0;

    if (nk == 0) {
        return 0;
    }
    ranks = PyMem_RawMalloc(nk * sizeof(size_t));
    found = PyMem_RawMalloc(nk * sizeof(int64_t));
    if (ranks == NULL || found == NULL) {
        PyMem_RawFree(ranks);
        PyMem_RawFree(found);
        return -1;
    }
    for (j = 0; j < nk; j++) {
        ranks[j] = (size_t)ks[j];
    }
    qsort(ranks, nk, sizeof(size_t), cmp_size);
    for (r = 0; r < nk; r++) {
        if (nr == 0 || ranks[r] != ranks[nr - 1]) {
            ranks[nr++] = ranks[r];
        }
    }
    if (select_ranks(x, n, ranks, nr, found) < 0) {
        rc = -1;
    }
    else {
        for (j = 0; j < nk; j++) {
            vals[j] = found[rank_index(ranks, nr, (size_t)ks[j])];
        }
    }
    PyMem_RawFree(ranks);
    PyMem_RawFree(found);
    return rc;
}

/* ------------------------------------------------------------------ */
/* stalls and their gaps                                              */

size_t
tm_stall_mask(const int64_t *wait_ns, size_t n, int64_t threshold_ns,
              uint8_t *mask)
{
    size_t count = 0;
    size_t i;

    for (i = 0; i < n; i++) {
        mask[i] = wait_ns[i] > threshold_ns;
        count += mask[i];
    }
    return count;
}

size_t
tm_stall_gaps(const uint8_t *mask, const int64_t *epoch, size_t n,
              int64_t *gaps, size_t cap)
{
    size_t ngaps = 0;
    size_t last = 0;
    int64_t last_epoch = 0;
    int have = 0;
    size_t i;

    for (i = 0; i < n; i++) {
        if (!mask[i]) {
            continue;
        }
        if (have && (epoch == NULL || epoch[i] == last_epoch)
                && ngaps < cap) {
            gaps[ngaps++] = (int64_t)(i - last);
        }
        have = 1;
        last = i;
        last_epoch = epoch != NULL ? epoch[i] : 0;
    }
    return ngaps;
}

/*
 * By counting when the values span at most max(n, 65536) (gaps between
 * stalls are small: a period of a few steps), so that a million gaps
 * need no sort; else by sorting a copy.  The scratch is at most the size
 * of that copy either way.
 */
int
tm_gap_histogram(const int64_t *gaps, size_t n, int64_t *values,
                 int64_t *counts, size_t *nbins)
{
    int64_t *sorted;
    int64_t lo = INT64_MAX;
    int64_t hi = INT64_MIN;
    uint64_t span;
    size_t i;
    size_t m = 0;

    *nbins = 0;
    if (n == 0) {
        return 0;
    }
    for (i = 0; i < n; i++) {
        if (gaps[i] < lo) {
            lo = gaps[i];
        }
        if (gaps[i] > hi) {
            hi = gaps[i];
        }
    }
    span = (uint64_t)hi - (uint64_t)lo;
    if (span < (uint64_t)(n > 65536 ? n : 65536)) {
        int64_t *tally = PyMem_RawCalloc((size_t)span + 1, sizeof(int64_t));
        size_t k;

        if (tally == NULL) {
            return -1;
        }
        for (i = 0; i < n; i++) {
            uint64_t k2 = (uint64_t)gaps[i] - (uint64_t)lo;

            /* Bounded: gaps may change between passes (no GIL). */
            if (k2 <= span) {
                tally[k2]++;
            }
        }
        for (k = 0; k <= (size_t)span; k++) {
            if (tally[k] != 0 && m < n) {
                values[m] = (int64_t)((uint64_t)lo + (uint64_t)k);
                counts[m] = tally[k];
                m++;
            }
        }
        PyMem_RawFree(tally);
        *nbins = m;
        return 0;
    }
    sorted = PyMem_RawMalloc(n * sizeof(int64_t));
    if (sorted == NULL) {
        return -1;
    }
    memcpy(sorted, gaps, n * sizeof(int64_t));
    qsort(sorted, n, sizeof(int64_t), cmp_int64);
    for (i = 0; i < n; i++) {
        if (m > 0 && values[m - 1] == sorted[i]) {
            counts[m - 1]++;
        }
        else {
            values[m] = sorted[i];
            counts[m] = 1;
            m++;
        }
    }
    PyMem_RawFree(sorted);
    *nbins = m;
    return 0;
}

size_t
tm_modal_bin(const int64_t *counts, size_t nbins)
{
    size_t best = 0;
    size_t i;

    for (i = 1; i < nbins; i++) {
        if (counts[i] > counts[best]) {
            best = i;
        }
    }
    return best;
}

double
tm_multiple_fraction(const int64_t *gaps, size_t n, int64_t k)
{
    size_t hits = 0;
    size_t i;

    if (n == 0 || k < 1) {
        return NAN;
    }
    for (i = 0; i < n; i++) {
        hits += gaps[i] > 0 && gaps[i] % k == 0;
    }
    return (double)hits / (double)n;
}

int64_t
tm_overtaking(const int64_t *ranks, const int64_t *epoch, size_t n,
              uint8_t *mask)
{
    uint8_t *seen = NULL;
    size_t seen_cap = 0;
    size_t low = 0;              /* lowest rank not delivered so far */
    int64_t count = 0;
    size_t i, start = 0;

    memset(mask, 0, n);
    while (start < n) {
        size_t end = start + 1;
        int64_t top;

        /* One epoch: [start, end). */
        while (end < n && (epoch == NULL || epoch[end] == epoch[start])) {
            end++;
        }
        if (epoch == NULL) {
            end = n;
        }
        /* With m deliveries the lowest undelivered rank is at most m, so
           ranks above m never need remembering: seen[] has m + 1 slots
           whatever the ranks' values. */
        top = (int64_t)(end - start);
        if ((size_t)top + 1 > seen_cap) {
            uint8_t *grown = PyMem_RawRealloc(seen, (size_t)top + 1);

            if (grown == NULL) {
                PyMem_RawFree(seen);
                return -1;
            }
            seen = grown;
            seen_cap = (size_t)top + 1;
        }
        memset(seen, 0, (size_t)top + 1);
        low = 0;
        for (i = start; i < end; i++) {
            int64_t r = ranks[i];

            if (r < 0) {
                continue;
            }
            if ((size_t)r > low) {
                mask[i] = 1;
                count++;
            }
            if (r <= top) {
                seen[r] = 1;
            }
            while (low <= (size_t)top && seen[low]) {
                low++;
            }
        }
        start = end;
    }
    PyMem_RawFree(seen);
    return count;
}

double
tm_autocorr(const int64_t *x, size_t n, size_t lag)
{
    __int128 shifted = 0;
    int64_t lo = INT64_MAX;
    int64_t hi = INT64_MIN;
    long double mean, num = 0.0L, den = 0.0L;
    size_t i;

    if (lag == 0 || n <= lag) {
        return NAN;
    }
    /* Deviations from x[0] are exact; see tm_summarize. */
    for (i = 0; i < n; i++) {
        shifted += (__int128)x[i] - x[0];
        if (x[i] < lo) {
            lo = x[i];
        }
        if (x[i] > hi) {
            hi = x[i];
        }
    }
    mean = (long double)shifted / (long double)n;
    if ((uint64_t)hi - (uint64_t)lo <= (uint64_t)INT64_MAX) {
        /* Every deviation fits int64: the same exact values, converted by
           the FPU instead of the software int128 conversion (about 4x
           faster on 10M values, the same result bit for bit). */
        for (i = 0; i < n; i++) {
            long double d = (long double)(int64_t)((uint64_t)x[i]
                                                   - (uint64_t)x[0]) - mean;

            den += d * d;
            if (i + lag < n) {
                num += d * ((long double)(int64_t)((uint64_t)x[i + lag]
                                                   - (uint64_t)x[0])
                            - mean);
            }
        }
        return den == 0.0L ? NAN : (double)(num / den);
    }
    for (i = 0; i < n; i++) {
        long double d = (long double)((__int128)x[i] - x[0]) - mean;

        den += d * d;
        if (i + lag < n) {
            num += d * ((long double)((__int128)x[i + lag] - x[0]) - mean);
        }
    }
    if (den == 0.0L) {
        return NAN;
    }
    return (double)(num / den);
}

/* ------------------------------------------------------------------ */
/* Otsu's split of log(x)                                             */

/* The sort path: every split between distinct values of sorted log(x). */
static int
log_otsu_sorted(const int64_t *x, size_t n, tm_otsu *out)
{
    double *v;
    long double total = 0.0L;
    long double mean, var = 0.0L, left = 0.0L, best = -1.0L;
    size_t i, split = 0;

    v = PyMem_RawMalloc(n * sizeof(double));
    if (v == NULL) {
        return -1;
    }
    for (i = 0; i < n; i++) {
        v[i] = log((double)(x[i] > 1 ? x[i] : 1));
        total += v[i];
    }
    qsort(v, n, sizeof(double), cmp_double);
    mean = total / (long double)n;
    for (i = 0; i < n; i++) {
        long double d = (long double)v[i] - mean;
        var += d * d;
    }
    for (i = 0; i + 1 < n; i++) {
        long double w0, m0, m1, between;

        left += v[i];
        if (v[i] == v[i + 1]) {
            continue;
        }
        w0 = (long double)(i + 1) / (long double)n;
        m0 = left / (long double)(i + 1);
        m1 = (total - left) / (long double)(n - i - 1);
        between = w0 * (1.0L - w0) * (m0 - m1) * (m0 - m1);
        if (between > best) {
            best = between;
            split = i;
            out->lower_mean = (double)expl(m0);
            out->upper_mean = (double)expl(m1);
        }
    }
    if (best >= 0.0L && var > 0.0L) {
        out->threshold = exp(0.5 * (v[split] + v[split + 1]));
        out->eta = (double)(best * (long double)n / var);
        out->upper_count = n - split - 1;
    }
    PyMem_RawFree(v);
    return 0;
}

/*
 * The histogram path, for long inputs: the same split, found without
 * sorting every value.  Bins are log-spaced (the top TM_OTSU_MANT_BITS
 * mantissa bits of the double, so each spans a factor of at most
 * 1 + 2**-10); each holds its count, the sum of its logs, its smallest and
 * largest value.  The between-class variance at every bin boundary is then
 * exact (the classes' sums are sums of whole bins).  A split inside a bin
 * can only win where an upper bound of its between-class variance (from
 * the bin's count and value range) reaches the best boundary: those few
 * bins are gathered, sorted and scanned split by split as the sort path
 * does.  Splits are visited in ascending order, so that ties resolve to
 * the lowest split as in the sort path.  The answer is the sort path's up
 * to the rounding of sums taken in another order (long double).
 */
#define TM_OTSU_MANT_BITS 10
#define TM_OTSU_BINS ((size_t)64 << TM_OTSU_MANT_BITS)
#define TM_OTSU_ONE 0x3FF0000000000000ULL   /* the bits of 1.0 */

typedef struct {
    size_t count;
    int64_t lo;          /* smallest and largest value (clamped to >= 1) */
    int64_t hi;
    double anchor;       /* log of the first value binned here */
    double dev;          /* of log(value) - anchor, and of its square: */
    double dev2;         /* small terms (a bin is under 2^-10 wide in
                            log), so double keeps them precise */
    long double sum;     /* of log(value): count anchor + dev, after */
    size_t slot;         /* gathered bins: the start of its slice */
    size_t fill;         /* ... and its write cursor */
    int refine;
} otsu_bin;

static inline size_t
otsu_key(int64_t v)
{
    double d = (double)v;
    uint64_t bits;
    size_t key;

    memcpy(&bits, &d, sizeof(bits));
    key = (size_t)((bits - TM_OTSU_ONE) >> (52 - TM_OTSU_MANT_BITS));
    return key < TM_OTSU_BINS ? key : TM_OTSU_BINS - 1;
}

/* (S0 n - T n0)^2 / (n^2 n0 (n - n0)): Otsu's w0 w1 (m0 - m1)^2 written
   with the lower class's count n0 and log sum S0 (T: the total). */
static inline long double
otsu_between(long double s0, size_t n0, long double total, size_t n)
{
    long double w0 = (long double)n0 / (long double)n;
    long double m0 = s0 / (long double)n0;
    long double m1 = (total - s0) / (long double)(n - n0);

    return w0 * (1.0L - w0) * (m0 - m1) * (m0 - m1);
}

/* An upper bound of the between-class variance of the splits inside bin b
   (lower class: the bins before it, count c0 and sum s0, plus the j
   smallest of b, 1 <= j < count).  The difference of class means is
   linear in j and in the mean y of those j logs (y in [log lo, log hi]),
   so its largest magnitude is at a corner; n0 (n - n0) is smallest at an
   end of the range of n0. */
static long double
otsu_inside_bound(const otsu_bin *b, size_t c0, long double s0,
                  long double total, size_t n)
{
    long double ylo = logl((long double)b->lo);
    long double yhi = logl((long double)b->hi);
    size_t js[2] = {1, b->count - 1};
    long double ys[2] = {ylo, yhi};
    long double num = 0.0L;
    long double d0, d1, den;
    int a, k;

    for (a = 0; a < 2; a++) {
        for (k = 0; k < 2; k++) {
            size_t n0 = c0 + js[a];
            long double t = (s0 + (long double)js[a] * ys[k]) * (long double)n
                            - total * (long double)n0;

            if (fabsl(t) > num) {
                num = fabsl(t);
            }
        }
    }
    d0 = (long double)(c0 + 1) * (long double)(n - c0 - 1);
    d1 = (long double)(c0 + b->count - 1) * (long double)(n - c0 - b->count + 1);
    den = (long double)n * (long double)n * (d0 < d1 ? d0 : d1);
    return num * num / den;
}

/* Below this many keys a bin sorts by qsort; above, by radix passes,
   whose 64K-entry count table costs more than qsort's comparisons of a
   few thousand keys. */
#define TM_RADIX_MIN 4096

/* Sorts keys[0..m) ascending: LSD radix, 16 bits a pass, as many passes
   as ``span`` (the largest key) needs, through ``tmp`` (m keys) and
   ``count`` (65536 entries).  O(m) a pass, where qsort's comparator calls
   cost about 100 ns a key at a million keys (a bin of one wait repeated
   with nanosecond jitter). */
static void
radix_sort_u64(uint64_t *keys, uint64_t *tmp, size_t *count, size_t m,
               uint64_t span)
{
    uint64_t *src = keys, *dst = tmp, *swap;
    unsigned shift = 0;

    if (m < TM_RADIX_MIN) {
        qsort(keys, m, sizeof(uint64_t), cmp_u64);
        return;
    }
    do {
        size_t i, at = 0;

        memset(count, 0, 65536 * sizeof(size_t));
        for (i = 0; i < m; i++) {
            count[(src[i] >> shift) & 0xFFFF]++;
        }
        for (i = 0; i < 65536; i++) {
            size_t c = count[i];

            count[i] = at;
            at += c;
        }
        for (i = 0; i < m; i++) {
            dst[count[(src[i] >> shift) & 0xFFFF]++] = src[i];
        }
        swap = src;
        src = dst;
        dst = swap;
        shift += 16;
    } while (shift < 64 && (span >> shift) != 0);
    if (src != keys) {
        memcpy(keys, src, m * sizeof(uint64_t));
    }
}

static int
log_otsu_binned(const int64_t *x, size_t n, tm_otsu *out)
{
    otsu_bin *bins;
    uint64_t *buf = NULL, *tmp = NULL;   /* refined bins' values less lo */
    size_t *count = NULL;                /* radix_sort_u64's table */
    size_t widest = 0;                   /* the largest refined bin */
    long double total = 0.0L, mean, var = 0.0L, best = -1.0L, left;
    long double best_m0 = 0.0L, best_m1 = 0.0L;
    double v_lo = 0.0, v_hi = 0.0;    /* the logs either side of the split */
    size_t best_n0 = 0, c0, gathered = 0;
    size_t i, b;
    int rc = -1;

    bins = PyMem_RawCalloc(TM_OTSU_BINS, sizeof(otsu_bin));
    if (bins == NULL) {
        return -1;
    }
    for (i = 0; i < n; i++) {
        int64_t v = x[i] > 1 ? x[i] : 1;
        otsu_bin *bin = &bins[otsu_key(v)];
        double lv = log((double)v);
        double d;

        if (bin->count == 0) {
            bin->lo = bin->hi = v;
            bin->anchor = lv;
        }
        else if (v < bin->lo) {
            bin->lo = v;
        }
        else if (v > bin->hi) {
            bin->hi = v;
        }
        bin->count++;
        /* double, not long double: x87 loads and stores of each bin's
           sums in this loop cost more than the rest of it. */
        d = lv - bin->anchor;
        bin->dev += d;
        bin->dev2 += d * d;
    }
    for (b = 0; b < TM_OTSU_BINS; b++) {
        if (bins[b].count != 0) {
            bins[b].sum = (long double)bins[b].count * (long double)bins[b].anchor
                          + (long double)bins[b].dev;
            total += bins[b].sum;
        }
    }
    mean = total / (long double)n;
    /* sum (v - mean)^2 = sum over bins of dev2 + 2 a dev + count a^2,
       with a = anchor - mean: deviations from a value of the bin itself
       (its first) keep the squares small and the sum precise. */
    for (b = 0; b < TM_OTSU_BINS; b++) {
        if (bins[b].count != 0) {
            long double a = (long double)bins[b].anchor - mean;

            var += bins[b].dev2 + 2.0L * a * bins[b].dev
                   + (long double)bins[b].count * a * a;
        }
    }
    /* 1: the best split at a bin boundary. */
    c0 = 0;
    left = 0.0L;
    for (b = 0; b < TM_OTSU_BINS; b++) {
        long double between;

        if (bins[b].count == 0) {
            continue;
        }
        c0 += bins[b].count;
        left += bins[b].sum;
        if (c0 >= n) {
            break;
        }
        between = otsu_between(left, c0, total, n);
        if (between > best) {
            best = between;
        }
    }
    /* 2: the bins whose inside may reach it (with a margin for rounding). */
    c0 = 0;
    left = 0.0L;
    for (b = 0; b < TM_OTSU_BINS; b++) {
        otsu_bin *bin = &bins[b];

        if (bin->count == 0) {
            continue;
        }
        if (bin->count >= 2 && bin->lo != bin->hi
                && otsu_inside_bound(bin, c0, left, total, n)
                   >= best * (1.0L - 1e-9L)) {
            bin->refine = 1;
            bin->slot = gathered;
            bin->fill = gathered;
            gathered += bin->count;
            if (bin->count > widest) {
                widest = bin->count;
            }
        }
        c0 += bin->count;
        left += bin->sum;
    }
    if (gathered > 0) {
        buf = PyMem_RawMalloc(gathered * sizeof(uint64_t));
        if (buf == NULL) {
            goto done;
        }
        if (widest >= TM_RADIX_MIN) {
            tmp = PyMem_RawMalloc(widest * sizeof(uint64_t));
            count = PyMem_RawMalloc(65536 * sizeof(size_t));
            if (tmp == NULL || count == NULL) {
                goto done;
            }
        }
        for (i = 0; i < n; i++) {
            int64_t v = x[i] > 1 ? x[i] : 1;
            otsu_bin *bin = &bins[otsu_key(v)];

            /* Bounded: x may change between passes (no GIL); the answer
               is then meaningless, never a memory error. */
            if (bin->refine && bin->fill < bin->slot + bin->count
                    && v >= bin->lo && v <= bin->hi) {
                buf[bin->fill++] = (uint64_t)(v - bin->lo);
            }
        }
    }
    /* 3: every split in ascending order: inside refined bins value by
       value, then at the bin's end. */
    best = -1.0L;
    c0 = 0;
    left = 0.0L;
    for (b = 0; b < TM_OTSU_BINS; b++) {
        otsu_bin *bin = &bins[b];
        long double between;

        if (bin->count == 0) {
            continue;
        }
        if (bin->refine) {
            uint64_t *s = buf + bin->slot;
            size_t m = bin->fill - bin->slot;
            long double part = left;
            double here, next;
            size_t k;

            /* Sorted as integers (log is increasing), each log taken once
               in order. */
            radix_sort_u64(s, tmp, count, m, (uint64_t)(bin->hi - bin->lo));
            next = m ? log((double)(bin->lo + (int64_t)s[0])) : 0.0;
            for (k = 0; k + 1 < m; k++) {
                here = next;
                next = log((double)(bin->lo + (int64_t)s[k + 1]));
                part += here;
                if (here == next) {
                    continue;
                }
                between = otsu_between(part, c0 + k + 1, total, n);
                if (between > best) {
                    best = between;
                    best_n0 = c0 + k + 1;
                    best_m0 = part / (long double)best_n0;
                    best_m1 = (total - part) / (long double)(n - best_n0);
                    v_lo = here;
                    v_hi = next;
                }
            }
        }
        c0 += bin->count;
        left += bin->sum;
        if (c0 >= n) {
            break;
        }
        between = otsu_between(left, c0, total, n);
        if (between > best) {
            /* The split follows bin b: its largest value, then the next
               bin's smallest. */
            size_t nb = b + 1;

            while (nb < TM_OTSU_BINS && bins[nb].count == 0) {
                nb++;
            }
            best = between;
            best_n0 = c0;
            best_m0 = left / (long double)c0;
            best_m1 = (total - left) / (long double)(n - c0);
            v_lo = log((double)bin->hi);
            v_hi = nb < TM_OTSU_BINS ? log((double)bins[nb].lo) : v_lo;
        }
    }
    if (best >= 0.0L && var > 0.0L) {
        out->threshold = exp(0.5 * (v_lo + v_hi));
        out->eta = (double)(best * (long double)n / var);
        out->upper_count = n - best_n0;
        out->lower_mean = (double)expl(best_m0);
        out->upper_mean = (double)expl(best_m1);
    }
    rc = 0;

done:
    PyMem_RawFree(count);
    PyMem_RawFree(tmp);
    PyMem_RawFree(buf);
    PyMem_RawFree(bins);
    return rc;
}

/*
 * Otsu (1979), "A threshold selection method from gray-level histograms":
 * the split maximising the between-class variance.  eta, the share of the
 * total variance that the split explains, measures separability; a single
 * Gaussian gives at most 2/pi (about 0.64), so values near 1 mean two
 * well-separated groups.  Run on log(x) so that "fast" and "stalled" are
 * judged by ratio, not by difference.  Up to TM_OTSU_SORT_N values sort
 * them all; longer inputs take the histogram path (the same split).
 */
#define TM_OTSU_SORT_N 65536

int
tm_log_otsu(const int64_t *x, size_t n, tm_otsu *out)
{
    out->threshold = NAN;
    out->eta = NAN;
    out->lower_mean = NAN;
    out->upper_mean = NAN;
    out->upper_count = 0;
    if (n < 2) {
        return 0;
    }
    if (n <= TM_OTSU_SORT_N) {
        return log_otsu_sorted(x, n, out);
    }
    return log_otsu_binned(x, n, out);
}

void
tm_residue_counts(const int64_t *position, const uint8_t *tested,
                  const uint8_t *stalled, size_t n, int64_t period,
                  int64_t *fetches, int64_t *stalls, int64_t *last)
{
    /* A mask stands in for the division where the period is a power of
       two (num_workers 2, 4, 8: the usual loader periods). */
    const int64_t low = (period & (period - 1)) == 0 ? period - 1 : -1;
    int64_t top = -1;
    size_t i;

    memset(fetches, 0, (size_t)period * sizeof(int64_t));
    memset(stalls, 0, (size_t)period * sizeof(int64_t));
    for (i = 0; i < n; i++) {
        int64_t p = position[i];
        int64_t r;

        if (!tested[i] || p < 0) {
            continue;
        }
        r = low >= 0 ? (p & low) : p % period;
        fetches[r]++;
        stalls[r] += stalled[i] != 0;
        if (p > top) {
            top = p;
        }
    }
    *last = top;
}
