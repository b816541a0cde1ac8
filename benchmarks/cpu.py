"""The CPU benchmark suite: ember vs JAX, NumPy and PyTorch on the workloads of issue 4.

Run from the repository root: ``python benchmarks/cpu.py [--only a,b,...] [--quick]
[--markdown]``. Every workload runs under each engine in this one process (JAX and PyTorch
only when installed); the table gives the median time per call, the ratios ember / JAX and
ember / NumPy, and, for the memory-bound workloads, a bandwidth reference: ``np.copyto`` of
half the workload's bytes (a copy reads and writes, so its traffic equals what the workload
must read plus write). Times to first result, (g) and (h), are measured in fresh processes.

Workloads: (a) ``sum(x + y*z)``, 1e7 float32; (b) selu, 1e7; (c) ``exp(sin(a)*2+1)``, 1e6;
(d) softmax and layernorm over (4096, 1024) on the last axis; (e) an MLP 784-512-512-10 train
step (value_and_grad + SGD, batch 128; the forward loss if ember has no ``value_and_grad``);
(f) a cached jit call on 4 elements; (g) trace + compile + run of a small function and of the
MLP step in a fresh process, disk caches off/empty; (h) (g) again for ember with its disk cache
warm; (i) eager op-by-op code: one ``add`` on 4 elements, a 20-op chain on 1e4 elements, and
an eager ``fori_loop`` of 1,000 small steps whose body is a new lambda on every call (ember and
JAX only); (j) control flow under jit: a ``fori_loop`` of 1,000 small elementwise steps on 16
elements, and an RNN ``scan`` (100 steps of ``tanh(h @ W + x_t @ U)``, batch 8, 32 -> 64), NumPy as
plain Python loops (PyTorch not run).
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

ENGINES = ("ember", "jax", "numpy", "torch")
BW_REF = "bandwidth reference"


# --- engines ---------------------------------------------------------------------------------

@dataclass
class Engine:
    """What a workload needs from a framework: its NumPy-like module and a few hooks."""

    name: str
    m: Any                       # numpy-like module: ember.numpy, jax.numpy, numpy, torch
    jit: Callable                # identity for eager-only engines
    put: Callable                # NumPy array -> engine array
    block: Callable              # waits for a result (a pytree) and returns it
    value_and_grad: Callable | None = None
    tree_map: Callable | None = None
    info: str = ""


def make_engine(name: str) -> Engine | None:
    """The engine called ``name``, or None when its framework is not installed."""
    if name == "ember":
        import ember
        import ember.numpy as enp
        from ember.backends import canonical_name

        return Engine("ember", enp, lambda f: ember.jit(f, backend="cpu"), enp.asarray,
                      _blocker(ember.block_until_ready),
                      getattr(ember, "value_and_grad", None), ember.tree_util.tree_map,
                      info=f"backend 'cpu' = {canonical_name('cpu')!r}")
    if name == "jax":
        try:
            import jax
            import jax.numpy as jjnp
        except ImportError:
            return None
        jax.config.update("jax_enable_x64", False)
        return Engine("jax", jjnp, jax.jit, jjnp.asarray, _blocker(jax.block_until_ready),
                      jax.value_and_grad, jax.tree_util.tree_map,
                      info=f"jax {jax.__version__}")
    if name == "numpy":
        return Engine("numpy", np, lambda f: f, lambda a: a, lambda out: out,
                      info=f"numpy {np.__version__}")
    if name == "torch":
        try:
            import torch
        except ImportError:
            return None
        return Engine("torch", torch, lambda f: f, torch.from_numpy, lambda out: out,
                      info=f"torch {torch.__version__} (eager)")
    raise ValueError(f"make_engine: unknown engine {name!r}")


def _blocker(block_until_ready: Callable) -> Callable:
    def block(out):
        block_until_ready(out)
        return out
    return block


# --- timing ----------------------------------------------------------------------------------

def _calibrated(fn: Callable[[], Any], min_seconds: float) -> int:
    """How many calls of ``fn`` (already warmed up) make a batch of at least ``min_seconds``.

    Batches of doubling size are timed until one lasts a tenth of ``min_seconds``; the
    fastest of two such estimates counts, so one slow call (a library built on first use, a
    neighbour's burst) cannot shrink every batch to a single noisy call."""
    def seconds_per_call() -> float:
        number = 1
        while True:
            start = time.perf_counter()
            for _ in range(number):
                fn()
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds / 10:
                return elapsed / number
            number *= 2

    once = min(seconds_per_call(), seconds_per_call())
    return max(1, int(min_seconds / max(once, 1e-9)))


def _settle() -> None:
    """Waits for ember's background work (optimized compiles, shared-library links), so it
    does not run on a core while something is timed."""
    if "ember.backends" in sys.modules:
        backend = sys.modules["ember.backends"].get_backend("cpu")
        getattr(backend, "wait_for_background", lambda: None)()


# Engines measured apart from the others (``main``): their library threads spin for a while
# after a call (NumPy's OpenBLAS ~0.1 s: 2^28 cycles of the time-stamp counter; PyTorch's
# OpenMP threads). Interleaved with ember and JAX, the batch that came right after NumPy's
# shared a core with a spinning BLAS thread: on the 2-core VM, ember's MLP step (always
# next) ran 1.5-2x slower for that while, and JAX's softmax, when rotated after NumPy or
# started after a 0.2 s pause, 1.5 -> 3-7 ms.
SPINNING_ENGINES = ("numpy", "torch")


def median_times(fns: dict[str, Callable[[], Any]], repeats: int,
                 min_seconds: float) -> dict[str, float]:
    """Median seconds per call of each of ``fns`` over ``repeats`` batches of at least
    ``min_seconds``. The batches are interleaved (one of each function per round), so a
    slow spell of the machine (this is a shared 2-core VM) hits every engine alike and the
    ratios stay meaningful."""
    for fn in fns.values():
        fn()  # warm up (compiles under jit)
    _settle()
    numbers = {name: _calibrated(fn, min_seconds) for name, fn in fns.items()}
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            number = numbers[name]
            start = time.perf_counter()
            for _ in range(number):
                fn()
            samples[name].append((time.perf_counter() - start) / number)
    return {name: statistics.median(times) for name, times in samples.items()}


def bandwidth_copy(traffic_bytes: int) -> Callable[[], Any]:
    """A call of ``np.copyto`` moving ``traffic_bytes`` (half read, half written): the
    bandwidth reference."""
    src = np.ones(traffic_bytes // 8, np.float32)
    dst = np.empty_like(src)
    return lambda: np.copyto(dst, src)


# --- workloads -------------------------------------------------------------------------------

@dataclass
class Workload:
    key: str                     # the letter, with a digit when a letter has several
    name: str
    fns: dict[str, Callable[[], Any]]  # engine -> zero-argument call returning a ready result
    traffic_bytes: int | None = None   # bytes the workload must read + write
    notes: list[str] = field(default_factory=list)


def _rng_arrays(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s, dtype=np.float32) for s in shapes]


def _jitted(engines: dict[str, Engine], fn: Callable, *arrays: np.ndarray,
            torch_fn: Callable | None = None) -> dict[str, Callable[[], Any]]:
    """``fn(m, *args)`` under every engine: jitted for ember/JAX, eager for NumPy/PyTorch."""
    calls = {}
    for name, eng in engines.items():
        f = torch_fn if name == "torch" and torch_fn is not None else fn
        args = [eng.put(a) for a in arrays]
        compiled = eng.jit(lambda *xs, f=f, m=eng.m: f(m, *xs))
        calls[name] = lambda compiled=compiled, args=args, eng=eng: eng.block(compiled(*args))
    return calls


def workload_a(engines, quick):
    x, y, z = _rng_arrays(10**7, 10**7, 10**7)
    fns = _jitted(engines, lambda m, x, y, z: m.sum(x + y * z), x, y, z)
    return [Workload("a", "sum(x + y*z), 1e7 f32", fns, traffic_bytes=3 * x.nbytes)]


SELU_ALPHA, SELU_SCALE = 1.6732632423543772, 1.0507009873554805


def _selu(m, x):
    return SELU_SCALE * m.where(x > 0, x, SELU_ALPHA * m.expm1(x))


def workload_b(engines, quick):
    (x,) = _rng_arrays(10**7)
    return [Workload("b", "selu, 1e7 f32", _jitted(engines, _selu, x),
                     traffic_bytes=2 * x.nbytes)]


def _exp_sin(m, a):
    return m.exp(m.sin(a) * 2.0 + 1.0)


def workload_c(engines, quick):
    (a,) = _rng_arrays(10**6)
    return [Workload("c", "exp(sin(a)*2+1), 1e6 f32", _jitted(engines, _exp_sin, a),
                     traffic_bytes=2 * a.nbytes)]


def _softmax(m, x):
    e = m.exp(x - m.max(x, axis=-1, keepdims=True))
    return e / m.sum(e, axis=-1, keepdims=True)


def _layernorm(m, x):
    mu = m.mean(x, axis=-1, keepdims=True)
    var = m.mean(m.square(x - mu), axis=-1, keepdims=True)
    return (x - mu) / m.sqrt(var + 1e-5)


def workload_d(engines, quick):
    (x,) = _rng_arrays((4096, 1024))
    torch_softmax = lambda t, x: t.softmax(x, dim=-1)
    torch_layernorm = lambda t, x: t.nn.functional.layer_norm(x, (x.shape[-1],), eps=1e-5)
    softmax = _jitted(engines, _softmax, x, torch_fn=torch_softmax)
    layernorm = _jitted(engines, _layernorm, x, torch_fn=torch_layernorm)
    return [Workload("d1", "softmax (4096, 1024) f32", softmax, traffic_bytes=2 * x.nbytes),
            Workload("d2", "layernorm (4096, 1024) f32", layernorm, traffic_bytes=2 * x.nbytes)]


# (e) and (g): the MLP. A train step needs value_and_grad; NumPy gets a hand-written backward.
MLP_SIZES, MLP_BATCH, MLP_LR = (784, 512, 512, 10), 128, 0.01


def mlp_data(seed=0):
    rng = np.random.default_rng(seed)
    params = [(rng.standard_normal((i, o), dtype=np.float32) / np.float32(np.sqrt(i)),
               np.zeros(o, np.float32)) for i, o in zip(MLP_SIZES[:-1], MLP_SIZES[1:])]
    x = rng.standard_normal((MLP_BATCH, MLP_SIZES[0]), dtype=np.float32)
    y = np.eye(MLP_SIZES[-1], dtype=np.float32)[rng.integers(0, MLP_SIZES[-1], MLP_BATCH)]
    return params, x, y


def mlp_loss(m, params, x, y):
    h = x
    for w, b in params[:-1]:
        h = m.maximum(h @ w + b, 0.0)
    w, b = params[-1]
    logits = h @ w + b
    shifted = logits - m.max(logits, axis=-1, keepdims=True)
    log_probs = shifted - m.log(m.sum(m.exp(shifted), axis=-1, keepdims=True))
    return -m.mean(m.sum(y * log_probs, axis=-1))


def _numpy_mlp_step(params, x, y):
    """Loss and SGD-updated params with the gradient written out by hand."""
    acts = [x]
    for w, b in params[:-1]:
        acts.append(np.maximum(acts[-1] @ w + b, 0.0))
    logits = acts[-1] @ params[-1][0] + params[-1][1]
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    loss = -np.mean(np.sum(y * log_probs, axis=-1))
    delta = (np.exp(log_probs) - y) / np.float32(x.shape[0])
    new = []
    for i in range(len(params) - 1, -1, -1):
        w, b = params[i]
        new.append((w - MLP_LR * (acts[i].T @ delta), b - MLP_LR * delta.sum(axis=0)))
        if i:
            delta = (delta @ w.T) * (acts[i] > 0)
    return loss, new[::-1]


def mlp_variant(ember_engine: Engine) -> str:
    return "train step" if ember_engine.value_and_grad is not None else "forward loss"


def mlp_function(eng: Engine, variant: str) -> Callable:
    """The (not yet jitted) MLP function of ``eng``: ``(params, x, y) -> loss[, new params]``."""
    m = eng.m
    if variant == "forward loss":
        return lambda params, x, y: mlp_loss(m, params, x, y)
    if eng.name == "numpy":
        return _numpy_mlp_step
    grad_fn = eng.value_and_grad(lambda params, x, y: mlp_loss(m, params, x, y))

    def step(params, x, y):
        loss, grads = grad_fn(params, x, y)
        return loss, eng.tree_map(lambda p, g: p - MLP_LR * g, params, grads)
    return step


def _torch_mlp(torch, variant):
    def step(params, x, y):
        params = [(w.detach().requires_grad_(), b.detach().requires_grad_()) for w, b in params]
        loss = mlp_loss(_TorchOps(torch), params, x, y)
        if variant == "forward loss":
            return loss.detach()
        grads = torch.autograd.grad(loss, [p for pair in params for p in pair])
        flat = [p.detach() - MLP_LR * g for p, g in zip((p for pr in params for p in pr), grads)]
        return loss.detach(), list(zip(flat[::2], flat[1::2]))
    return step


class _TorchOps:
    """The few NumPy-style functions ``mlp_loss`` needs, on PyTorch."""

    def __init__(self, torch):
        self.t = torch

    def maximum(self, a, b):
        return self.t.clamp_min(a, b)

    def max(self, a, axis, keepdims):
        return a.amax(dim=axis, keepdim=keepdims)

    def sum(self, a, axis, keepdims=False):
        return a.sum(dim=axis, keepdim=keepdims)

    def log(self, a):
        return self.t.log(a)

    def exp(self, a):
        return self.t.exp(a)

    def mean(self, a):
        return a.mean()


def workload_e(engines, quick):
    variant = mlp_variant(engines["ember"]) if "ember" in engines else "train step"
    params, x, y = mlp_data()
    fns = {}
    for name, eng in engines.items():
        if name == "torch":
            f = _torch_mlp(eng.m, variant)
        else:
            if variant == "train step" and name != "numpy" and eng.value_and_grad is None:
                continue
            f = eng.jit(mlp_function(eng, variant))
        p = [(eng.put(w), eng.put(b)) for w, b in params]
        args = (p, eng.put(x), eng.put(y))
        fns[name] = lambda f=f, args=args, eng=eng: eng.block(f(*args))
    return [Workload("e", f"MLP 784-512-512-10, b128, {variant}", fns,
                     notes=[f"(e) measures the {variant}"
                            + ("" if variant == "train step" else
                               " (ember has no value_and_grad yet)")])]


def workload_f(engines, quick):
    (x,) = _rng_arrays(4)
    fn = lambda m, x: x * 2.0 + 1.0
    return [Workload("f", "cached jit call, 4 f32 (dispatch)", _jitted(engines, fn, x))]


def _chain20(m, x, y):
    """20 elementwise ops: add, mul, sin, exp, tanh, maximum."""
    maximum = m.maximum if m.__name__ != "torch" else (
        lambda a, b: m.maximum(a, b) if isinstance(b, m.Tensor) else m.clamp_min(a, b))
    t = x + y
    t = t * 0.5
    t = m.sin(t)
    t = t * y
    t = m.exp(t)
    t = t + x
    t = m.tanh(t)
    t = maximum(t, y)
    t = t * t
    t = t + 1.0
    t = m.sin(t)
    t = t * x
    t = m.exp(t)
    t = maximum(t, 0.5)
    t = m.tanh(t)
    t = t + y
    t = t * 0.25
    t = m.sin(t)
    t = maximum(t, x)
    return t + t


def workload_i(engines, quick):
    x4, y4 = _rng_arrays(4, 4)
    x, y = _rng_arrays(10**4, 10**4, seed=1)
    (v16,) = _rng_arrays(16, seed=2)
    add, chain, loop = {}, {}, {}
    for name, eng in engines.items():
        a, b = eng.put(x4), eng.put(y4)
        add[name] = lambda a=a, b=b, eng=eng: eng.block(eng.m.add(a, b))
        c, d = eng.put(x), eng.put(y)
        chain[name] = lambda c=c, d=d, eng=eng: eng.block(_chain20(eng.m, c, d))
        lax = _lax_of(name)
        if lax is not None:  # (an eager loop: traced on every call, as user code does)
            v = eng.put(v16)
            loop[name] = lambda v=v, eng=eng, lax=lax: eng.block(lax.fori_loop(
                0, 1000, lambda i, t: eng.m.tanh(t) * 0.9 + 0.1, v))
    return [Workload("i1", "eager add, 4 f32", add),
            Workload("i2", "eager 20-op chain, 1e4 f32", chain),
            Workload("i3", "eager fori_loop 1000 x (tanh(x)*0.9+0.1), 16 f32", loop)]


def _lax_of(name: str):
    """The engine's ``lax`` module when it has the control-flow functions, else None."""
    try:
        if name == "ember":
            from ember import lax
        elif name == "jax":
            from jax import lax
        else:
            return None
    except ImportError:
        return None
    return lax if hasattr(lax, "fori_loop") and hasattr(lax, "scan") else None


def _fori_step(m, x):
    return m.tanh(x) * 0.9 + 0.1


def workload_j(engines, quick):
    (x,) = _rng_arrays(16)
    h, xs, w, u = _rng_arrays((8, 64), (100, 8, 32), (64, 64), (32, 64), seed=2)
    w, u = w * 0.1, u * 0.1
    loop, rnn = {}, {}
    for name, eng in engines.items():
        m, lax = eng.m, _lax_of(name)
        if name == "numpy":
            def np_loop(x=x):
                for _ in range(1000):
                    x = _fori_step(np, x)
                return x

            def np_rnn(h=h):
                ys = []
                for t in range(xs.shape[0]):
                    h = np.tanh(h @ w + xs[t] @ u)
                    ys.append(h)
                return h, np.stack(ys)
            loop[name], rnn[name] = np_loop, np_rnn
            continue
        if lax is None:
            continue

        def fori(x, m=m, lax=lax):
            return lax.fori_loop(0, 1000, lambda i, x: _fori_step(m, x), x)

        def scan(h, xs, w, u, m=m, lax=lax):
            def step(h, x):
                h = m.tanh(h @ w + x @ u)
                return h, h
            return lax.scan(step, h, xs)
        f, g = eng.jit(fori), eng.jit(scan)
        a, args = eng.put(x), [eng.put(v) for v in (h, xs, w, u)]
        loop[name] = lambda f=f, a=a, eng=eng: eng.block(f(a))
        rnn[name] = lambda g=g, args=args, eng=eng: eng.block(g(*args))
    return [Workload("j1", "fori_loop 1000 x (tanh(x)*0.9+0.1), 16 f32", loop),
            Workload("j2", "RNN scan, 100 steps, b8 32->64 f32", rnn)]


def _cnn_loss(m, lax, params, x):
    """Two 3x3 convolutions (32 channels, NHWC) with relu, a 2x2 max pool and a mean."""
    dn = ("NHWC", "HWIO", "NHWC")
    h = lax.conv_general_dilated(x, params[0], (1, 1), "SAME", dimension_numbers=dn)
    h = m.maximum(h, 0.0)
    h = lax.conv_general_dilated(h, params[1], (1, 1), "SAME", dimension_numbers=dn)
    h = lax.reduce_window(m.maximum(h, 0.0), -m.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1),
                          "VALID")
    return m.mean(h * h)


