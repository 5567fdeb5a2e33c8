"""The GPU-visible input wait (CUDA events) and GPU utilisation in the input
waits (NVML).
"""

from __future__ import annotations

import math
from typing import Optional


from ..fmt import fmt_s, pct
from . import input_bound
from ._types import Finding, Words


# The GPU-visible input share (GPU-visible wait / GPU step, over the steady
# steps with both readings) takes over the diagnosis only when it speaks for
# most of the run: at least GPU_MIN_COVERAGE of the steady steps read, and
# at least MIN_STEADY_STEPS of them.  A half is a choice, not a measurement:
# below it the readings may describe another part of the run than the host
# share does (steps skipped while the ring was full are the GPU's slowest
# stretch).  The bounds are the host's own (INPUT_BOUND_SHARE,
# COMPUTE_BOUND_SHARE): both are shares of the step lost to waiting for
# input, one as the host saw it, the other as the GPU did.
GPU_MIN_COVERAGE = 0.5

GPU_NOT_USED = "gpu_not_used"        # too few readings: the host diagnosis stands
GPU_AGREES = "gpu_agrees"            # the GPU-visible share gives the same label
GPU_DID_NOT_WAIT = "gpu_did_not_wait"  # host input-bound, the GPU under the bound
GPU_DIFFERS = "gpu_differs"          # another label, from the GPU-visible share


# NVML's utilisation sample is the percent of the driver's window (1/6 s to
# 1 s) in which a kernel ran; a window that straddles the edge of an input
# wait mixes the wait with compute.  With GPU_UTIL_MIN_READINGS readings in
# each kind of interval, one such straddling reading moves a kind's mean by
# at most 100 / 5 = 20 points; under it there are "too few readings to
# tell".  The rule needs a drop larger than that: at least
# GPU_UTIL_MIN_DROP_PCT points (20 from one straddler, plus a margin of
# half as much again) and the waits' mean at most GPU_UTIL_MAX_RATIO of the
# rest's (a GPU at 65% in waits against 95% elsewhere is not idle).  Both
# are choices from that arithmetic, not measurements.
GPU_UTIL_MIN_READINGS = 5
GPU_UTIL_MIN_DROP_PCT = 30.0
GPU_UTIL_MAX_RATIO = 0.5

GPU_UTIL_TOO_FEW = "too_few"              # under GPU_UTIL_MIN_READINGS in a kind
GPU_UTIL_IDLE_IN_WAITS = "gpu_idle_in_waits"  # the GPU idles while the loop waits


def gpu_util_rule(slow_readings: int, fast_readings: int, slow_mean: Optional[float],
                  fast_mean: Optional[float]) -> Optional[str]:
    """What NVML's utilisation in input waits (slow) against the rest of
    the steps (fast) says: GPU_UTIL_TOO_FEW with under
    GPU_UTIL_MIN_READINGS readings in either; GPU_UTIL_IDLE_IN_WAITS when
    the waits' mean is at least GPU_UTIL_MIN_DROP_PCT points below the
    rest's and at most GPU_UTIL_MAX_RATIO of it (it confirms that the GPU
    idles while the loop waits for input); None otherwise (nothing is
    said beyond the numbers)."""
    if (slow_readings < GPU_UTIL_MIN_READINGS or fast_readings < GPU_UTIL_MIN_READINGS
            or slow_mean is None or fast_mean is None):
        return GPU_UTIL_TOO_FEW
    if (fast_mean - slow_mean >= GPU_UTIL_MIN_DROP_PCT
            and slow_mean <= GPU_UTIL_MAX_RATIO * fast_mean):
        return GPU_UTIL_IDLE_IN_WAITS
    return None


def gpu_diagnosis(host: input_bound.Diagnosis, gpu_share: Optional[float], coverage: Optional[float],
                  steps_read: int) -> tuple[input_bound.Diagnosis, str]:
    """(the diagnosis, the rule's code) once the GPU-visible input share
    is known.

    With under GPU_MIN_COVERAGE of the steady steps read, or fewer than
    MIN_STEADY_STEPS readings, the host's diagnosis stands
    (GPU_NOT_USED).  Otherwise the GPU-visible share is diagnosed with the
    host's bounds (:func:`diagnose`): when the host reads INPUT-BOUND or
    HAND-OVER but the GPU waited under INPUT_BOUND_SHARE of its step, the
    host waited while the GPU worked (GPU_DID_NOT_WAIT: the GPU-visible
    label); when both are input-bound the host's label stays (HAND-OVER
    and HOST-BOUND say more); any other difference takes the GPU-visible label
    (GPU_DIFFERS: e.g. a host-to-device copy marked with input_ready()
    that the host wait does not hold).
    """
    if (gpu_share is None or not math.isfinite(gpu_share) or coverage is None
            or coverage < GPU_MIN_COVERAGE or steps_read < input_bound.MIN_STEADY_STEPS
            or host.label == input_bound.NO_DATA):
        return host, GPU_NOT_USED
    gpu = input_bound.diagnose(gpu_share)
    host_input = host.label in (input_bound.INPUT_BOUND, input_bound.HAND_OVER,
                                input_bound.HOST_BOUND)
    if host_input and gpu.label == input_bound.INPUT_BOUND:
        return host, GPU_AGREES
    if host_input:
        return gpu, GPU_DID_NOT_WAIT
    if gpu.label == host.label:
        return host, GPU_AGREES
    return gpu, GPU_DIFFERS


