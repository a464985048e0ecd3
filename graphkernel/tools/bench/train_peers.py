"""The training step in the frameworks a user would otherwise pick, on the same weights and inputs:

    torch           eager, torch.optim.AdamW(fused=True)
    torch.compile   torch.compile of the whole step function (forward, loss.backward(), optimizer.step()),
                    AdamW(foreach=True) so the compiler sees the update as tensor code
    jax             jax.jit of value_and_grad plus a hand-written AdamW (torch's formula), parameters and
                    moments donated so the update reuses their buffers

Neither torch nor jax is a dependency of graphkernel; a missing one raises PeerMissing with the line that
installs it. `make(name, shape, weights, inputs)` returns an object with `info` (compile seconds),
`step() -> loss`, `profile(n)`.
"""
from __future__ import annotations

import math
import statistics
import time

import numpy as np

from graphkernel.tools.bench.bert import GELU_C, LN_EPSILON
from graphkernel.tools.bench.train_model import BETAS, EPS, LR, WEIGHT_DECAY

PEERS = ("torch", "torch.compile", "jax")
INSTALL = {"torch": "pip install torch==2.13.0 (a CPU build; a plain `pip install torch` pulls CUDA wheels)",
           "jax": "pip install jax jaxlib"}


class PeerMissing(Exception):
    """The framework of a peer is not installed."""


def installed(name: str) -> bool:
    """Whether the framework `name` (torch, jax) can be imported."""
    try:
        __import__(name)
    except ImportError:
        return False
    return True


def _import(name: str):
    try:
        return __import__(name)
    except ImportError as e:
        raise PeerMissing(f"{name} is not installed ({e}); install it with: {INSTALL[name]}") from None


def encoder(p: dict, shape, x, mask, layer_norm, gelu, softmax, swap):
    """The encoder stack as array code (torch tensors or jax arrays), bench/bert.py's layer `shape.layers`
    times; `swap(t, a, b)` exchanges two axes (torch's transpose, jax's swapaxes)."""
    b, s, h, heads = shape.batch, shape.seq, shape.hidden, shape.heads
    dh = h // heads
    rows = x.reshape(b * s, h)
    for i in range(shape.layers):
        w = {k[len(f"layer{i}."):]: v for k, v in p.items() if k.startswith(f"layer{i}.")}

        def linear(t, stem):
            return t @ w[f"{stem}.weight"] + w[f"{stem}.bias"]

        def split(t):
            return swap(t.reshape(b, s, heads, dh), 1, 2)

        q, k, v = (split(linear(rows, f"attention.{n}")) for n in ("query", "key", "value"))
        scores = (q @ swap(k, -1, -2)) * (dh ** -0.5) + mask
        ctx = swap(softmax(scores) @ v, 1, 2).reshape(b * s, h)
        hid = layer_norm(linear(ctx, "attention.output") + rows, w["attention.ln.gamma"], w["attention.ln.beta"])
        out = linear(gelu(linear(hid, "intermediate")), "output")
        rows = layer_norm(out + hid, w["output.ln.gamma"], w["output.ln.beta"])
    return rows.reshape(b, s, h)


