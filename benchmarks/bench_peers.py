"""What each way of timing a DataLoader adds to one training-shaped step.

Two loop shapes, the same variants in each:

* ``dataloader`` (the training-shaped loop): a real
  ``torch.utils.data.DataLoader`` over an in-memory ``TensorDataset``
  (``--dataset-steps`` batches of ``--batch`` rows of ``--dim`` float32
  features plus an int64 label; ``num_workers=0``, no shuffle), and a small
  CPU step: the forward pass of a two-layer MLP (``dim -> --hidden -> 10``,
  ReLU) on the batch, on one torch thread, autograd off.  About 35 us of
  fetch and 20 us of step here.
* ``light``: the same batches, prebuilt in a list, fetched from a list
  iterator, and no step, so that a step costs a few ns and what a variant
  adds is resolved to the ns (in the dataloader shape, the noise of this
  shared machine is a microsecond or two a step; see the A/A row).
  ``record_function`` (6 us a step) runs here in a second group of rounds
  with its own bare blocks, so that its churn of the caches and the
  allocator does not sit between the ns-sized blocks of the others.  Every
  variant's instrumentation runs the same code for either fetch (traceml's
  C iterator, for instance, does the same work around a DataLoader's
  ``__next__`` with ``num_workers=0`` as around a list's).

Variants, in this process:

* ``bare for``: ``for batch in loader: step(batch)``;
* ``bare for (A/A copy)``: the same loop again, compared with the first:
  what this machine's noise alone makes of a difference;
* ``bare next()``: ``it = iter(loader)`` and ``batch = next(it)`` by hand
  in a counted loop: the shape of the hand-instrumented variants below,
  which are compared with it, so that what they add is the instrumentation,
  not the ``next()`` call;
* ``traceml wrap``: ``for batch in traceml.wrap(loader): step(batch)``, with
  traceml's default settings (the /proc sampler on); ``traceml.report()``
  runs once at the end, outside the timed blocks, and is timed on its own;
* ``traceml probes``: ``step_begin(); batch = next(it); fetch_done();
  step(batch); step_end()``;
* ``probes, no step_end``: ``step_begin(); batch = next(it);
  fetch_done(); step(batch)``: the next ``step_begin()`` ends the step,
  so it takes the same two stamps a step as ``python list``;
* ``python list``: ``t0 = perf_counter_ns(); batch = next(it)``, then both
  stamps appended to a list: what one writes without a tool.  It keeps
  every stamp for the whole run (a list per epoch, all kept), as traceml's
  store keeps every step: a recorder that dropped its list each epoch would
  reuse the same memory while traceml's store grows into new pages;
* ``record_function``: ``with torch.profiler.record_function(
  "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"):
  batch = next(it)``, as a user adds it, no profiler running;
* ``record_function + profiler``: the same inside an active
  ``torch.profiler.profile(activities=[CPU])``, which then also records
  every op of the step (dataloader shape only; starting and stopping the
  profiler, with its post-processing, are outside the timed blocks);

and, dataloader shape only, traceml-ai in a second virtual environment
(``--peer-venv``, default .venv-peer in the repository root), through its documented API,
under its launcher ``traceml run`` (``traceml.init()`` does not trace
without the launcher's aggregator), one process per ``init`` mode, each
with its own bare loop:

* ``traceml-ai quickstart``: its README's "Plain PyTorch example":
  ``traceml.init(mode="auto")``, which patches ``DataLoader.__iter__`` to
  time every fetch, and ``with traceml.trace_step(model): step(batch)``;
* ``traceml-ai trace_step``: ``init(mode="manual")`` and
  ``trace_step(model)`` alone (no fetch timing: the step boundary's cost);
* ``traceml-ai wrap_dataloader_fetch``: ``init(mode="manual")``,
  ``for batch in traceml.wrap_dataloader_fetch(loader):`` and
  ``trace_step(model)`` around the step (the manual DataLoader timing of
  its Public API; ``trace_step`` publishes the fetch events).

traceml-ai's runtime drains its step queue (2048 steps) once per sampler
interval: at its default ``--interval 2`` and this loop's ~15,000 steps a
second the queue overflows, and each dropped step prints two lines to
stderr.  The peer runs use ``--peer-interval`` (default 0.05 s, at which
nothing is dropped here), its cheapest setting for this loop;
``--peer-default-interval`` adds a run at its default 2 s.

Method.  Each variant is a generator that runs its real loop, epoch after
epoch, and yields after every block of steps; the harness times one block
(one ``next()`` of the generator) at a time, one block of every variant per
round, in a new random order every round (a fixed rotation would keep each
variant behind the same predecessor, and the profiler's traces in the caches
and the allocator made the one behind it measurably slower).  Per-epoch costs (``iter()`` of the
loader and of traceml's wrapper, the sampler thread's start) are paid once
per epoch, as in training.  Timings read this thread's CPU time (``--clock
wall``: the wall clock); the process's CPU time, which also counts
background threads (traceml's sampler, traceml-ai's runtime), is read
beside it.  The garbage collector is off while timing and runs between
rounds.  Per round, "added" is the variant's block minus its baseline's
block of the same round, per step; printed as min / median / max over the
rounds, a distribution-free 95% interval of the median (the differences
have heavy tails: a block that met another job's burst), and the median
ratio to the baseline.  "best-best" is the variant's fastest block minus the
baseline's fastest (the estimate bench_wrap.py uses).  A difference counts
as resolved when the two medians' intervals do not overlap.

traceml's sampler thread runs while a wrapped loop is open, which here is
the whole run (the wrap variant's loop is suspended between its blocks), so
its CPU falls on every variant alike and cancels out of "added"; see
bench_sampler.py for its share.

Targets (the issue): traceml adds the least per step of the instrumented
variants, and ``wrap`` adds under 100 ns per step.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time

# Nothing from traceml (or _common, which imports it) at module level: the
# peer child runs this file in a venv where ``import traceml`` is
# traceml-ai's deprecated alias, which raises ImportError.
import numpy as np

try:
    import torch
    from torch.utils.data import DataLoader, TensorDataset
except ImportError:  # main() says so and passes
    torch = None
    NATIVE_ITER = None
else:
    # DataLoader.__iter__ as torch defines it, kept before traceml-ai's
    # init(mode="auto") patches it: the bare loops of the peer child use it.
    NATIVE_ITER = DataLoader.__iter__

RF_NAME = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
READY, HOUSEKEEP = "ready", "housekeep"
TARGET_NS = 100.0
DEFAULT_PEER_VENV = ".venv-peer"  # beside .venv, in the repository root
CLOCKS = {"cpu": time.thread_time_ns, "wall": time.perf_counter_ns}
PROFILE_STEPS = 1000  # steps per profiler session (record_function + profiler)


# --------------------------------------------------------------------------
# the loop


class Ctx:
    """The loop's parts, shared by every variant of one process and shape."""

    def __init__(self, args, shape: str, tm=None):
        torch.set_num_threads(1)
        torch.set_grad_enabled(False)  # global: the generators interleave
        g = torch.Generator().manual_seed(0)
        n = args.dataset_steps * args.batch
        dataset = TensorDataset(
            torch.randn(n, args.dim, generator=g),
            torch.randint(0, 10, (n,), generator=g),
        )
        self.model = torch.nn.Sequential(
            torch.nn.Linear(args.dim, args.hidden), torch.nn.ReLU(),
            torch.nn.Linear(args.hidden, 10),
        ).requires_grad_(False)
        self.shape = shape
        self.tm = tm  # traceml or traceml_ai, as this process has it
        if shape == "dataloader":
            self.loader = DataLoader(dataset, batch_size=args.batch,
                                     shuffle=False, num_workers=0)
            self.iter = NATIVE_ITER  # iter() without traceml-ai's patch
            model = self.model

            def step(batch):
                return model(batch[0])

            self.block = args.block
        else:  # light: prebuilt batches, no step
            self.loader = list(DataLoader(dataset, batch_size=args.batch))
            self.iter = iter

            def step(batch):
                pass

            self.block = args.light_block
        self.step = step


