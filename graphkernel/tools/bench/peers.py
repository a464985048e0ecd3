"""The peers run in the same process as graphkernel, on the same computation: jax.jit on the workload's
array code, ONNX Runtime on its ONNX model. Both are optional imports (the `bench` extra installs them): a
missing one raises NotInstalled, which the harness announces once and then skips quietly; never
installed or required.

    jax_impl(workload, arrays)  -> (Impl, compile seconds) | raises Unavailable
    ort_impl(workload, arrays)  -> (Impl, session seconds) | raises Unavailable
    threads=N (bench --threads): ONNX Runtime's intra-op pool; jax's through limit_jax_threads before import
"""
from __future__ import annotations

import os
import time

import numpy as np

from graphkernel.tools.bench.timing import Impl


ORT_MAX_IR_VERSION = 10    # opsets 17 and 20 need no newer IR
ORT_SPIN_S = 0.15          # ONNX Runtime's intra-op pool spins after a run: its process used ~50 ms of CPU in
                           # a 1 s sleep after one 256x1024 Softmax, and a parallel launch timed meanwhile got
                           # one core (0.47 ms against 0.26); 150 ms later it had stopped


class Unavailable(Exception):
    """A peer that is not installed or cannot run this workload."""


class NotInstalled(Unavailable):
    """A peer whose package cannot be imported: unavailable for every workload of the run."""


INSTALL = {"jax": "pip install jax", "onnxruntime": "pip install onnxruntime"}


def versions() -> dict:
    out = {}
    for name in ("jax", "onnxruntime", "matplotlib"):
        try:
            out[name] = __import__(name).__version__
        except Exception as e:  # noqa: BLE001 - any import failure means "not available"
            out[name] = f"unavailable ({type(e).__name__}: {e})"
    return out


def limit_jax_threads(threads: int) -> None:
    """XLA's CPU thread pools, set before jax is imported (they cannot change afterwards)."""
    import os
    flags = f"--xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'} " \
            f"intra_op_parallelism_threads={threads}"
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flags).strip()


def jax_impl(workload, arrays: list[np.ndarray], threads: int | None = None) -> tuple[Impl, float]:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        raise NotInstalled(f"jax: {type(e).__name__}: {e}") from None
    except Exception as e:  # noqa: BLE001 - installed but broken: unavailable, said per workload
        raise Unavailable(f"jax: {type(e).__name__}: {e}") from None
    fn = jax.jit(lambda consts, *xs: workload.arrays(jnp, consts, *xs))
    consts = {k: jax.device_put(v) for k, v in workload.consts.items()}
    xs = [jax.device_put(a) for a in arrays]
    t0 = time.perf_counter()
    fn(consts, *xs).block_until_ready()
    compile_s = time.perf_counter() - t0

    def call():
        return fn(consts, *xs).block_until_ready()
    return Impl("jax", call), compile_s


def ort_impl(workload, arrays: list[np.ndarray], threads: int | None = None) -> tuple[Impl, float]:
    if workload.onnx_model is None:
        raise Unavailable("no ONNX model for this workload")
    try:
        import onnxruntime as ort
    except ImportError as e:
        raise NotInstalled(f"onnxruntime: {type(e).__name__}: {e}") from None
    except Exception as e:  # noqa: BLE001 - installed but broken: unavailable, said per workload
        raise Unavailable(f"onnxruntime: {type(e).__name__}: {e}") from None
    model = workload.onnx_model()
    if model.ir_version > ORT_MAX_IR_VERSION:  # the onnx package writes a newer IR than ORT reads
        copy = type(model)()
        copy.CopyFrom(model)
        copy.ir_version, model = ORT_MAX_IR_VERSION, copy
    t0 = time.perf_counter()
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    feeds = {i.name: a for i, a in zip(session.get_inputs(), arrays)}
    session.run(None, feeds)
    setup_s = time.perf_counter() - t0

    def call():
        return session.run(None, feeds)[0]
    pool = (threads or os.cpu_count() or 1) > 1
    return Impl("onnxruntime", call, spins_s=ORT_SPIN_S if pool else 0.0), setup_s
