"""Build and run one sweep case (tests/sweep_cases.py) every way the compiler can run it.

    prepared   the graph after expand and simplify with fusion off: what every target executes
    reference  ir.interpret of `prepared`: the oracle
    unfused    `prepared` lowered: one kernel per primitive
    pipeline   the graph through the fusion passes (fusion on, the case's core_num), lowered
    forced     `prepared` as one composite, lowered: the kernel generator on the whole case, whatever
               the cost model would decide (when kernels.fusible says one kernel can compute it)

Each lowered program runs with the default parallel threshold and with it forced to 0 (every
launch of more than one block runs in chunks over the pool's threads).
"""
from __future__ import annotations

import numpy as np

from ir.dtypes import as_dtype
from ir.graph import Graph
from ir.interpret import interpret
from ir.symbolic import Dim, evaluate_shape
from ir.specialize import bind, is_dynamic, specialize
from ir.verify import verify
from kernels import DeviceConfig, lower
from kernels.fusible import unsupported_reason
from graphkernel.settings.flags import parse_flags
from graphkernel.settings.options import CompileOptions
from graphkernel.passes.pipeline import run_pipeline
from ir import GraphBuilder
from tests.kernel_graphs import fused
from tests.sweep_cases import ElementwiseCase, ReduceCase, dyadic, sum_is_exact
from tests.tolerance import assert_close


def compile_ir(graph: Graph, fusion: bool, core_num: int) -> Graph:
    opts = CompileOptions(enable_graph_kernel=fusion, flags=parse_flags("", read_env=False),
                          core_num=core_num)
    out = run_pipeline(graph, opts, lambda stage, g: None)
    verify(out)
    return out


def programs(graph: Graph, core_num: int) -> tuple[list[np.ndarray] | None, dict]:
    """(reference results, {label: graph lowered}) for the case's graph."""
    prepared = compile_ir(graph, False, core_num)
    graphs = {"unfused": prepared, "pipeline": compile_ir(graph, True, core_num)}
    if unsupported_reason(prepared) is None:
        graphs["forced"] = fused(prepared)
    return prepared, graphs


def run_everywhere(graph: Graph, arrays: list[np.ndarray], core_num: int, *, exact: bool,
                   elementwise_float32: bool = False, others=()) -> dict:
    """Run every program; check each against the reference (bitwise when `exact`) and every program
    against the unfused one (bitwise when exact or a float32 elementwise chain). A graph of symbolic
    sizes (the sweep's dynamic dims) is lowered once and run at the sizes of `arrays` and then at each
    of `others`, (arrays, exact) at other sizes: the same programs, planned per shape, against the
    reference at each. Returns the lowered programs by label, for coverage checks."""
    prepared, graphs = programs(graph, core_num)
    lowered: dict = {}
    for label, g in graphs.items():
        default = None
        for threshold in (None, 0):
            cfg = DeviceConfig(core_num=core_num) if threshold is None else \
                DeviceConfig(core_num=core_num, parallel_min_elements=threshold)
            program = lower(g, cfg)
            if default is not None and [s.threads > 1 for s in program.steps] == default:
                continue   # no launch turned parallel: the same kernels ran already
            default = [s.threads > 1 for s in program.steps]
            lowered[f"{label}, parallel threshold {'default' if threshold is None else threshold}"] = program
    for run_arrays, run_exact in [(arrays, exact), *others]:
        _check_all(prepared, lowered, run_arrays, run_exact, elementwise_float32)
    return lowered


