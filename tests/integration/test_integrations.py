"""traceml.integrations: Lightning, the Hugging Face Trainer and Accelerate
run for real on the CPU, with a dataset whose every 4th fetched item
sleeps; and the loader facts of framework loader wrappers.

Each framework test runs a few dozen optimizer steps with num_workers=0
(the stall is in the main process) and checks the report against what
the loop did: its step count against the framework's own count of
optimizer steps, the stalled steps against the steps that fetched a
sleeping item (derived below from how each framework fetches), the
period (4), and the files and logs written.  Nothing touches the network.
"""

import csv
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import traceml
from traceml import wrapping

from tiny_models import hf_model, lightning_module, mse_loss

# No framework phones home, asks for a login or reports usage.
for key, value in {
    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "WANDB_DISABLED": "true", "WANDB_MODE": "disabled", "DISABLE_MLFLOW_INTEGRATION": "TRUE",
    "DO_NOT_TRACK": "1", "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(key, value)

STALL_S = 0.05      # every 4th fetched item sleeps this long
COMPUTE_S = 0.004   # each training step sleeps this long
STEPS = 24          # optimizer steps per run
# Stalled steps are told from the others by their input wait: 25 ms is
# half the sleep and far above the few ms a healthy fetch takes here
# under load (shared/TRAPS.md: scheduling blips of 2-10 ms).
STALLED_WAIT_NS = int(STALL_S / 2 * 1e9)


def stalling_dataset(n, make_item):
    """A map-style dataset of n items whose every 4th fetch (4th, 8th, ...
    call of __getitem__, whatever the index: the Trainer shuffles)
    sleeps STALL_S."""
    import torch.utils.data

    class Stalling(torch.utils.data.Dataset):
        def __init__(self):
            self.calls = 0

        def __len__(self):
            return n

        def __getitem__(self, i):
            self.calls += 1
            if self.calls % 4 == 0:
                time.sleep(STALL_S)
            return make_item(i)

    return Stalling()


def check_stalls(rep, expected, period=4):
    """The report's stall steps are ``expected`` (step indices), which are
    also the steady steps whose measured wait is over STALLED_WAIT_NS, and
    the cadence is PERIODIC every ``period`` steps."""
    waits = rep.input_wait_ns
    steady = np.ones(len(waits), dtype=bool)
    steady[: rep["steps"] - rep["steady_steps"]] = False  # one epoch: the first steps
    measured = np.flatnonzero(steady & (waits > STALLED_WAIT_NS)).tolist()
    assert measured == expected
    assert rep["stalls"]["steps"] == expected
    assert rep["stalls"]["count"] == len(expected)
    assert rep["temporal"]["label"] == "PERIODIC"
    assert rep["temporal"]["period"] == period


def check_files(rep, text_path, run_path):
    with open(text_path, encoding="utf-8") as fh:
        text = fh.read()
    assert str(rep) in text
    back = traceml.load(run_path)
    assert back["steps"] == rep["steps"]
    np.testing.assert_array_equal(back.input_wait_ns, rep.input_wait_ns)


# --- loader facts of framework wrappers (no framework needed) ----------------------


class FakeAdapter:
    """Shaped like accelerate's DataLoaderAdapter: holds the DataLoader as
    ``base_dataloader``, forwards attributes, claims its class, and
    iterates it inside a generator made at the first fetch."""

    def __init__(self, base):
        self.base_dataloader = base

    def __getattr__(self, name):
        if name == "base_dataloader":
            raise AttributeError(name)
        return getattr(self.base_dataloader, name)

    @property
    def __class__(self):
        return self.base_dataloader.__class__

    def __len__(self):
        return len(self.base_dataloader)

    def __iter__(self):
        yield from self.base_dataloader


def test_adapter_facts_come_from_the_dataloader_inside():
    torch = pytest.importorskip("torch")
    from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

    base = DataLoader(list(range(12)), batch_sampler=BatchSampler(
        SequentialSampler(range(12)), batch_size=3, drop_last=False))
    adapter = FakeAdapter(base)
    assert isinstance(adapter, torch.utils.data.DataLoader)   # as accelerate's
    assert wrapping.torch_loader(adapter) is base
    assert wrapping.torch_loader(base) is base
    assert wrapping.torch_loader([1, 2]) is None
    facts = wrapping.loader_facts(adapter)
    assert facts["num_workers"] == 0
    assert facts["batch_size"] == 3            # the loader's is None: its batch sampler's
    assert base.batch_size is None
    assert facts["wrapper"] == f"{__name__.split('.')[0]}.FakeAdapter"
    # A plain DataLoader's facts are as before: no wrapper, its own batch_size.
    assert "wrapper" not in wrapping.loader_facts(base)
    assert wrapping.loader_facts(base)["batch_size"] is None

    got = [int(b.sum()) for b in traceml.wrap(adapter)]
    assert got == [0 + 1 + 2, 3 + 4 + 5, 6 + 7 + 8, 9 + 10 + 11]
    rep = traceml.report()
    assert rep["steps"] == 4
    assert rep["loader"]["batch_size"] == 3
    assert rep["loader"]["wrapper"].endswith(".FakeAdapter")
    # No workers: nothing is out of reach, so nothing is said unread.
    assert "unread" not in rep["loader"]


def test_adapter_with_workers_says_what_it_cannot_read(tmp_path):
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    adapter = FakeAdapter(DataLoader(list(range(8)), batch_size=2, num_workers=1))
    for _ in traceml.wrap(adapter):
        time.sleep(0.03)     # long enough for the sampler (20 ms) to read the loop
    rep = traceml.report()
    assert rep["steps"] == 4
    assert rep["loader"]["num_workers"] == 1
    unread = rep["loader"]["unread"]
    assert unread.startswith("worker PIDs, delivery order, worker batch timing: ")
    assert "FakeAdapter makes torch's iterator in a generator" in unread
    assert rep["production"]["available"] is False
    assert rep["production"]["unavailable"] == unread
    assert "unread=worker PIDs" in str(rep)
    assert rep["workers"]["pids_by_epoch"] == [{"epoch": 0, "pids": None}]
    # Its worker counters: not "no worker processes", but hidden.
    reasons = rep["workers"]["intervals"]["unavailable"]
    assert set(reasons.values()) == {f"worker PIDs hidden by {rep['loader']['wrapper']}"}
    # Kept in a saved run.
    back = traceml.load(rep.save(tmp_path / "run.traceml"))
    assert back["loader"] == rep["loader"]
    # A plain DataLoader with workers keeps all three.
    traceml.reset()
    plain = DataLoader(list(range(8)), batch_size=2, num_workers=1)
    assert sum(len(b) for b in traceml.wrap(plain)) == 8
    rep = traceml.report()
    assert "unread" not in rep["loader"]
    assert rep["delivery"]["known"] == 4


def test_one_loader_combined_loader_gives_its_loader():
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    class Combined:      # Lightning's CombinedLoader keeps its iterables as .flattened
        def __init__(self, loaders):
            self.flattened = loaders

        def __iter__(self):
            return iter(self.flattened[0])

    dl = DataLoader(list(range(6)), batch_size=2)
    assert wrapping.torch_loader(Combined([dl])) is dl
    assert wrapping.loader_facts(Combined([dl]))["batch_size"] == 2
    assert wrapping.torch_loader(Combined([dl, dl])) is None   # whose fetch? unknown
    assert wrapping.loader_facts(Combined([dl, dl])) is None


# --- the adapters' logic, without the frameworks (exact clock) ---------------------


class Namespace:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def test_huggingface_hooks_place_the_steps(tmp_path):
    from traceml.integrations.huggingface import _CallbackBody

    cb = _CallbackBody()
    # One clock read per probe (abandon_step reads none), in this order:
    cb.recorder._set_test_clock([0, 10, 30, 31, 50, 60, 100, 101, 140, 150, 151])
    args, control = Namespace(output_dir=str(tmp_path / "out")), Namespace()
    state = Namespace(global_step=0, log_history=[], is_world_process_zero=False)
    cb.on_train_begin(args, state, control, train_dataloader=[1, 2, 3])
    assert cb.loader is None                     # not a DataLoader: no facts
    cb.on_epoch_begin(args, state, control)      # begin 0
    cb.on_step_begin(args, state, control)       # fetch done 10
    cb.on_step_end(args, state, control)         # end 30, begin 31
    cb.on_log(args, state, control)              # logging: begin again at 50
    cb.on_step_begin(args, state, control)       # fetch done 60
    cb.on_step_end(args, state, control)         # end 100, begin 101
    cb.on_step_begin(args, state, control)       # fetch done 140
    cb.on_step_end(args, state, control)         # end 150, begin 151
    cb.on_epoch_end(args, state, control)        # the open step dropped
    state.global_step = 3
    cb.on_train_end(args, state, control)
    steps = cb.last_report.steps
    np.testing.assert_array_equal(steps["begin_ns"], [0, 50, 101])
    np.testing.assert_array_equal(steps["fetch_done_ns"], [10, 60, 140])
    np.testing.assert_array_equal(steps["end_ns"], [30, 100, 150])
    assert cb.recorder.store_info()["steps_abandoned"] == 2
    assert set(cb.last_report["misuse"].values()) == {0}
    # Not the main process: reported, nothing written or logged.
    assert cb.paths is None and state.log_history == []
    assert not (tmp_path / "out").exists()
    state.is_world_process_zero = True
    rep = cb.report(args, state)
    assert rep["steps"] == 3
    assert state.log_history[-1]["step"] == 3
    assert state.log_history[-1]["traceml/steps"] == 3.0
    assert all(isinstance(v, (int, float)) for v in state.log_history[-1].values())
    check_files(rep, cb.paths["text"], cb.paths["run"])


def test_lightning_setup_wraps_training_loaders_only(tmp_path):
    from traceml.integrations.lightning import _CallbackBody

    class Strategy:
        def __init__(self):
            self.seen = []

        def process_dataloader(self, dataloader):    # the strategy's own result is kept
            self.seen.append(dataloader)
            return dataloader if isinstance(dataloader, traceml.Wrapped) else \
                ("processed", dataloader)

    strategy = Strategy()
    trainer = Namespace(strategy=strategy, training=False, is_global_zero=False,
                        loggers=[], global_step=0, log_dir=None,
                        default_root_dir=str(tmp_path))
    cb = _CallbackBody()
    cb.setup(trainer, None, "validate")          # not a fit: nothing taken
    assert "process_dataloader" not in vars(strategy)
    cb.setup(trainer, None, "fit")
    assert strategy.process_dataloader(["v"]) == ("processed", ["v"])   # not training
    trainer.training = True
    train = strategy.process_dataloader(["t"])
    assert isinstance(train, traceml.Wrapped) and train.iterable == ("processed", ["t"])
    assert train.name == "train"
    assert strategy.process_dataloader(train) is train   # never wrapped twice
    second = strategy.process_dataloader(["u"])
    assert second.name == "train#2"
    assert list(train) == ["processed", ["t"]]
    assert strategy.seen == [["v"], ["t"], train, ["u"]]
    cb.teardown(trainer, None, "fit")
    assert "process_dataloader" not in vars(strategy)
    assert strategy.process_dataloader(["t"]) == ("processed", ["t"])
    # Every rank reports; only rank 0 writes.
    cb.on_fit_end(trainer, None)
    assert cb.last_report["steps"] == 2 and cb.paths is None
    trainer.is_global_zero = True
    cb.on_fit_end(trainer, None)
    assert os.path.dirname(cb.paths["text"]) == str(tmp_path)


def test_rank_zero_falls_back_to_torch_distributed():
    from traceml.integrations import rank_zero

    assert rank_zero(True) is True and rank_zero(False) is False
    assert rank_zero(None) is True      # torch.distributed not initialised here


# --- importable without the frameworks --------------------------------------------


@pytest.mark.parametrize("module, name, package", [
    ("lightning", "TraceMLCallback", "lightning"),
    ("lightning", "PLTraceMLCallback", "pytorch-lightning"),
    ("huggingface", "TraceMLCallback", "transformers"),
])
def test_adapters_import_without_their_framework(module, name, package):
    # A child process where the frameworks cannot be imported (None in
    # sys.modules makes `import` raise ImportError).
    code = f"""
import sys
for m in ("lightning", "lightning.pytorch", "pytorch_lightning", "transformers", "accelerate"):
    sys.modules[m] = None
import traceml.integrations.{module} as mod
assert not any(sys.modules.get(m) for m in ("lightning", "transformers", "accelerate"))
try:
    getattr(mod, {name!r})
except ImportError as exc:
    print(exc)
else:
    raise SystemExit("no ImportError")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(traceml.__file__)), timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith(f"which is not installed: pip install {package}")


def test_accelerate_prepare_without_accelerate():
    code = """
import sys
sys.modules["accelerate"] = None
from traceml.integrations import accelerate
try:
    accelerate.prepare(object(), [1])
except ImportError as exc:
    print(exc)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(traceml.__file__)), timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("pip install accelerate")


