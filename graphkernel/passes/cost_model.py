"""The fusion cost model: a kernel's predicted time on this CPU backend (the emulated AI Core).

    seconds = launch + max(bytes / bandwidth, ops / (OPS_PER_SECOND_PER_THREAD * threads))

    launch   LAUNCH_SECONDS, + PARALLEL_LAUNCH_SECONDS when the launch uses more than one thread
    bytes    every kernel input read once (a stitched multi-phase kernel re-reads its rows once per
             phase that needs them), every output written once
    ops      per primitive: its cost (1, DIVIDE_COST, TRANSCENDENTAL_COST; x FLOAT16_OP_COST for
             float16) x the points where the kernel evaluates it: the whole iteration shape for a
             value that varies along the reduce axes (so a small producer broadcast into a big kernel
             is recomputed per point), one per row for a reduced value
    threads  aicore.launch_threads: min(block_dim, host threads) for a launch of 1M points or more,
             else 1; block_dim from `block_dim_for`, 1 for a float16 ReduceSum. The lowering also
             weighs the points by the work of each (kernels.lower.work_weight: a 256x1024 Softmax runs
             over the threads); the model does not, so it times such a heavy mid-size kernel on one
             thread, too slow by up to the thread count, its parts and its fusion alike
    UB       a reduce-then-broadcast kernel keeps every row value it needs in a later phase in the UB:
             ub_bytes = row length x their bytes; when that overflows the UB only stitch fusion may
             run it, recomputing and re-reading the row per phase.

All figures come from `kernels/aicore.py`, so the lowering and the model agree. `score(parts, fused)`
is the time a fusion saves: a fusion is worth it only when that is positive.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ir.graph import Graph, Node, Value
from ir.ops import Cost, Pattern, get
from kernels import aicore
from kernels.fusible import analyze

# operations per element of each cost class of the op table
_OPS = {Cost.FREE: 0.0, Cost.ARITH: 1.0, Cost.DIVIDE: float(aicore.DIVIDE_COST),
        Cost.TRANSCENDENTAL: float(aicore.TRANSCENDENTAL_COST)}


def op_cost(node: Node) -> float:
    """Operations per evaluated element."""
    base = _OPS[get(node.op).cost]
    dtype = node.inputs[0].dtype if node.inputs else node.types[0].dtype
    return base * (aicore.FLOAT16_OP_COST if dtype.is_half or node.types[0].dtype.is_half else 1)


@dataclass(frozen=True)
class Estimate:
    seconds: float
    bytes: int
    ops: float
    block_dim: int
    ub_bytes: int
    threads: int = 1
    phases: int = 1
    fits_ub: bool = True
    single_core: bool = False     # a float16 ReduceSum pins the kernel to one block
    recompute: float = 1.0        # most evaluations of one value per element it has (broadcast recompute)

    def figures(self, prefix: str) -> dict:
        return {f"{prefix}_us": round(self.seconds * 1e6, 3), f"{prefix}_bytes": self.bytes,
                f"{prefix}_ops": self.ops, f"{prefix}_block_dim": self.block_dim,
                f"{prefix}_ub_bytes": self.ub_bytes}


def _single_core(graph: Graph) -> bool:
    return aicore.runs_single_core((n.op, n.inputs[0].dtype.name) for n in graph.nodes if n.inputs)


_latest: tuple = (None, 0, None)   # (graph, core_num, Estimate) of the latest estimate()


def estimate(graph: Graph, core_num: int = aicore.DEFAULT_CORE_NUM) -> Estimate:
    """The predicted time and figures of one kernel computing `graph` (a composite's subgraph).

    A kernel whose live rows do not fit the UB is estimated as stitched (rows recomputed and re-read
    per phase) and says so with `fits_ub=False`; whether it may exist is the legality check's call.
    Fusion asks twice in a row about each candidate (legality, then profit): the latest answer is
    kept for the same graph object (graphs are immutable).
    """
    global _latest
    latest = _latest
    if latest[0] is graph and latest[1] == core_num:
        return latest[2]
    result = _estimate(graph, core_num)
    _latest = (graph, core_num, result)
    return result


def _estimate(graph: Graph, core_num: int) -> Estimate:
    ks = analyze(graph)
    total = math.prod(ks.shape)
    if not ks.reduce_axes:
        recompute = max((total / max(1, n.outputs[0].type.size) for n in graph.nodes
                         if n.op != "Const" and get(n.op).pattern != Pattern.REDUCE and op_cost(n) > 0),
                        default=1.0)
        return elementwise_estimate(
            total, sum(op_cost(n) for n in graph.nodes if n.op != "Const"),
            sum(v.dtype.itemsize for v in ks.aligned),
            sum(v.type.nbytes for v in graph.inputs) + sum(v.type.nbytes for v in graph.outputs),
            core_num, max(1.0, recompute), _single_core(graph))
    row = math.prod(ks.shape[a] for a in ks.reduce_axes)
    rows = max(1, total // max(row, 1))

    def full(v: Value) -> bool:
        """The value varies along the reduce axes (is evaluated per element, not per row)."""
        return any(ks.aligned[v][a] != 1 for a in ks.reduce_axes)

    def compute_phase(node: Node) -> int:
        return max((ks.phase[v] for v in node.inputs), default=0)

    # Phases in which each value is needed (a later phase re-reads or recomputes a row value).
    need: dict[Value, set[int]] = {}
    for v in graph.outputs:
        need.setdefault(v, set()).add(compute_phase(v.node) if v.node.inputs else 0)
    for node in reversed(graph.nodes):
        phases = set().union(*(need.get(v, set()) for v in node.outputs))
        if get(node.op).pattern == Pattern.REDUCE:
            phases = {compute_phase(node)}
        for v in node.inputs:
            need.setdefault(v, set()).update(phases)

    cached = [v for v, ph in need.items() if full(v) and ks.num_phases > 1
              and max(ph, default=0) > (compute_phase(v.node) if v.node.op != "Input" else 0)]
    if cached:
        ub_bytes = row * sum(v.dtype.itemsize for v in cached)
    else:
        per_element = sum(v.dtype.itemsize for v in ks.aligned if full(v)) or 1
        ub_bytes = min(total, aicore.tile_elements(per_element)) * per_element
    fits_ub = ub_bytes <= aicore.UB_BYTES
    rereads = (lambda v: max(1, len(need.get(v, ())))) if not fits_ub else (lambda v: 1)

    ops = 0.0
    recompute = 1.0
    for node in graph.nodes:
        if node.op == "Const":
            continue
        if get(node.op).pattern == Pattern.REDUCE:
            ops += op_cost(node) * total
            continue
        out = node.outputs[0]
        points = (total * rereads(out)) if full(out) else rows
        ops += op_cost(node) * points
        if op_cost(node) > 0:
            recompute = max(recompute, points / max(1, out.type.size))
    nbytes = sum(v.type.nbytes * (rereads(v) if full(v) else 1) for v in graph.inputs)
    nbytes += sum(v.type.nbytes for v in graph.outputs)
    items, per_item = (rows, row) if rows > 1 else (total, 1)
    return _timed(ops, nbytes, ub_bytes, fits_ub, items, per_item, total, core_num, ks.num_phases,
                  _single_core(graph), recompute)


def elementwise_estimate(total: int, op_costs: float, value_bytes: int, nbytes: int, core_num: int,
                         recompute: float = 1.0, single_core: bool = False) -> Estimate:
    """The estimate of a kernel without reduce axes over `total` elements: `op_costs` is the sum of
    its primitives' op_cost, `value_bytes` the itemsizes of every value of its subgraph (a tile keeps
    one element of each per point), `nbytes` its inputs' and outputs' bytes. Sums only: fusion adds
    two clusters' figures up (graphkernel/passes/flat.py) instead of walking their kernel."""
    per_element = value_bytes or 1
    ub_bytes = min(total, aicore.tile_elements(per_element)) * per_element
    return _timed(float(op_costs) * total, nbytes, ub_bytes, ub_bytes <= aicore.UB_BYTES, total, 1, total,
                  core_num, 1, single_core, recompute)


