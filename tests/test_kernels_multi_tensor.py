"""Multi-tensor kernels (kernels/multi_tensor.py) and the pass that makes them (multi_tensor_fusion).

The kernel distinguishes: how many tensors and of what sizes (a block's share may start, end or lie
inside any tensor; tiny tensors; sizes that make the launch parallel), inputs shared by every tensor
against one array per tensor, a size-1 input per tensor, how many results, results stored through
the input they update (in place), the dtype (float16 as uint16 bits), and block_dim. The grid crosses
them; each case is checked bit for bit against the same parts lowered one kernel per tensor.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from graphkernel import context, nn
from graphkernel.cell import Cell
from graphkernel.settings.options import CompileOptions
from graphkernel.passes.pass_context import PassContext
from graphkernel.passes.fusion_rules import CYCLE
from graphkernel.passes.multi_tensor_fusion import multi_tensor_fusion
from graphkernel.ops import operations as P
from graphkernel.tensor import Parameter, Tensor
from ir.builder import GraphBuilder
from ir.dtypes import DType
from ir.interpret import interpret
from kernels import aicore
from kernels import DeviceConfig, KernelBuildWarning, lower
from kernels.multi_tensor import MAX_TENSORS
from kernel_graphs import random_array
from tolerance import assert_close

pytestmark = pytest.mark.filterwarnings("error::kernels.KernelBuildWarning")

# a one-element tensor describes to another kernel (every buffer present), so the pass keeps it apart
SIZES = {"two": [(3, 5), (17,)], "small": [(2,), (40,), (2, 2)],
         "parallel": [(300, 257), (1000,), (64, 64), (7,)]}    # launched on threads (parallel_min_elements=1)


def update_graph(shapes, dtype="float32", outputs=2, in_place=True, per_tensor_scale=False, merged=True,
                 variant=0):
    """For each shape t: m' = m*0.9 + g*lr [* s_t], p' = p - m' (outputs=2) or p' only (outputs=1), with lr
    shared; Assigns write p (and m) when `in_place`. `merged`: one composite of T parts, else one per t."""
    dt = DType[dtype]
    b = GraphBuilder()
    lr = b.input((), dtype=dt, name="lr")
    ins = []
    for t, shape in enumerate(shapes):
        ins.append([b.input(shape, dtype=dt, name=f"{n}{t}") for n in ("p", "m", "g")] +
                   ([b.input((1,) * len(shape), dtype=dt, name=f"s{t}")] if per_tensor_scale else []))

    def part(builder, p, m, g, lr_, *scale):
        step = builder.op("Mul", g, lr_)
        if scale:
            step = builder.op("Mul", step, scale[0])
        m2 = builder.op("Add", builder.op("Mul", m, builder.scalar(0.9 + variant, m)), step)
        p2 = builder.op("Sub", p, m2)
        return [p2, m2] if outputs == 2 else [p2]

    news = []
    if merged:
        flat = [v for group in ins for v in group] + [lr]
        inner = GraphBuilder(*(v.type for v in flat))
        per = len(ins[0])
        results = []
        for t in range(len(shapes)):
            results += part(inner, *inner.inputs[t * per:(t + 1) * per][:3], inner.inputs[-1],
                            *inner.inputs[t * per + 3:(t + 1) * per])
        outs = b.composite(inner.graph(*results), *flat, name="Fused_update_0")
        news = [outs[t * outputs:(t + 1) * outputs] for t in range(len(shapes))]
    else:
        for group in ins:
            sub = GraphBuilder(*(v.type for v in group + [lr]))
            outs = b.composite(sub.graph(*part(sub, *sub.inputs[:3], sub.inputs[-1], *sub.inputs[3:-1])),
                               *group, lr, name="Fused_one_0")
            news.append(outs)
    results, assigns = [], []
    for group, new in zip(ins, news):
        if in_place:
            assigns += [b.op("Assign", group[k], new[k]) for k in range(outputs)]
        else:
            results += list(new)
    total = b.reduce("ReduceSum", ins[0][2], tuple(range(len(shapes[0]))), keep_dims=False)
    return b.graph(total, *results, *assigns)


def run(graph, cfg, steps=2):
    program = lower(graph, cfg)
    arrays = [random_array(v.shape, v.dtype.np, seed=k) for k, v in enumerate(graph.inputs)]
    results = [program.run(arrays) for _ in range(steps)]
    return program, arrays, results


# every code variant (dtype, outputs, in place, a per-tensor input) on the sequential variant; the small
# sizes, and the parallel variant (its loops are the same in every dtype), in float32
GRID = [c for c in itertools.product(SIZES, ("float16", "float32", "float64"), (1, 2), (True, False), (False, True))
        if c[0] == "two" or (c[1] == "float32" and (c[0] == "small" or c[2] == 2))] + [("two", "bfloat16", 2, True, True)]


@pytest.mark.grid
@pytest.mark.parametrize("sizes, dtype, outputs, in_place, per_tensor_scale", GRID)
def test_multi_tensor_kernel_equals_one_kernel_per_tensor(sizes, dtype, outputs, in_place, per_tensor_scale):
    shapes = SIZES[sizes]
    kw = dict(dtype=dtype, outputs=outputs, in_place=in_place, per_tensor_scale=per_tensor_scale)
    merged, single = update_graph(shapes, merged=True, **kw), update_graph(shapes, merged=False, **kw)
    cfg = DeviceConfig(parallel_min_elements=1) if sizes == "parallel" else DeviceConfig()
    program, arrays, results = run(merged, cfg)
    (step,) = [s for s in program.steps if s.info.variant == "multi_tensor"]
    assert (step.threads > 1) == (sizes == "parallel" and aicore.host_threads() > 1)   # both launches are reached
    if in_place:
        assert len(step.in_place) == outputs * len(shapes)
        assert not [s for s in program.steps if s.info.op_types == ("Assign",)], "every update in place"
    base, base_arrays, base_results = run(single, cfg)
    assert not [s for s in base.steps if s.info.variant == "multi_tensor"]
    for got, want in zip(arrays, base_arrays):
        assert_close(got, want, bitwise=True)
    for got, want in zip(results, base_results):
        for g, w in zip(got, want):
            assert_close(g, w, bitwise=True)
    # and against the reference, one step from the same inputs
    fresh = [random_array(v.shape, v.dtype.np, seed=k) for k, v in enumerate(merged.inputs)]
    want = interpret(merged, fresh)
    got = program.run(fresh)
    for g, w in zip(got, want):
        assert_close(g, w, rtol_scale=4)


@pytest.mark.parametrize("core_num", [1, 3, 32])
def test_every_block_dim_gives_the_same_bits(core_num):
    shapes = SIZES["parallel"]
    graph = update_graph(shapes)
    _, arrays, _ = run(graph, DeviceConfig(core_num=core_num, parallel_min_elements=1))
    _, base, _ = run(update_graph(shapes, merged=False), DeviceConfig())
    for got, want in zip(arrays, base):
        assert_close(got, want, bitwise=True)


def test_one_multi_tensor_kernel_serves_every_value_of_its_constants():
    """The parts' constant (m * c, c = 0.9, 1.9, 0.0) is the kernel's argument: one kernel for the three,
    each run giving the bits of the one-kernel-per-tensor program."""
    names = set()
    for variant in (0, 1, -0.9):
        program, arrays, _ = run(update_graph(SIZES["two"], variant=variant), DeviceConfig())
        (step,) = [s for s in program.steps if s.info.variant == "multi_tensor"]
        names.add(step.info.kernel)
        _, base, _ = run(update_graph(SIZES["two"], variant=variant, merged=False), DeviceConfig())
        for got, want in zip(arrays, base):
            assert_close(got, want, bitwise=True)
    assert len(names) == 1


def test_run_step_of_a_multi_tensor_kernel():
    graph = update_graph(SIZES["two"])
    program = lower(graph, DeviceConfig(cache_mode="disable"))
    index, step = next((k, s) for k, s in enumerate(program.steps) if s.info.variant == "multi_tensor")
    inputs = [random_array(v.shape, v.dtype.np, seed=k) for k, v in enumerate(step.values_in)]
    kept = [a.copy() for a in inputs]
    outs = program.run_step(index, inputs)
    node = step.values_out[0].node
    for o, w in zip(outs, interpret(node.subgraph, inputs)):
        assert_close(o, w, rtol_scale=4)
    for a, k in zip(inputs, kept):
        assert_close(a, k, bitwise=True)


def test_parts_of_different_kernels_are_inlined_with_a_warning():
    """Two disjoint parts of different formulas are no multi-tensor kernel (the pass never makes one):
    the composite runs as single-op kernels, with the KernelBuildWarning that names it."""
    shapes = SIZES["two"]
    graph = update_graph(shapes, in_place=False)
    b = GraphBuilder(*(v.type for v in graph.inputs))
    first, second = b.inputs[1], b.inputs[4]     # p0 (3, 5) and p1 (17,)
    inner = GraphBuilder(first.type, second.type)
    x, y = inner.inputs
    both = inner.graph(inner.op("Neg", x), inner.op("Exp", y))
    outs = b.composite(both, first, second, name="Fused_Neg_Exp_0")
    g = b.graph(*outs)
    with pytest.warns(KernelBuildWarning, match="Fused_Neg_Exp_0 .*not one elementwise kernel.*inlined"):
        program = lower(g, DeviceConfig(cache_mode="disable"))
    arrays = [random_array(v.shape, v.dtype.np, seed=k) for k, v in enumerate(g.inputs)]
    for got, want in zip(program.run(arrays), interpret(g, arrays)):
        assert_close(got, want)


# --- the pass ---------------------------------------------------------------------------------------

class MLP(Cell):
    """Parameters of five shapes: two weights, two biases, a scale."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(0)
        self.w1 = Parameter(rng.standard_normal((12, 16)).astype(np.float32) * 0.3, name="w1")
        self.b1 = Parameter(np.zeros(16, np.float32), name="b1")
        self.w2 = Parameter(rng.standard_normal((16, 4)).astype(np.float32) * 0.3, name="w2")
        self.b2 = Parameter(np.zeros(4, np.float32), name="b2")
        self.scale = Parameter(np.ones((1, 4), np.float32), name="scale")

    def construct(self, x, target):
        h = P.Tanh()(P.MatMul()(x, self.w1) + self.b1)
        y = (P.MatMul()(h, self.w2) + self.b2) * self.scale
        d = y - target
        return P.ReduceMean()(d * d, ())


