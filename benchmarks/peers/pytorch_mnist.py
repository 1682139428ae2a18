#!/usr/bin/env python3
"""The PyTorch version of README's first command (`bash scripts/train.sh`, examples/mnist_mlp.cpp):
a 784-512-10 ReLU MLP trained with SGD (lr 0.01, batch 64) on Fashion-MNIST, written the way a
standard PyTorch MNIST script is: nn.Sequential, torch.optim.SGD, nn.CrossEntropyLoss and a
DataLoader over a TensorDataset with shuffle=True.

Usage: pytorch_mnist.py [--epochs 10] [--threads 0] [--data DIR] [--batch 64] [--lr 0.01] [--seed 0]
  --threads 0: PyTorch's default; DIR (default /usr/share/datasets/fashion-mnist) holds the four
  MNIST-format files (train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
  t10k-labels-idx1-ubyte), raw or .gz.

Pixels are scaled to [0, 1], then normalised with the training set's mean and (population)
standard deviation, as mnist_mlp does. Per epoch it prints, in mnist_mlp's format,
  epoch  1/10  train loss 0.5123  test accuracy 0.8312  41234 samples/s  1.46 s
where samples/s and seconds are the training loop's alone (batches drawn from the DataLoader,
forward, loss, backward, SGD step; not the test pass), then
  final test accuracy 0.8712
  result library=pytorch-e2e samples_per_s=S test_accuracy=A epochs=E threads=T version=V
with S the epochs' training samples over their training seconds.
"""
import argparse
import gzip
import os
import sys
import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

NAMES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]


def read_idx(path):
    """An IDX file (raw or gzipped) as a numpy array of its dimensions."""
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        data = f.read()
    zero, kind, ndim = data[0] * 256 + data[1], data[2], data[3]
    if zero != 0 or kind != 0x08:
        sys.exit(f"pytorch_mnist.py: {path} is not an IDX file of unsigned bytes")
    dims = np.frombuffer(data, dtype=">i4", count=ndim, offset=4)
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(tuple(int(d) for d in dims))


def find(directory, name):
    for candidate in (os.path.join(directory, name), os.path.join(directory, name + ".gz")):
        if os.path.exists(candidate):
            return candidate
    sys.exit(f"pytorch_mnist.py: {name}[.gz] not found in {directory}\n"
             "  install Fashion-MNIST with: sudo apt-get install dataset-fashion-mnist\n"
             "  or pass --data DIR with the four MNIST-format files (raw or .gz)")


def load(directory):
    train_x, train_y, test_x, test_y = (read_idx(find(directory, name)) for name in NAMES)
    train_x = train_x.reshape(len(train_x), -1).astype(np.float32) / 255
    test_x = test_x.reshape(len(test_x), -1).astype(np.float32) / 255
    mean = float(train_x.mean(dtype=np.float64))
    std = float(np.sqrt(((train_x.astype(np.float64) - mean) ** 2).mean()))
    train_x = (train_x - mean) / std
    test_x = (test_x - mean) / std
    return (torch.from_numpy(train_x), torch.from_numpy(train_y.astype(np.int64)),
            torch.from_numpy(test_x), torch.from_numpy(test_y.astype(np.int64)), mean, std)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=0, help="0: PyTorch's default")
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    train_x, train_y, test_x, test_y, mean, std = load(args.data)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    loader = DataLoader(TensorDataset(train_x, train_y), batch_size=args.batch, shuffle=True)
    params = sum(p.numel() for p in model.parameters())
    print(f"pytorch mnist: 784-512-10 ReLU MLP, {params} parameters")
    print(f"data {args.data}: {len(train_x)} train, {len(test_x)} test (normalised with mean {mean:.4f}, "
          f"std {std:.4f}); batch {args.batch}, lr {args.lr:g}, on cpu with {torch.get_num_threads()} threads")

    def test_accuracy():
        model.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, len(test_x), 256):
                correct += (model(test_x[i:i + 256]).argmax(1) == test_y[i:i + 256]).sum().item()
        model.train()
        return correct / len(test_x)

    accuracy = test_accuracy()
    total_samples, total_seconds = 0, 0.0
    for epoch in range(args.epochs):
        loss_sum, samples = 0.0, 0
        t0 = time.perf_counter()
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            loss_sum += loss.item() * len(y)
            samples += len(y)
        seconds = time.perf_counter() - t0
        total_samples += samples
        total_seconds += seconds
        accuracy = test_accuracy()
        print(f"epoch {epoch + 1:2d}/{args.epochs}  train loss {loss_sum / samples:.4f}  test accuracy {accuracy:.4f}  "
              f"{samples / seconds:.0f} samples/s  {seconds:.2f} s", flush=True)
    print(f"final test accuracy {accuracy:.4f}")
    rate = total_samples / total_seconds if total_seconds > 0 else 0.0
    print(f"result library=pytorch-e2e samples_per_s={rate:.1f} test_accuracy={accuracy:.4f} epochs={args.epochs} "
          f"threads={torch.get_num_threads()} version={torch.__version__}")


if __name__ == "__main__":
    main()