def workload_k(engines, quick):
    x, k1, k2 = _rng_arrays((32, 28, 28, 1), (3, 3, 1, 32), (3, 3, 32, 32), seed=3)
    params = (k1 * 0.3, k2 * 0.06)
    step = {}
    for name, eng in engines.items():
        lax = _lax_of(name)
        if lax is None:
            continue
        root = importlib.import_module(name)  # (ember or jax: their value_and_grad)
        f = eng.jit(root.value_and_grad(
            lambda p, x, m=eng.m, lax=lax: _cnn_loss(m, lax, p, x)))
        ps, xa = tuple(eng.put(p) for p in params), eng.put(x)
        step[name] = lambda f=f, ps=ps, xa=xa, eng=eng: eng.block(f(ps, xa))
    return [Workload("k", "CNN step: 2 convs 3x3x32 + max pool, b32 28x28, grad", step)]


# --- (g), (h): time to first result in fresh processes ----------------------------------------

def _small_fn(m, x):
    return m.sum(m.tanh(x * 2.0 + 1.0))


def first_result_child(engine_name: str, func: str) -> None:
    """In a fresh process: seconds from ``jit`` to the first ready result (trace+compile+run).

    ``func``: ``small``, or ``mlp:`` followed by the MLP variant.
    """
    eng = make_engine(engine_name)
    if func == "small":
        (x,) = _rng_arrays(1000)
        fn, args = (lambda x: _small_fn(eng.m, x)), (eng.put(x),)
    else:
        params, x, y = mlp_data()
        fn = mlp_function(eng, func.removeprefix("mlp:"))
        args = ([(eng.put(w), eng.put(b)) for w, b in params], eng.put(x), eng.put(y))
    eng.block(args)  # the runtime is up before the clock starts
    start = time.perf_counter()
    eng.block(eng.jit(fn)(*args))
    print(json.dumps({"seconds": time.perf_counter() - start}))