# --- Lightning --------------------------------------------------------------------


@pytest.mark.slow
def test_lightning_trainer(tmp_path):
    L = pytest.importorskip("lightning")
    torch = pytest.importorskip("torch")
    from lightning.pytorch.loggers import CSVLogger
    from torch.utils.data import DataLoader

    from traceml.integrations.lightning import TraceMLCallback

    Tiny = lightning_module(L, torch, mse_loss(torch), COMPUTE_S)
    ds = stalling_dataset(64, lambda i: (torch.tensor([float(i)]), torch.tensor([1.0])))
    callback = TraceMLCallback()
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=STEPS, callbacks=[callback],
                        logger=CSVLogger(tmp_path), default_root_dir=tmp_path,
                        enable_progress_bar=False, enable_model_summary=False,
                        enable_checkpointing=False, num_sanity_val_steps=0)
    strategy_method = trainer.strategy.process_dataloader
    trainer.fit(Tiny(), DataLoader(ds, batch_size=1, num_workers=0))

    rep = callback.last_report
    assert trainer.global_step == STEPS
    assert rep["steps"] == STEPS
    assert rep["source"] == "train"
    # Lightning fetches one batch per training batch (a loader with a
    # length is not fetched ahead): step k fetches the (k+1)-th item, so
    # the sleeping 4th, 8th, ... items are the fetches of steps 3, 7, ...
    check_stalls(rep, [k for k in range(1, STEPS) if (k + 1) % 4 == 0])
    assert rep["loader"]["num_workers"] == 0 and rep["loader"]["batch_size"] == 1
    assert rep["delivery"]["known"] == STEPS
    # The strategy has its own method back.
    assert trainer.strategy.process_dataloader == strategy_method
    assert "process_dataloader" not in vars(trainer.strategy)

    # Written where Lightning users look: the logger's folder and metrics.
    assert os.path.dirname(callback.paths["text"]) == trainer.log_dir
    check_files(rep, callback.paths["text"], callback.paths["run"])
    with open(os.path.join(trainer.log_dir, "metrics.csv"), newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("traceml/steps")]
    assert len(rows) == 1
    assert float(rows[0]["traceml/steps"]) == STEPS
    assert float(rows[0]["traceml/period"]) == 4
    assert float(rows[0]["traceml/stalls"]) == rep["stalls"]["count"]
    assert int(rows[0]["step"]) == STEPS

    # On demand, mid-run or after: the same recording.
    again = callback.report()
    assert again["steps"] == STEPS


