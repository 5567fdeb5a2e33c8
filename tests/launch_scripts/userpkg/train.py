"""python -m userpkg.train: a package's training entry point."""
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset


def main(argv):
    loader = DataLoader(TensorDataset(torch.arange(24.0)), batch_size=4)
    print("batches", [b.tolist() for (b,) in loader])
    print("argv", argv, "package", __package__, "spec", __spec__.name)
    return 0 if argv == ["--ok"] else 5


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
