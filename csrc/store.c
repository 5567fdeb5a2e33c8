#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "store.h"

/* 1024 records = 32 KiB: enough for short runs without a second growth. */
#define TM_STORE_INITIAL_CAP 1024

_Static_assert(sizeof(tm_record) == 32, "a step record must stay 32 bytes");

void
tm_store_init(tm_store *store)
{
    memset(store, 0, sizeof(*store));
    store->cap_limit = SIZE_MAX;
}

/* Let go of the store's block: freed unless views still hold it. */
static void
drop_records(tm_store *store)
{
    if (store->lent != NULL) {
        tm_lent_release(store->lent);
        store->lent = NULL;
    }
    else {
        PyMem_RawFree(store->records);
    }
    store->records = NULL;
    store->cap = 0;
}

/* A block no view holds any more is the store's alone again: growth can
   realloc it in place and a clear can keep it. */
static void
reclaim_lent(tm_store *store)
{
    if (store->lent != NULL && store->lent->refs == 1) {
        PyMem_RawFree(store->lent);
        store->lent = NULL;
    }
}

void
tm_lent_release(tm_lent *lent)
{
    if (--lent->refs == 0) {
        PyMem_RawFree(lent->records);
        PyMem_RawFree(lent);
    }
}

/*
 * Lend the store's block to one more view: a new reference to its tm_lent
 * (NULL with no block yet, or when the tm_lent cannot be allocated).
 */
tm_lent *
tm_store_lend(tm_store *store)
{
    if (store->records == NULL) {
        return NULL;
    }
    if (store->lent == NULL) {
        store->lent = PyMem_RawMalloc(sizeof(tm_lent));
        if (store->lent == NULL) {
            return NULL;
        }
        store->lent->records = store->records;
        store->lent->refs = 1;
    }
    store->lent->refs++;
    return store->lent;
}

void
tm_store_clear(tm_store *store)
{
    reclaim_lent(store);
    if (store->lent != NULL) {
        /* Views show the old records: new ones go to a new block. */
        drop_records(store);
    }
    store->len = 0;
    store->dropped = 0;
    store->oom = 0;
    store->delivery_lost = 0;
    PyMem_RawFree(store->delivery);
    store->delivery = NULL;
    PyMem_RawFree(store->bytes);
    store->bytes = NULL;
    store->nbytes = 0;
    store->bytes_cap = 0;
    PyMem_RawFree(store->clocks);
    store->clocks = NULL;
    store->nclocks = 0;
    store->clocks_cap = 0;
    store->generation++;
}

void
tm_store_free(tm_store *store)
{
    drop_records(store);
    PyMem_RawFree(store->delivery);
    PyMem_RawFree(store->bytes);
    PyMem_RawFree(store->clocks);
    store->delivery = NULL;
    store->bytes = NULL;
    store->nbytes = 0;
    store->bytes_cap = 0;
    store->clocks = NULL;
    store->nclocks = 0;
    store->clocks_cap = 0;
    store->len = 0;
}

/*
 * Double the capacity.  The old block stays valid when realloc fails, so a
 * failure loses nothing already recorded: it only sets the sticky flag.
 * A block lent to views is not moved: its records are copied into a new
 * one, and the views keep the old.
 */
