"""A Lightning Trainer.fit as users write it: a one-weight model, a
training and a validation DataLoader, two epochs on the CPU.

    python lightning_fit.py [fit|hook|callback] [exit4]

``fit`` (default): the loaders are given to trainer.fit(); ``hook``: the
module's train_dataloader() / val_dataloader() make them (Lightning
wraps DataLoader.__init__ while it calls them); ``callback``: as ``fit``,
with traceml's own TraceMLCallback, which times the training loader
itself.  ``exit4``: sys.exit(4) after the fit."""
import sys

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

mode = sys.argv[1] if len(sys.argv) > 1 else "fit"
torch.manual_seed(0)
x = torch.arange(32.0).reshape(32, 1) / 32
data = TensorDataset(x, 2 * x + 1)


def train_loader():
    return DataLoader(data, batch_size=4)


def val_loader():
    return DataLoader(TensorDataset(x[:8], 2 * x[:8] + 1), batch_size=4)


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)

    def training_step(self, batch, batch_idx):
        inputs, target = batch
        return torch.nn.functional.mse_loss(self.layer(inputs), target)

    def validation_step(self, batch, batch_idx):
        inputs, target = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.layer(inputs), target))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class Hooked(Tiny):
    def train_dataloader(self):
        return DataLoader(data, batch_size=4)

    def val_dataloader(self):
        return DataLoader(TensorDataset(x[:8], 2 * x[:8] + 1), batch_size=4)


callbacks = []
if mode == "callback":
    from traceml.integrations.lightning import TraceMLCallback

    callbacks.append(TraceMLCallback(log_metrics=False))
trainer = L.Trainer(accelerator="cpu", devices=1, max_epochs=2, logger=False,
                    enable_progress_bar=False, enable_model_summary=False,
                    enable_checkpointing=False, num_sanity_val_steps=0,
                    callbacks=callbacks, default_root_dir=".")
if mode == "hook":
    trainer.fit(Hooked())
else:
    trainer.fit(Tiny(), train_loader(), val_loader())
print(f"fit done: global_step {trainer.global_step}, "
      f"val_loss {trainer.callback_metrics['val_loss'].item():.4f}")
if sys.argv[2:] == ["exit4"]:
    sys.exit(4)
