"""One rank of a small DistributedDataParallel job, for tests/integration/test_ranks.py
and benchmarks/bench_gather.py (run as a script, one process per rank).

    python tests/ranks_worker.py RANK WORLD INIT_FILE OUT_DIR SCENARIO

A real DDP model (a 64x64 linear layer, gloo, CPU) with a real gradient
all-reduce per step, iterating ``traceml.wrap(DataLoader(...))``
(num_workers=0; each dataset item is a whole batch).  Scenarios (``,``
joins several):

* ``stall=R``: rank R's dataset sleeps STALL_S on every 4th batch;
* ``steps=R:N``: rank R runs N steps (DDP with ``join`` so that the
  others' all-reduces do not wait for it);
* ``absent=R``: rank R trains but never calls the gather (it sleeps
  past the gather's deadline);
* ``timeout=S``: the gather's timeout_s;
* ``repeat=K``: gather K times (rank 0 saves ``job.run``, ``job2.run``, ...);
* ``dies=R``: rank R checks in to the gather, then exits before sending.

Every rank ends with one all-reduce on the job's own process group
(``allreduce{R}`` holds its sum): traceml's gather, even past its
deadline, must leave that group working.

Each rank saves its own records (``rank{R}.npy``, the local report's
steps); rank 0 saves the gathered report (``job.run``) and its text
(``job.txt``).
"""

from __future__ import annotations

import datetime
import os
import sys
import time

STEPS = 40
STALL_S = 0.05
COMPUTE_S = 0.008  # the forward's share of a step: a sleep, so 3 ranks fit 2 cores


def main(rank: int, world: int, init: str, out: str, scenario: str) -> None:
    import numpy as np
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, Dataset

    import traceml

    opts = dict(kv.split("=", 1) for kv in scenario.split(",") if "=" in kv)
    stall_rank = int(opts["stall"]) if "stall" in opts else None
    steps = STEPS
    short = opts.get("steps")
    if short and int(short.split(":")[0]) == rank:
        steps = int(short.split(":")[1])
    absent = int(opts["absent"]) if "absent" in opts else None
    dies = int(opts["dies"]) if "dies" in opts else None
    timeout_s = float(opts.get("timeout", 20))

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))

    class Batches(Dataset):
        def __len__(self):
            return steps

        def __getitem__(self, i):
            if rank == stall_rank and i % 4 == 3:
                time.sleep(STALL_S)
            g = torch.Generator().manual_seed(i)
            return torch.randn(16, 64, generator=g)

    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(64, 64))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Batches(), batch_size=None, num_workers=0)
    with model.join():
        for x in traceml.wrap(loader, name="train"):
            opt.zero_grad()
            time.sleep(COMPUTE_S)
            model(x).square().mean().backward()
            opt.step()
    np.save(os.path.join(out, f"rank{rank}.npy"), traceml.report().steps)
    if rank == dies:
        # Checks in, then dies before sending anything.
        from traceml import ranks

        def die(*args, **kwargs):
            os._exit(0)

        ranks._send = die
    if rank == absent:
        time.sleep(timeout_s + 2)
    else:
        for k in range(int(opts.get("repeat", 1))):
            job = traceml.gather(timeout_s=timeout_s)
            if rank == 0:
                job.save(os.path.join(out, "job.run" if k == 0 else f"job{k + 1}.run"))
                with open(os.path.join(out, "job.txt"), "w", encoding="utf-8") as f:
                    f.write(str(job))
            else:
                assert job is None
        with open(os.path.join(out, f"done{rank}"), "w") as f:
            f.write("ok")
    if dies is not None:
        os._exit(0)
    # The job's own group still works after traceml's gather (and after
    # its deadline passed on an absent rank): one more all-reduce.
    total = torch.ones(1)
    dist.all_reduce(total)
    with open(os.path.join(out, f"allreduce{rank}"), "w") as f:
        f.write(str(int(total.item())))
    # Not destroy_process_group(): rank 0 may hold receives abandoned at
    # the deadline (an absent rank); the process ends here either way.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4],
         sys.argv[5] if len(sys.argv) > 5 else "")