OPTIMIZERS = {
    "AdamWeightDecay": lambda ps: nn.AdamWeightDecay(ps, 1e-2, weight_decay=0.01),
    "Adam": lambda ps: nn.Adam(ps, 1e-2),
    "Momentum": lambda ps: nn.Momentum(ps, 1e-2, 0.9),
    "SGD": lambda ps: nn.SGD(ps, 1e-2, momentum=0.9, nesterov=True),
}


def _train(optimizer, flags, steps=3):
    context.set_context(mode=context.GRAPH_MODE, device_target="Ascend", enable_graph_kernel=True,
                        graph_kernel_flags=flags)
    net = MLP()
    step = nn.TrainOneStepCell(net, OPTIMIZERS[optimizer](net.trainable_params()))
    rng = np.random.default_rng(1)
    x, target = (Tensor(rng.standard_normal(s).astype(np.float32)) for s in ((8, 12), (8, 4)))
    kernels = step.compile(x, target).kernels
    losses = [step(x, target).asnumpy() for _ in range(steps)]
    return kernels, losses, [p.asnumpy() for p in step.get_parameters()]


@pytest.mark.grid
@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_updates_of_every_shape_make_one_launch_with_the_same_bits(optimizer):
    """Every update composite of one kernel joins one launch (an update whose composite also computes its
    gradient, a reduction, is a backward kernel and stays apart); the bits do not change."""
    kernels, losses, params = _train(optimizer, "")
    updates = [k for k in kernels if k.phase == "optimizer" and k.variant in ("elementwise", "multi_tensor")]
    alone = [k.kernel for k in updates if k.variant == "elementwise"]
    assert len(alone) == len(set(alone)), f"updates of one kernel left apart: {alone}"
    off_kernels, off_losses, off_params = _train(optimizer, "--disable_pass=composite.multi_tensor_fusion")
    off_updates = [k for k in off_kernels if k.phase == "optimizer" and k.variant == "elementwise"]
    if optimizer == "Adam":
        # composite fusion puts Adam's bias-corrected step size (a scalar every update reads) into the first
        # updates, with two shapes: no two update kernels are alike
        assert len(updates) == len(off_updates)
    else:
        assert "multi_tensor" in [k.variant for k in updates]
        assert len(updates) < len(off_updates)
    for a, b in zip(losses + params, off_losses + off_params):
        assert_close(a, b, bitwise=True)


