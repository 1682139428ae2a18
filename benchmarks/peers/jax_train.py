#!/usr/bin/env python3
"""The JAX peer of bench_train: one configuration, trained for a fixed time, one result line.

Usage: jax_train.py MODEL BATCH SECONDS THREADS
  MODEL: mlp784 (784-512-10), tiny (32-64-64-10), wide (784-2048-2048-10), lenet (LeNet-5),
         gpt (examples/char_lm's model: 4 causal pre-norm transformer blocks, T = 128, D = 128,
         4 heads, V = 128, exact GELU, mean cross-entropy over every position)

One step is forward, softmax cross-entropy (mean over the batch), jax.value_and_grad and an SGD
update (lr 0.01), all under one jax.jit with the parameters donated, on synthetic inputs held on
the device (uniform in [-1, 1], labels uniform in 0..9; LeNet's NCHW, 1x28x28), parameters drawn
as PyTorch's defaults are (weights and biases uniform in +-1/sqrt(fan_in), which is what
kaiming_uniform with a = sqrt(5) gives). Warm-up (the compilation, then at least 3 steps and
0.25 s) is excluded; jax.block_until_ready marks the timing boundaries.

XLA's CPU client sizes its thread pool from the CPUs it may run on and takes no thread count, so
the threads are set by CPU affinity: with THREADS below the CPUs available this process pins itself
to the first THREADS of them before importing JAX (compare.sh also runs the 1-thread runs under
taskset -c 0), and on one thread XLA_FLAGS gains --xla_cpu_multi_thread_eigen=false. Prints
  result library=jax model=M batch=B threads=T samples_per_s=S steps=N peak_rss_mb=R version=V
"""
import os
import resource
import sys
import time


def pin(threads):
    """Restricts this process to `threads` of the CPUs it may run on; returns how many it has."""
    cpus = sorted(os.sched_getaffinity(0))
    if threads < len(cpus):
        os.sched_setaffinity(0, cpus[:threads])
    if threads == 1 and "xla_cpu_multi_thread_eigen" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()
    return len(os.sched_getaffinity(0))


LAYERS = {  # ("linear", in, out) | ("conv", in_channels, out_channels, kernel, padding) | "relu" | "pool" | "flatten"
    "mlp784": [("linear", 784, 512), "relu", ("linear", 512, 10)],
    "tiny": [("linear", 32, 64), "relu", ("linear", 64, 64), "relu", ("linear", 64, 10)],
    "wide": [("linear", 784, 2048), "relu", ("linear", 2048, 2048), "relu", ("linear", 2048, 10)],
    "lenet": [("conv", 1, 6, 5, 2), "relu", "pool", ("conv", 6, 16, 5, 0), "relu", "pool", "flatten",
              ("linear", 400, 120), "relu", ("linear", 120, 84), "relu", ("linear", 84, 10)],
}


def init_params(layers, rng):
    """PyTorch's default initialization: weight and bias uniform in +-1/sqrt(fan_in)."""
    import numpy as np

    params = []
    for layer in layers:
        if isinstance(layer, str):
            continue
        if layer[0] == "linear":
            _, fan_in, fan_out = layer
            shape = (fan_out, fan_in)  # PyTorch's layout: y = x W^T + b
        else:
            _, cin, cout, k, _ = layer
            fan_in, shape = cin * k * k, (cout, cin, k, k)  # OIHW
        bound = 1.0 / np.sqrt(fan_in)
        w = rng.uniform(-bound, bound, shape).astype(np.float32)
        b = rng.uniform(-bound, bound, (shape[0],)).astype(np.float32)
        params.append((w, b))
    return params


def make_step(layers):
    import jax
    import jax.numpy as jnp
    from jax import lax

    def forward(params, x):
        i = 0
        for layer in layers:
            if layer == "relu":
                x = jax.nn.relu(x)
            elif layer == "pool":  # 2x2 max pooling, stride 2, NCHW
                x = lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
            elif layer == "flatten":
                x = x.reshape(x.shape[0], -1)  # C, H, W order, as nn.Flatten
            else:
                w, b = params[i]
                i += 1
                if layer[0] == "linear":
                    x = x @ w.T + b
                else:
                    pad = layer[4]
                    x = lax.conv_general_dilated(x, w, (1, 1), [(pad, pad), (pad, pad)],
                                                 dimension_numbers=("NCHW", "OIHW", "NCHW"))
                    x = x + b[None, :, None, None]
        return x

    def loss_fn(params, x, y):
        logp = jax.nn.log_softmax(forward(params, x))
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    def step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), loss

    return jax.jit(step, donate_argnums=0)


GPT = {"length": 128, "vocabulary": 128, "width": 128, "heads": 4, "layers": 4}


