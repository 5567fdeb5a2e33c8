/*
 * The timing store: one fixed-size record per completed step.
 *
 * Records are appended only once a step is complete, so a record, once
 * written, is never touched again: misuse of the probes or a failed growth
 * can lose the step being closed (counted in `dropped`) but never corrupts
 * earlier records.  The store is owned by one recorder and used with the
 * GIL held.
 */
#ifndef TRACEML_STORE_H
#define TRACEML_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "hint.h"

/* Flags of a record (the `flags` field of the snapshot). */
enum {
    TM_FLAG_EPOCH_START = 1,   /* first step of an epoch: includes iter() */
    TM_FLAG_NO_FETCH = 2,      /* closed without fetch_done(): wait is 0 */
    TM_FLAG_IMPLICIT_END = 4,  /* closed by the next step_begin() */
};

/* Bits 8..15 of flags: the step's position in its epoch, saturated at 255
   (a wrapped loop's first max(1, num_workers) steps are its start-up). */
#define TM_FLAG_POS_SHIFT 8
#define TM_FLAG_POS_MAX 255

typedef struct {
    int64_t begin_ns;        /* the fetch of this step's batch starts */
    int64_t fetch_done_ns;   /* the batch is in the loop's hands */
    int64_t end_ns;          /* the next fetch starts, or the loop ends */
    int32_t epoch;           /* per source, 0-based */
    uint16_t source;         /* 0: the probes; 1..: wrapped iterables */
    uint16_t flags;          /* TM_FLAG_* */
} tm_record;

/* Which batch a step delivered, where a DataLoader exposes it: its rank in
   the epoch's sampler order and the worker that produced it (-1: unknown). */
typedef struct {
    int32_t rank;
    int32_t worker;
} tm_delivery;

/* A measured batch size: the step (index in the store), its tensor and
   array bytes and how many tensors and arrays hold them (each crosses
   processes through its own shared-memory segment, a cost per tensor).
   Kept apart from the records, since only sampled steps have one: the
   other steps write nothing. */
typedef struct {
    int64_t step;
    int64_t bytes;
    int64_t tensors;
} tm_batch_bytes;

/* The fetching thread's CPU clock and run-queue wait are read around the
   first TM_CLOCKS_FIRST fetches of an epoch (of a recording, for the
   probes) and, after, around two fetches in a row every TM_CLOCKS_EVERY
   (so that the step between them has its body clocked too, from its batch in hand to the next fetch): the four
   reads (two clock_gettime of the thread's CPU clock, two
   preads of its schedstat) cost about 2.5 us (measured on the 2-core
   build host), noise beside a DataLoader's fetch (tens of us and up) but
   not beside wrap's own 50-200 ns a step: two fetches every 1021 add
   about 5 ns a step to a long epoch.  The stride is prime: a stall every
   2, 4 or 8 fetches falls on every residue of it, where a stride of 1024
   would read one residue. */
#define TM_CLOCKS_FIRST 1024
#define TM_CLOCKS_EVERY 1021
#define TM_CLOCKED(k) ((k) < TM_CLOCKS_FIRST || (k) % TM_CLOCKS_EVERY <= 1)
/* The probes clock their first TM_CLOCKS_FIRST steps alike, then two in a
   row every TM_PROBE_CLOCKS_EVERY (prime too): a clocked probe step reads
   both clocks three times (begin, fetch_done, the close), 3.5 us here,
   which at wrap's stride added 14 ns to a 110 ns begin+fetch+end triple
   (bench_ab_probes); at this one, under 1 ns. */