@pytest.mark.parametrize("optimizer", ["Adam", "AdamWeightDecay"])
def test_disable_cluster_ops_keeps_an_op_out_of_the_optimizer_kernels(optimizer):
    """--disable_cluster_ops reaches multi-tensor fusion as it reaches every fusion pass: the update's
    Sqrt (sqrt of the second moment) stays a kernel of its own, never one launch over several, and the
    rest of the update still fuses; the bits are those of the step without the flag."""
    kernels, losses, params = _train(optimizer, "--disable_cluster_ops=Sqrt")
    sqrt = [k for k in kernels if "Sqrt" in k.op_types]
    assert sqrt and all(k.phase == "optimizer" for k in sqrt)
    assert all(k.op_types == ("Sqrt",) and k.variant != "multi_tensor" for k in sqrt), \
        [(k.name, k.op_types, k.variant) for k in sqrt]
    assert [k for k in kernels if k.phase == "optimizer" and len(k.op_types) > 1]
    _, flagless_losses, flagless_params = _train(optimizer, "")
    for a, b in zip(losses + params, flagless_losses + flagless_params):
        assert_close(a, b, bitwise=True)


def test_the_fusion_log_names_the_merge():
    context.set_context(mode=context.GRAPH_MODE, device_target="Ascend", enable_graph_kernel=True,
                        graph_kernel_flags="")
    net = MLP()
    step = nn.TrainOneStepCell(net, nn.Momentum(net.trainable_params(), 1e-2, 0.9))
    rng = np.random.default_rng(1)
    x, target = (Tensor(rng.standard_normal(s).astype(np.float32)) for s in ((8, 12), (8, 4)))
    compiled = step.compile(x, target)
    records = [r for r in compiled.log if r.reason.startswith("multi-tensor:")]
    # four of the five, each candidate asked against the group so far: `scale`'s update shares a kernel
    # with its gradient (a ReduceSum over the batch)
    assert [(r.accepted, r.figures["tensors"]) for r in records] == [(True, 2), (True, 3), (True, 4)]
    (kernel,) = [k for k in compiled.kernels if k.variant == "multi_tensor"]
    assert all(r.composites == (kernel.name,) for r in records)