def _check_all(prepared: Graph, lowered: dict, arrays: list[np.ndarray], exact: bool,
               elementwise_float32: bool) -> None:
    reference = prepared
    if is_dynamic(prepared):   # the reference at these arrays' sizes
        reference = specialize(prepared, bind([v.type for v in prepared.inputs], [a.shape for a in arrays]))
    want = interpret(reference, arrays)
    snapshot = [a.copy() for a in arrays]
    results = {key: [np.array(r) for r in program.run(arrays)] for key, program in lowered.items()}
    for a, s in zip(arrays, snapshot):
        assert_close(a, s, bitwise=True, err_msg="an input array was written")
    base = results["unfused, parallel threshold default"]
    for key, outs in results.items():
        assert len(outs) == len(want)
        for k, (got, ref, unf) in enumerate(zip(outs, want, base)):
            where = f"{key}, output {k}"
            assert_close(got, ref, bitwise=exact, err_msg=f"{where} vs the reference")
            assert_close(got, unf, bitwise=exact or elementwise_float32, err_msg=f"{where} vs unfused")


# --- reductions --------------------------------------------------------------------------------

CHAIN_MAGNITUDE = {"input": 2.0, "scalar_chain": 4.8125, "broadcast_chain": 4.0, "escaping": 3.25}


def reduce_graph(case: ReduceCase, sizes: dict | None = None) -> tuple[Graph, list[np.ndarray]]:
    """The case's graph and inputs; with dynamic dims the graph's are symbolic sizes (hinted at the
    case's shape) and the inputs are at `sizes` (the case's own when not given)."""
    b = GraphBuilder(dtype=case.dtype)
    shape = symbolic_shape(case.shape(), case.dynamic_axes) if case.dims == "dynamic" else case.shape()
    x = b.input(shape)
    arrays = [dyadic(at(shape, sizes), case.dtype, case.seed)]
    outputs = []
    if case.operand == "input":
        t = x
    elif case.operand == "scalar_chain":
        t = b.op("Sub", b.op("Mul", x, b.const(2.0)), b.const(0.8125))
    elif case.operand == "broadcast_chain":
        bshape = broadcast_operand_shape(shape, case.axes, case.seed)
        y = b.input(bshape)
        arrays.append(dyadic(at(bshape, sizes), case.dtype, case.seed + 1))
        t = b.op("Add", x, y)
    elif case.operand == "escaping":
        t = b.op("Add", b.op("Mul", x, b.const(1.5)), b.const(0.25))
        outputs.append(t)
    else:
        raise ValueError(case.operand)

    def reduce(v):
        return b.op(case.reduction, v, axis=case.spelled_axes, keep_dims=case.keep_dims)

    def back(r):
        """r broadcast against t: as it is with keep_dims, reshaped to keep the axes without."""
        if case.keep_dims:
            return r
        return b.op("Reshape", r, shape=tuple(1 if a in case.axes else d for a, d in enumerate(shape)))

    r = reduce(t)
    if case.consumer == "none":
        outputs.append(r)
    elif case.consumer == "elementwise":
        outputs.append(b.op("Add", b.op("Mul", r, b.const(3.0)), b.const(1.0)))
    elif case.consumer == "broadcast_back":
        outputs.append(b.op("Sub", t, back(r)))
    elif case.consumer == "second":
        e = b.op("Tanh", b.op("Sub", t, back(r)))
        outputs.append(b.op("Mul", e, back(reduce(e))))
    elif case.consumer == "sibling":
        outputs += [r, reduce(b.op("Sub", b.op("Abs", x), b.const(0.5)))]
    else:
        raise ValueError(case.consumer)
    return b.graph(*outputs), arrays


def broadcast_operand_shape(shape, axes, seed) -> tuple[int, ...]:
    """The shape of a broadcast operand: a bias (last axis), a leading axis, the kept axes only, or
    the reduced axes only, chosen by the seed."""
    rank = len(shape)
    style = seed % 4
    if style == 0:
        keep = {rank - 1}
    elif style == 1:
        keep = {0}
    elif style == 2:
        keep = {a for a in range(rank) if a not in axes}
    else:
        keep = set(axes)
    out = tuple(d if a in keep else 1 for a, d in enumerate(shape))
    if style == 0 and rank > 1 and seed % 8 == 0:
        return out[-1:]   # spelled with fewer dims, as numpy aligns it
    return out


