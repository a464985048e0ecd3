"""`graphkernel demo`: the two nets of MindSpore's graph-kernel fusion example, fusion on and off, dumps and timings."""
from __future__ import annotations

import os
import time

import numpy as np

from graphkernel import Tensor, context
from graphkernel.nn import Cell
from graphkernel.ops import operations as P


class NetBasicFuse(Cell):
    """The basic-fusion example: Mul and TensorAdd become one composite."""

    def __init__(self):
        super().__init__()
        self.add = P.TensorAdd()
        self.mul = P.Mul()

    def construct(self, x):
        mul_res = self.mul(x, 2.0)
        add_res = self.add(mul_res, 1.0)
        return add_res


class NetCompositeFuse(Cell):
    """The composite-fusion example: {Mul, TensorAdd} then Pow join one composite."""

    def __init__(self):
        super().__init__()
        self.add = P.TensorAdd()
        self.mul = P.Mul()
        self.pow = P.Pow()

    def construct(self, x):
        mul_res = self.mul(x, 2.0)
        add_res = self.add(mul_res, 1.0)
        pow_res = self.pow(add_res, 3.0)
        return pow_res


def interleaved_step_us(net_cls, x: Tensor, repeat: int, rounds: int = 10) -> dict[bool, float]:
    """Median step time (us) of `net_cls` with fusion off and on, timed in alternating rounds so that
    drift on a busy machine hits both sides alike."""
    nets = {}
    for fusion in (False, True):
        context.set_context(enable_graph_kernel=fusion)
        nets[fusion] = net_cls()
        nets[fusion](x)                         # compile and warm up
        nets[fusion].compile(x).wait_for_kernels()   # time the built kernels, not their stand-ins
    times: dict[bool, list[float]] = {False: [], True: []}
    per_round = max(1, repeat // rounds)
    for _ in range(rounds):
        for fusion, net in nets.items():
            context.set_context(enable_graph_kernel=fusion)
            for _ in range(per_round):
                t0 = time.perf_counter()
                net(x)
                times[fusion].append(time.perf_counter() - t0)
    return {fusion: float(np.median(t)) * 1e6 for fusion, t in times.items()}


def reference(net_cls, x: np.ndarray) -> np.ndarray:
    """What numpy computes for the two nets."""
    return (x * 2 + 1) ** 3 if net_cls is NetCompositeFuse else x * 2 + 1


LARGE = (4096, 1024)


def run_demo(save_graphs_path: str = "dot_out", device_target: str = "Ascend", repeat: int = 200,
             seed: int = 0, out=print, large: tuple[int, int] | None = LARGE) -> dict:
    """Run both nets with fusion off and on; returns what it printed as data (for tests).

    Each net is compiled with fusion off and on (dumps under <save_graphs_path>/<Net>/fusion_{off,on}/),
    checked against numpy, and timed: `repeat` calls per side at 4x4, fewer at `large`, interleaved."""
    rng = np.random.default_rng(seed)
    x = Tensor(rng.standard_normal((4, 4)).astype(np.float32))
    results = {}
    for net_cls in (NetBasicFuse, NetCompositeFuse):
        for fusion in (False, True):
            context.reset_graph_id()  # each directory holds graph 0, named as MindSpore names it
            context.set_context(mode=context.GRAPH_MODE, device_target=device_target,
                                enable_graph_kernel=fusion, save_graphs=True,
                                save_graphs_path=os.path.join(save_graphs_path, net_cls.__name__,
                                                              "fusion_on" if fusion else "fusion_off"))
            net = net_cls()
            t0 = time.perf_counter()
            compiled = net.compile(x)
            compile_ms = (time.perf_counter() - t0) * 1e3
            result = net(x)
            ok = np.allclose(result.asnumpy(), reference(net_cls, x.asnumpy()), rtol=1e-5, atol=1e-6)
            results[(net_cls.__name__, fusion)] = dict(
                kernels=[k.name for k in compiled.kernels], compile_ms=compile_ms,
                matches_numpy=ok, dump_files=compiled.dump_files, result=result.asnumpy())
            out(f"================ {net_cls.__name__}, enable_graph_kernel={fusion} ================")
            if not fusion:
                out(f"x: {x.asnumpy()}")
            out(f"result: {result.asnumpy()}")
            out(f"matches numpy: {ok}")
            out(f"kernels ({len(compiled.kernels)}): " + ", ".join(
                f"{k.name}[{'+'.join(k.op_types)}]" for k in compiled.kernels))
            out(f"compile {compile_ms:.1f} ms")
            out("dumps: " + ", ".join(compiled.dump_files))
    context.set_context(save_graphs=False)
    out(f"================ summary: fusion off -> on (median step, {repeat} calls a side, interleaved) "
        "================")
    for net_cls in (NetBasicFuse, NetCompositeFuse):
        off, on = results[(net_cls.__name__, False)], results[(net_cls.__name__, True)]
        small = interleaved_step_us(net_cls, x, repeat)
        results[(net_cls.__name__, "small")] = small
        line = (f"{net_cls.__name__:18s} kernels {len(off['kernels'])} -> {len(on['kernels'])}; "
                f"4x4 step {small[False]:.1f} -> {small[True]:.1f} us ({small[True] / small[False]:.2f}x)")
        if large is not None:
            big = Tensor(rng.standard_normal(large).astype(np.float32))
            steps = interleaved_step_us(net_cls, big, max(5, repeat // 20), rounds=5)
            results[(net_cls.__name__, "large")] = steps
            line += (f"; {large[0]}x{large[1]} step {steps[False] / 1e3:.2f} -> {steps[True] / 1e3:.2f} ms "
                     f"({steps[True] / steps[False]:.2f}x)")
        out(line + f"; same result: {bool(np.allclose(off['result'], on['result'], rtol=1e-5, atol=1e-6))}")
    context.set_context(enable_graph_kernel=False)
    return results