GPU_ROWS = (("host wait", "host_wait_s"), ("GPU-visible wait", "gpu_wait_s"),
            ("GPU step", "gpu_step_s"))
GPU_COLS = ("mean", "median", "p95")


def _pct_or_dash(share: Optional[float], digits: int = 0) -> str:
    return "-" if share is None else pct(share, digits)


def _shares(p: dict) -> tuple[str, str]:
    return _pct_or_dash(p.get("host_share"), 1), _pct_or_dash(p.get("gpu_share"), 1)


# The words of the rule that decided the diagnosis once GPU-visible waits
# were read, by gpu_diagnosis's code.
WORDS: dict[str, Words] = {
    GPU_NOT_USED: lambda p: (
        f"GPU-visible waits read on {_pct_or_dash(p.get('coverage'))} of the steady steps "
        f"({p.get('steps_read', 0)}); under {pct(GPU_MIN_COVERAGE)} "
        f"or {input_bound.MIN_STEADY_STEPS} steps they do not decide the diagnosis"),
    GPU_DID_NOT_WAIT: lambda p: (
        "the host waited {} of its step for input, but the GPU waited only {} of its step "
        "(< {}): the host waited while the GPU was still working on the previous step, so "
        "faster input would gain little").format(*_shares(p), pct(input_bound.INPUT_BOUND_SHARE)),
    GPU_AGREES: lambda p: (
        "the GPU saw the same: it waited {1} of its step for input (host {0})".format(*_shares(p))),
    GPU_DIFFERS: lambda p: (
        "the GPU waited {1} of its step for input (host {0}, same steps); the GPU-visible "
        "share decides".format(*_shares(p))),
}


def gpu_finding(code: str, g: dict) -> Finding:
    """The rule behind the diagnosis once GPU-visible waits are read, as a
    Finding: gpu_diagnosis's ``code`` and the numbers of the report's
    ``gpu`` block ``g`` its words quote (shares as fractions)."""
    return Finding(code, {k: g.get(k) for k in ("host_share", "gpu_share", "coverage",
                                                "steps_read")})


def gpu_lines(s: dict) -> list[str]:
    """The lines under the GPU table: coverage, the shares, what the
    readings mean, and the rule; [] without a ``gpu`` block."""
    g = s.get("gpu")
    if not g:
        return []
    out = [f"GPU-visible input wait ({g.get('backend') or 'cuda'} events): read on "
           f"{g['steps_read']} of {g['steady_steps']} steady steps "
           f"({_pct_or_dash(g['coverage'])})"
           + (f", {g['skipped']} not recorded (ring of {g['ring']} full)" if g["skipped"] else "")
           + (f", {g['pending']} not reached by the GPU yet (torch.cuda.synchronize() "
              "before report() reads them)" if g["pending"] else "")]
    if g["gpu_share"] is not None:
        out.append(f"  the GPU waited {pct(g['gpu_share'], 1)} of its step for input; "
                   f"the host {_pct_or_dash(g['host_share'], 1)} of its step, on the same steps")
    out.append("  " + ("waits run to input_ready() (the host-to-device copy included) on "
                       f"{g['ready_marked']} steps" if g["ready_marked"] else
                       "waits end when the batch reached the loop: a host-to-device copy "
                       "after it counts as GPU step, not wait (input_ready() to include it)"))
    if g["rule"] != GPU_NOT_USED or g["steps_read"]:
        out.append("  " + g["rule_text"])
    if g.get("error"):
        out.append(f"  the event source failed and was turned off: {g['error']}")
    out.extend("  " + line for line in gpu_util_lines(g.get("utilisation")))
    return out


def _util_pct(kind: dict) -> str:
    m = kind.get("mean_pct")
    return ("-" if m is None else f"{m:.0f}%") + f" ({kind.get('readings', 0)} readings)"


def gpu_util_lines(u: Optional[dict]) -> list[str]:
    """The GPU utilisation lines (NVML; the gpu block's ``utilisation``,
    evidence.gpu_utilisation): unavailable and why, or the mean in input
    waits against the rest of the steps, and what gpu_util_rule
    says; [] without it (a run file saved before it was read)."""
    if not u:
        return []
    if not u.get("available"):
        return [f"GPU utilisation (NVML): unavailable: {u.get('why') or 'not read'}"]
    window = u.get("window_s")
    out = ["GPU utilisation (NVML, a kernel running, % of the driver's window"
           + (f" of about {fmt_s(window)}" if window else "") + "): "
           f"{_util_pct(u['slow'])} during input waits, "
           f"{_util_pct(u['fast'])} in the rest of the steps"]
    if u.get("rule") == GPU_UTIL_TOO_FEW:
        out.append(f"  too few readings to tell (under {GPU_UTIL_MIN_READINGS} in input "
                   "waits or in the rest; only waits longer than the driver's window show)")
    elif u.get("rule") == GPU_UTIL_IDLE_IN_WAITS:
        out.append("  NVML confirms that the GPU idles while the loop waits for input: its "
                   "utilisation drops in the waits")
    lost = (u.get("overwritten") or 0) + (u.get("dropped") or 0)
    if lost:
        out.append(f"  {lost} NVML readings lost (the ring was full, or the driver announced them but did not return them)")
    if u.get("error"):
        out.append(f"  NVML stopped: {u['error']}")
    return out
