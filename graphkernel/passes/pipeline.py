"""The compile pipeline: one visible list of passes, in order, each gated by an opt_level.

A pass is `fn(graph, opts) -> graph`. `--disable_pass=stage.pass` / `--enable_pass=stage.pass` and
fusion_switch_file override the gate. A pass runs inside each branch of a conditional (an If node's
then and else graphs, innermost first), then on the graph holding it: fusion happens within a branch
and never across its boundary (the If node is opaque to the passes of the enclosing graph). A pass
that needs what surrounds a branch (precision: which captures carry gradients) sets
`handles_branches` and recurses itself. Every stage ends with a dump (with save_graphs) whose file name
is MindSpore's. With --verify or GRAPHKERNEL_VERIFY=1 (the tests set it), ir.verify runs
after every pass.
"""
from __future__ import annotations

import difflib
import os
from typing import Callable

from ir.autodiff import differentiate, needs_autodiff
from ir.graph import Graph
from ir.ops import OPS, Pattern, branches, map_branches
from ir.verify import verify
from graphkernel.expanders import EXPANDERS, expand
from graphkernel.settings.flags import MINDSPORE_OPS, MINDSPORE_PASSES, FlagError, no_effect
from graphkernel.settings.options import FUSION_STAGES, CompileOptions
from graphkernel.passes.arith_simplify import arith_simplify
from graphkernel.passes.comm_schedule import comm_schedule
from graphkernel.passes.basic_fusion import basic_fusion
from graphkernel.passes.composite_fusion import composite_fusion
from graphkernel.passes.constant_fold import constant_fold
from graphkernel.passes.conv_epilogue import conv_epilogue
from graphkernel.passes.cse import cse
from graphkernel.passes.dce import dce
from graphkernel.passes.low_precision import low_precision
from graphkernel.passes.multi_tensor_fusion import multi_tensor_fusion
from graphkernel.passes.parallel_fusion import parallel_fusion
from graphkernel.passes.partition import partition
from graphkernel.passes.precision import precision
from graphkernel.passes.recompute import recompute
from graphkernel.passes.sibling_fusion import sibling_fusion
from graphkernel.precision.modes import pass_runs

Pass = Callable[[Graph, CompileOptions], Graph]
FLAG_ONLY = 4   # above every opt_level (0..3): a pass only its flag or --enable_pass turns on


def _passes() -> list[tuple[str, str, Pass, int]]:
    """(stage, pass name, function, opt_level at which it runs by default)."""
    return [
        ("expand", "expand", expand, 0),                       # composite ops -> primitives (fusion off too)
        ("precision", "precision", precision, 0),              # Casts per precision_mode (not the default)
        ("simplify", "constant_fold", constant_fold, 0),       # ops on constants -> constants
        ("simplify", "arith_simplify", arith_simplify, 0),     # x*1, x+0, pow(x,2) -> x*x, cast chains, ...
        ("simplify", "cse", cse, 0),                           # merge identical ops
        ("simplify", "dce", dce, 0),                           # drop ops no output needs
        ("simplify", "partition", partition, 0),               # host ops: mix_compile_mode check, copies
        ("simplify", "comm_schedule", comm_schedule, 0),       # buckets' AllReduce: start early, wait late
        ("fuse_basic", "basic_fusion", basic_fusion, 1),       # simple elementwise ops -> composites
        ("composite", "composite_fusion", composite_fusion, 1),  # composites + other fusible ops, by cost
        ("composite", "recompute", recompute, 2),              # duplicate cheap producers into consumers
        ("composite", "sibling_fusion", sibling_fusion, 2),    # same-axes reductions -> one kernel
        ("composite", "multi_tensor_fusion", multi_tensor_fusion, 1),  # an optimizer's updates -> one launch
        ("composite", "parallel_fusion", parallel_fusion, 3),  # independent composites -> one launch
        ("composite", "low_precision", low_precision, FLAG_ONLY),  # composites compute in float16
        ("composite", "conv_epilogue", conv_epilogue, 1),      # a conv's output pass computes its reader
        ("composite", "comm_schedule", comm_schedule, 1),      # again, over the fused graph
    ]


# Options of a pass that are addressed by name like passes (--disable_pass, fusion_switch_file); the
# pass reads them through CompileOptions (stitch_fusion: opt_level 3 and up).
PASS_OPTIONS = [
    ("composite", "stitch_fusion"),                      # composite_fusion: rows larger than the UB
]