int
tm_store_grow(tm_store *store)
{
    size_t new_cap;
    tm_record *grown;

    reclaim_lent(store);
    if (store->cap == 0) {
        new_cap = TM_STORE_INITIAL_CAP;
    }
    else if (store->cap > SIZE_MAX / 2 / sizeof(tm_record)) {
        store->oom = 1;
        return -1;
    }
    else {
        new_cap = store->cap * 2;
    }
    if (new_cap > store->cap_limit) {
        new_cap = store->cap_limit;
    }
    if (new_cap <= store->cap) {
        store->oom = 1;
        return -1;
    }
    if (store->lent != NULL) {
        grown = PyMem_RawMalloc(new_cap * sizeof(tm_record));
        if (grown != NULL) {
            memcpy(grown, store->records, store->len * sizeof(tm_record));
            tm_lent_release(store->lent);
            store->lent = NULL;
        }
    }
    else {
        grown = PyMem_RawRealloc(store->records, new_cap * sizeof(tm_record));
    }
    if (grown == NULL) {
        store->oom = 1;
        return -1;
    }
    store->records = grown;
    if (store->delivery != NULL) {
        tm_delivery *d = PyMem_RawRealloc(store->delivery,
                                          new_cap * sizeof(tm_delivery));

        if (d == NULL) {
            /* Keep the timings; give up on which batch came from where. */
            PyMem_RawFree(store->delivery);
            store->delivery = NULL;
            store->delivery_lost = 1;
        }
        else {
            store->delivery = d;
        }
    }
    store->cap = new_cap;
    return 0;
}

/* Record step i's delivery, allocating the parallel array on first use
   (earlier steps read as unknown). */
void
tm_store_set_delivery(tm_store *store, size_t i, int32_t rank, int32_t worker)
{
    size_t k;

    if (store->delivery == NULL) {
        if (store->delivery_lost) {
            return;
        }
        store->delivery = PyMem_RawMalloc(store->cap * sizeof(tm_delivery));
        if (store->delivery == NULL) {
            store->delivery_lost = 1;
            return;
        }
        for (k = 0; k < i; k++) {
            store->delivery[k].rank = -1;
            store->delivery[k].worker = -1;
        }
    }
    store->delivery[i].rank = rank;
    store->delivery[i].worker = worker;
}

/* A sampled side array (arr, n entries of `size` bytes, *cap allocated)
   with room for one more: arr itself, or its copy doubled when full
   (`first` entries at first), *cap updated.  NULL when the growth fails;
   arr is then left as it was. */
static void *
sample_room(void *arr, size_t n, size_t *cap, size_t size, size_t first)
{
    size_t want;
    void *grown;

    if (n < *cap) {
        return arr;
    }
    want = *cap ? 2 * *cap : first;
    grown = PyMem_RawRealloc(arr, want * size);
    if (grown != NULL) {
        *cap = want;
    }
    return grown;
}

/* Record step i's batch size (bytes, in `tensors` tensors and arrays).  A
   failed growth loses this size only: the sizes are a sample. */
void
tm_store_add_bytes(tm_store *store, size_t i, int64_t bytes, int32_t tensors)
{
    tm_batch_bytes *room = sample_room(store->bytes, store->nbytes, &store->bytes_cap,
                                       sizeof(*room), 64);

    if (room == NULL) {
        return;
    }
    store->bytes = room;
    store->bytes[store->nbytes].step = (int64_t)i;
    store->bytes[store->nbytes].bytes = bytes;
    store->bytes[store->nbytes].tensors = tensors;
    store->nbytes++;
}

/* Record step i's clocks.  A failed growth loses this reading only: the
   clocks are a sample. */
void
tm_store_add_clock(tm_store *store, size_t i, int64_t cpu_ns, int64_t runq_ns,
                   int64_t body_cpu_ns, int64_t body_runq_ns, int64_t others_cpu_ns)
{
    tm_fetch_clock *room = sample_room(store->clocks, store->nclocks, &store->clocks_cap,
                                       sizeof(*room), 256);

    if (room == NULL) {
        return;
    }
    store->clocks = room;
    store->clocks[store->nclocks].step = (int64_t)i;
    store->clocks[store->nclocks].cpu_ns = cpu_ns;
    store->clocks[store->nclocks].runq_ns = runq_ns;
    store->clocks[store->nclocks].body_cpu_ns = body_cpu_ns;
    store->clocks[store->nclocks].body_runq_ns = body_runq_ns;
    store->clocks[store->nclocks].others_cpu_ns = others_cpu_ns;
    store->nclocks++;
}