@contextlib.contextmanager
def quiet_stderr():
    """Silence file descriptor 2 (the profiler's C++ start/stop lines)."""
    sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(null)
        os.close(saved)


def v_bare_for(c: Ctx):
    loader, step, block, it_of = c.loader, c.step, c.block, c.iter
    n = 0
    while True:
        for batch in it_of(loader):
            step(batch)
            n += 1
            if n == block:
                n = 0
                yield READY


def v_bare_next(c: Ctx):
    loader, step, block, it_of = c.loader, c.step, c.block, c.iter
    it = it_of(loader)
    while True:
        for _ in itertools.repeat(None, block):
            try:
                batch = next(it)
            except StopIteration:
                it = it_of(loader)
                batch = next(it)
            step(batch)
        yield READY


def v_traceml_wrap(c: Ctx):
    loader, step, block = c.loader, c.step, c.block
    wrap, name = c.tm.wrap, f"bench_peers_{c.shape}"
    n = 0
    while True:
        # Named: a list takes no weak reference, so unnamed each epoch
        # would make a new source (a DataLoader would find its own).
        for batch in wrap(loader, name=name):
            step(batch)
            n += 1
            if n == block:
                n = 0
                yield READY


def v_traceml_probes(c: Ctx):
    loader, step, block, it_of = c.loader, c.step, c.block, c.iter
    step_begin, fetch_done, step_end = (c.tm.step_begin, c.tm.fetch_done,
                                        c.tm.step_end)
    it = it_of(loader)
    while True:
        for _ in itertools.repeat(None, block):
            step_begin()
            try:
                batch = next(it)
            except StopIteration:
                it = it_of(loader)
                batch = next(it)
            fetch_done()
            step(batch)
            step_end()
        yield READY