def test_a_candidate_depending_on_a_member_is_refused():
    """q's update reads p's new value: one launch for both would read what it writes."""
    b = GraphBuilder()
    p, q = b.input((4, 3), name="p"), b.input((5,), name="q")

    def halve(v):
        sub = GraphBuilder(v.type)
        (out,) = b.composite(sub.graph(sub.op("Mul", sub.inputs[0], sub.scalar(0.5, sub.inputs[0]))), v,
                             name="Fused_Mul_0")
        return out
    p2 = halve(p)
    q2 = halve(b.op("Add", q, b.reduce("ReduceSum", p2, (0, 1), keep_dims=False)))
    r = halve(b.input((6,), name="r"))
    graph = b.graph(b.reduce("ReduceSum", q, (0,), keep_dims=False),
                    b.op("Assign", p, p2), b.op("Assign", q, q2), b.op("Assign", b.inputs[2], r))
    with PassContext() as passes:
        fused = multi_tensor_fusion(graph, CompileOptions(enable_graph_kernel=True))
    reasons = [(r.accepted, r.reason) for r in passes.log]
    assert (False, "multi-tensor: " + CYCLE) in reasons
    assert any(a for a, _ in reasons)
    arrays = [random_array(v.shape, v.dtype.np, seed=k) for k, v in enumerate(graph.inputs)]
    for got, want in zip(interpret(fused, arrays), interpret(graph, arrays)):
        assert_close(got, want, bitwise=True)