# --- Hugging Face Trainer ---------------------------------------------------------


def hf_model_and_data(torch):
    """A one-weight model whose forward sleeps COMPUTE_S and returns the
    loss the Trainer wants, and 64 stalling items of {x, labels}."""
    return hf_model(torch, COMPUTE_S), stalling_dataset(64, lambda i: {"x": torch.tensor([float(i)]),
                                                   "labels": torch.tensor([1.0])})


@pytest.mark.slow
def test_huggingface_trainer(tmp_path):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")

    from traceml.integrations.huggingface import TraceMLCallback

    model, ds = hf_model_and_data(torch)
    callback = TraceMLCallback()
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=STEPS, per_device_train_batch_size=1,
        dataloader_num_workers=0, report_to="none", use_cpu=True, logging_steps=5,
        save_strategy="no", disable_tqdm=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=ds,
                                   callbacks=[callback])
    trainer.train()

    rep = callback.last_report
    assert trainer.state.global_step == STEPS
    assert rep["steps"] == STEPS
    # The Trainer's loader is accelerate's DataLoaderShard, which fetches
    # one batch ahead: step 0 fetches items 1 and 2, step k >= 1 item
    # k + 2, so the sleeping 4th, 8th, ... items are waited for at steps
    # 2, 6, 10, ...
    check_stalls(rep, [k for k in range(1, STEPS) if (k + 2) % 4 == 0])
    # The logging after on_step_end (every 5 steps) is not input wait: the
    # step is opened again after it, each reopening counted as abandoned;
    # the hooks never misuse the probes.
    assert callback.recorder.store_info()["steps_abandoned"] >= STEPS // 5
    assert set(rep["misuse"].values()) == {0}
    assert callback.loader["wrapper"] == "accelerate.DataLoaderShard"
    assert callback.loader["batch_size"] == 1

    # Written where Trainer users look: output_dir and the log history.
    assert os.path.dirname(callback.paths["text"]) == str(tmp_path)
    check_files(rep, callback.paths["text"], callback.paths["run"])
    with open(callback.paths["text"], encoding="utf-8") as fh:
        assert "wrapper=accelerate.DataLoaderShard" in fh.readline()
    last = trainer.state.log_history[-1]
    assert last["step"] == STEPS
    assert last["traceml/steps"] == STEPS
    assert last["traceml/period"] == 4
    assert last["traceml/stalls"] == rep["stalls"]["count"]


