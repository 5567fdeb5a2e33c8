"""One rank of a small 2-rank training job run by a trainer with a traceml
adapter, for tests/integration/test_integrations_ranks.py (launched by torchrun, one
process per rank, gloo on the CPU):

    python -m torch.distributed.run --standalone --nproc_per_node=2 \\
        tests/trainer_ranks_worker.py FRAMEWORK OUT_DIR

FRAMEWORK is ``lightning`` (``lightning.Trainer(strategy="ddp")`` with
``traceml.integrations.lightning.TraceMLCallback``), ``huggingface``
(``transformers.Trainer`` with ``traceml.integrations.huggingface.
TraceMLCallback``) or ``accelerate`` (a loop over
``traceml.integrations.accelerate.prepare``, then ``publish``).  Each
trains a one-weight model wrapped in DistributedDataParallel (a real
gradient all-reduce per step) for STEPS optimizer steps, one epoch of
ITEMS items
(batch size 1, num_workers=0); on rank 1 every 4th fetched item (4th,
8th, ... call of ``__getitem__``) sleeps STALL_S.

Each rank writes into OUT_DIR:

* ``pid{R}``: its process group id, first thing (the test kills it if the
  run fails or hangs; torchrun starts each rank in a session of its own);
* ``local{R}.npy``: its own steps (the local report of the recorder the
  adapter records into);
* ``result{R}.json``: what the adapter returned (None or not), the paths
  it wrote, the framework's step count, and the dataset indices this rank
  fetched (the framework's sampler shards them);
* its run folder ``rank{R}/`` (the trainer's ``default_root_dir`` /
  ``output_dir`` / ``project_dir``), where the adapter writes, on rank 0
  only.
"""

from __future__ import annotations

import json
import os
import sys
import time

from tiny_models import hf_model, lightning_module, mse_loss

STEPS = 24          # optimizer steps per rank
ITEMS = 2 * STEPS   # dataset items: STEPS a rank once sharded (one epoch)
STALL_S = 0.05      # rank 1: every 4th fetched item sleeps this long
COMPUTE_S = 0.004   # each training step sleeps this long (2 ranks share 2 cores)
STALL_RANK = 1

# No framework phones home, asks for a login or reports usage (set by the
# test for the launch, and here again for a rank run by hand).
OFFLINE = {
    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "WANDB_DISABLED": "true", "WANDB_MODE": "disabled", "DISABLE_MLFLOW_INTEGRATION": "TRUE",
    "DO_NOT_TRACK": "1", "TOKENIZERS_PARALLELISM": "false",
}


def stalling_dataset(torch, rank, make_item):
    """ITEMS items; on STALL_RANK every 4th call of __getitem__ sleeps
    STALL_S.  ``fetched`` lists the indices asked for, in order."""

    class Stalling(torch.utils.data.Dataset):
        def __init__(self):
            self.fetched = []

        def __len__(self):
            return ITEMS

        def __getitem__(self, i):
            self.fetched.append(int(i))
            if rank == STALL_RANK and len(self.fetched) % 4 == 0:
                time.sleep(STALL_S)
            return make_item(i)

    return Stalling()


# Each run_* trains on this rank and returns (what the adapter returned:
# the job's report or None, the paths it wrote or None, this rank's own
# steps, facts for the test, the dataset).

def run_lightning(torch, rank, folder):
    import lightning as L
    from lightning.pytorch.loggers import CSVLogger
    from torch.utils.data import DataLoader

    from traceml.integrations.lightning import TraceMLCallback

    Tiny = lightning_module(L, torch, mse_loss(torch), COMPUTE_S)
    ds = stalling_dataset(torch, rank, lambda i: (torch.tensor([float(i)]), torch.tensor([1.0])))
    callback = TraceMLCallback()
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_steps=STEPS,
                        callbacks=[callback], logger=CSVLogger(folder), default_root_dir=folder,
                        enable_progress_bar=False, enable_model_summary=False,
                        enable_checkpointing=False, num_sanity_val_steps=0)
    trainer.fit(Tiny(), DataLoader(ds, batch_size=1, num_workers=0))
    # The loader the fit loop iterated: the callback's wrapper of the
    # DataLoader Lightning rebuilt with a DistributedSampler.
    loaders = getattr(trainer.fit_loop._combined_loader, "flattened", None) or []
    inner = [getattr(dl, "iterable", dl) for dl in loaders]
    return callback.last_report, callback.paths, callback.recorder.report().steps, {
        "global_step": int(trainer.global_step),
        "framework_rank": int(trainer.global_rank),
        "world_size": int(trainer.world_size),
        "environment": type(trainer.strategy.cluster_environment).__name__,
        "launcher_external": bool(trainer.strategy.cluster_environment
                                  .creates_processes_externally),
        "loader_types": [type(dl).__name__ for dl in loaders],
        "samplers": [type(getattr(dl, "sampler", None)).__name__ for dl in inner],
    }, ds


