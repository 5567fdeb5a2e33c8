/*
 * Reducers: pure functions over int64 arrays (nanoseconds, step indices).
 * They know nothing of the store or the clock, so they are tested against
 * NumPy alone.  Functions returning int give 0 on success and -1 when a
 * scratch allocation failed (nothing else can fail).
 */
#ifndef TRACEML_REDUCE_H
#define TRACEML_REDUCE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    size_t count;
    int64_t min;
    int64_t max;
    int64_t sum_hi;      /* exact sum = sum_hi * 2**64 + sum_lo */
    uint64_t sum_lo;
    double mean;
    double std;          /* population (ddof=0), as numpy.std */
} tm_summary;

/* count, min, max, exact sum, mean and (with with_std) std of x; without
   with_std one pass only, and std is NaN. */
void tm_summarize(const int64_t *x, size_t n, int with_std, tm_summary *out);

/*
 * Percentiles q (in [0, 100]) by numpy.percentile's "linear" rule, found by
 * selection: a 65536-bucket histogram of the high bits, then quickselect in
 * the few buckets that hold the wanted ranks.  The input is not modified.
 */
int tm_percentiles(const int64_t *x, size_t n, const double *q, size_t nq,
                   double *out);

/*
 * Order statistics: vals[j] = the ks[j]-th smallest of x (0-based; every
 * ks[j] < n, any order, repeats allowed), by the same selection as
 * tm_percentiles.  The input is not modified.
 */
int tm_order_stats(const int64_t *x, size_t n, const int64_t *ks, size_t nk,
                   int64_t *vals);

size_t tm_stall_mask(const int64_t *wait_ns, size_t n, int64_t threshold_ns,
                     uint8_t *mask);

/* Steps between consecutive nonzero mask entries (of the same epoch when
   epoch is not NULL), at most cap of them (stalls - 1 suffice). */
size_t tm_stall_gaps(const uint8_t *mask, const int64_t *epoch, size_t n,
                     int64_t *gaps, size_t cap);

int tm_gap_histogram(const int64_t *gaps, size_t n, int64_t *values,
                     int64_t *counts, size_t *nbins);

typedef struct {
    double threshold;    /* geometric midpoint across the best split */
    double eta;          /* between-class / total variance of log(x) */
    double lower_mean;   /* geometric means of the two classes */
    double upper_mean;
    size_t upper_count;
} tm_otsu;

/*
 * Otsu's split of log(max(x, 1)).  Up to 65536 values: a sort and a scan
 * of every split.  Longer inputs: a log-spaced histogram (count, log sum
 * and value range per bin) gives every split at a bin boundary exactly;
 * only bins whose inside could beat the best boundary (an upper bound from
 * their count and range) are gathered and sorted.  Both give the same
 * split (ties: the lowest), and the same numbers up to the rounding of
 * long double sums taken in another order.
 */
int tm_log_otsu(const int64_t *x, size_t n, tm_otsu *out);

/* The most frequent value of a histogram (smallest value on ties). */
size_t tm_modal_bin(const int64_t *counts, size_t nbins);

/*
 * Autocorrelation of x at lag (1 <= lag < n): the sum over t of
 * (x[t] - mean)(x[t + lag] - mean) divided by the sum of (x[t] - mean)^2,
 * the estimator of Box and Jenkins.  NaN when undefined (n <= lag, or all
 * values equal).
 */
double tm_autocorr(const int64_t *x, size_t n, size_t lag);

/*
 * Overtaking deliveries: delivery t overtakes when some rank lower than
 * ranks[t] had not been delivered before t (it is delivered later, or
 * never).  Ranks are a batch's position in its epoch's sampler order; a
 * rank < 0 (unknown) is neither counted nor remembered.  With epoch (may be
 * NULL) the record starts afresh at every change of epoch.  mask[t] = 1 for
 * an overtaking delivery.  Returns the count, or -1 if scratch memory ran
 * out.
 */
int64_t tm_overtaking(const int64_t *ranks, const int64_t *epoch, size_t n,
                      uint8_t *mask);

/*
 * Counts by residue of the position mod period (period >= 1): fetches[r]
 * counts the i with tested[i] and position[i] >= 0 and position[i] %
 * period == r, stalls[r] those of them with stalled[i]; *last is their
 * largest position (-1: none counted).  fetches and stalls hold period
 * entries, zeroed here.  One pass: the residue test's counts over 10M
 * steps without the residue, mask and gathered copies NumPy would make.
 */
void tm_residue_counts(const int64_t *position, const uint8_t *tested,
                       const uint8_t *stalled, size_t n, int64_t period,
                       int64_t *fetches, int64_t *stalls, int64_t *last);

/* Fraction of gaps that are positive multiples of k (k >= 1); NaN if n = 0. */
double tm_multiple_fraction(const int64_t *gaps, size_t n, int64_t k);

#endif  /* TRACEML_REDUCE_H */
