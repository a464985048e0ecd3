"""Stand-ins: what a launch runs while its generated kernel builds in the background.

A stand-in computes the kernel's subgraph op by op on numpy arrays, called exactly as the kernel's
launch is called (the executor's arguments: the inputs, the outputs not stored through an input, the
scratch buffers, then the int arguments), so the executor swaps the real launch in for it between
two calls without changing anything else (kernels/background.py, Program.run).

    an op numpy computes with the kernels' bits    its numpy reference (the op row's): + - * /,
                                                    comparisons, Select, Cast, Maximum/Minimum, Sqrt,
                                                    reductions (whose order may differ: within the
                                                    dtype's tolerance, as fused vs unfused), ...
    an op whose kernel bits numpy does not give     its single-op generated kernel (`exact`, given by
      (KERNEL_EXACT: kernels.mathfn's exp, log,     kernels/lower.py): one kernel per op, dtype and
      tanh and erf; libm in float64; Pow by small   operand pattern, built in the foreground once and
      integers as multiplications)                  kept in the kernel cache like any other

So an elementwise chain computes on its stand-in the bits its fused kernel computes, and a chain with
a sum agrees within the dtype's tolerance. An elementwise subgraph whose outputs share one shape runs
in chunks of rows (CHUNK_ELEMENTS), so its temporaries stay small (as the kernel's tiles do). A kernel that updates a Parameter in place computes every
result before writing any, as the kernel does.
"""
from __future__ import annotations

import numpy as np

from ir.graph import Graph
from ir.ops import Pattern, evaluate_any_shape, get

# ops whose kernel computes other bits than the numpy reference (kernels/emitters.py: kernels.mathfn's
# own exp/log/tanh/erf, libm in float64, Softplus in float64, Pow by small integers as multiplications)
KERNEL_EXACT = frozenset({"Exp", "Log", "Tanh", "Erf", "Sin", "Cos", "Atan", "Softplus", "Pow"})
CHUNK_ELEMENTS = 1 << 16    # an elementwise stand-in computes rows of about this many elements at a time:
                            # its temporaries stay in the cache (the optimizer's update of a 30522x1024
                            # embedding made fourteen 125 MB temporaries at once, 8.5 s of a 13.5 s step)


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
        self.elementwise = all(get(node.op).pattern <= Pattern.BROADCAST and node.op != "BroadcastTo"
                               for node in sub.nodes)
        self._chunks = None
        self.sliced: list = []

    def __call__(self, *args):
        n_in = len(self.in_shapes)
        ins = [_typed(a, d).reshape(s) for a, d, s in zip(args[:n_in], self.in_dtypes, self.in_shapes)]
        outs = [None] * len(self.out_dtypes)
        for k, out in zip(self.passed, args[n_in:n_in + len(self.passed)]):
            outs[k] = _typed(out, self.out_dtypes[k]).reshape(self.sub.outputs[k].shape)
        for k, i in self.aliased.items():   # stored through input i: the same buffer
            outs[k] = ins[i]
        for rows in self.chunks:
            chunk = [a if sliced is None else a[rows] for a, sliced in zip(ins, self.sliced)]
            results = self.compute(chunk)
            if self.aliased:   # a result may be a view of an input an in-place store overwrites
                results = [np.array(r) for r in results]
            for out, r in zip(outs, results):   # after every result of the chunk: an in-place update
                out[rows] = r

    @property
    def chunks(self) -> list:
        """Slices of the outputs' first axis a call computes one after the other: rows of about
        CHUNK_ELEMENTS when every op is elementwise and the outputs share one shape (each element
        depends on its own row of every input, or on a broadcast one), else the whole at once."""
        if self._chunks is None:
            self._chunks, self.sliced = [Ellipsis], [None] * len(self.in_shapes)
            shape = self.sub.outputs[0].shape
            per_row = int(np.prod(shape[1:], dtype=np.int64)) if shape else 0
            if (self.elementwise and shape and all(v.shape == shape for v in self.sub.outputs)
                    and per_row and shape[0] * per_row > CHUNK_ELEMENTS):
                rows = max(1, CHUNK_ELEMENTS // per_row)
                self._chunks = [slice(a, min(a + rows, shape[0])) for a in range(0, shape[0], rows)]
                # an input whose first axis lines up with the outputs' is sliced; a broadcast one is not
                self.sliced = [True if len(s) == len(shape) and s[0] == shape[0] else None for s in self.in_shapes]
        return self._chunks

    def compute(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """The subgraph's results on numpy arrays shaped as its inputs."""
        env = dict(zip(self.sub.inputs, arrays))
        with np.errstate(all="ignore"):
            for node in self.sub.nodes:
                args = [env[v] for v in node.inputs]
                fn = self.exact.get(node)
                results = fn(args) if fn is not None else evaluate_any_shape(node, args)
                env.update(zip(node.outputs, results))
        return [env[v] for v in self.sub.outputs]


def _typed(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A flat buffer seen as `dtype` (generated kernels take float16 as its uint16 bits)."""
    return a.view(dtype) if a.dtype != dtype else a