@pytest.mark.parametrize("consts, launches", [((0.5, 0.5, 0.5), [3]), ((0.0, -0.0, 0.0), [2]),
                                              ((np.nan, -np.nan), [])], ids=["equal", "signed zeros", "nans"])
def test_updates_share_a_launch_only_with_the_same_constant_bits(consts, launches):
    """One multi-tensor launch passes one set of constants (the kernel's arguments), so the pass groups
    updates by their constants' bits: 0.0 and -0.0 (equal as floats) or NaNs of two signs go to
    launches of their own, and each Parameter gets the reference's bits."""
    b = GraphBuilder()
    params = [b.input((3 + k, 4), name=f"p{k}") for k in range(len(consts))]
    assigns = []
    for p, c in zip(params, consts):
        sub = GraphBuilder(p.type)
        x = sub.inputs[0]
        (new,) = b.composite(sub.graph(sub.op("Mul", sub.op("Mul", x, sub.scalar(c, x)), sub.scalar(3.0, x))), p,
                             name="Fused_Mul_0")
        assigns.append(b.op("Assign", p, new))
    graph = b.graph(b.reduce("ReduceSum", params[0], (0, 1), keep_dims=False), *assigns)
    with PassContext():
        fused = multi_tensor_fusion(graph, CompileOptions(enable_graph_kernel=True))
    program = lower(fused, DeviceConfig())
    assert [len(s.values_out) for s in program.steps if s.info.variant == "multi_tensor"] == launches
    arrays = [random_array(v.shape, v.dtype.np, seed=k) for k, v in enumerate(graph.inputs)]
    want = interpret(graph, [a.copy() for a in arrays])[1:]   # the Assigns' values
    program.run(arrays)
    for got, w in zip(arrays, want):   # the Parameters, updated in place
        assert got.tobytes() == np.asarray(w).tobytes()


@pytest.mark.parametrize("count", [MAX_TENSORS, MAX_TENSORS + 1, 2 * MAX_TENSORS + 3])
def test_a_long_group_is_cut_into_launches_of_at_most_max_tensors(count):
    """One launch takes at most MAX_TENSORS updates (numba's build time grows faster than the tensor
    count); a longer group is cut in graph order, a last piece of one update left as it was."""
    b = GraphBuilder()
    params = [b.input((3 + k % 5,), name=f"p{k}") for k in range(count)]
    assigns = []
    for p in params:
        sub = GraphBuilder(p.type)
        (new,) = b.composite(sub.graph(sub.op("Mul", sub.inputs[0], sub.scalar(0.5, sub.inputs[0]))), p,
                             name="Fused_Mul_0")
        assigns.append(b.op("Assign", p, new))
    graph = b.graph(b.reduce("ReduceSum", params[0], (0,), keep_dims=False), *assigns)
    with PassContext() as passes:
        fused = multi_tensor_fusion(graph, CompileOptions(enable_graph_kernel=True))
    sizes = [r.figures["tensors"] for r in passes.log if r.accepted]   # each launch's, as it grows
    sizes = [n for k, n in enumerate(sizes) if k + 1 == len(sizes) or sizes[k + 1] <= n]   # the last of each
    expected = [min(MAX_TENSORS, count - k) for k in range(0, count, MAX_TENSORS)]
    assert sizes == [n for n in expected if n > 1]
    parts = sorted(len(n.subgraph.nodes) for n in fused.nodes if n.subgraph is not None)
    assert sum(parts) == sum(len(n.subgraph.nodes) for n in graph.nodes if n.subgraph is not None)
    arrays = [random_array(v.shape, v.dtype.np, seed=k) for k, v in enumerate(graph.inputs)]
    for got, want in zip(interpret(fused, arrays), interpret(graph, arrays)):
        assert_close(got, want, bitwise=True)
