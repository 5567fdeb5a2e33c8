"""One-weight models for the trainer tests (tests/integration/test_integrations.py
and tests/trainer_ranks_worker.py): each training step sleeps a given
time, standing in for compute, so that a fetch's stall is what the
adapters see."""

import time


def lightning_module(L, torch, loss, compute_s):
    """A LightningModule class whose training step sleeps ``compute_s``
    and returns loss(layer, batch), with plain SGD."""

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)

        def training_step(self, batch, batch_idx):
            time.sleep(compute_s)
            return loss(self.layer, batch)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    return Tiny


def mse_loss(torch):
    """loss(layer, (x, y)): the mean squared error of layer(x) against y."""
    return lambda layer, batch: torch.nn.functional.mse_loss(layer(batch[0]), batch[1])


def hf_model(torch, compute_s):
    """A torch module for transformers.Trainer: forward(x, labels) sleeps
    ``compute_s`` and returns {"loss": mse(layer(x), labels)}."""

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)

        def forward(self, x, labels=None):
            time.sleep(compute_s)
            return {"loss": torch.nn.functional.mse_loss(self.layer(x), labels)}

    return Tiny()
