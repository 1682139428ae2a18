#!/usr/bin/python3
"""Writes tests/optim/torch_reference.hpp: PyTorch's numbers for the optimizer tests.

Regenerate (Debian: apt install python3-torch) with
    /usr/bin/python3 tests/optim/make_reference.py > tests/optim/torch_reference.hpp

- Adam/AdamW trajectories: torch.optim.Adam / AdamW (foreach=False) on one flat parameter of 8
  values with a fixed gradient sequence, in float64 and float32, optionally with
  torch.nn.utils.clip_grad_norm_ before each step and the lr of a schedule.
- Learning-rate curves from torch.optim.lr_scheduler: StepLR, LinearLR followed by
  CosineAnnealingLR (etnn's CosineWarmup, cross-checked against LambdaLR), OneCycleLR.
- clip_grad_norm_: the returned norm and the clipped gradient.
The hyper-parameters are float32 in etnn, so they are rounded to float32 here before use.
"""
import math
import struct
import sys
import warnings

import torch

warnings.filterwarnings("ignore")  # schedulers stepped without optimizer steps

NUM_PARAMS = 8
STEPS = 8


def f32(x):
    """The float32 nearest to x, as a Python float (what a `float` option holds)."""
    return struct.unpack("f", struct.pack("f", x))[0]


INITIAL = [0.5 * math.sin(1.3 * i + 0.2) for i in range(NUM_PARAMS)]
# Large gradients first, then small ones, so that amsgrad's running maximum matters.
GRADIENTS = [[math.sin(0.9 * s + 1.7 * i + 0.3) * (3.0 if s < 3 else 0.2) + 0.01 * i for i in range(NUM_PARAMS)]
             for s in range(STEPS)]


# Schedules: (C++ initialiser, description for the torch curve).
def constant():
    return ("etnn::optim::schedule::Constant{}", ("constant",))


def step_decay(step_size, gamma):
    return (f"etnn::optim::schedule::StepDecay{{.step_size = {step_size}, .gamma = {gamma!r}}}",
            ("step", step_size, gamma))


def cosine_warmup(warmup, total, min_lr):
    return (f"etnn::optim::schedule::CosineWarmup{{.warmup = {warmup}, .total = {total}, .min_lr = {min_lr!r}}}",
            ("cosine", warmup, total, min_lr))


def one_cycle(max_lr, total, pct_start=0.3, div_factor=25.0, final_div_factor=1e4):
    return (f"etnn::optim::schedule::OneCycle{{.max_lr = {max_lr!r}, .total = {total}, .pct_start = {pct_start!r}, "
            f".div_factor = {div_factor!r}, .final_div_factor = {final_div_factor!r}}}",
            ("onecycle", max_lr, total, pct_start, div_factor, final_div_factor))


def torch_curve(spec, base_lr, steps):
    """The lr of each of `steps` optimizer steps, from torch's schedulers."""
    def optimizer(lr):
        return torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr)

    def record(opt, scheduler, n):
        lrs = []
        for _ in range(n):
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            scheduler.step()
        return lrs

    kind = spec[0]
    if kind == "constant":
        return [base_lr] * steps
    if kind == "step":
        opt = optimizer(base_lr)
        return record(opt, torch.optim.lr_scheduler.StepLR(opt, step_size=spec[1], gamma=spec[2]), steps)
    if kind == "cosine":
        _, warmup, total, min_lr = spec
        assert steps <= total
        lrs = []
        if warmup > 0:
            opt = optimizer(base_lr)
            lrs += record(opt, torch.optim.lr_scheduler.LinearLR(
                opt, start_factor=1.0 / warmup, end_factor=1.0, total_iters=warmup - 1), warmup)
        opt = optimizer(base_lr)
        lrs += record(opt, torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total - warmup, eta_min=min_lr),
                      total - warmup)
        # The same curve as one LambdaLR.
        def factor(s):
            if s < warmup:
                return (s + 1) / warmup
            x = (s - warmup) / (total - warmup)
            return (min_lr + (base_lr - min_lr) * (1 + math.cos(math.pi * x)) / 2) / base_lr
        opt = optimizer(base_lr)
        check = record(opt, torch.optim.lr_scheduler.LambdaLR(opt, factor), total)
        assert all(abs(a - b) <= 1e-12 * base_lr for a, b in zip(lrs, check)), (lrs, check)
        return lrs[:steps]
    if kind == "onecycle":
        _, max_lr, total, pct_start, div_factor, final_div_factor = spec
        assert steps <= total
        opt = optimizer(base_lr)
        scheduler = torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=max_lr, total_steps=total, pct_start=pct_start, anneal_strategy="cos",
            cycle_momentum=False, div_factor=div_factor, final_div_factor=final_div_factor)
        lrs = []
        for s in range(steps):
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            if s + 1 < total:  # OneCycleLR refuses to step past its total
                scheduler.step()
        return lrs
    raise ValueError(kind)