# Bytecode for the children: the development setup may forbid writing ``.pyc`` files
# (``PYTHONDONTWRITEBYTECODE``, an editable install), which would make every child compile
# ember's sources while JAX's installed package has its bytecode. So the children share a
# private bytecode folder that an unmeasured run of each engine fills first, as an installed
# package would have it.
_pycache_dir: list[str] = []


def _pycache() -> str:
    if not _pycache_dir:
        _pycache_dir.append(tempfile.mkdtemp(prefix="ember-bench-pycache-"))
        atexit.register(shutil.rmtree, _pycache_dir[0], ignore_errors=True)
    return _pycache_dir[0]


def _run_child(engine: str, func: str, env_update: dict[str, str]) -> float:
    env = dict(os.environ, PYTHONPYCACHEPREFIX=_pycache())
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for var in ("JAX_COMPILATION_CACHE_DIR", "EMBER_ENABLE_COMPILATION_CACHE",
                "JAX_ENABLE_COMPILATION_CACHE"):
        env.pop(var, None)
    env.update(env_update)
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--first-result", engine,
                          func], env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"first-result child {engine}/{func} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]


def workloads_g_h(engines, quick, want_g: bool, want_h: bool):
    """Cold (g) for ember and JAX, warm-cache (h) for ember; medians over fresh processes."""
    repeats = 1 if quick else 3
    variant = mlp_variant(engines["ember"])
    results = []
    for func in ("small", "mlp:" + variant):  # unmeasured: fills the bytecode folder
        for engine in ("ember", "jax") if "jax" in engines else ("ember",):
            with tempfile.TemporaryDirectory(prefix="ember-bench-cache-") as cache_dir:
                _run_child(engine, func, {"EMBER_CACHE_DIR": cache_dir,
                                          "JAX_ENABLE_COMPILATION_CACHE": "false"})
    for i, (func, label) in enumerate((("small", "small fn"),
                                       ("mlp:" + variant, f"MLP {variant}")), start=1):
        cold, warm, jax_cold = [], [], []
        for _ in range(repeats):
            cache_dir = tempfile.mkdtemp(prefix="ember-bench-cache-")
            try:
                env = {"EMBER_CACHE_DIR": cache_dir, "EMBER_ENABLE_COMPILATION_CACHE": "1"}
                cold.append(_run_child("ember", func, env))
                if want_h:
                    warm.append(_run_child("ember", func, env))
            finally:
                shutil.rmtree(cache_dir, ignore_errors=True)
            if "jax" in engines and want_g:
                jax_cold.append(_run_child("jax", func, {"JAX_ENABLE_COMPILATION_CACHE": "false"}))
        cold_s = statistics.median(cold)
        if want_g:
            times = {"ember": cold_s}
            if jax_cold:
                times["jax"] = statistics.median(jax_cold)
            results.append((f"g{i}", f"first result, {label}", times))
        if want_h:
            results.append((f"h{i}",
                            f"first result, {label}, warm cache",
                            {"ember": statistics.median(warm), "ember cold": cold_s}))
    return results


