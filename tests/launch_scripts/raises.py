"""A loop whose body fails on the fourth batch."""
import torch
from torch.utils.data import DataLoader, TensorDataset


def check(batch, i):
    if i == 3:
        raise ValueError(f"batch {i} holds {batch.tolist()}")


def train():
    loader = DataLoader(TensorDataset(torch.arange(32.0)), batch_size=4)
    for i, (batch,) in enumerate(loader):
        print("step", i, flush=True)
        check(batch, i)


train()