# --- Accelerate -------------------------------------------------------------------


def _accelerate_loop(tmp_path, dispatch):
    accelerate = pytest.importorskip("accelerate")
    torch = pytest.importorskip("torch")
    from accelerate.utils import DataLoaderConfiguration
    from torch.utils.data import DataLoader

    from traceml.integrations import accelerate as tm_accelerate

    accelerator = accelerate.Accelerator(
        cpu=True, dataloader_config=DataLoaderConfiguration(dispatch_batches=dispatch))
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model, optimizer = accelerator.prepare(model, optimizer)
    ds = stalling_dataset(STEPS, lambda i: (torch.tensor([float(i)]), torch.tensor([1.0])))
    rec = traceml.Recorder()
    loader = tm_accelerate.prepare(accelerator, DataLoader(ds, batch_size=1, num_workers=0),
                                   recorder=rec)
    optimizer_steps = 0
    for x, y in loader:
        optimizer.zero_grad()
        accelerator.backward(torch.nn.functional.mse_loss(model(x), y))
        optimizer.step()
        time.sleep(COMPUTE_S)
        optimizer_steps += 1
    rep = tm_accelerate.make_report(rec)
    assert tm_accelerate.publish(accelerator, rep, folder=tmp_path) is rep
    return loader, rep, optimizer_steps


