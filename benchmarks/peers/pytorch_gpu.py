#!/usr/bin/env python3
"""The PyTorch peer of etnn's CUDA benchmarks: training steps per second, copy and fused-Adam bandwidth.

Usage: pytorch_gpu.py [--device cuda|cpu] [--seconds S] [--configs LIST] [--modes LIST] [--quick] [--tf32]
  --device   cuda (default) or cpu (a smoke test of this script; batches are capped at 4096 there)
  --seconds  timed seconds per measurement (default 1.0; 0.2 with --quick)
  --configs  comma-separated, default fused64,mlp784,d2d_copy,adam_flat
               fused64   mlp64x4 (64-64-64-64-64-16: 4 hidden Linear+ReLU, then Linear to 16), MSE against
                         random targets, Adam lr 1e-3 (fused=True where available), batches 2**14 and 2**18
               mlp784    784-512-10 (Linear, ReLU, Linear), cross-entropy with integer labels, SGD lr 0.01
                         (no momentum), batches 64 and 4096
               d2d_copy  dst.copy_(src) of a 256 MiB float32 tensor (1M elements on cpu), GB/s counted as
                         (read + write bytes) / time
               adam_flat torch.optim.Adam([p], fused=True) step over a flat float32 parameter of 64M elements
                         (1M on cpu) with p.grad set; bytes per step 7 * 4 * n (p, g, m, v read; p, m, v written)
  --modes    comma-separated, default eager,bf16,fp16,compile,graphs,graphs_bf16,compile_max;
             all = those and compile_bf16
               eager         fp32
               bf16          eager under torch.autocast(device_type, dtype=torch.bfloat16)
               fp16          eager under torch.autocast(device_type, dtype=torch.float16), the loss scaled
                             by torch.amp.GradScaler (cuda only)
               compile       torch.compile(model, dynamic=False) (mode default), fp32
               compile_bf16  the compiled model under autocast bf16
               graphs        the whole step (zero_grad, forward, loss, backward, optimizer step) captured once
                             into one torch.cuda.graph and replayed, fp32; Adam(fused=True, capturable=True),
                             SGD without state (cuda only): what a PyTorch expert runs for small networks
               graphs_bf16   the same under torch.autocast(bfloat16, cache_enabled=False) inside the capture
               compile_max   torch.compile(mode="max-autotune", dynamic=False) of model plus loss (Inductor's
                             autotuned kernels and its own CUDA graphs), and the optimizer step compiled too
  --quick    seconds 0.2 (unless --seconds is given) and no compile modes
  --tf32     allow TF32 for fp32 matmuls (torch.set_float32_matmul_precision("high")); off by default,
             which is PyTorch's default: fp32 modes are then true fp32

One step is opt.zero_grad(set_to_none=True), forward, loss, backward and the optimizer step, on synthetic
data created once on the device (inputs uniform in [-1, 1], labels uniform in 0..9 or targets uniform in
[-1, 1]), with PyTorch's default initialization. Only the model is compiled (the optimizer step stays eager);
compilation and warm-up are excluded from the timing. Warm-up is at least 10 steps (3 on cpu) and 0.5 s
(compile: at least 20 steps and 1 s after the first, compiling step). The clock (time.perf_counter) starts and
stops after torch.cuda.synchronize(). Prints, first,
  machine library=pytorch torch="V" device=D gpu="NAME" cuda="V" tf32=0|1
then one line per measurement
  result library=pytorch device=D model=M batch=B mode=MODE samples_per_s=S step_ms=T steps=N opt=O [compile_s=C]
  result library=pytorch device=D model=M batch=B mode=MODE status=unavailable|failed reason="..."
  result library=pytorch device=D model=d2d_copy bytes=BYTES gbps=G steps=N
  result library=pytorch device=D model=adam_flat n=N gbps=G step_ms=T steps=N opt=O
and at the end a markdown table of all results. Exits 1 if a non-compile measurement failed.
"""
import argparse
import sys
import time

import torch
from torch import nn
import torch.nn.functional as F