# --- targets, table --------------------------------------------------------------------------

# key -> (what the target compares, the largest allowed ratio)
TARGETS = {
    "a": ("ember/jax", 1 / 1.5), "d1": ("ember/jax", 1 / 1.5), "d2": ("ember/jax", 1 / 1.5),
    "b": ("ember/jax", 1 / 4), "c": ("ember/jax", 1 / 4), "e": ("ember/jax", 1.0),
    "f": ("ember/jax", 1.0), "g1": ("ember/jax", 0.5), "g2": ("ember/jax", 0.5),
    "h1": ("warm/cold", 0.1), "h2": ("warm/cold", 0.1), "i1": ("ember/jax", 0.25),
    "i2": ("ember/jax", 0.25),
}
BANDWIDTH_TARGET = {"a": 1.3}


def _fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def _ratio(a, b) -> float | None:
    return None if a is None or b is None else a / b


def _fmt_ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}"


def _verdict(key: str, row: dict) -> str:
    checks = []
    if key in TARGETS:
        what, limit = TARGETS[key]
        r = row["warm/cold"] if what == "warm/cold" else row["ember/jax"]
        if r is not None:
            checks.append((f"{what} ≤ {limit:.2f}", r <= limit))
    if key in BANDWIDTH_TARGET and row["ember/bw"] is not None:
        limit = BANDWIDTH_TARGET[key]
        checks.append((f"ember/bw ≤ {limit:.2f}", row["ember/bw"] <= limit))
    if not checks:
        return "n/a"
    status = "PASS" if all(ok for _, ok in checks) else "FAIL"
    if len(checks) == 1:
        return f"{status} ({checks[0][0]})"
    return f"{status} (" + "; ".join(f"{c}: {'ok' if ok else 'fail'}" for c, ok in checks) + ")"