@pytest.mark.slow
@pytest.mark.parametrize("dispatch, kind", [(False, "DataLoaderShard"),
                                            (True, "DataLoaderDispatcher")])
def test_accelerate_loop(tmp_path, dispatch, kind):
    loader, rep, optimizer_steps = _accelerate_loop(tmp_path, dispatch)
    assert type(loader.iterable).__name__ == kind
    assert optimizer_steps == STEPS
    assert rep["steps"] == STEPS
    assert rep["source"] == kind
    # Both fetch one batch ahead (the shard to know the last batch, the
    # dispatcher the next batch's shape): step 0 fetches items 1 and 2,
    # step k >= 1 item k + 2, so the sleeping 4th, 8th, ... items are
    # waited for at steps 2, 6, 10, ...
    check_stalls(rep, [k for k in range(1, STEPS) if (k + 2) % 4 == 0])
    assert rep["loader"]["wrapper"] == f"accelerate.{kind}"
    assert rep["loader"]["batch_size"] == 1 and rep["loader"]["num_workers"] == 0
    check_files(rep, tmp_path / "traceml_report.txt", tmp_path / "traceml_report.traceml")


@pytest.mark.slow
def test_accelerate_prepare_order():
    accelerate = pytest.importorskip("accelerate")
    from torch.utils.data import DataLoader

    from traceml.integrations import accelerate as tm_accelerate

    accelerator = accelerate.Accelerator(cpu=True)
    with pytest.raises(TypeError, match="already wrapped by traceml"):
        tm_accelerate.prepare(accelerator, traceml.wrap(DataLoader(list(range(4)))))
    with pytest.raises(TypeError, match="accelerator must be an accelerate.Accelerator"):
        tm_accelerate.prepare(object(), DataLoader(list(range(4))))