def reduce_exact(case: ReduceCase, shape: tuple[int, ...] | None = None) -> bool:
    """Whether every result of the case is exact with dyadic data, so any correct program gives the
    reference's bits: sums of few enough terms, no transcendental (the `second` consumer)."""
    if case.consumer == "second":
        return False
    if case.reduction in ("ReduceMax", "ReduceMin"):
        return True
    shape = case.shape() if shape is None else shape
    terms = int(np.prod([shape[a] for a in case.axes]))
    return sum_is_exact(terms, CHAIN_MAGNITUDE[case.operand], case.dtype)


def run_reduce_case(case: ReduceCase) -> dict:
    graph, arrays = reduce_graph(case)
    others = []
    if case.dims == "dynamic":   # the same compile at other sizes: a 1-row (or 1-long) and an odd one
        for sizes in case.other_sizes():
            _, at_sizes = reduce_graph(case, sizes)
            others.append((at_sizes, reduce_exact(case, at(symbolic_shape(case.shape(), case.dynamic_axes),
                                                            sizes))))
    return run_everywhere(graph, arrays, case.core_num, exact=reduce_exact(case), others=others)


# --- elementwise -------------------------------------------------------------------------------

def elementwise_graph(case: ElementwiseCase, sizes: dict | None = None) -> tuple[Graph, list[np.ndarray]]:
    b = GraphBuilder(dtype=case.dtype)
    xs, ys = case.shapes()
    if case.dims == "dynamic":
        xs, ys = case.symbolic_shapes()
    x = b.input(xs)
    arrays = [dyadic(at(xs, sizes), case.dtype, case.seed)]
    if case.aliasing == "same_value":
        y = x
    else:
        y = b.input(ys)
        arrays.append(arrays[0] if case.aliasing == "same_array" else dyadic(at(ys, sizes), case.dtype, case.seed + 1))
    if case.chain == "arith":       # exact on dyadic data: bitwise everywhere
        out = b.op("Sub", b.op("Mul", x, y), b.op("Mul", y, b.const(0.5)))
        outs = [b.op("Maximum", out, b.op("Neg", x))]
    elif case.chain == "select":
        outs = [b.op("Select", b.op("Greater", x, y), b.op("Abs", y), b.op("Minimum", x, b.const(0.25))),
                b.op("Cast", b.op("Less", y, x), dtype=as_dtype("float32"))]
    elif case.chain == "random":    # Dropout(keep 0.5) between fusible ops: x * y * mask * 2 - x, exact
        offset = b.input((1,), dtype=as_dtype("int32"))
        arrays.append(np.array([case.seed % 1000], np.int32))
        dropped = b.op("Dropout", b.op("Mul", x, y), offset, keep_prob=0.5, seed=case.seed, op_id=7)
        outs = [b.op("Add", dropped, b.op("Neg", x))]
    elif case.chain == "transcendental":
        outs = [b.op("Mul", b.op("Tanh", b.op("Add", x, y)), b.op("Exp", b.op("Mul", y, b.const(0.5))))]
    else:
        raise ValueError(case.chain)
    return b.graph(*outs), arrays


def run_elementwise_case(case: ElementwiseCase) -> dict:
    graph, arrays = elementwise_graph(case)
    exact = case.chain != "transcendental"
    others = [(elementwise_graph(case, sizes)[1], exact) for sizes in case.other_sizes()] \
        if case.dims == "dynamic" else []
    return run_everywhere(graph, arrays, case.core_num, exact=exact,
                          elementwise_float32=case.dtype == "float32", others=others)


# --- dynamic dims ------------------------------------------------------------------------------

def symbolic_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple:
    """`shape` with the dims of `axes` symbolic sizes d<axis> (ir/symbolic.py), hinted at their extent."""
    return tuple(Dim.symbol(f"d{a}", n) if a in axes else n for a, n in enumerate(shape))


def at(shape: tuple, sizes: dict | None) -> tuple[int, ...]:
    """A (symbolic) shape's extents at `sizes`; its hints without them."""
    return tuple(int(d) for d in shape) if sizes is None else evaluate_shape(shape, sizes)