#define TM_PROBE_CLOCKS_EVERY 8191
#define TM_PROBE_CLOCKED(k) ((k) < TM_CLOCKS_FIRST || (k) % TM_PROBE_CLOCKS_EVERY <= 1)
/* A step's clocks in the thread that ran it (sampled steps only, see
   TM_CLOCKS_* above): the step (index in the store), the thread's CPU
   time inside the fetch (CLOCK_THREAD_CPUTIME_ID) and its wait for a core
   inside the fetch (schedstat's run-queue field; -1 where the kernel keeps
   none), then the same two for the step's body, from the batch in hand to
   the next fetch (-1 where the next fetch was not clocked), and the CPU
   time of the process's other threads inside the fetch
   (CLOCK_PROCESS_CPUTIME_ID less the thread's own, at least 0; -1
   unknown): a thread holding the GIL, the pin-memory thread. */
typedef struct {
    int64_t step;
    int64_t cpu_ns;
    int64_t runq_ns;
    int64_t body_cpu_ns;
    int64_t body_runq_ns;
    int64_t others_cpu_ns;
} tm_fetch_clock;

/*
 * A block of records lent to read-only views (Recorder.snapshot_view):
 * freed when the store and every view have let go of it.  While its block
 * is lent, the store never moves it nor writes over a record in it:
 * growth copies into a new block, a clear starts a new one (appends only
 * write past the records a view shows).
 */
typedef struct {
    tm_record *records;
    size_t refs;             /* the store's hold (while current) + one per view */
} tm_lent;

typedef struct {
    /* What every append touches, first and together (one cache line):
       a loop over a real DataLoader evicts the store between two steps
       (benchmarks/README.md, "The DataLoader path"). */
    tm_record *records;
    size_t len;
    size_t cap;
    uint64_t generation;     /* bumped by every clear (reset, fork) */
    tm_delivery *delivery;   /* parallel to records; NULL until first used */
    tm_lent *lent;           /* non-NULL while records is lent to views */
    int delivery_lost;       /* its growth failed: delivery dropped */
    int oom;                 /* sticky: a growth has failed */
    tm_batch_bytes *bytes;   /* measured batch sizes, in step order */
    size_t nbytes;
    size_t bytes_cap;
    tm_fetch_clock *clocks;  /* sampled fetch clocks, in step order */
    size_t nclocks;
    size_t clocks_cap;
    size_t cap_limit;        /* SIZE_MAX: none; tests lower it to make growth fail */
    uint64_t dropped;        /* steps lost to a failed growth */
} tm_store;

void tm_store_init(tm_store *store);
void tm_store_set_delivery(tm_store *store, size_t i, int32_t rank,
                           int32_t worker);
void tm_store_add_bytes(tm_store *store, size_t i, int64_t bytes, int32_t tensors);
void tm_store_add_clock(tm_store *store, size_t i, int64_t cpu_ns,
                        int64_t runq_ns, int64_t body_cpu_ns,
                        int64_t body_runq_ns, int64_t others_cpu_ns);
void tm_store_clear(tm_store *store);
void tm_store_free(tm_store *store);
int tm_store_grow(tm_store *store);
tm_lent *tm_store_lend(tm_store *store);
void tm_lent_release(tm_lent *lent);

/* Append one record; never fails loudly: a failed growth counts a drop. */
static inline void
tm_store_push(tm_store *store, int64_t begin_ns, int64_t fetch_done_ns,
              int64_t end_ns, int32_t epoch, uint16_t source, uint16_t flags,
              int32_t rank, int32_t worker, int64_t bytes, int32_t tensors)
{
    tm_record *rec;

    if (TM_UNLIKELY(store->len == store->cap) && tm_store_grow(store) < 0) {
        store->dropped++;
        return;
    }
    rec = &store->records[store->len];
    rec->begin_ns = begin_ns;
    rec->fetch_done_ns = fetch_done_ns;
    rec->end_ns = end_ns;
    rec->epoch = epoch;
    rec->source = source;
    rec->flags = flags;
    if (TM_UNLIKELY(rank >= 0 || store->delivery != NULL)) {
        tm_store_set_delivery(store, store->len, rank, worker);
    }
    if (TM_UNLIKELY(bytes >= 0)) {
        tm_store_add_bytes(store, store->len, bytes, tensors);
    }
    store->len++;
}

#endif  /* TRACEML_STORE_H */