CONFIGS = {  # name -> (model, batches)
    "fused64": ("mlp64x4", (2 ** 14, 2 ** 18)),
    "mlp784": ("mlp784", (64, 4096)),
}
ALL_CONFIGS = ["fused64", "mlp784", "d2d_copy", "adam_flat"]
ALL_MODES = ["eager", "bf16", "fp16", "compile", "compile_bf16", "graphs", "graphs_bf16", "compile_max"]
DEFAULT_MODES = ["eager", "bf16", "fp16", "compile", "graphs", "graphs_bf16", "compile_max"]
CPU_MAX_BATCH = 4096


def make_model(name):
    if name == "mlp64x4":
        layers = []
        for _ in range(4):
            layers += [nn.Linear(64, 64), nn.ReLU()]
        return nn.Sequential(*layers, nn.Linear(64, 16))
    if name == "mlp784":
        return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10))
    raise ValueError(name)


def make_adam(params, device, capturable=False):
    """Adam lr 1e-3: fused=True where it works (CUDA), else foreach=True, else the default. capturable: its
    step count lives on the device, as a step captured into a CUDA graph needs (or NotImplementedError)."""
    params = list(params)
    if capturable:
        if device != "cuda":
            raise NotImplementedError("a CUDA graph capture needs cuda")
        for kind, kwargs in (("adam_fused_capturable", {"fused": True}), ("adam_foreach_capturable", {"foreach": True})):
            try:
                return torch.optim.Adam(params, lr=1e-3, capturable=True, **kwargs), kind
            except (TypeError, RuntimeError, ValueError):
                pass
        raise NotImplementedError(f"torch {torch.__version__} has no capturable Adam")
    if device == "cuda":
        for kind, kwargs in (("adam_fused", {"fused": True}), ("adam_foreach", {"foreach": True})):
            try:
                return torch.optim.Adam(params, lr=1e-3, **kwargs), kind
            except (TypeError, RuntimeError, ValueError):
                pass
    return torch.optim.Adam(params, lr=1e-3), "adam_default"


def make_sgd(params, device):
    if device == "cuda":
        try:
            return torch.optim.SGD(params, lr=0.01, foreach=True), "sgd_foreach"
        except (TypeError, RuntimeError, ValueError):
            pass
    return torch.optim.SGD(params, lr=0.01), "sgd_default"


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def quoted(text, limit=240):
    text = " ".join(str(text).split()).replace('"', "'").replace("\\", "/")
    return '"' + (text[:limit] + "..." if len(text) > limit else text) + '"'


def timed(step, device, seconds, min_warm_steps, min_warm_s):
    """Warm up, then run steps until `seconds` elapsed. Returns (steps, seconds, first warm-up step's seconds)."""
    t0 = time.perf_counter()
    step()
    sync(device)
    first_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    i = 1
    while i < min_warm_steps or time.perf_counter() - t0 < min_warm_s:
        step()
        i += 1
    sync(device)
    steps = 0
    t0 = time.perf_counter()
    while True:
        step()
        steps += 1
        if time.perf_counter() - t0 >= seconds:
            break
    sync(device)
    return steps, time.perf_counter() - t0, first_s


def graph_step(model, opt, loss_fn, x, y, autocast):
    """The whole training step captured into one CUDA graph (PyTorch's "whole-network capture" recipe:
    a few eager steps on a side stream first, so that lazily made state, the optimizer's included, exists
    before the capture). Returns the replay; x and y are the static inputs every replay reads."""
    def body():
        opt.zero_grad(set_to_none=False)  # the gradients' memory stays put: the graph writes into it
        if autocast is not None:
            with torch.autocast(device_type="cuda", dtype=autocast, cache_enabled=False):
                loss = loss_fn(model(x), y)
        else:
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    return graph.replay


