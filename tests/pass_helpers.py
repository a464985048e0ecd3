"""Helpers for the expander, simplify and precision tests: types, random inputs, op lists; the reference
interpreter (ir.interpret) and verifier (ir.verify) re-exported. Graphs are built with ir.GraphBuilder:

    g = GraphBuilder(tt(F32, 4, 8)); x, = g.inputs
    y = g.op("Mul", x, g.const(2.0)); graph = g.graph(y)
"""
from __future__ import annotations

import numpy as np

from ir.dtypes import DType
from ir.graph import Graph, TensorType
from ir.interpret import interpret  # noqa: F401  (re-exported for the tests)
from ir.verify import verify  # noqa: F401

F16, F32, F64, I32, I64 = DType.float16, DType.float32, DType.float64, DType.int32, DType.int64


def tt(dtype: DType, *shape: int) -> TensorType:
    return TensorType(tuple(shape), dtype)


def random_inputs(graph: Graph, seed: int = 0, positive: bool = False) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for v in graph.inputs:
        if not v.dtype.is_float:
            arrays.append(rng.integers(1 if positive else -5, 6, v.shape).astype(v.dtype.np))
            continue
        a = rng.standard_normal(v.shape)
        arrays.append((np.abs(a) + 0.5 if positive else a).astype(v.dtype.np))
    return arrays


def ops(graph: Graph) -> list[str]:
    return [n.op for n in graph.nodes]
