"""prediction_check's words: the numbers in one line come from one pace."""

import re

import pytest

from traceml import predict
from traceml.findings import prediction_check


def test_a_row_that_keeps_up_quotes_the_cores_at_its_own_pace():
    # Batches of 16 ms of CPU and 84 ms asleep at 2 workers on 2 CPUs; the
    # loop's 12 ms step body is 5 ms on a CPU and 7 ms waiting for a core.
    # The rows read the compute as measured (12 ms), at which k workers
    # need 16 / 12 = 1.3 cores; at the quiet compute (5 ms) they would
    # need 3.2, more than the host has, and a line saying both
    # ("num_workers=57 keeps up ... the workers need about 13.3 cores" on 2
    # CPUs, helper 33A) contradicts itself.
    def stats(v):
        return {"mean": v, "median": v, "p95": v}

    s = {"production": {"available": True, "coverage": 1.0, "make_s": stats(0.100),
                        "cpu_s": stats(0.016), "runq_s": None, "handover_s": stats(0.0),
                        "busy_share": 1.0},
         "host": {"usable_cpus": 2}, "loader": {"num_workers": 2},
         "compute_s": {"mean": 0.012}, "input_wait_s": {"mean": 0.04},
         "step_s": {"mean": 0.052},
         "wait_parts": {"compute": {"steps": 40, "compute_s": 0.48, "runq_known": True,
                                    "parts_s": {"main_cpu": 0.20, "cpu_wait": 0.28,
                                                "off_cpu": 0.0}}}}
    p = predict.predict(s)
    assert p["keeps_up_with"] is not None and p["keeps_up_with"] > 2
    assert p["worker_cores_needed"] == pytest.approx(0.016 / (0.012 * 0.20 / 0.48))
    assert p["worker_cores_needed"] > 2
    trusted = {**p, "trust": prediction_check.PREDICT_TRUSTED}
    (line,) = [t for t in prediction_check.prediction_lines({"prediction": trusted})
               if "keeps up" in t]
    cores = float(re.search(r"the workers need about ([0-9.]+) cores", line).group(1))
    assert cores == pytest.approx(0.016 / 0.012, abs=0.05), line
    assert cores <= p["usable_cpus"]
