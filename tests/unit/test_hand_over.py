"""hand_over: bytes advice only where bytes cross processes."""

from traceml.findings import hand_over, input_bound

BIG = 2 * hand_over.HANDOVER_MIN_BYTES


def test_no_hand_over_without_worker_processes():
    # num_workers=0: ImageFolder-style float32 batches past the line, made in
    # the main process: nothing is handed over, so no bytes advice.
    assert hand_over.handover(BIG, input_bound.INPUT_BOUND, None, True, 0) is None
    assert hand_over.handover(BIG, input_bound.INPUT_BOUND, True, False, 2) == "handover_bytes"
    assert hand_over.handover(BIG, input_bound.INPUT_BOUND, False, True, 2) == "handover_main"
