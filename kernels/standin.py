"""Stand-ins: what a launch runs while its generated kernel builds in the background.

A stand-in computes the kernel's subgraph op by op on numpy arrays, called exactly as the kernel's
launch is called (the executor's arguments: the inputs, the outputs not stored through an input, the
scratch buffers, then the int arguments), so the executor swaps the real launch in for it between
two calls without changing anything else (kernels/background.py, Program.run).

    an op numpy computes with the kernels' bits    its numpy reference (ir.ops.evaluate): + - * /,
                                                    comparisons, Select, Cast, Maximum/Minimum, Sqrt,
                                                    reductions (whose order may differ: within the
                                                    dtype's tolerance, as fused vs unfused), ...
    an op whose kernel bits numpy does not give     its single-op generated kernel (`exact`, given by
      (KERNEL_EXACT: kernels.mathfn's exp, log,     kernels/lower.py): one kernel per op, dtype and
      tanh and erf; libm in float64; Pow by small   operand pattern, built in the foreground once and
      integers as multiplications)                  kept in the kernel cache like any other

So an elementwise chain computes on its stand-in the bits its fused kernel computes, and a chain with
a sum agrees within the dtype's tolerance. A kernel that updates a Parameter in place computes every
result before writing any, as the kernel does.
"""
from __future__ import annotations

import numpy as np

from ir.graph import Graph
from ir.ops import evaluate

# ops whose kernel computes other bits than the numpy reference (kernels/emitters.py: kernels.mathfn's
# own exp/log/tanh/erf, libm in float64, Softplus in float64, Pow by small integers as multiplications)
KERNEL_EXACT = frozenset({"Exp", "Log", "Tanh", "Erf", "Sin", "Cos", "Atan", "Softplus", "Pow"})


class StandIn:
    """The launch of `sub` (the kernel's subgraph, scalar constants inside) as numpy ops.

    Called as the launch is: `standin(*ins, *outs, *scratch, *ints)` with flat arrays (float16 as its
    uint16 bits); `in_place` holds the (output k, input i) pairs the kernel stores through input i
    (those outputs take no argument). `exact(node)` gives the callable computing one KERNEL_EXACT
    node of `sub` with the kernel's bits: `fn(arrays) -> results`."""

    def __init__(self, sub: Graph, in_place: tuple, exact):
        self.sub = sub
        self.in_shapes = [v.shape for v in sub.inputs]
        self.in_dtypes = [v.dtype.np for v in sub.inputs]
        self.out_dtypes = [v.dtype.np for v in sub.outputs]
        self.aliased = dict(in_place)
        self.passed = [k for k in range(len(sub.outputs)) if k not in self.aliased]
        self.exact = {node: exact(node) for node in sub.nodes if node.op in KERNEL_EXACT}

    def __call__(self, *args):
        n_in = len(self.in_shapes)
        ins = [_typed(a, d).reshape(s) for a, d, s in zip(args[:n_in], self.in_dtypes, self.in_shapes)]
        results = self.compute(ins)
        if self.aliased:   # a result may be a view of an input an in-place store overwrites
            results = [np.array(r) for r in results]
        outs = args[n_in:n_in + len(self.passed)]
        for k, out in zip(self.passed, outs):
            _typed(out, self.out_dtypes[k])[:] = results[k].reshape(-1)
        for k, i in self.aliased.items():   # after every result is computed: an in-place update
            _typed(args[i], self.out_dtypes[k])[:] = results[k].reshape(-1)

    def compute(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """The subgraph's results on numpy arrays shaped as its inputs."""
        env = dict(zip(self.sub.inputs, arrays))
        with np.errstate(all="ignore"):
            for node in self.sub.nodes:
                args = [env[v] for v in node.inputs]
                fn = self.exact.get(node)
                results = fn(args) if fn is not None else evaluate(node, args)
                env.update(zip(node.outputs, results))
        return [env[v] for v in self.sub.outputs]


def _typed(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A flat buffer seen as `dtype` (generated kernels take float16 as its uint16 bits)."""
    return a.view(dtype) if a.dtype != dtype else a
