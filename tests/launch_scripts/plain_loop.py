"""A training loop as users write it: a TensorDataset, a DataLoader, a
loss summed over the batches.  python plain_loop.py [num_workers]"""
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

num_workers = int(sys.argv[1]) if len(sys.argv) > 1 else 0
data = TensorDataset(torch.arange(96.0).reshape(48, 2), torch.arange(48) % 3)
loader = DataLoader(data, batch_size=6, shuffle=False, num_workers=num_workers)

weights = torch.ones(2)
for epoch in range(2):
    total = 0.0
    for x, y in loader:
        total += float((x @ weights).sum() + y.sum())
    print(f"epoch {epoch}: {len(loader)} batches, total {total}")
print("argv", sys.argv[1:], "main", __name__, "file", __file__.rsplit("/", 1)[-1])
