#!/usr/bin/env python3
"""etnn checkpoints against PyTorch (Debian's python3-torch), for mlp784, LeNet-5, LeNet-5 with batch
norm and a residual MLP, each built as the equivalent torch.nn.Sequential:
(a) PyTorch loads the checkpoint etnn saved (strict: every name and shape) and computes the same
    logits as etnn on the same inputs, in eval mode and in training mode (batch statistics), and
    updates batch norm's running statistics as etnn does;
(b) PyTorch trains a few steps and saves its state_dict with safetensors.torch (num_batches_tracked
    as int64); etnn loads it and computes the same logits.
Usage: interop_torch.py PATH_TO_INTEROP_TORCH_BINARY"""
import os
import subprocess
import sys
import tempfile

try:
    import torch
    from torch import nn
    from safetensors.torch import load_file, save_file
except ImportError as e:  # reported as skipped by ctest (SKIP_RETURN_CODE 77)
    print(f"skipped: {e}; scripts/install-deps.sh installs python3-torch and safetensors")
    sys.exit(77)


class Residual(nn.Module):
    """x + block(x): etnn's nn::residual, its block an nn.Sequential named `block`."""

    def __init__(self, *layers):
        super().__init__()
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.block(x)


def lenet(batch_norm):
    norm = (lambda c: [nn.BatchNorm2d(c)]) if batch_norm else (lambda c: [])
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), *norm(6), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 16, 5), *norm(16), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


MODELS = {
    "mlp784": (lambda: nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10)), (784,)),
    "lenet": (lambda: lenet(False), (1, 28, 28)),
    "lenet_bn": (lambda: lenet(True), (1, 28, 28)),
    "resmlp": (lambda: nn.Sequential(nn.Linear(64, 64), Residual(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64)),
                                     nn.ReLU(), nn.LayerNorm(64), nn.Linear(64, 10)), (64,)),
}


def close(a, b, what):
    err = (a - b).abs().max().item()
    scale = b.abs().max().item()
    assert err <= 1e-5 + 1e-5 * scale, f"{what}: max difference {err} (scale {scale})"
    return err


def etnn_to_torch(model, path):
    state = load_file(path)
    # load_state_dict copies into each buffer's own dtype (num_batches_tracked stays int64).
    model.load_state_dict(state, strict=True)


def check_export(binary, name, tmp):
    build, shape = MODELS[name]
    subprocess.run([binary, name, "export", tmp], check=True)
    model = build()
    etnn_to_torch(model, os.path.join(tmp, "etnn.safetensors"))
    io = load_file(os.path.join(tmp, "etnn_io.safetensors"))
    model.eval()
    with torch.no_grad():
        e1 = close(model(io["x"]), io["eval_logits"], f"{name} eval logits")
        model.train()
        e2 = close(model(io["x"]), io["train_logits"], f"{name} train-mode logits")
    after = load_file(os.path.join(tmp, "etnn_after.safetensors"))
    for key, value in model.state_dict().items():
        close(value.double(), after[key].double(), f"{name} {key} after a training-mode forward")
    print(f"(a) {name}: torch loads etnn's checkpoint; logits differ by {max(e1, e2):.2e} at most, "
          f"running statistics agree")


def check_import(binary, name, tmp):
    build, shape = MODELS[name]
    torch.manual_seed(3)
    model = build()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _ in range(3):
        x = torch.rand(16, *shape) * 3 - 1
        y = torch.randint(0, 10, (16,))
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, os.path.join(tmp, "torch.safetensors"))
    x = torch.rand(5, *shape) * 3 - 1
    model.eval()
    with torch.no_grad():
        logits = model(x)
    save_file({"x": x}, os.path.join(tmp, "torch_io.safetensors"))
    subprocess.run([binary, name, "import", tmp], check=True)
    err = close(load_file(os.path.join(tmp, "etnn_logits.safetensors"))["logits"], logits, f"{name} imported logits")
    print(f"(b) {name}: etnn loads torch's state_dict; logits differ by {err:.2e} at most")


def main():
    binary = sys.argv[1]
    for name in MODELS:
        with tempfile.TemporaryDirectory() as tmp:
            check_export(binary, name, tmp)
            check_import(binary, name, tmp)


if __name__ == "__main__":
    main()