def v_traceml_probes_no_end(c: Ctx):
    loader, step, block, it_of = c.loader, c.step, c.block, c.iter
    step_begin, fetch_done = c.tm.step_begin, c.tm.fetch_done
    it = it_of(loader)
    while True:
        for _ in itertools.repeat(None, block):
            step_begin()
            try:
                batch = next(it)
            except StopIteration:
                it = it_of(loader)
                batch = next(it)
            fetch_done()
            step(batch)
        yield READY


def v_python_list(c: Ctx):
    loader, step, block, it_of = c.loader, c.step, c.block, c.iter
    stamp = time.perf_counter_ns
    it = it_of(loader)
    stamps: list = []
    kept = [stamps]  # every epoch's stamps, kept as traceml keeps its store
    append = stamps.append
    while True:
        for _ in itertools.repeat(None, block):
            t0 = stamp()
            try:
                batch = next(it)
            except StopIteration:
                it = it_of(loader)
                stamps = []  # one list per epoch, the old ones kept
                kept.append(stamps)
                append = stamps.append
                batch = next(it)
            append(t0)
            append(stamp())
            step(batch)
        yield READY


def v_record_function(c: Ctx):
    loader, step, block, it_of = c.loader, c.step, c.block, c.iter
    record_function = torch.profiler.record_function
    it = it_of(loader)
    while True:
        for _ in itertools.repeat(None, block):
            with record_function(RF_NAME):
                try:
                    batch = next(it)
                except StopIteration:
                    it = it_of(loader)
                    batch = next(it)
            step(batch)
        yield READY