class Run:
    def __init__(self, name, decoupled, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=None,
                 amsgrad=False, max_grad_norm=0.0, schedule=None):
        self.name, self.decoupled, self.amsgrad = name, decoupled, amsgrad
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.weight_decay = weight_decay if weight_decay is not None else (0.01 if decoupled else 0.0)
        self.max_grad_norm = max_grad_norm
        self.schedule = schedule or constant()

    def trajectory(self, dtype):
        p = torch.tensor(INITIAL, dtype=dtype, requires_grad=True)
        kind = torch.optim.AdamW if self.decoupled else torch.optim.Adam
        opt = kind([p], lr=f32(self.lr), betas=(f32(self.beta1), f32(self.beta2)), eps=f32(self.eps),
                   weight_decay=f32(self.weight_decay), amsgrad=self.amsgrad, foreach=False)
        lrs = torch_curve(self.schedule[1], f32(self.lr), STEPS)
        params, norms = [], []
        for s in range(STEPS):
            p.grad = torch.tensor(GRADIENTS[s], dtype=dtype)
            norm = 0.0
            if self.max_grad_norm > 0:
                norm = torch.nn.utils.clip_grad_norm_([p], f32(self.max_grad_norm)).item()
            opt.param_groups[0]["lr"] = lrs[s]
            opt.step()
            params.append(p.detach().tolist())
            norms.append(norm)
        return params, norms


RUNS = [
    Run("adam_default", False),
    Run("adam_l2", False, lr=0.01, beta1=0.8, beta2=0.99, eps=1e-6, weight_decay=0.1),
    Run("adam_amsgrad", False, lr=0.02, weight_decay=0.05, amsgrad=True),
    Run("adamw_default", True),
    Run("adamw_amsgrad", True, lr=0.05, beta1=0.85, beta2=0.95, weight_decay=0.1, amsgrad=True),
    Run("adam_cosine_warmup_clip", False, lr=0.05, max_grad_norm=1.0, schedule=cosine_warmup(3, 8, 1e-3)),
    Run("adamw_one_cycle_clip", True, amsgrad=True, max_grad_norm=2.0, schedule=one_cycle(0.1, 8)),
    Run("adam_step_decay", False, lr=0.03, schedule=step_decay(3, 0.5)),
]

CURVES = [  # (name, base lr, schedule, steps)
    ("constant", 0.1, constant(), 5),
    ("step_decay", 0.1, step_decay(3, 0.5), 12),
    ("cosine_warmup", 0.1, cosine_warmup(5, 20, 1e-3), 20),
    ("cosine_without_warmup", 0.05, cosine_warmup(0, 10, 0.0), 10),
    ("one_cycle_default", 0.1, one_cycle(0.1, 25), 25),
    ("one_cycle_custom", 0.1, one_cycle(0.3, 40, pct_start=0.25, div_factor=10.0, final_div_factor=100.0), 40),
]

CLIPS = [  # (max_norm, gradient)
    (1.0, GRADIENTS[0]),                       # clipped
    (100.0, GRADIENTS[0]),                     # left alone
    (0.5, [0.1 * g for g in GRADIENTS[4]]),    # clipped, small values
]


