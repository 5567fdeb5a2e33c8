"""traceml.gather() at 1M steps per rank on 3 ranks: wall time and peak
memory on rank 0, beside the floor.

The script starts ``--ranks`` processes of itself (gloo over a
``file://`` rendezvous in a temporary directory, CPU only).  Each rank
records ``--steps`` steps with a Recorder's probes (rank 2 with a wait
every 8th step, so that the job has a straggler to find), then every rank
calls ``traceml.gather(recorder=rec)`` ``--rounds`` times.  Rank 0 times,
per round, in the same process:

* ``total``: the whole ``gather()`` call;
* ``local``: its own report (``Recorder.report``), which every rank
  builds before sending;
* ``transfer``: the store check-in, the gloo group of traceml's own and
  the point-to-point receives of every other rank's facts and records
  (``ranks._present`` + ``new_group`` + ``ranks._receive``);
* ``combine``: ``ranks.combine``, the job's report (the largest wait per
  step, per-rank verdicts, straggler, echo, and ``report.build`` over the
  job's steps);
* the floor: a ``numpy.copyto`` of the bytes rank 0 receives (32 B a step
  of every other rank) between two arrays allocated beforehand,
  interleaved with the rounds.

Wall clock (the ranks are processes; gloo's threads do the receiving),
best and median of the rounds; the peak RSS of rank 0 above its RSS
before each call (``VmHWM`` reset through /proc/self/clear_refs), in
bytes per gathered step (steps of all ranks).  No target in the issue:
the numbers are shown, not judged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (Check, common_args, print_checks, print_machine,
                     proc_status_kib, reset_peak, write_json)


def child(rank: int, world: int, init: str, out: str, steps: int, rounds: int) -> None:
    import datetime

    import torch.distributed as dist

    import traceml
    from traceml import ranks

    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=300))
    rec = traceml.Recorder()
    begin, done, end = rec.step_begin, rec.fetch_done, rec.step_end
    slow = rank == 2
    for i in range(steps):
        begin()
        if slow and i % 8 == 7:
            t = time.perf_counter_ns() + 20_000  # a 20 us wait
            while time.perf_counter_ns() < t:
                pass
        done()
        end()
    timings: dict = {"total": [], "local": [], "transfer": [], "combine": [], "floor": [],
                     "peak_bytes": []}
    received = (world - 1) * steps * 32
    src = np.ones(received, dtype=np.uint8)
    dst = np.zeros(received, dtype=np.uint8)
    phase = {}

    def timed(name, fn):
        def run(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                phase[name] = phase.get(name, 0.0) + time.perf_counter() - t0
        return run

    ranks._present = timed("transfer", ranks._present)
    ranks._receive = timed("transfer", ranks._receive)
    dist.new_group = timed("transfer", dist.new_group)
    ranks.combine = timed("combine", ranks.combine)
    for _ in range(rounds):
        t0 = time.perf_counter()
        rec.report()
        local = time.perf_counter() - t0
        t0 = time.perf_counter()
        np.copyto(dst, src)
        timings["floor"].append(time.perf_counter() - t0)
        phase.clear()
        rss = proc_status_kib("VmRSS") * 1024
        reset_peak()
        t0 = time.perf_counter()
        job = traceml.gather(recorder=rec, timeout_s=300)
        total = time.perf_counter() - t0
        peak = proc_status_kib("VmHWM") * 1024 - rss
        if rank == 0:
            assert job.summary["ranks"]["gathered"] == list(range(world))
            assert job.summary["steps"] == steps
            timings["total"].append(total)
            timings["local"].append(local)
            timings["transfer"].append(phase.get("transfer", 0.0))
            timings["combine"].append(phase.get("combine", 0.0))
            timings["peak_bytes"].append(peak)
            timings["stragglers"] = job.summary["ranks"]["stragglers"]
        del job
    if rank == 0:
        with open(os.path.join(out, "rank0.json"), "w") as f:
            json.dump(timings, f)
    os._exit(0)


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--child":
        rank, world, init, out, steps, rounds = argv[1:7]
        child(int(rank), int(world), init, out, int(steps), int(rounds))
        return 0
    p = common_args(__doc__.splitlines()[0], timing=False)
    p.add_argument("--steps", type=int, default=None,
                   help="steps per rank (default 1,000,000; quick: 100,000)")
    p.add_argument("--ranks", type=int, default=3, help="ranks (default 3)")
    p.add_argument("--rounds", type=int, default=None, help="gathers (default 5; quick: 2)")
    args = p.parse_args(argv)
    steps = args.steps or (100_000 if args.quick else 1_000_000)
    rounds = args.rounds or (2 if args.quick else 5)
    if not args.no_machine:
        print_machine()
    with tempfile.TemporaryDirectory() as tmp:
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child",
                                   str(r), str(args.ranks), os.path.join(tmp, "rdv"), tmp,
                                   str(steps), str(rounds)],
                                  env=dict(os.environ, OMP_NUM_THREADS="1"))
                 for r in range(args.ranks)]
        try:
            for proc in procs:
                proc.wait(timeout=1800)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        if any(proc.returncode for proc in procs):
            print("a rank failed", file=sys.stderr)
            return 1
        with open(os.path.join(tmp, "rank0.json")) as f:
            t = json.load(f)
    gathered = steps * args.ranks
    print(f"gather: {args.ranks} ranks x {steps:,} steps, {rounds} rounds, on rank 0 "
          f"(received {(args.ranks - 1) * steps * 32 / 1e6:.0f} MB); stragglers found: "
          f"{t['stragglers']}")
    print(f"{'':10} {'best':>9} {'median':>9}")
    for key in ("total", "local", "transfer", "combine", "floor"):
        v = np.asarray(t[key])
        print(f"{key:10} {v.min():8.3f}s {np.median(v):8.3f}s")
    best = min(t["total"])
    ratio = min(t["transfer"]) / min(t["floor"])
    peak = np.asarray(t["peak_bytes"]) / gathered
    print(f"transfer / floor (best): {ratio:.1f}x;  peak RSS above the start on rank 0: "
          f"{peak.min():.1f}-{peak.max():.1f} B per gathered step "
          f"({np.max(t['peak_bytes']) / 2**20:.0f} MiB)")
    checks = [
        Check("gather", f"gather() total at {steps:,} steps x {args.ranks} ranks", best, "s",
              "none (shown)", True, info=True),
        Check("gather", "transfer / memcpy floor", ratio, "x", "none (shown)", True, info=True),
        Check("gather", "peak RSS on rank 0 per gathered step", float(peak.max()), "B",
              "none (shown)", True, info=True),
    ]
    print_checks(checks)
    write_json(args.json, checks, {"timings": t})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