def v_record_function_profiler(c: Ctx):
    """record_function inside an active profiler.  One profiler session per
    PROFILE_STEPS steps; its start and its stop (post-processing) run in
    untimed calls (the HOUSEKEEP protocol of run_rounds)."""
    loader, step, block, it_of = c.loader, c.step, c.block, c.iter
    record_function = torch.profiler.record_function
    profile, cpu = torch.profiler.profile, torch.profiler.ProfilerActivity.CPU
    blocks = max(1, PROFILE_STEPS // block)
    it = it_of(loader)
    while True:
        prof = profile(activities=[cpu])
        with quiet_stderr():
            prof.start()
        try:
            yield READY  # untimed: the profiler runs, a timed block may start
            for k in range(blocks):
                for _ in itertools.repeat(None, block):
                    with record_function(RF_NAME):
                        try:
                            batch = next(it)
                        except StopIteration:
                            it = it_of(loader)
                            batch = next(it)
                    step(batch)
                yield READY if k < blocks - 1 else HOUSEKEEP
        finally:
            with quiet_stderr():
                prof.stop()  # untimed: run by advance() after HOUSEKEEP


def v_peer_quickstart(c: Ctx):
    """traceml-ai README, "Plain PyTorch example" (init(mode="auto"))."""
    loader, step, block, model = c.loader, c.step, c.block, c.model
    trace_step = c.tm.trace_step
    n = 0
    while True:
        for batch in loader:  # DataLoader.__iter__ patched by init(auto)
            with trace_step(model):
                step(batch)
            n += 1
            if n == block:
                n = 0
                yield READY


def v_peer_trace_step(c: Ctx):
    loader, step, block, model, it_of = c.loader, c.step, c.block, c.model, c.iter
    trace_step = c.tm.trace_step
    n = 0
    while True:
        for batch in it_of(loader):
            with trace_step(model):
                step(batch)
            n += 1
            if n == block:
                n = 0
                yield READY


def v_peer_wrap_fetch(c: Ctx):
    loader, step, block, model = c.loader, c.step, c.block, c.model
    trace_step, wrap_fetch = c.tm.trace_step, c.tm.wrap_dataloader_fetch
    wrapped = wrap_fetch(loader)
    n = 0
    while True:
        for batch in wrapped:
            with trace_step(model):
                step(batch)
            n += 1
            if n == block:
                n = 0
                yield READY


# Light-shape variants timed in a separate group of rounds (see local_shape).
LIGHT_APART = ("record_function",)

# name -> (generator factory, baseline name or None, what it is, shapes)
BOTH = ("dataloader", "light")
LOCAL_VARIANTS = {
    "bare for": (v_bare_for, None, "for batch in loader", BOTH),
    "bare for (A/A copy)": (v_bare_for, "bare for",
                            "the same loop: the noise floor", BOTH),
    "bare next()": (v_bare_next, None, "batch = next(it) by hand", BOTH),
    "traceml wrap": (v_traceml_wrap, "bare for",
                     "for batch in traceml.wrap(loader)", BOTH),
    "traceml probes": (v_traceml_probes, "bare next()",
                       "step_begin / next / fetch_done / step / step_end", BOTH),
    "probes, no step_end": (v_traceml_probes_no_end, "bare next()",
                            "step_begin / next / fetch_done / step", BOTH),
    "python list": (v_python_list, "bare next()",
                    "perf_counter_ns() around next(), 2 appends", BOTH),
    "record_function": (v_record_function, "bare next()",
                        "with record_function(...): next(it); no profiler", BOTH),
    "record_function + profiler": (
        v_record_function_profiler, "bare next()",
        "the same in an active torch.profiler.profile()", ("dataloader",)),
}
PEER_MODES = {
    "auto": {
        "bare for": (v_bare_for, None, "for batch in loader (native iter)", BOTH),
        "traceml-ai quickstart": (
            v_peer_quickstart, "bare for",
            "init(mode='auto') + with trace_step(model)", BOTH),
    },
    "manual": {
        "bare for": (v_bare_for, None, "for batch in loader", BOTH),
        "traceml-ai trace_step": (
            v_peer_trace_step, "bare for",
            "init(mode='manual') + with trace_step(model), no fetch timing", BOTH),
        "traceml-ai wrap_dataloader_fetch": (
            v_peer_wrap_fetch, "bare for",
            "init(mode='manual') + wrap_dataloader_fetch + trace_step", BOTH),
    },
}


# --------------------------------------------------------------------------
# the harness


def advance(gen) -> None:
    """Run a generator, untimed, until it is ready for a timed block."""
    while next(gen) != READY:
        pass


def run_rounds(ctx: Ctx, variants: dict, rounds: int, warmup: int,
               clock_name: str, gc_every: int = 20, seed: int = 0) -> dict:
    """Time one block of every variant per round, in a random order.

    Returns {name: {"clock": [ns per step, by round], "process": [...]}}."""
    clock, pclock = CLOCKS[clock_name], time.process_time_ns
    gens = {name: v[0](ctx) for name, v in variants.items()}
    for g in gens.values():
        advance(g)
    names = list(gens)
    out = {name: {"clock": [], "process": []} for name in names}
    block = ctx.block
    order = random.Random(seed)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for r in range(warmup + rounds):
            if r % gc_every == 0:
                gc.collect()
            # A new random order every round: a rotation would keep each
            # variant behind the same predecessor, whose traces in the
            # caches and the allocator (the profiler's, say) then bias it.
            order.shuffle(names)
            for name in names:
                g = gens[name]
                p0 = pclock()
                t0 = clock()
                mark = next(g)
                t1 = clock()
                p1 = pclock()
                if mark != READY:
                    advance(g)
                if r >= warmup:
                    out[name]["clock"].append((t1 - t0) / block)
                    out[name]["process"].append((p1 - p0) / block)
    finally:
        if gc_was_enabled:
            gc.enable()
    for g in gens.values():
        g.close()  # ends open loops: traceml's WrapIter, profilers
    return out


def shape_variants(table: dict, shape: str) -> dict:
    return {n: v for n, v in table.items() if shape in v[3]}


# --------------------------------------------------------------------------
# the peer child (runs in the peer venv, under `traceml run`)


def peer_child(args) -> int:
    import traceml_ai

    mode = args.peer_child
    cfg = traceml_ai.init(mode=mode, on_missing_aggregator="raise")
    patched = DataLoader.__iter__ is not NATIVE_ITER
    ctx = Ctx(args, "dataloader", tm=traceml_ai)
    variants = shape_variants(PEER_MODES[mode], "dataloader")
    res = run_rounds(ctx, variants, args.rounds, args.warmup, args.clock)
    with open(args.peer_out, "w") as f:
        json.dump({
            "mode": mode,
            "init": repr(cfg),
            "dataloader_patched": patched,
            "traceml_ai": getattr(traceml_ai, "__version__", "?"),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "variants": {n: {"baseline": v[1], "what": v[2]}
                         for n, v in variants.items()},
            "results": res,
        }, f)
    return 0


def run_peer(args, mode: str, interval: float) -> dict | None:
    """Run the peer child for one init mode under `traceml run`; returns its
    JSON plus the steps traceml-ai reported dropping, or None on failure."""
    launcher = os.path.join(args.peer_venv, "bin", "traceml")
    tmp = tempfile.mkdtemp(prefix="bench_peers_")
    try:
        out = os.path.join(tmp, "peer.json")
        cmd = [
            launcher, "run", os.path.abspath(__file__),
            "--interval", f"{interval:g}", "--logs-dir", os.path.join(tmp, "logs"),
            "--args", "--peer-child", mode, "--peer-out", out,
            "--rounds", str(args.rounds), "--warmup", str(args.warmup),
            "--block", str(args.block), "--clock", args.clock,
            "--dataset-steps", str(args.dataset_steps), "--batch", str(args.batch),
            "--dim", str(args.dim), "--hidden", str(args.hidden),
        ]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True,
                              timeout=args.peer_timeout)
        elapsed = time.perf_counter() - t0
        if proc.returncode != 0 or not os.path.exists(out):
            print(f"  traceml-ai run ({mode}) failed, exit {proc.returncode}:")
            print("  " + "\n  ".join((proc.stdout + proc.stderr).splitlines()[-20:]))
            return None
        with open(out) as f:
            res = json.load(f)
        drops = 0
        for root, _, files in os.walk(os.path.join(tmp, "logs")):
            for name in files:
                if name == "training.stderr.log":
                    with open(os.path.join(root, name), errors="replace") as f:
                        drops += sum("Step queue full" in line for line in f)
        res.update(dropped_steps=drops, launcher_s=elapsed, interval=interval)
        return res
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------
# analysis and output


