"""`graphkernel demo`: the seed's two nets (seed 003), fusion on and off, dumps and timings."""
from __future__ import annotations

import os
import time

import numpy as np

from graphkernel import Tensor, context
from graphkernel.nn import Cell
from graphkernel.ops import operations as P


class NetBasicFuse(Cell):
    """Seed 003's basic-fusion example: Mul and TensorAdd become one composite."""

    def __init__(self):
        super().__init__()
        self.add = P.TensorAdd()
        self.mul = P.Mul()

    def construct(self, x):
        mul_res = self.mul(x, 2.0)
        add_res = self.add(mul_res, 1.0)
        return add_res


class NetCompositeFuse(Cell):
    """Seed 003's composite-fusion example: {Mul, TensorAdd} then Pow join one composite."""

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


def _median_call_us(fn, x, repeat: int) -> float:
    fn(x)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e6


LARGE = (4096, 1024)


def run_demo(save_graphs_path: str = "dot_out", device_target: str = "Ascend", repeat: int = 200,
             seed: int = 0, out=print, large: tuple[int, int] | None = LARGE) -> dict:
    """Run both nets with fusion off and on; returns what it printed as data (for tests)."""
    rng = np.random.default_rng(seed)
    x = Tensor(rng.standard_normal((4, 4)).astype(np.float32))
    results = {}
    for net_cls in (NetBasicFuse, NetCompositeFuse):
        for fusion in (False, True):
            context.reset_graph_id()  # each directory holds graph 0, named as in the seed
            context.set_context(mode=context.GRAPH_MODE, device_target=device_target,
                                enable_graph_kernel=fusion, save_graphs=True,
                                save_graphs_path=os.path.join(save_graphs_path, net_cls.__name__,
                                                              "fusion_on" if fusion else "fusion_off"))
            net = net_cls()
            t0 = time.perf_counter()
            compiled = net.compile(x)
            compile_ms = (time.perf_counter() - t0) * 1e3
            result = net(x)
            call_us = _median_call_us(net, x, repeat)
            expected = ((x.asnumpy() * 2 + 1) ** 3 if net_cls is NetCompositeFuse else x.asnumpy() * 2 + 1)
            ok = np.allclose(result.asnumpy(), expected, rtol=1e-5, atol=1e-6)
            results[(net_cls.__name__, fusion)] = dict(
                kernels=[k.name for k in compiled.kernels], compile_ms=compile_ms, call_us=call_us,
                matches_numpy=ok, dump_files=compiled.dump_files, result=result.asnumpy())
            out(f"================ {net_cls.__name__}, enable_graph_kernel={fusion} ================")
            if not fusion:
                out(f"x: {x.asnumpy()}")
            out(f"result: {result.asnumpy()}")
            out(f"matches numpy: {ok}")
            out(f"kernels ({len(compiled.kernels)}): " + ", ".join(
                f"{k.name}[{'+'.join(k.op_types)}]" for k in compiled.kernels))
            out(f"compile {compile_ms:.1f} ms, step {call_us:.1f} us (median of {repeat})")
            out("dumps: " + ", ".join(compiled.dump_files))
    context.set_context(save_graphs=False, enable_graph_kernel=False)
    out("================ summary: fusion off -> on ================")
    for net_cls in (NetBasicFuse, NetCompositeFuse):
        off, on = results[(net_cls.__name__, False)], results[(net_cls.__name__, True)]
        line = (f"{net_cls.__name__:18s} kernels {len(off['kernels'])} -> {len(on['kernels'])}; "
                f"4x4 step {off['call_us']:.1f} -> {on['call_us']:.1f} us")
        if large is not None:
            big = Tensor(rng.standard_normal(large).astype(np.float32))
            steps = {}
            for fusion in (False, True):
                context.set_context(enable_graph_kernel=fusion)
                steps[fusion] = _median_call_us(net_cls(), big, max(5, repeat // 20))
            context.set_context(enable_graph_kernel=False)
            results[(net_cls.__name__, "large")] = steps
            line += (f"; {large[0]}x{large[1]} step {steps[False] / 1e3:.2f} -> {steps[True] / 1e3:.2f} ms "
                     f"({steps[True] / steps[False]:.2f}x)")
        out(line + f"; same result: {bool(np.allclose(off['result'], on['result'], rtol=1e-5, atol=1e-6))}")
    return results
