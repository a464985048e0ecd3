"""graph_kernel_flags: MindSpore's syntax (`--key=value`, bare `--key` = true, lists comma-separated).

`parse_flags(text)` returns a GraphKernelFlags; a misspelt key names itself and the nearest known key.
The parser knows keys and value syntax only: the ops and `stage.pass` names a list flag may hold are
checked by `check_names`, given by whoever assembles the options (graphkernel.passes.pipeline.check_flag_names).
MS_DEV_GRAPH_KERNEL_FLAGS in the environment is read too, after the context's flags (so it wins).

A real MindSpore flag that means nothing here (`--kernel_generator=AKG`, `--enable_auto_tensor_inplace`),
and a MindSpore op or pass named in a list flag that this pipeline does not expand, cluster or run, give a
FlagWarning naming it and saying it has no effect; only names MindSpore does not know either are errors.
"""
from __future__ import annotations

import difflib
import os
import shlex
import warnings
from dataclasses import dataclass, fields

from ir.errors import GraphKernelError


class FlagError(GraphKernelError, ValueError):
    """A graph_kernel_flags string that does not parse."""


class FlagWarning(UserWarning):
    """A MindSpore graph-kernel flag (or an op or pass a list flag names) that has no effect here."""


# Flags MindSpore 2.10's graph_kernel_flags knows (its flag table) that change nothing here
MINDSPORE_ONLY_FLAGS = frozenset({
    "disable_cce_lib_ops", "disable_fusion_pattern", "disable_matmul_post_fusion", "disable_packet_ops",
    "disable_simplify_exprs", "enable_allreduce_epilogue_fusion", "enable_allreduce_prologue_fusion",
    "enable_auto_tensor_inplace", "enable_cce_lib", "enable_cce_lib_ops", "enable_cce_lib_ops_only",
    "enable_csr_fusion", "enable_debug_mode", "enable_dynamic_batch", "enable_dynamic_shape_fusion",
    "enable_fusion_pattern_only", "enable_horizontal_fusion", "enable_lite_conv_tuning",
    "enable_packet_ops_only", "enable_simplify_exprs_only", "enable_vectorization", "fusion_ops_level",
    "kernel_generator", "online_tuning", "parallel_ops_level", "recompute_increment_threshold",
    "recompute_peak_threshold", "repository_path"})
# MindSpore ops its graph-kernel fusion expands or clusters that graphkernel has no row or expander for
MINDSPORE_OPS = frozenset({
    "AdamApplyOne", "AdamApplyOneWithDecay", "AddN", "ArgMaxWithValue", "BatchNorm", "BatchNormGrad",
    "ClipByNormNoDivSum", "DropoutGrad", "EqualCount", "Erfc", "ExpandDims", "FastGeLU", "FastGeLUGrad",
    "FusedAdam", "FusedAdamWeightDecay", "FusedMulAdd", "GreaterEqual", "Identity", "LessEqual",
    "MaximumGrad", "MinimumGrad", "OnesLike", "ZerosLike", "SigmoidCrossEntropyWithLogits",
    "SigmoidCrossEntropyWithLogitsGrad", "SoftmaxCrossEntropyWithLogits", "SoftmaxGradExt", "Softsign",
    "SoftplusGrad", "SparseSoftmaxCrossEntropyWithLogits", "SqrtGrad", "SquareSumAll", "SquaredDifference",
    "Squeeze", "StridedSlice", "TanhGrad", "Tile"})
# MindSpore graph-kernel pass names (the part after the stage) that are not passes of this pipeline
MINDSPORE_PASSES = frozenset({
    "arithmetic_simplify", "atomic_clean", "axis_normalizer", "cluster", "core_ops_optimization",
    "decrease_compute_precision", "decrease_transfer_precision", "eliminate_redundant_output", "expand",
    "graph_kernel_cse", "graph_kernel_recompute", "graph_kernel_splitter", "insert_pad", "optimize_assign",
    "parallel_cluster", "raise_reduction_precision", "reorder_ops", "shape_ops_splitter", "split_assign",
    "tensor_promotion", "transform_op_optimizer"})


def no_effect(source: str, text: str) -> None:
    warnings.warn(f"{source}: {text} has no effect here", FlagWarning, stacklevel=4)


@dataclass(frozen=True)
class GraphKernelFlags:
    opt_level: int | None = None             # None: 2 when fusion is on, 0 when off
    enable_expand_ops: frozenset = frozenset()
    disable_expand_ops: frozenset = frozenset()
    enable_expand_ops_only: frozenset | None = None
    enable_cluster_ops: frozenset = frozenset()
    disable_cluster_ops: frozenset = frozenset()
    enable_cluster_ops_only: frozenset | None = None
    enable_pass: frozenset = frozenset()      # "stage.pass" names
    disable_pass: frozenset = frozenset()
    composite_op_limit_size: int = 200
    reduce_fuse_depth: int = 10
    enable_parallel_fusion: bool = False
    enable_recompute_fusion: bool = False
    enable_stitch_fusion: bool = False
    enable_low_precision: bool = False        # fused kernels compute in float16 (passes/low_precision.py)
    dump_as_text: bool = False
    dump_as_html: bool = False                # the report page of each graph, with the dumps (graphkernel/observation/report.py)
    verify: bool = False                      # run ir.verify after every pass (tests turn it on)
    compile_mode: str | None = None           # background | wait; None: $GRAPHKERNEL_COMPILE_MODE, else background