def train_measurement(model_name, batch, mode, data, args):
    device = args.device
    torch.manual_seed(0)
    model = make_model(model_name).to(device)
    graphs = mode.startswith("graphs")
    if graphs and device != "cuda":
        raise NotImplementedError("CUDA graphs need cuda")
    if model_name == "mlp64x4":
        opt, opt_kind = make_adam(model.parameters(), device, capturable=graphs)
        loss_fn = F.mse_loss
    else:
        opt, opt_kind = make_sgd(model.parameters(), device)  # lr only: no state, nothing on the host
        loss_fn = F.cross_entropy
    if graphs:
        autocast = torch.bfloat16 if mode == "graphs_bf16" else None
        replay = graph_step(model, opt, loss_fn, data[0], data[1], autocast)
        steps, t, first_s = timed(replay, device, args.seconds, 10, 0.5)
        return steps, t, first_s, opt_kind
    if mode == "compile_max":
        if not hasattr(torch, "compile"):
            raise NotImplementedError(f"torch.compile is not in torch {torch.__version__}")
        torch._dynamo.reset()
        forward_loss = torch.compile(lambda inputs, targets: loss_fn(model(inputs), targets), mode="max-autotune",
                                     dynamic=False)
        opt_step = torch.compile(opt.step, mode="max-autotune")
        x, y = data

        def compiled_step():
            opt.zero_grad(set_to_none=True)
            forward_loss(x, y).backward()
            opt_step()

        try:
            steps, t, first_s = timed(compiled_step, device, args.seconds, 20, 1.0)
        finally:
            torch._dynamo.reset()
        return steps, t, first_s, opt_kind
    compiled = mode.startswith("compile")
    if compiled:
        if not hasattr(torch, "compile"):
            raise NotImplementedError(f"torch.compile is not in torch {torch.__version__}")
        torch._dynamo.reset()  # fresh caches: no recompile limit, no automatic dynamic shapes across configs
        forward = torch.compile(model, dynamic=False)
    else:
        forward = model
    autocast = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(mode.rsplit("_", 1)[-1])
    if autocast == torch.float16 and device != "cuda":
        raise NotImplementedError("fp16 autocast with GradScaler is measured on cuda only")
    scaler = None
    if autocast == torch.float16:  # torch.amp.GradScaler since 2.3, torch.cuda.amp's before
        scaler = torch.amp.GradScaler("cuda") if hasattr(torch.amp, "GradScaler") else torch.cuda.amp.GradScaler()
    x, y = data

    def step():
        opt.zero_grad(set_to_none=True)
        if autocast is not None:
            with torch.autocast(device_type=device, dtype=autocast):
                loss = loss_fn(forward(x), y)
        else:
            loss = loss_fn(forward(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()

    warm_steps = (20 if compiled else 10) if device == "cuda" else 3
    warm_s = 1.0 if compiled else 0.5
    try:
        steps, t, first_s = timed(step, device, args.seconds, warm_steps, warm_s)
    finally:
        if compiled:
            torch._dynamo.reset()
    return steps, t, first_s, opt_kind


def copy_measurement(args):
    n = 64 * 2 ** 20 if args.device == "cuda" else 2 ** 20  # 256 MiB of float32 on cuda, 4 MiB on cpu
    src = torch.empty(n, device=args.device).uniform_(-1, 1)
    dst = torch.empty_like(src)
    steps, t, _ = timed(lambda: dst.copy_(src), args.device, args.seconds, 10, 0.5)
    nbytes = 4 * n
    return nbytes, 2 * nbytes * steps / t / 1e9, steps


def adam_flat_measurement(args):
    n = 64 * 2 ** 20 if args.device == "cuda" else 2 ** 20
    p = nn.Parameter(torch.empty(n, device=args.device).uniform_(-1, 1))
    p.grad = torch.empty_like(p).uniform_(-1e-3, 1e-3)
    opt, opt_kind = make_adam([p], args.device)
    steps, t, _ = timed(opt.step, args.device, args.seconds, 10, 0.5)
    return n, 7 * 4 * n * steps / t / 1e9, 1e3 * t / steps, steps, opt_kind


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--configs", default=",".join(ALL_CONFIGS))
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tf32", action="store_true")
    args = parser.parse_args()
    if args.seconds is None:
        args.seconds = 0.2 if args.quick else 1.0
    configs = [c for c in args.configs.split(",") if c]
    modes = ALL_MODES if args.modes == "all" else [m for m in args.modes.split(",") if m]
    for name in configs:
        if name not in ALL_CONFIGS:
            parser.error(f"unknown config '{name}' ({', '.join(ALL_CONFIGS)})")
    for mode in modes:
        if mode not in ALL_MODES:
            parser.error(f"unknown mode '{mode}' ({', '.join(ALL_MODES)}, or all)")
    if args.quick:
        modes = [m for m in modes if not m.startswith("compile")]
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("pytorch_gpu.py: CUDA is not available (use --device cpu for a smoke test)")
    torch.set_float32_matmul_precision("high" if args.tf32 else "highest")

    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "none"
    print(f"machine library=pytorch torch={quoted(torch.__version__)} device={device} gpu={quoted(gpu)} "
          f"cuda={quoted(torch.version.cuda)} tf32={int(args.tf32)}", flush=True)

    rows, bandwidth_rows, failed = [], [], False
    head = f"result library=pytorch device={device}"
    for name in configs:
        if name == "d2d_copy":
            nbytes, gbps, steps = copy_measurement(args)
            print(f"{head} model=d2d_copy bytes={nbytes} gbps={gbps:.1f} steps={steps}", flush=True)
            bandwidth_rows.append(("d2d_copy", f"{nbytes} B", f"{gbps:.1f}", "", "copy_"))
            continue
        if name == "adam_flat":
            n, gbps, step_ms, steps, opt_kind = adam_flat_measurement(args)
            print(f"{head} model=adam_flat n={n} gbps={gbps:.1f} step_ms={step_ms:.3f} steps={steps} "
                  f"opt={opt_kind}", flush=True)
            bandwidth_rows.append(("adam_flat", f"n={n}", f"{gbps:.1f}", f"{step_ms:.3f}", opt_kind))
            continue
        model_name, batches = CONFIGS[name]
        if device == "cpu":
            batches = sorted({min(b, CPU_MAX_BATCH) for b in batches})
        for batch in batches:
            torch.manual_seed(1)
            x = torch.rand(batch, 784 if model_name == "mlp784" else 64, device=device) * 2 - 1
            if model_name == "mlp784":
                y = torch.randint(0, 10, (batch,), device=device)
            else:
                y = torch.rand(batch, 16, device=device) * 2 - 1
            for mode in modes:
                where = f"{head} model={model_name} batch={batch} mode={mode}"
                try:
                    steps, t, first_s, opt_kind = train_measurement(model_name, batch, mode, (x, y), args)
                except Exception as e:  # noqa: BLE001 -- report and go on with the other measurements
                    unavailable = mode.startswith("compile") or isinstance(e, NotImplementedError)
                    status = "unavailable" if unavailable else "failed"
                    failed |= status == "failed"
                    print(f"{where} status={status} reason={quoted(f'{type(e).__name__}: {e}')}", flush=True)
                    rows.append((model_name, batch, mode, status, "", "", "", ""))
                    continue
                rate, step_ms = steps * batch / t, 1e3 * t / steps
                extra = f" compile_s={first_s:.1f}" if mode.startswith("compile") else ""
                print(f"{where} samples_per_s={rate:.1f} step_ms={step_ms:.3f} steps={steps} opt={opt_kind}{extra}",
                      flush=True)
                rows.append((model_name, batch, mode, f"{rate:.0f}", f"{step_ms:.3f}", str(steps), opt_kind,
                             f"{first_s:.1f}" if extra else ""))
            del x, y

    print()
    print(f"PyTorch {torch.__version__} on {device} ({gpu}), {args.seconds} s per measurement:")
    if rows:
        print()
        print("| model | batch | mode | samples/s | ms/step | steps | optimizer | compile s |")
        print("|---|---:|---|---:|---:|---:|---|---:|")
        for r in rows:
            print("| " + " | ".join(str(v) for v in r) + " |")
    if bandwidth_rows:
        print()
        print("| measurement | size | GB/s | ms/step | op |")
        print("|---|---:|---:|---:|---|")
        for r in bandwidth_rows:
            print("| " + " | ".join(r) + " |")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
