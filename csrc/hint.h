/*
 * Branch hints for the per-step paths (the wrap iterator, the probes, the
 * store's append): the rare branch's code goes out of the line the common
 * case runs through, so that a step touches fewer instruction cache lines
 * (a real DataLoader's __next__ evicts them between two steps; see
 * benchmarks/README.md, "The DataLoader path"); TM_HOT_INLINE puts a small
 * helper's code inside the step's own.  TM_HOT groups the per-step
 * functions in .text.hot, side by side; TM_COLD sends a rare path's
 * function to .text.unlikely and keeps it out of its caller's code;
 * TM_NOINLINE keeps a sometimes-taken helper out of the line the common
 * case runs through.  GCC and Clang only; plain conditions and inline
 * elsewhere.
 */
#ifndef TRACEML_HINT_H
#define TRACEML_HINT_H

#if defined(__GNUC__) || defined(__clang__)
#define TM_LIKELY(x) __builtin_expect(!!(x), 1)
#define TM_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TM_HOT_INLINE static inline __attribute__((always_inline))
#define TM_HOT __attribute__((hot))
#define TM_COLD __attribute__((cold, noinline))
#define TM_NOINLINE __attribute__((noinline))
#else
#define TM_LIKELY(x) (x)
#define TM_UNLIKELY(x) (x)
#define TM_HOT_INLINE static inline
#define TM_HOT
#define TM_COLD
#define TM_NOINLINE
#endif

#endif  /* TRACEML_HINT_H */
