"""Run the traceml benchmarks and print a compact summary.

Each benchmark runs in its own Python process (so that the memory
benchmark starts from a clean heap and no benchmark inherits another's
store), its full output is shown as it runs, and the targets of all of
them are collected at the end::

    python benchmarks/run_all.py            # full run (15-30 minutes)
    python benchmarks/run_all.py --quick    # smoke run (about 6 minutes)
    python benchmarks/run_all.py --no-peer  # without traceml-ai

bench_peers.py runs traceml-ai from a second venv (--peer-venv, default
the repository's .venv-peer) and skips it, saying so, when that venv is missing;
bench_callgrind.py skips itself when valgrind is missing.

Exit status: 0 when every script ran (whatever the verdicts), 1 when one
failed; with ``--strict``, also 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from _common import load_average, machine_info, print_machine

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = [
    "bench_probes.py",
    "bench_wrap.py",
    "bench_loader.py",
    "bench_reduce.py",
    "bench_memory.py",
    "bench_longrun.py",
    "bench_sampler.py",
    "bench_peers.py",
    "bench_floor.py",
    "bench_callgrind.py",
    "bench_gather.py",
]


def run_one(script: str, quick: bool, tmpdir: str,
            extra: list[str]) -> tuple[int, list[dict], float]:
    """Run one script; returns its exit status, its checks and its wall time."""
    out = os.path.join(tmpdir, script + ".json")
    cmd = [sys.executable, os.path.join(HERE, script), "--no-machine", "--json", out]
    if quick:
        cmd.append("--quick")
    cmd += extra
    flags = " ".join(cmd[cmd.index(out) + 1:])
    print(f"\n=== {script}{' ' + flags if flags else ''} ===", flush=True)
    t0 = time.perf_counter()
    rc = subprocess.call(cmd)
    elapsed = time.perf_counter() - t0
    checks: list[dict] = []
    if rc == 0 and os.path.exists(out):
        with open(out) as f:
            checks = json.load(f)["checks"]
    return rc, checks, elapsed


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fast smoke run of each")
    p.add_argument(
        "--strict", action="store_true", help="exit 1 when a target is missed"
    )
    p.add_argument(
        "--only", nargs="+", choices=SCRIPTS, default=SCRIPTS, help="a subset"
    )
    p.add_argument("--no-peer", action="store_true",
                   help="bench_peers.py without traceml-ai")
    p.add_argument("--peer-venv", default=None,
                   help="bench_peers.py: the venv with traceml-ai")
    args = p.parse_args(argv)
    extras = {script: [] for script in SCRIPTS}
    if args.no_peer:
        extras["bench_peers.py"].append("--no-peer")
    if args.peer_venv:
        extras["bench_peers.py"] += ["--peer-venv", args.peer_venv]

    print_machine(machine_info())
    results = []
    with tempfile.TemporaryDirectory() as tmpdir:
        for script in args.only:
            results.append(
                (script, *run_one(script, args.quick, tmpdir, extras[script]))
            )

    print(f"\n=== summary === (load average now: {load_average()})")
    failed = missed = 0
    for script, rc, checks, elapsed in results:
        status = "ok" if rc == 0 else f"FAILED (exit {rc})"
        print(f"{script} ({elapsed:.1f} s): {status}")
        failed += rc != 0
        for c in checks:
            verdict = "info" if c.get("info") else "MET" if c["met"] else "MISSED"
            missed += verdict == "MISSED"
            sep = "" if c["unit"] in ("", "x") else " "
            print(
                f"  [{verdict:6}] {c['name']}: {c['value']:.4g}{sep}{c['unit']} "
                f"(target {c['target']})"
            )
    print(
        f"\n{len(results) - failed}/{len(results)} scripts ran; "
        f"{missed} target(s) missed"
    )
    if failed or (args.strict and missed):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