def clip(max_norm, gradient, dtype):
    g = torch.tensor(gradient, dtype=dtype)
    p = torch.zeros(NUM_PARAMS, dtype=dtype, requires_grad=True)
    p.grad = g
    norm = torch.nn.utils.clip_grad_norm_([p], f32(max_norm)).item()
    return norm, p.grad.tolist()


def num(x):
    return repr(float(x))


def array(values):
    return "{" + ", ".join(num(v) for v in values) + "}"


def matrix(rows):
    return "{" + ", ".join(array(r) for r in rows) + "}"


def main():
    out = []
    w = out.append
    w(f"// Generated by tests/optim/make_reference.py with PyTorch {torch.__version__}; do not edit. Regenerate with")
    w("//   /usr/bin/python3 tests/optim/make_reference.py > tests/optim/torch_reference.hpp")
    w("#pragma once")
    w("#include <etnn/optim/schedule.hpp>")
    w("")
    w("namespace etnn::test::torch_reference {")
    w("")
    w(f"inline constexpr int num_params = {NUM_PARAMS};")
    w(f"inline constexpr int steps = {STEPS};")
    w(f"inline constexpr double initial[num_params] = {array(INITIAL)};")
    w(f"inline constexpr double gradients[steps][num_params] = {matrix(GRADIENTS)};")
    w("")
    w("// torch.optim.Adam (decoupled = false) or AdamW from `initial` with `gradients`: the parameters")
    w("// after each step in float64 and float32, and clip_grad_norm_'s float64 norm (0: not clipping).")
    w("struct AdamRun {")
    w("  const char* name;")
    w("  bool decoupled;")
    w("  float lr, beta1, beta2, eps, weight_decay;")
    w("  bool amsgrad;")
    w("  float max_grad_norm;")
    w("  etnn::optim::schedule::Schedule schedule;")
    w("  double f64[steps][num_params];")
    w("  double f32[steps][num_params];")
    w("  double norm[steps];")
    w("};")
    w("")
    w("inline const AdamRun adam_runs[] = {")
    for r in RUNS:
        p64, n64 = r.trajectory(torch.float64)
        p32, _ = r.trajectory(torch.float32)
        w(f"    {{\"{r.name}\", {'true' if r.decoupled else 'false'}, {r.lr!r}f, {r.beta1!r}f, {r.beta2!r}f, "
          f"{r.eps!r}f, {r.weight_decay!r}f, {'true' if r.amsgrad else 'false'}, {r.max_grad_norm!r}f,")
        w(f"     {r.schedule[0]},")
        w(f"     {matrix(p64)},")
        w(f"     {matrix(p32)},")
        w(f"     {array(n64)}}},")
    w("};")
    w("")
    w("// torch.optim.lr_scheduler's lr for each optimizer step, from base lr `base_lr`.")
    w("struct ScheduleCurve {")
    w("  const char* name;")
    w("  float base_lr;")
    w("  etnn::optim::schedule::Schedule schedule;")
    w("  int steps;")
    w("  double lr[64];")
    w("};")
    w("")
    w("inline const ScheduleCurve schedule_curves[] = {")
    for name, base, sched, n in CURVES:
        lrs = torch_curve(sched[1], f32(base), n)
        w(f"    {{\"{name}\", {base!r}f, {sched[0]}, {n},")
        w(f"     {array(lrs)}}},")
    w("};")
    w("")
    w("// torch.nn.utils.clip_grad_norm_(max_norm) on `gradient`: the returned norm and the clipped")
    w("// gradient, in float64 and float32.")
    w("struct ClipCase {")
    w("  float max_norm;")
    w("  double gradient[num_params];")
    w("  double norm64;")
    w("  double clipped64[num_params];")
    w("  double norm32;")
    w("  double clipped32[num_params];")
    w("};")
    w("")
    w("inline const ClipCase clip_cases[] = {")
    for max_norm, g in CLIPS:
        n64, c64 = clip(max_norm, g, torch.float64)
        n32, c32 = clip(max_norm, g, torch.float32)
        w(f"    {{{max_norm!r}f, {array(g)},")
        w(f"     {num(n64)}, {array(c64)},")
        w(f"     {num(n32)}, {array(c32)}}},")
    w("};")
    w("")
    w("}  // namespace etnn::test::torch_reference")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
