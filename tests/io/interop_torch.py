#!/usr/bin/env python3
"""etnn checkpoints against PyTorch (Debian's python3-torch), for mlp784, LeNet-5, LeNet-5 with batch
norm, a residual MLP, a causal transformer block over token ids and a stack of 1-d convolutions
over token embeddings, each built as the equivalent
torch.nn.Sequential:
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks", "peers"))
try:
    import torch
    from torch import nn
    from safetensors.torch import load_file, save_file
    # etnn's sequence layers and residual as torch modules
    from torch_gpt import Residual, SequenceConv1d, TokenEmbedding, transformer
except ImportError as e:  # reported as skipped by ctest (SKIP_RETURN_CODE 77)
    print(f"skipped: {e}; scripts/install-deps.sh installs python3-torch and safetensors")
    sys.exit(77)


def gpt(length=16, vocabulary=20, width=16, heads=4):
    return nn.Sequential(*transformer(length, vocabulary, width, heads, layers=1), nn.Flatten(),
                         nn.Linear(length * width, 10))


def conv1d():
    return nn.Sequential(TokenEmbedding(20, 12), SequenceConv1d(12, 16, 3, padding=1), nn.GELU(),
                         SequenceConv1d(16, 8, 4, stride=2, padding=1), nn.Flatten(), nn.Linear(8 * 8, 10))


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
    "gpt": (gpt, (16,)),
    "conv1d": (conv1d, (16,)),
}
TOKEN_MODELS = ("gpt", "conv1d")


def random_input(name, shape, batch):
    """Inputs in [-1, 2), or token ids in [0, 20) (as floats) for the token model."""
    if name in TOKEN_MODELS:
        return torch.randint(0, 20, (batch, *shape)).float()
    return torch.rand(batch, *shape) * 3 - 1


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
        x = random_input(name, shape, 16)
        y = torch.randint(0, 10, (16,))
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, os.path.join(tmp, "torch.safetensors"))
    x = random_input(name, shape, 5)
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