def added_stats(res: dict, name: str, base: str) -> dict:
    """Added ns per step: per round, variant minus baseline of that round."""
    from _common import mean_ci, median_ci  # the parent only (sys.path set)

    v = np.asarray(res[name]["clock"])
    b = np.asarray(res[base]["clock"])
    d = v - b
    lo, hi = median_ci(d)
    mean, mean_lo, mean_hi = mean_ci(d)
    pv, pb = np.asarray(res[name]["process"]), np.asarray(res[base]["process"])
    return {
        "min": float(d.min()), "median": float(np.median(d)), "max": float(d.max()),
        "lo": lo, "hi": hi,
        "mean": mean, "mean_lo": mean_lo, "mean_hi": mean_hi,
        "ratio": float(np.median(v / b)),
        "best_minus_best": float(v.min() - b.min()),
        "step_median": float(np.median(v)),
        "process_median": float(np.median(pv - pb)),
        "process_mean": float(np.mean(pv - pb)),
        "rounds": int(len(d)),
    }


def fmt_ns(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 10 else f"{x:.1f}"


def print_table(rows: list) -> None:
    """rows: (name, baseline or None, stats)."""
    w = 34
    print(f"{'':{w}} {'added ns per step, paired by round':^84}  {'best-':>8} "
          f"{'ratio':>7} {'proc CPU':^19}")
    print(f"{'':{w}} {'min':>8} {'median':>8} {'max':>8} {'median 95% CI':>18} "
          f"{'mean':>8} {'mean +-1.96 se':>20}  {'best':>8} {'median':>7} "
          f"{'median':>9} {'mean':>9}")
    for name, base, s in rows:
        if base is None:
            print(f"{name:{w}} {'step: ' + fmt_ns(s['step_median']) + ' ns (median)':>45}")
            continue
        ci = f"[{fmt_ns(s['lo'])}, {fmt_ns(s['hi'])}]"
        mci = f"[{fmt_ns(s['mean_lo'])}, {fmt_ns(s['mean_hi'])}]"
        print(f"{name:{w}} {fmt_ns(s['min']):>8} {fmt_ns(s['median']):>8} "
              f"{fmt_ns(s['max']):>8} {ci:>18} {fmt_ns(s['mean']):>8} {mci:>20}  "
              f"{fmt_ns(s['best_minus_best']):>8} {s['ratio']:7.4f} "
              f"{fmt_ns(s['process_median']):>9} {fmt_ns(s['process_mean']):>9}")


def print_head_to_head(res: dict, a: str, b: str) -> dict:
    """a against b directly, paired by round (both hand-written variants
    share the bare next() baseline, which then cancels): a - b per step,
    and the ratio of their added costs (medians; means)."""
    from _common import mean_ci, median_ci

    va, vb = np.asarray(res[a]["clock"]), np.asarray(res[b]["clock"])
    base = np.asarray(res["bare next()"]["clock"])
    d = va - vb
    lo, hi = median_ci(d)
    m, mlo, mhi = mean_ci(d)
    add_a, add_b = va - base, vb - base
    ratio_med = float(np.median(add_a) / np.median(add_b))
    ratio_mean = float(add_a.mean() / add_b.mean())
    print(f"  {a} - {b}, paired by round: median {fmt_ns(float(np.median(d)))} "
          f"[{fmt_ns(lo)}, {fmt_ns(hi)}], mean {fmt_ns(m)} [{fmt_ns(mlo)}, "
          f"{fmt_ns(mhi)}] ns per step; added, {a} / {b}: {ratio_med:.2f}x "
          f"(medians), {ratio_mean:.2f}x (means)")
    return {"median": float(np.median(d)), "lo": lo, "hi": hi, "mean": m,
            "mean_lo": mlo, "mean_hi": mhi, "ratio_median": ratio_med,
            "ratio_mean": ratio_mean}


def local_shape(args, shape: str, traceml, load_average) -> dict:
    """Time the local variants in one shape; print the table; stats."""
    ctx = Ctx(args, shape, tm=traceml)
    variants = shape_variants(LOCAL_VARIANTS, shape)
    rounds = args.rounds if shape == "dataloader" else args.light_rounds
    if shape == "dataloader":
        print(f"\n--- dataloader shape: DataLoader(TensorDataset("
              f"{args.dataset_steps * args.batch:,} x {args.dim} float32 + "
              f"label), batch_size={args.batch}, num_workers=0) + MLP "
              f"{args.dim}->{args.hidden}->10 forward; {args.dataset_steps:,} "
              f"steps per epoch")
    else:
        print(f"\n--- light shape: the same {args.dataset_steps:,} batches "
              "prebuilt in a list, no step")
    print(f"{rounds} rounds (+{args.warmup} warm-up) of one {ctx.block}-step "
          f"block per variant, random order; clock: "
          f"{'thread CPU' if args.clock == 'cpu' else 'wall'}")
    traceml.reset()
    t0 = time.perf_counter()
    apart = {n: v for n, v in variants.items() if n in LIGHT_APART} if shape == "light" else {}
    res = run_rounds(ctx, {n: v for n, v in variants.items() if n not in apart},
                     rounds, args.warmup, args.clock)
    if apart:
        # Heavy variants in their own group, with their own baseline: next
        # to ns-sized costs, their churn of the caches and the allocator
        # would inflate the others' blocks.
        group = {n: variants[n] for n in {v[1] for v in apart.values()}}
        group.update(apart)
        res2 = run_rounds(ctx, group, rounds, args.warmup, args.clock)
        res.update({n: res2[n] for n in apart})
        for n in group:
            if n not in apart:
                res[n + " (2nd group)"] = res2[n]
        variants = {**variants, **{n: (v[0], v[1] + " (2nd group)", *v[2:])
                                   for n, v in apart.items()}}
    print(f"({time.perf_counter() - t0:.1f} s; load average now {load_average()})")

    # report() once, after the timed blocks, timed on its own.
    steps = traceml._core.default_recorder().store_info()["steps"]
    w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
    rep = traceml.report()
    str(rep)
    report_ms = ((time.perf_counter_ns() - w0) / 1e6, (time.thread_time_ns() - c0) / 1e6)
    del rep
    traceml.reset()

    stats, rows = {}, []
    for name, v in variants.items():
        base = v[1]
        s = added_stats(res, name, base or name)
        stats[name] = s
        rows.append((name, base, s))
    print_table(rows)
    if apart:
        print(f"  ({', '.join(apart)}: timed in a second group of rounds with "
              "its own bare next() blocks)")
    d = np.median(np.asarray(res["bare next()"]["clock"])
                  - np.asarray(res["bare for"]["clock"]))
    print(f"  baselines: traceml wrap and the A/A copy vs bare for; the "
          f"hand-written variants vs bare next() (bare next() - bare for: "
          f"{fmt_ns(d)} ns, median)")
    print(f"  traceml.report() once, after the timed blocks, over {steps:,} "
          f"recorded steps: {report_ms[0]:.1f} ms wall, {report_ms[1]:.1f} ms "
          "CPU (not in the rows)")
    h2h = print_head_to_head(res, "traceml probes", "python list")
    h2h_two = print_head_to_head(res, "probes, no step_end", "python list")
    return {"stats": stats, "report_ms": report_ms, "report_steps": steps,
            "probes_vs_python": h2h, "probes_no_end_vs_python": h2h_two}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="few rounds, small epochs (about a minute with the peer)")
    p.add_argument("--shape", choices=["both", "dataloader", "light"],
                   default="both", help="loop shapes to time (default both)")
    p.add_argument("--rounds", type=int, default=None,
                   help="dataloader-shape rounds (default 600; quick: 60)")
    p.add_argument("--light-rounds", type=int, default=None,
                   help="light-shape rounds (default 60; quick: 8)")
    p.add_argument("--warmup", type=int, default=None,
                   help="untimed rounds first (default 5; quick: 2)")
    p.add_argument("--block", type=int, default=50,
                   help="steps per timed block, dataloader shape (default 50)")
    p.add_argument("--light-block", type=int, default=20_000,
                   help="steps per timed block, light shape (default 20,000)")
    p.add_argument("--clock", choices=sorted(CLOCKS), default="cpu",
                   help="this thread's CPU time (default) or the wall clock")
    p.add_argument("--dataset-steps", type=int, default=20_000,
                   help="batches per epoch (default 20,000; quick: 5,000)")
    p.add_argument("--batch", type=int, default=8, help="rows per batch (8)")
    p.add_argument("--dim", type=int, default=64, help="features per row (64)")
    p.add_argument("--hidden", type=int, default=256, help="MLP hidden width (256)")
    p.add_argument("--peer-venv", default=DEFAULT_PEER_VENV,
                   help="venv with traceml-ai (default .venv-peer)")
    p.add_argument("--no-peer", action="store_true", help="skip traceml-ai")
    p.add_argument("--peer-interval", type=float, default=0.05,
                   help="traceml-ai's sampler interval, s (default 0.05)")
    p.add_argument("--peer-default-interval", action="store_true",
                   help="also run the quickstart at traceml-ai's default 2 s")
    p.add_argument("--peer-timeout", type=float, default=900)
    p.add_argument("--json", metavar="PATH", default=None,
                   help="also write the target checks as JSON (run_all.py)")
    p.add_argument("--no-machine", action="store_true")
    p.add_argument("--peer-child", choices=sorted(PEER_MODES), help=argparse.SUPPRESS)
    p.add_argument("--peer-out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.rounds is None:
        args.rounds = 60 if args.quick else 600
    if args.light_rounds is None:
        args.light_rounds = 8 if args.quick else 60
    if args.warmup is None:
        args.warmup = 2 if args.quick else 5
    if args.quick:
        args.dataset_steps = min(args.dataset_steps, 5_000)

    if args.peer_child:
        return peer_child(args)

    # Our side: traceml (and _common) are imported only here.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import traceml
    from _common import Check, load_average, print_checks, print_machine, write_json

    if torch is None:
        print("torch is not installed: no DataLoader to time "
              "(pip install torch==2.13.0)")
        write_json(args.json, [], {"bench": "peers", "skipped": "no torch"})
        return 0

    if not args.no_machine:
        print_machine()
    print(f"torch {torch.__version__}, 1 torch thread, autograd off; "
          f"traceml {traceml.__version__}, default settings (sampler on)")
    shapes = ["dataloader", "light"] if args.shape == "both" else [args.shape]
    local = {s: local_shape(args, s, traceml, load_average) for s in shapes}

    peers = []
    if "dataloader" in shapes and not args.no_peer:
        launcher = os.path.join(args.peer_venv, "bin", "traceml")
        if not os.path.exists(launcher):
            print(f"\n(traceml-ai skipped: {launcher} is missing; README.md says "
                  "how to make the peer venv; --no-peer silences this)")
        else:
            runs = [("auto", args.peer_interval), ("manual", args.peer_interval)]
            if args.peer_default_interval:
                runs.append(("auto", 2.0))
            for mode, interval in runs:
                print(f"\n--- traceml-ai, init(mode={mode!r}), `traceml run "
                      f"--interval {interval:g}` in {args.peer_venv}, dataloader "
                      f"shape, {args.rounds} rounds of {args.block}-step blocks",
                      flush=True)
                r = run_peer(args, mode, interval)
                if r is None:
                    continue
                print(f"traceml-ai {r['traceml_ai']}, torch {r['torch']}, Python "
                      f"{r['python']}; DataLoader.__iter__ patched: "
                      f"{r['dataloader_patched']}; steps dropped (queue full): "
                      f"{r['dropped_steps']:,}; {r['launcher_s']:.1f} s in all")
                rows = []
                for name, v in r["variants"].items():
                    base = v["baseline"]
                    label = name if interval == args.peer_interval else f"{name} @ {interval:g} s"
                    rows.append((label, base, added_stats(r["results"], name, base or name)))
                print_table(rows)
                peers.append((r, rows))

    # ---- verdicts
    checks = []
    peer_stats = {label: s for _, rows in peers for label, base, s in rows if base}

    def others_of(st: dict) -> dict:
        return {n: s for n, s in st.items() if LOCAL_VARIANTS[n][1]
                and n != "bare for (A/A copy)" and not n.startswith(("traceml", "probes"))}

    for shape in local:
        # Issue 8's target: the probes add at most 0.6x what the Python
        # recorder adds, taking the same two stamps a step.  Judged on the
        # light loop: in the dataloader loop both add ~0.3 us to a ~100 us
        # step whose noise (the A/A row) is a few us, so the ratio of their
        # medians is mostly noise there, shown for information.
        two = local[shape]["probes_no_end_vs_python"]
        three = local[shape]["probes_vs_python"]
        checks.append(Check(
            "peers", f"{shape} loop: probes, no step_end (two stamps) added / python "
            "list added (medians)", two["ratio_median"], "x", "<= 0.6",
            two["ratio_median"] <= 0.6, info=shape != "light"))
        checks.append(Check(
            "peers", f"{shape} loop: probes with step_end (three stamps) added / python "
            "list added (medians)", three["ratio_median"], "x", "none", True, info=True))

    if "dataloader" in local:
        # Here the machine's noise is a few hundred ns a step: the verdict
        # on "least" counts only the differences the 95% intervals resolve.
        st = local["dataloader"]["stats"]
        wrap, aa = st["traceml wrap"], st["bare for (A/A copy)"]
        lo_w, hi_w = wrap["lo"], wrap["hi"]
        checks.append(Check(
            "peers", "dataloader loop: wrap added per step, median (paired)",
            wrap["median"], "ns", f"< {TARGET_NS:g} ns, if the noise resolved it",
            wrap["median"] < TARGET_NS, info=True))
        checks.append(Check(
            "peers", "dataloader loop: wrap added per step, median's 95% upper bound",
            hi_w, "ns", f"< {TARGET_NS:g} ns", hi_w < TARGET_NS, info=True))
        checks.append(Check(
            "peers", "dataloader loop: A/A copy, largest |bound| of its median's 95% CI "
            "(the noise floor)", max(abs(aa["lo"]), abs(aa["hi"])), "ns", "none",
            True, info=True))
        # Two identical loops differ too (the A/A row): a difference counts
        # as resolved only when the intervals are further apart than that.
        floor = max(abs(aa["lo"]), abs(aa["hi"]))
        others = others_of(st)
        others.update(peer_stats)
        above = [n for n, s in others.items() if s["lo"] - hi_w > floor]
        below = [n for n, s in others.items() if lo_w - s["hi"] > floor]
        unresolved = [n for n in others if n not in above and n not in below]
        margin = min((others[n]["lo"] - hi_w for n in above), default=float("nan"))
        checks.append(Check(
            "peers", f"dataloader loop: wrap adds less than each other variant "
            f"resolved beyond the A/A floor ({len(above)} of {len(others)}; "
            f"unresolved: {', '.join(unresolved) or 'none'}), smallest gap",
            margin, "ns", "no variant resolved below wrap", not below))
    if "light" in local:
        st = local["light"]["stats"]
        wrap = st["traceml wrap"]
        # As in the other benchmarks, the verdict takes the best timings
        # (other jobs only add time); the median is shown beside it.
        checks.append(Check(
            "peers", "light loop: wrap added per step, best-best",
            wrap["best_minus_best"], "ns", f"< {TARGET_NS:g} ns",
            wrap["best_minus_best"] < TARGET_NS))
        checks.append(Check(
            "peers", "light loop: wrap added per step, median (paired)",
            wrap["median"], "ns", f"< {TARGET_NS:g} ns", wrap["median"] < TARGET_NS,
            info=True))
        for key, how in (("best_minus_best", "best-best"), ("median", "medians")):
            others = {n: s[key] for n, s in others_of(st).items()}
            ours = min(wrap[key], st["traceml probes"][key], st["probes, no step_end"][key])
            low = min(others, key=others.get)
            checks.append(Check(
                "peers", f"light loop: cheapest other ({low}) minus traceml's "
                f"cheapest (wrap or probes), {how}", others[low] - ours, "ns",
                "> 0 (traceml adds the least)", ours < others[low],
                info=key == "median"))
    if peer_stats:
        low = min(peer_stats, key=lambda n: peer_stats[n]["median"])
        checks.append(Check(
            "peers", f"dataloader loop: cheapest traceml-ai variant ({low}), added",
            peer_stats[low]["median"], "ns", "none", True, info=True))
    print()
    print_checks(checks)
    write_json(args.json, checks, {
        "bench": "peers",
        "local": {s: v["stats"] for s, v in local.items()},
        "peers": peer_stats,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
