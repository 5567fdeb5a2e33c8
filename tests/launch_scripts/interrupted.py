"""A long loop its user stops with Ctrl-C (or a scheduler with SIGTERM)."""
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

if __name__ == "__main__":
    loader = DataLoader(TensorDataset(torch.arange(4000.0)), batch_size=4, num_workers=2)
    for step, _ in enumerate(loader):
        if step == 5:
            print("training", flush=True)
        time.sleep(0.005)
    print("finished")
