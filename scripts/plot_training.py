#!/usr/bin/env python3
"""Draws the loss and test-accuracy curves of an etnn training log (mnist_mlp --log FILE.csv).

Usage: plot_training.py metrics.csv [out.png]     (default: metrics.png beside the CSV)
"""
import csv
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    source = pathlib.Path(sys.argv[1])
    target = pathlib.Path(sys.argv[2]) if len(sys.argv) == 3 else source.with_suffix(".png")
    with source.open() as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{source}: no epochs logged")
    epochs = [int(r["epoch"]) for r in rows]
    figure, (loss_axes, accuracy_axes) = plt.subplots(1, 2, figsize=(10, 4))
    loss_axes.plot(epochs, [float(r["loss"]) for r in rows], marker="o")
    loss_axes.set(xlabel="epoch", ylabel="train loss", title="loss")
    accuracy_axes.plot(epochs, [float(r["accuracy"]) for r in rows], marker="o", color="tab:green")
    accuracy_axes.set(xlabel="epoch", ylabel="test accuracy", title="accuracy")
    for axes in (loss_axes, accuracy_axes):
        axes.grid(alpha=0.3)
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    figure.tight_layout()
    figure.savefig(target, dpi=100)
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