def _timed(ops: float, nbytes: int, ub_bytes: int, fits_ub: bool, items: int, per_item: int, total: int,
           core_num: int, phases: int, single_core: bool, recompute: float) -> Estimate:
    """The Estimate of a kernel of these figures: launch + max(memory, compute) over its threads."""
    block_dim = aicore.block_dim_for(items, core_num, single_core=single_core, elements_per_item=per_item)
    threads = aicore.launch_threads(block_dim, total)
    launch = aicore.LAUNCH_SECONDS + (aicore.PARALLEL_LAUNCH_SECONDS if threads > 1 else 0.0)
    share = 1.0 if threads > 1 else aicore.SINGLE_THREAD_BANDWIDTH_SHARE
    memory = nbytes / (aicore.bandwidth(nbytes) * share)
    compute = ops / (aicore.OPS_PER_SECOND_PER_THREAD * threads)
    return Estimate(launch + max(memory, compute), int(nbytes), ops, block_dim, int(ub_bytes), threads,
                    phases, fits_ub, single_core, recompute)


def joint_estimate(parts: list[Estimate], points: int, core_num: int) -> Estimate:
    """One launch doing the work of `parts`, kernels of one code without reduce axes over different
    sizes, over their `points` together (a multi-tensor kernel, kernels/multi_tensor.py: its blocks share
    the parts' concatenated elements): the parts' bytes and operations, the block_dim and threads of
    that many points, a tile the size of the largest part's."""
    return _timed(sum(p.ops for p in parts), sum(p.bytes for p in parts), max(p.ub_bytes for p in parts),
                  all(p.fits_ub for p in parts), points, 1, points, core_num, 1, False,
                  max(p.recompute for p in parts))