COLUMNS = ["", "workload", "ember", "jax", "numpy", "torch", "bw ref", "ember/jax",
           "ember/numpy", "ember/bw", "target"]


def build_rows(measured: list[tuple[str, str, dict, float | None]]) -> list[list[str]]:
    rows = []
    for key, name, times, bw in measured:
        ember_t = times.get("ember")
        row = {"ember/jax": _ratio(ember_t, times.get("jax")),
               "ember/numpy": _ratio(ember_t, times.get("numpy")),
               "ember/bw": _ratio(ember_t, bw),
               "warm/cold": _ratio(ember_t, times.get("ember cold"))}
        jax_cell = _fmt_time(times.get("jax"))
        if "ember cold" in times:  # (h): the comparison is with ember's own cold start
            jax_cell = f"(cold {_fmt_time(times['ember cold'])})"
        rows.append([key, name, _fmt_time(ember_t), jax_cell, _fmt_time(times.get("numpy")),
                     _fmt_time(times.get("torch")), _fmt_time(bw),
                     _fmt_ratio(row["ember/jax"] if "ember cold" not in times
                                else row["warm/cold"]),
                     _fmt_ratio(row["ember/numpy"]), _fmt_ratio(row["ember/bw"]),
                     _verdict(key, row)])
    return rows