_LIST = {"enable_expand_ops", "disable_expand_ops", "enable_expand_ops_only", "enable_cluster_ops",
         "disable_cluster_ops", "enable_cluster_ops_only", "enable_pass", "disable_pass"}
_BOOL = {f.name for f in fields(GraphKernelFlags) if f.type in ("bool",)}
_CHOICES = {"compile_mode": ("background", "wait")}
COMPILE_MODE_ENV = "GRAPHKERNEL_COMPILE_MODE"   # the default of --compile_mode (the test suite: wait)
_INT_RANGES = {"opt_level": (0, 3), "composite_op_limit_size": (1, 100000), "reduce_fuse_depth": (0, 1000)}
KNOWN_FLAGS = tuple(f.name for f in fields(GraphKernelFlags))


def _value(key: str, raw: str | None):
    if key in _BOOL:
        if raw is None or raw.lower() in ("true", "1", "on"):
            return True
        if raw.lower() in ("false", "0", "off"):
            return False
        raise FlagError(f"--{key}={raw}: expected true or false")
    if raw is None:
        raise FlagError(f"--{key} needs a value (--{key}=...)")
    if key in _LIST:
        return frozenset(item.strip() for item in raw.split(",") if item.strip())
    if key in _CHOICES:
        if raw not in _CHOICES[key]:
            raise FlagError(f"--{key}={raw}: expected one of {', '.join(_CHOICES[key])}")
        return raw
    lo, hi = _INT_RANGES[key]
    try:
        value = int(raw)
    except ValueError:
        raise FlagError(f"--{key}={raw}: expected an integer in {lo}..{hi}") from None
    if not lo <= value <= hi:
        raise FlagError(f"--{key}={raw}: expected an integer in {lo}..{hi}")
    return value


def parse_flags(text: str, *, read_env: bool = True, check_names=None) -> GraphKernelFlags:
    """`check_names(source, key, names)`, when given, checks every list flag's names and returns those
    kept (a MindSpore name that means nothing here warns and is dropped)."""
    if not isinstance(text, str):
        raise FlagError(f"graph_kernel_flags must be a string, got {type(text).__name__}")
    env = os.environ.get("MS_DEV_GRAPH_KERNEL_FLAGS", "") if read_env else ""
    values: dict = {}
    for source, chunk in (("graph_kernel_flags", text), ("MS_DEV_GRAPH_KERNEL_FLAGS", env)):
        try:
            tokens = shlex.split(chunk)
        except ValueError as e:
            raise FlagError(f"{source}: {e}") from None
        for token in tokens:
            if not token.startswith("--"):
                raise FlagError(f"{source}: {token!r} is not a flag (flags look like --key=value)")
            key, eq, raw = token[2:].partition("=")
            if key in MINDSPORE_ONLY_FLAGS:
                no_effect(source, f"--{key} (a MindSpore graph-kernel flag)")
                continue
            if key not in KNOWN_FLAGS:
                near = difflib.get_close_matches(key, KNOWN_FLAGS, n=1)
                hint = f"; did you mean --{near[0]}?" if near else ""
                raise FlagError(f"{source}: unknown flag --{key}{hint}; accepted: "
                                f"{', '.join('--' + k for k in KNOWN_FLAGS)}")
            values[key] = _value(key, raw if eq else None)
            if key in _LIST and check_names is not None:
                values[key] = check_names(source, key, values[key])
    flags = GraphKernelFlags(**values)
    for name in sorted(flags.enable_cluster_ops & flags.disable_expand_ops):
        no_effect("graph_kernel_flags", f"--enable_cluster_ops={name} with --disable_expand_ops={name} (a composite "
                  "op joins fused kernels here through its expansion)")
    for name in sorted(flags.disable_cluster_ops & flags.enable_expand_ops):
        no_effect("graph_kernel_flags", f"--disable_cluster_ops={name} with --enable_expand_ops={name} (expanded, "
                  "its primitives fuse, as MindSpore fuses an expanded op)")
    return flags


def compile_mode(flags: GraphKernelFlags, same_bits: bool = False) -> str:
    """How a graph's kernels build: --compile_mode; else wait when the results must not depend on when
    kernels arrive (`same_bits`: deterministic on, or a graph of collectives, whose ranks keep their
    Parameters bitwise equal; a stand-in sums in another order than its kernel, and which calls run
    stand-ins is a matter of timing); else $GRAPHKERNEL_COMPILE_MODE, else "background" (the first step
    runs on stand-ins while the kernels build: docs/kernels.md)."""
    if flags.compile_mode is not None:
        return flags.compile_mode
    if same_bits:
        return "wait"
    env = os.environ.get(COMPILE_MODE_ENV, "")
    if env and env not in _CHOICES["compile_mode"]:
        raise FlagError(f"{COMPILE_MODE_ENV}={env}: expected one of {', '.join(_CHOICES['compile_mode'])}")
    return env or "background"