def back_to_back(parts: list[Estimate]) -> list[Estimate]:
    """Independent kernels run one after the other: together they stream the bytes of all of them, so
    each is timed at the bandwidth of that total (a part alone may fit the cache, the pair may not)."""
    total = sum(p.bytes for p in parts)
    out = []
    for p in parts:
        share = 1.0 if p.threads > 1 else aicore.SINGLE_THREAD_BANDWIDTH_SHARE
        launch = aicore.LAUNCH_SECONDS + (aicore.PARALLEL_LAUNCH_SECONDS if p.threads > 1 else 0.0)
        memory = p.bytes / (aicore.bandwidth(total) * share)
        compute = p.ops / (aicore.OPS_PER_SECOND_PER_THREAD * p.threads)
        out.append(replace(p, seconds=max(p.seconds, launch + max(memory, compute))))
    return out


def score(parts: list[Estimate], fused: Estimate | list[Estimate]) -> float:
    """Seconds the fusion saves (positive: worth fusing): the kernels it replaces against the kernel it
    makes (or the kernels, when it makes several: recompute)."""
    made = fused if isinstance(fused, list) else [fused]
    return sum(p.seconds for p in parts) - sum(k.seconds for k in made)


def refusal_reason(parts: list[Estimate], fused: Estimate) -> str:
    """Why the cost model refuses a fusion, naming the dominant effect."""
    before = sum(p.seconds for p in parts)
    widest = max(p.block_dim for p in parts)
    tail = f"fused {fused.seconds * 1e6:.3g}us >= parts {before * 1e6:.3g}us"
    if fused.single_core and fused.threads < max(p.threads for p in parts):
        return (f"fused kernel runs with block_dim 1 (a float16 ReduceSum is single-core) where the parts "
                f"used up to block_dim {widest}: {tail}")
    if not fused.fits_ub:
        return f"stitched rows are recomputed and re-read once per phase ({fused.phases} phases): {tail}"
    if fused.recompute > max(p.recompute for p in parts):
        return f"a broadcast recomputes its producer x{fused.recompute:.3g} per element in the fused kernel: {tail}"
    return f"no time saved: {tail}"
