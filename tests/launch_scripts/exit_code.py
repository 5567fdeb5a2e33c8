"""Trains, then leaves with an exit status of its own."""
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.arange(40.0)), batch_size=4)
seen = 0
for (batch,) in loader:
    seen += len(batch)
print("seen", seen)
if seen < 1000:
    print("not enough data", file=sys.stderr)
    sys.exit(3)