def print_table(rows: list[list[str]], markdown: bool) -> None:
    if markdown:
        print("| " + " | ".join(COLUMNS) + " |")
        print("| " + " | ".join("---" if i < 2 or i == len(COLUMNS) - 1 else "---:"
                                for i in range(len(COLUMNS))) + " |")
        for row in rows:
            print("| " + " | ".join(row) + " |")
        return
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS)]
    line = lambda cells: "  ".join(c.ljust(w) if i in (0, 1, len(cells) - 1) else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(cells, widths)))
    print(line(COLUMNS))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(line(row))


WORKLOADS = {"a": workload_a, "b": workload_b, "c": workload_c, "d": workload_d,
             "e": workload_e, "f": workload_f, "i": workload_i, "j": workload_j,
             "k": workload_k}
ALL_KEYS = tuple("abcdefghijk")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(ALL_KEYS),
                        help="comma-separated workload letters, e.g. a,b,f (default: all)")
    parser.add_argument("--quick", action="store_true", help="fewer repeats, shorter batches")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--first-result", nargs=2, metavar=("ENGINE", "FUNC"),
                        help=argparse.SUPPRESS)  # the child process of (g) and (h)
    args = parser.parse_args(argv)
    if args.first_result:
        first_result_child(*args.first_result)
        return
    only = [k.strip() for k in args.only.replace(",", " ").split() if k.strip()]
    unknown = [k for k in only if k not in ALL_KEYS]
    if unknown:
        parser.error(f"--only: unknown workloads {unknown}; choose from {','.join(ALL_KEYS)}")
    repeats, min_seconds = (3, 0.05) if args.quick else (7, 0.2)

    engines = {n: e for n in ENGINES if (e := make_engine(n)) is not None}
    for name in ENGINES:
        print(f"{name:6s}: {engines[name].info if name in engines else 'not installed, skipped'}")
    print(f"cpu   : {os.cpu_count()} cores; times are medians of {repeats} repeats, "
          "interleaved across engines (NumPy and PyTorch after ember and JAX)")

    measured, notes = [], []
    for letter in only:
        if letter in "gh":
            continue
        for wl in WORKLOADS[letter](engines, args.quick):
            fns = dict(wl.fns)
            if wl.traffic_bytes:
                fns[BW_REF] = bandwidth_copy(wl.traffic_bytes)
            times = median_times({k: f for k, f in fns.items() if k not in SPINNING_ENGINES},
                                 repeats, min_seconds)
            spinning = {k: f for k, f in fns.items() if k in SPINNING_ENGINES}
            if spinning:  # (then, apart: see SPINNING_ENGINES)
                times.update(median_times(spinning, repeats, min_seconds))
            bw = times.pop(BW_REF, None)
            _check_agreement(wl, notes)
            notes.extend(wl.notes)
            measured.append((wl.key, wl.name, times, bw))
            print(f"  measured {wl.key}: {wl.name}", file=sys.stderr)
    if "g" in only or "h" in only:
        for key, name, times in workloads_g_h(engines, args.quick, "g" in only, "h" in only):
            measured.append((key, name, times, None))
            print(f"  measured {key}: {name}", file=sys.stderr)
        notes.append("(g) small fn: sum(tanh(2x+1)) on 1e3 f32; each time is trace + compile + "
                     "first run in a fresh process (JAX's persistent cache off, ember's disk "
                     "cache in an empty directory; both with Python bytecode compiled, as "
                     "installed packages have it)")
    if "h" in only:
        notes.append("(h) rows: the jax column holds ember's own cold (g) time and the ratio "
                     "column is ember warm / ember cold")
    measured.sort(key=lambda item: item[0])
    print()
    print_table(build_rows(measured), args.markdown)
    for note in notes:
        print(f"note: {note}")


def _check_agreement(wl: Workload, notes: list[str]) -> None:
    """Notes an engine whose first output differs from NumPy's (the benchmark stays fair)."""
    if "numpy" not in wl.fns:
        return
    ref = _first_leaf(wl.fns["numpy"]())
    for name, fn in wl.fns.items():
        got = _first_leaf(fn())
        if got.shape != ref.shape or not np.allclose(got, ref, rtol=2e-3, atol=2e-3):
            err = np.max(np.abs(got.astype(np.float64) - ref)) if got.shape == ref.shape else None
            notes.append(f"({wl.key}) {name} disagrees with numpy: shape {got.shape} vs "
                         f"{ref.shape}, max abs error {err}")


def _first_leaf(out) -> np.ndarray:
    while isinstance(out, (tuple, list)):
        out = out[0]
    if hasattr(out, "detach"):  # torch
        out = out.detach()
    return np.asarray(out, dtype=np.float64)


if __name__ == "__main__":
    main()