def run_huggingface(torch, rank, folder):
    import transformers

    from traceml.integrations.huggingface import TraceMLCallback

    ds = stalling_dataset(torch, rank, lambda i: {"x": torch.tensor([float(i)]),
                                                  "labels": torch.tensor([1.0])})
    callback = TraceMLCallback()
    args = transformers.TrainingArguments(
        output_dir=folder, max_steps=STEPS, per_device_train_batch_size=1,
        dataloader_num_workers=0, report_to="none", use_cpu=True, ddp_backend="gloo",
        logging_steps=5, save_strategy="no", disable_tqdm=True)
    trainer = transformers.Trainer(model=hf_model(torch, COMPUTE_S), args=args, train_dataset=ds,
                                   callbacks=[callback])
    trainer.train()
    return callback.last_report, callback.paths, callback.recorder.report().steps, {
        "global_step": int(trainer.state.global_step),
        "framework_rank": int(args.process_index),
        "world_size": int(args.world_size),
        "is_world_process_zero": bool(trainer.state.is_world_process_zero),
        "model": type(trainer.model_wrapped).__name__,
        "loader": callback.loader,
        # Whether the numbers of Report.flat() reached this rank's log history.
        "logged": any("traceml/steps" in e for e in trainer.state.log_history),
    }, ds


def run_accelerate(torch, rank, folder):
    import accelerate
    from torch.utils.data import DataLoader

    from traceml.integrations import accelerate as tm_accelerate

    accelerator = accelerate.Accelerator(cpu=True, project_dir=folder)
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model, optimizer = accelerator.prepare(model, optimizer)
    ds = stalling_dataset(torch, rank, lambda i: (torch.tensor([float(i)]), torch.tensor([1.0])))
    # The documented path: traceml's default recorder, publish() makes the report.
    loader = tm_accelerate.prepare(accelerator, DataLoader(ds, batch_size=1, num_workers=0))
    steps = 0
    for x, y in loader:
        optimizer.zero_grad()
        time.sleep(COMPUTE_S)
        accelerator.backward(torch.nn.functional.mse_loss(model(x), y))
        optimizer.step()
        steps += 1
    rep = tm_accelerate.publish(accelerator)
    paths = None
    if rep is not None:
        from traceml.integrations import RUN_FILE, TEXT_FILE
        paths = {"text": os.path.join(folder, TEXT_FILE), "run": os.path.join(folder, RUN_FILE)}
    import traceml

    return rep, paths, traceml.report().steps, {
        "global_step": steps,
        "framework_rank": int(accelerator.process_index),
        "world_size": int(accelerator.num_processes),
        "is_main_process": bool(accelerator.is_main_process),
        "distributed_type": str(accelerator.distributed_type),
        "model": type(model).__name__,
        "loader": type(loader.iterable).__name__,
    }, ds


def main(framework: str, out: str) -> None:
    for key, value in OFFLINE.items():
        os.environ.setdefault(key, value)
    rank = int(os.environ["RANK"])
    with open(os.path.join(out, f"pid{rank}"), "w") as f:
        f.write(str(os.getpgid(0)))
    import numpy as np
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    folder = os.path.join(out, f"rank{rank}")
    os.makedirs(folder, exist_ok=True)
    run = {"lightning": run_lightning, "huggingface": run_huggingface,
           "accelerate": run_accelerate}[framework]
    rep, paths, local_steps, facts, ds = run(torch, rank, folder)
    np.save(os.path.join(out, f"local{rank}.npy"), local_steps)
    facts.update({
        "rank": rank,
        "dist_rank": dist.get_rank() if dist.is_initialized() else None,
        "returned_none": rep is None,
        "paths": paths,
        "fetched": ds.fetched,
    })
    with open(os.path.join(out, f"result{rank}.json"), "w", encoding="utf-8") as f:
        json.dump(facts, f)
    sys.stdout.flush()
    # As torch advises: a gloo group still alive at interpreter exit makes
    # a rank abort there now and then ("terminate called without an active
    # exception"; 3 runs in 12 of a bare 2-rank torch 2.13 all-reduce
    # script, none in 12 with this call).  No framework here destroys it.
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