# The stage whose end writes each dump (MindSpore's file names); `{id}` is the graph id.
STAGE_DUMPS = {
    "validate": "6_validate",
    "autodiff": "hwopt_d_autodiff_end_graph_{id}",
    "expand": "hwopt_d_expand_end_graph_{id}",
    "precision": "hwopt_d_precision_end_graph_{id}",
    "simplify": "hwopt_d_simplify_end_graph_{id}",
    "fuse_basic": "hwopt_d_fuse_basic_opt_end_graph_{id}",
    "composite": "hwopt_d_composite_opt_end_graph_{id}",
}


def pass_names() -> list[str]:
    """Every `stage.pass` name --enable_pass/--disable_pass accept, in pipeline order."""
    return [f"{stage}.{name}" for stage, name, _, _ in _passes()] + \
           [f"{stage}.{name}" for stage, name in PASS_OPTIONS]


def check_flag_names(source: str, key: str, names: frozenset) -> frozenset:
    """Every op or pass a list flag names must exist: a misspelt name would silently change nothing.
    A MindSpore op or pass this pipeline does not expand, cluster or run warns and is dropped; the names
    kept are returned."""
    if key.endswith("_pass"):
        known, what, theirs = pass_names(), "a stage.pass of the pipeline", MINDSPORE_PASSES
    elif "expand" in key:
        known, what, theirs = sorted(EXPANDERS), "a composite op the expanders rewrite", MINDSPORE_OPS | set(OPS)
    else:
        known, what, theirs = sorted(OPS), "an op", MINDSPORE_OPS
    kept = set()
    for name in sorted(names):
        if name not in known:
            if name in theirs or name.rpartition(".")[2] in theirs:
                no_effect(source, f"--{key}={name} (a MindSpore {'pass' if key.endswith('_pass') else 'op'} "
                                  f"that is not {what} here)")
                continue
            near = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise FlagError(f"{source}: --{key}={name}: not {what}{hint}; accepted: {', '.join(known)}")
        op = OPS.get(name)
        if op is not None and op.expandable:   # a composite op: the flag decides its expansion (options.py)
            kept.add(name)
            continue
        if key.startswith("enable_cluster") and op.pattern >= Pattern.INJECTIVE:
            no_effect(source, f"--{key}={name} ({name} is {op.pattern.name}, never fused here)")
            continue
        kept.add(name)
    return frozenset(kept)


def stages_run(opts: CompileOptions) -> list[str]:
    """The stages whose dumps this compile writes, in order: the fusion stages with enable_graph_kernel at
    opt_level 1 and up, or when --enable_pass opens one of their passes below that."""
    stages = ["validate", "expand"] + (["precision"] if pass_runs(opts.precision_mode) else []) + ["simplify"]
    if opts.enable_graph_kernel:
        passes = _passes()
        stages += [stage for stage in FUSION_STAGES if opts.opt_level >= 1 or any(
            s == stage and opts.pass_enabled(f"{s}.{name}", level) for s, name, _, level in passes)]
    return stages


def _anywhere(graph: Graph, test) -> bool:
    """test(g) for the graph or any branch inside it."""
    return test(graph) or any(_anywhere(g, test) for node in graph.nodes for g in branches(node))


def run_pipeline(graph: Graph, opts: CompileOptions, on_stage: Callable[[str, Graph], None]) -> Graph:
    """Run every open pass in order; call `on_stage(stage, graph)` at the end of each stage. A graph that
    asks for gradients (or stops them) is differentiated first: the autodiff stage, never turned off."""
    on_stage("validate", graph)
    check = opts.flags.verify or os.environ.get("GRAPHKERNEL_VERIFY") == "1"
    if _anywhere(graph, needs_autodiff):
        graph = differentiate(map_branches(graph, differentiate))
        if check:
            verify(graph)
        on_stage("autodiff", graph)
    passes = _passes()
    for stage in stages_run(opts)[1:]:
        for pass_stage, name, fn, level in passes:
            if pass_stage == stage and opts.pass_enabled(f"{stage}.{name}", level):
                graph = fn(graph if getattr(fn, "handles_branches", False)
                           else map_branches(graph, lambda g: fn(g, opts)), opts)
                if check:
                    verify(graph)
        on_stage(stage, graph)
    return graph