@pytest.mark.slow
def test_pytorch_lightning_callback_class():
    pl = pytest.importorskip("pytorch_lightning")
    L = pytest.importorskip("lightning")
    from traceml.integrations import lightning as tm_lightning

    # Each Trainer accepts only its own package's Callback class.
    assert issubclass(tm_lightning.PLTraceMLCallback, pl.Callback)
    assert not issubclass(tm_lightning.PLTraceMLCallback, L.pytorch.Callback)
    assert issubclass(tm_lightning.TraceMLCallback, L.pytorch.Callback)
    assert tm_lightning.TraceMLCallback is tm_lightning.TraceMLCallback   # made once
    with pytest.raises(AttributeError):
        tm_lightning.NoSuchCallback  # noqa: B018 - the lookup must raise


@pytest.mark.slow
def test_lightning_keeps_worker_evidence(tmp_path, monkeypatch):
    L = pytest.importorskip("lightning")
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from traceml.integrations.lightning import TraceMLCallback

    Tiny = lightning_module(L, torch, lambda layer, batch: layer(batch).sum(), COMPUTE_S)
    # Lightning seeds the workers (worker_init_fn) on the loader it holds:
    # the wrapper passes that write to the DataLoader.  (seed_everything
    # sets these in os.environ: put back after the test.)
    monkeypatch.setenv("PL_GLOBAL_SEED", "0")
    monkeypatch.setenv("PL_SEED_WORKERS", "0")
    L.seed_everything(0, workers=True)
    loader = DataLoader(torch.arange(32.0).reshape(32, 1), batch_size=2, num_workers=2)
    assert loader.worker_init_fn is None
    callback = TraceMLCallback(write_files=False)
    trainer = L.Trainer(accelerator="cpu", devices=1, max_epochs=2, callbacks=[callback],
                        logger=False, default_root_dir=tmp_path, enable_progress_bar=False,
                        enable_model_summary=False, enable_checkpointing=False)
    trainer.fit(Tiny(), loader)
    assert loader.worker_init_fn is not None

    rep = callback.last_report
    assert trainer.global_step == 2 * 16        # 32 items, 2 a batch, 2 epochs
    assert rep["steps"] == 2 * 16 and rep["epochs"] == 2
    assert rep["loader"]["num_workers"] == 2 and "unread" not in rep["loader"]
    # The wrapped DataLoader's own iterator: every delivery's worker known,
    # each epoch's two worker processes seen.
    assert rep["delivery"]["known"] == 2 * 16
    pids = rep["workers"]["pids_by_epoch"]
    assert [len(p["pids"]) for p in pids] == [2, 2]
    # The workers timed their own batches (the hook ran beside Lightning's
    # worker_init_fn).
    assert rep["production"]["available"] and rep["production"]["batches"] > 0
    assert callback.paths is None


@pytest.mark.slow
def test_huggingface_gradient_accumulation(tmp_path):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")

    from traceml.integrations.huggingface import TraceMLCallback

    model, ds = hf_model_and_data(torch)
    callback = TraceMLCallback(write_files=False)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=12, per_device_train_batch_size=1,
        gradient_accumulation_steps=2, dataloader_num_workers=0, report_to="none",
        use_cpu=True, logging_steps=100, save_strategy="no", disable_tqdm=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=ds,
                                   callbacks=[callback])
    trainer.train()
    rep = callback.last_report
    # One step per optimizer step; each waits for its 2 micro-batches,
    # fetched together before on_step_begin: step 0 items 1-3 (the shard
    # fetches one ahead), step k >= 1 items 2k + 2 and 2k + 3, so the
    # sleeping 4th, 8th, ... items fall in steps 1, 3, 5, ...: period 2.
    assert trainer.state.global_step == 12 and rep["steps"] == 12
    check_stalls(rep, [k for k in range(1, 12) if k % 2 == 1], period=2)