def init_gpt(rng):
    """PyTorch's initialisation of torch_gpt.py's modules: embeddings N(0, 1), attention's in-projection
    xavier-uniform with zero biases, linear layers +-1/sqrt(fan_in), layer norms (1, 0)."""
    import numpy as np

    t, v, d = GPT["length"], GPT["vocabulary"], GPT["width"]

    def linear(fan_in, fan_out, zero_bias=False):
        bound = 1.0 / np.sqrt(fan_in)
        w = rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32)
        b = np.zeros(fan_out, np.float32) if zero_bias else rng.uniform(-bound, bound, fan_out).astype(np.float32)
        return w, b

    def norm():
        return np.ones(d, np.float32), np.zeros(d, np.float32)

    xavier = np.sqrt(6.0 / (4 * d))
    blocks = [{"ln1": norm(), "in": (rng.uniform(-xavier, xavier, (3 * d, d)).astype(np.float32),
                                     np.zeros(3 * d, np.float32)),
               "out": linear(d, d, zero_bias=True), "ln2": norm(), "fc1": linear(d, 4 * d), "fc2": linear(4 * d, d)}
              for _ in range(GPT["layers"])]
    return {"tokens": rng.standard_normal((v, d)).astype(np.float32),
            "positions": rng.standard_normal((t, d)).astype(np.float32),
            "blocks": blocks, "ln": norm(), "head": linear(d, v)}


def make_gpt_step():
    import jax
    import jax.numpy as jnp

    t, d, h = GPT["length"], GPT["width"], GPT["heads"]
    causal = jnp.tril(jnp.ones((t, t), bool))

    def layer_norm(x, gb):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + 1e-5) * gb[0] + gb[1]

    def attention(x, p):
        b = x.shape[0]
        qkv = x @ p["in"][0].T + p["in"][1]                                   # (B, T, 3D)
        q, k, v = (qkv[..., i * d:(i + 1) * d].reshape(b, t, h, d // h).transpose(0, 2, 1, 3) for i in range(3))
        scores = jnp.where(causal, q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(d / h), -jnp.inf)
        o = (jax.nn.softmax(scores, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
        return o @ p["out"][0].T + p["out"][1]

    def forward(params, ids):
        x = params["tokens"][ids] + params["positions"]
        for p in params["blocks"]:
            x = x + attention(layer_norm(x, p["ln1"]), p)
            hidden = jax.nn.gelu(layer_norm(x, p["ln2"]) @ p["fc1"][0].T + p["fc1"][1], approximate=False)
            x = x + hidden @ p["fc2"][0].T + p["fc2"][1]
        return layer_norm(x, params["ln"]) @ params["head"][0].T + params["head"][1]

    def loss_fn(params, ids, y):
        logp = jax.nn.log_softmax(forward(params, ids))
        return -jnp.mean(jnp.take_along_axis(logp, y[..., None], axis=-1))

    def step(params, ids, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, ids, y)
        return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), loss

    return jax.jit(step, donate_argnums=0)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    name, batch, seconds, threads = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    if name not in LAYERS and name != "gpt":
        sys.exit(f"jax_train.py: unknown model '{name}' (mlp784, tiny, wide, lenet, gpt)")
    cpus = pin(threads)

    import jax
    import numpy as np

    rng = np.random.default_rng(0)
    if name == "gpt":
        params = jax.device_put(init_gpt(rng))
        x = jax.device_put(rng.integers(0, GPT["vocabulary"], (batch, GPT["length"])).astype(np.int32))
        y = jax.device_put(rng.integers(0, GPT["vocabulary"], (batch, GPT["length"])).astype(np.int32))
        step = make_gpt_step()
    else:
        layers = LAYERS[name]
        params = jax.device_put(init_params(layers, rng))
        shape = {"tiny": (batch, 32), "lenet": (batch, 1, 28, 28)}.get(name, (batch, 784))
        x = jax.device_put(rng.uniform(-1, 1, shape).astype(np.float32))
        y = jax.device_put(rng.integers(0, 10, (batch,)).astype(np.int32))
        step = make_step(layers)

    params, loss = step(params, x, y)  # compiles
    jax.block_until_ready(params)
    t0 = time.perf_counter()
    i = 0
    while i < 3 or time.perf_counter() - t0 < 0.25:  # warm-up, and how many steps take about 20 ms
        params, loss = step(params, x, y)
        jax.block_until_ready(params)
        i += 1
    chunk = max(1, int(0.02 * i / (time.perf_counter() - t0)))
    steps = 0
    t0 = time.perf_counter()
    while True:
        # Dispatch is asynchronous: a chunk of steps is queued, then waited for, then the clock read.
        for _ in range(chunk):
            params, loss = step(params, x, y)
        jax.block_until_ready(params)
        steps += chunk
        t = time.perf_counter() - t0
        if t >= seconds:
            break
    if not np.isfinite(float(loss)):
        sys.exit(f"jax_train.py: the loss of {name}/{batch} is not finite")
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(f"result library=jax model={name} batch={batch} threads={min(threads, cpus)} "
          f"samples_per_s={steps * batch / t:.1f} steps={steps} peak_rss_mb={peak_kib / 1024:.1f} "
          f"version={jax.__version__}")


if __name__ == "__main__":
    main()
