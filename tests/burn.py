"""Datasets whose __getitem__ burns a set amount of CPU time, for timing
shape tests on real DataLoaders."""

import multiprocessing
import os
import time

import torch
from torch.utils.data import Dataset, IterableDataset


def burn_cpu(seconds: float) -> None:
    """Spin until this thread has used `seconds` of CPU time (not wall
    time: under contention the wall time stretches, as real work does)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class BurnDataset(Dataset):
    """n items; item i costs cpu_s of CPU (slow_cpu_s where i % slow_every
    == slow_index, when given)."""

    def __init__(self, n, cpu_s, slow_every=None, slow_index=0, slow_cpu_s=0.0):
        self.n = n
        self.cpu_s = cpu_s
        self.slow_every = slow_every
        self.slow_index = slow_index
        self.slow_cpu_s = slow_cpu_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.slow_every and i % self.slow_every == self.slow_index:
            burn_cpu(self.slow_cpu_s)
        else:
            burn_cpu(self.cpu_s)
        return torch.tensor([i])


class SleepDataset(Dataset):
    """n items; each sleeps sleep_s (I/O-like cost that holds no CPU, so its
    timing survives a loaded host) and returns its index."""

    def __init__(self, n, sleep_s):
        self.n = n
        self.sleep_s = sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.sleep_s)
        return torch.tensor([i])


class BurnIterable(IterableDataset):
    """An IterableDataset of n items costing cpu_s each (single worker)."""

    def __init__(self, n, cpu_s):
        self.n = n
        self.cpu_s = cpu_s

    def __iter__(self):
        for i in range(self.n):
            burn_cpu(self.cpu_s)
            yield torch.tensor([i])


# Lock-step workers for cadence tests (measured in tests/integration/test_dataloader.py:
# workers left to the scheduler of a loaded 2-core host drift out of phase
# in about a third of runs; started at one barrier with their burn on one
# shared core they kept the period in all of 80-odd runs here, yet drifted
# in about one CI run in five; PacedBurnDataset, items of 3 ms CPU on a
# fixed 25 ms wall grid, kept it in 20 of 20 runs of 2 and 4 workers here
# beside three CPU hogs, and the two cadence tests in 18 of 18 beside two;
# with 8 ms of CPU an item, 4 workers beside three hogs drifted in 7 of
# 10: the burn must fit well inside the item under load).


class OneCoreBurnDataset(BurnDataset):
    """BurnDataset whose burn runs on one given core; the rest of the
    worker (collate, the queue's feeder thread, passing the batch's
    shared-memory handle) may run on any core."""

    def __init__(self, n, cpu_s, core):
        super().__init__(n, cpu_s)
        self.core = core

    def __getitem__(self, i):
        allowed = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {self.core})
        try:
            return super().__getitem__(i)
        finally:
            os.sched_setaffinity(0, allowed)


class PacedBurnDataset(Dataset):
    """n items; each burns cpu_s of CPU, then sleeps until its tick on a
    fixed grid of item_wall_s seconds counted from this process's first
    item (cpu_s must fit well inside item_wall_s).  Every worker so makes
    one item per item_wall_s however the host delays it: a late item makes
    the next ones skip their sleep until the grid is met again, so phase
    errors do not add up over a run.  Started together (StartTogether),
    k workers deliver their batches in rounds, and the loop waits once a
    round: the lock-step cadence, held on a crowded CI host where
    OneCoreBurnDataset's drifted in one run in five (CI, session 4).  The
    grid is per process and never restarts: build one per loader."""

    def __init__(self, n, cpu_s, item_wall_s):
        if not 0 <= cpu_s < item_wall_s:
            raise ValueError("cpu_s must be in [0, item_wall_s)")
        self.n = n
        self.cpu_s = cpu_s
        self.item_wall_s = item_wall_s
        self._t0 = None
        self._made = 0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self._t0 is None:
            self._t0 = time.monotonic()
        burn_cpu(self.cpu_s)
        self._made += 1
        delay = self._t0 + self._made * self.item_wall_s - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        return torch.tensor([i])


class StartTogether:
    """worker_init_fn: wait until all workers have started."""

    def __init__(self, num_workers):
        ctx = multiprocessing.get_context("fork")
        self.barrier = ctx.Barrier(num_workers, timeout=60)

    def __call__(self, worker_id):
        self.barrier.wait()
