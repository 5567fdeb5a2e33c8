"""GPU-visible input wait on a real CUDA device: two loops, both measurements.

Run on a machine with a GPU, after ``pip install -e .`` (and a CUDA build
of torch)::

    python benchmarks/gpu_visible_wait.py [--steps N] [--json PATH]

Two wrapped loops over a fake loader whose every fetch sleeps on the host
and hands over a pinned batch, copied with ``.to("cuda",
non_blocking=True)`` and followed by matmuls sized to a target GPU step
(calibrated with CUDA events first).  The loop keeps the GPU at most one
step behind, as a training loop that reads the previous step's loss does
(it waits on the previous step's event; traceml itself never
synchronises inside the loop):

* **gpu-busy**: fetch 10 ms, GPU step 30 ms.  The host waits for every
  batch (host wait about 10 ms) while the GPU still runs the previous
  step: the GPU-visible wait should be near 0.
* **fetch-bound**: fetch 30 ms, GPU step 5 ms.  The GPU idles through
  most of each fetch: both waits large (the GPU-visible one about the
  fetch less the previous step's remaining GPU work).

A third measurement times ``traceml.wrap(range(N), cuda=True)`` against
``cuda=False`` with an empty body (the per-step cost of the events, as a
difference within one run).

Prints each loop's host wait and GPU-visible wait (median, p95), GPU
step, coverage and diagnosis, NVML's GPU utilisation in input waits and in
the rest of the steps (no verdict: the driver's window of 1/6 s to 1 s is
longer than these fetches), then a verdict per loop.  Exit status: 0
all verdicts hold, 1 one fails, 2 no CUDA device (nothing measured).
Takes well under 2 minutes; downloads nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def _no_gpu(why: str) -> int:
    print(f"gpu_visible_wait: no CUDA device ({why}); this script needs a GPU. "
          "Nothing was measured.")
    return 2


def calibrate(torch, target_s: float, n: int = 2048) -> int:
    """Matmuls of n x n float32 whose run on the GPU takes about target_s."""
    a = torch.randn(n, n, device="cuda")
    for _ in range(3):
        a @ a
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    reps = 20
    start.record()
    for _ in range(reps):
        a @ a
    end.record()
    end.synchronize()
    per = start.elapsed_time(end) / 1e3 / reps
    return max(1, round(target_s / per))


def run_loop(torch, traceml, name: str, fetch_s: float, gpu_s: float, steps: int,
             ready: bool) -> dict:
    """One wrapped loop; returns its numbers."""
    reps = calibrate(torch, gpu_s)
    w = torch.randn(2048, 2048, device="cuda")
    batch = torch.randn(64, 2048).pin_memory()

    def loader():
        for _ in range(steps):
            time.sleep(fetch_s)          # the host's fetch
            yield batch

    rec = traceml.Recorder()
    wrapped = rec.wrap(loader(), name=name, cuda=True)
    prev = None
    for b in wrapped:
        x = b.to("cuda", non_blocking=True)
        if ready:
            wrapped.input_ready()
        y = w
        for _ in range(reps):
            y = y @ w
        x.sum() + y[0, 0]                # the batch is used on the GPU
        done = torch.cuda.Event()
        done.record()
        if prev is not None:
            prev.synchronize()           # at most one step ahead (the loss of step i-1)
        prev = done
    torch.cuda.synchronize()             # after the loop: every event readable
    rep = rec.report()
    g = rep["gpu"]
    return {
        "loop": name, "fetch_s": fetch_s, "target_gpu_step_s": gpu_s, "matmuls": reps,
        "input_ready": ready,
        "host_wait_median_s": g["host_wait_s"]["median"], "host_wait_p95_s": g["host_wait_s"]["p95"],
        "gpu_wait_median_s": g["gpu_wait_s"]["median"], "gpu_wait_p95_s": g["gpu_wait_s"]["p95"],
        "gpu_step_median_s": g["gpu_step_s"]["median"], "coverage": g["coverage"],
        "skipped": g["skipped"], "pending": g["pending"], "error": g["error"],
        "host_share": g["host_share"], "gpu_share": g["gpu_share"],
        "host_diagnosis": g["host_diagnosis"], "diagnosis": rep["diagnosis"],
        "rule": g["rule"], "utilisation": g.get("utilisation"),
    }


def event_cost(torch, traceml, n: int) -> dict:
    """ns per step of wrap(range(n)) with cuda on, less with it off (best of 5)."""
    def once(cuda):
        rec = traceml.Recorder()
        t = time.perf_counter_ns()
        for _ in rec.wrap(range(n), cuda=cuda):
            pass
        torch.cuda.synchronize()
        return (time.perf_counter_ns() - t) / n

    best = {False: float("inf"), True: float("inf")}
    for _ in range(5):
        for cuda in (False, True):
            best[cuda] = min(best[cuda], once(cuda))
    return {"off_ns_per_step": best[False], "on_ns_per_step": best[True],
            "added_ns_per_step": best[True] - best[False]}


def fmt_ms(x) -> str:
    return "-" if x is None else f"{x * 1e3:.2f} ms"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=40, help="steps per loop (default 40)")
    ap.add_argument("--json", help="write the numbers to this file")
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        return _no_gpu("torch is not installed")
    if not torch.cuda.is_available():
        return _no_gpu("torch.cuda.is_available() is False")
    import traceml

    traceml.configure(sampler=False)    # timing only: no /proc thread beside the GPU work
    print(f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}")
    loops = [run_loop(torch, traceml, "gpu-busy", 0.010, 0.030, args.steps, False),
             run_loop(torch, traceml, "fetch-bound", 0.030, 0.005, args.steps, False),
             run_loop(torch, traceml, "fetch-bound+ready", 0.030, 0.005, args.steps, True)]
    cost = event_cost(torch, traceml, 2000)
    ok = True
    for r in loops:
        print(f"{r['loop']:>18}: fetch {fmt_ms(r['fetch_s'])}, GPU step "
              f"{fmt_ms(r['gpu_step_median_s'])} (target {fmt_ms(r['target_gpu_step_s'])})")
        print(f"{'':>18}  host wait   median {fmt_ms(r['host_wait_median_s'])}, "
              f"p95 {fmt_ms(r['host_wait_p95_s'])}")
        print(f"{'':>18}  GPU-visible median {fmt_ms(r['gpu_wait_median_s'])}, "
              f"p95 {fmt_ms(r['gpu_wait_p95_s'])}")
        print(f"{'':>18}  coverage {r['coverage']}, skipped {r['skipped']}, pending "
              f"{r['pending']}, error {r['error']}; host {r['host_diagnosis']} -> "
              f"{r['diagnosis']} ({r['rule']})")
        u = r["utilisation"] or {}
        if u.get("available"):
            def kind(k, u=u):
                m = u[k]["mean_pct"]
                return f"{'-' if m is None else f'{m:.0f}%'} ({u[k]['readings']} readings)"
            print(f"{'':>18}  NVML utilisation: input waits {kind('slow')}, rest "
                  f"{kind('fast')}; driver window {fmt_ms(u['window_s'])}; rule {u['rule']}"
                  + (f"; stopped: {u['error']}" if u.get("error") else ""))
        else:
            print(f"{'':>18}  NVML utilisation unavailable: {u.get('why')}")
        host, gpu, fetch = r["host_wait_median_s"], r["gpu_wait_median_s"], r["fetch_s"]
        if r["loop"] == "gpu-busy":
            holds = host is not None and gpu is not None and host >= 0.5 * fetch \
                and gpu <= 0.1 * fetch
            expect = "host wait >= half the fetch, GPU-visible <= 10% of it"
        else:
            holds = host is not None and gpu is not None and host >= 0.5 * fetch \
                and gpu >= 0.5 * (fetch - r["target_gpu_step_s"])
            expect = "both waits large"
        ok &= bool(holds) and (r["coverage"] or 0) >= 0.9
        print(f"{'':>18}  {'OK' if holds else 'FAIL'}: {expect}")
    print(f"events' cost: {cost['added_ns_per_step'] / 1e3:.1f} µs per step added by "
          f"cuda=True (off {cost['off_ns_per_step']:.0f} ns, on "
          f"{cost['on_ns_per_step']:.0f} ns per step, empty body)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"loops": loops, "event_cost": cost, "ok": ok}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