class TorchStep:
    def __init__(self, shape, weights, inputs, compiled: bool):
        torch = _import("torch")
        F = torch.nn.functional
        self.torch = torch
        self.params = {k: torch.nn.Parameter(torch.from_numpy(v.copy())) for k, v in weights.items()}
        x, mask, target = (torch.from_numpy(inputs[k].copy()) for k in ("x", "mask", "target"))
        h = shape.hidden

        def layer_norm(t, g, b):
            return F.layer_norm(t, (h,), g, b, LN_EPSILON)

        def gelu(t):
            return F.gelu(t, approximate="tanh")

        def loss_fn():
            y = encoder(self.params, shape, x, mask, layer_norm, gelu, lambda t: torch.softmax(t, -1), torch.transpose)
            return ((y - target) ** 2).mean()

        kind = {"foreach": True} if compiled else {"fused": True}
        self.opt = torch.optim.AdamW(list(self.params.values()), lr=LR, betas=BETAS, eps=EPS,
                                     weight_decay=WEIGHT_DECAY, **kind)
        self.loss_fn = loss_fn

        def step():
            self.opt.zero_grad(set_to_none=True)
            loss = loss_fn()
            loss.backward()
            self.opt.step()
            return loss.detach()

        self._step = torch.compile(step) if compiled else step
        self.info = {"compile_s": 0.0, "version": torch.__version__, "threads": torch.get_num_threads()}
        self.pending = None
        if compiled:   # the first step compiles: time it, and keep its loss for the first losses request
            t0 = time.perf_counter()
            self.pending = float(self._step())
            self.info["compile_s"] = time.perf_counter() - t0
            self.info["compile_includes_first_step"] = True

    def step(self) -> float:
        if self.pending is not None:
            loss, self.pending = self.pending, None
            return loss
        return float(self._step())

    def profile(self, n: int) -> dict:
        """Eager only: forward+backward and the optimizer step timed apart (CPU, synchronous)."""
        if self.opt.defaults.get("foreach"):
            return {}
        fb, opt = [], []
        for _ in range(n):
            self.opt.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            self.loss_fn().backward()
            t1 = time.perf_counter()
            self.opt.step()
            t2 = time.perf_counter()
            fb.append(t1 - t0)
            opt.append(t2 - t1)
        return {"calls": n, "fwd_bwd_s": statistics.median(fb), "optimizer_s": statistics.median(opt)}


class JaxStep:
    def __init__(self, shape, weights, inputs):
        jax = _import("jax")
        import jax.numpy as jnp
        self.jax = jax
        c = math.sqrt(2 / math.pi)
        x, mask, target = (jnp.asarray(inputs[k]) for k in ("x", "mask", "target"))

        def layer_norm(t, g, b):
            centered = t - t.mean(axis=-1, keepdims=True)
            var = (centered * centered).mean(axis=-1, keepdims=True)
            return centered / jnp.sqrt(var + np.float32(LN_EPSILON)) * g + b

        def gelu(t):
            return 0.5 * t * (1.0 + jnp.tanh(np.float32(c) * (t + np.float32(GELU_C) * t * t * t)))

        def softmax(t):
            e = jnp.exp(t - t.max(axis=-1, keepdims=True))
            return e / e.sum(axis=-1, keepdims=True)

        def loss_fn(p):
            y = encoder(p, shape, x, mask, layer_norm, gelu, softmax, jnp.swapaxes)
            return jnp.mean((y - target) ** 2)

        b1, b2 = BETAS

        def train(p, m, v, t):
            loss, g = jax.value_and_grad(loss_fn)(p)
            bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
            new_p, new_m, new_v = {}, {}, {}
            for k in p:
                mk = b1 * m[k] + (1 - b1) * g[k]
                vk = b2 * v[k] + (1 - b2) * g[k] * g[k]
                new_p[k] = p[k] * (1 - LR * WEIGHT_DECAY) - LR * (mk / bc1) / (jnp.sqrt(vk / bc2) + EPS)
                new_m[k], new_v[k] = mk, vk
            return loss, new_p, new_m, new_v

        self.train = jax.jit(train, donate_argnums=(0, 1, 2))
        self.p = {k: jnp.asarray(w) for k, w in weights.items()}
        self.m = {k: jnp.zeros_like(w) for k, w in self.p.items()}
        self.v = {k: jnp.zeros_like(w) for k, w in self.p.items()}
        self.t = 0
        t0 = time.perf_counter()
        self.compiled = self.train.lower(self.p, self.m, self.v, np.float32(1)).compile()
        self.info = {"compile_s": time.perf_counter() - t0, "version": jax.__version__}

    def step(self) -> float:
        self.t += 1
        loss, self.p, self.m, self.v = self.compiled(self.p, self.m, self.v, np.float32(self.t))
        return float(loss)

    def profile(self, n: int) -> dict:
        return {}


def make(name: str, shape, weights: dict, inputs: dict):
    if shape.vocab:
        raise PeerMissing("the peers run the encoder stack only")
    if name in ("torch", "torch.compile"):
        return TorchStep(shape, weights, inputs, compiled=name == "torch.compile")
    if name == "jax":
        return JaxStep(shape, weights, inputs)
    raise ValueError(f"unknown peer {name!r}; peers are {', '.join(PEERS)}")
