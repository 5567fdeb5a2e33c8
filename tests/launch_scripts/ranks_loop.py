"""A data-parallel loop as users write it without DDP, for torchrun:
each rank reads its shard through a DistributedSampler and all-reduces
its loss every step over a gloo group.

    torchrun --nproc_per_node=2 ranks_loop.py [destroy|atexit|nogroup] [exit3]

``destroy`` (default): destroy_process_group() at the end, as the torch
tutorials end; ``atexit``: the group is left up at exit (torch's gloo
then often aborts at interpreter teardown, "terminate called without an
active exception", with or without traceml); ``nogroup``: no process
group at all (each rank its shard, torchrun's RANK and WORLD_SIZE).
``exit3``: then sys.exit(3) on every rank."""
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

how = sys.argv[1] if len(sys.argv) > 1 else "destroy"
status = 3 if sys.argv[2:] == ["exit3"] else 0
torch.set_num_threads(1)
if how == "nogroup":
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
else:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

data = TensorDataset(torch.arange(64.0))
sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=False)
loader = DataLoader(data, batch_size=2, sampler=sampler)
total = torch.zeros(1)
for (x,) in loader:
    time.sleep(0.002)      # the step's compute
    loss = x.sum().reshape(1)
    if how != "nogroup":
        dist.all_reduce(loss)
    total += loss
print(f"rank {rank} of {world}: {len(loader)} steps, total {total.item()}", flush=True)
print(f"rank {rank} env {os.environ['LOCAL_RANK']}", file=sys.stderr, flush=True)
if how == "destroy":
    dist.destroy_process_group()
sys.exit(status)
