"""The user's two ways to keep work on the host (mixed compute: host ops next to device subgraphs).

    P.PyFunc(fn, in_types, in_shapes, out_types, out_shapes, stateful=True)(x, ...)
        MindSpore's signature (graphkernel/ops/operations.py): fn runs on numpy arrays on the host;
        its results must match the declared types and shapes (checked every call; a lie raises
        naming the op's scope name)

    with graphkernel.host_scope():         # TF Adapter's npu_scope.without_npu_compile_scope()
        pred = P.Add()(P.Mul()(x, 1.0), 0.0)   # traced as HostCall nodes: run on the host, never fused

Either needs `context.set_context(mix_compile_mode=True)` to compile next to device work: the
partition pass (graphkernel/passes/partition.py) refuses the graph otherwise, naming the op.
Outside a traced construct (PYNATIVE_MODE, plain calls) host_scope changes nothing: ops run one at a
time there anyway.
"""
from __future__ import annotations

from contextlib import contextmanager

from graphkernel.tracing.trace import active_trace


@contextmanager
def host_scope():
    """Ops traced inside run on the host and are never fused."""
    trace = active_trace()
    if trace is None:
        yield
        return
    trace.host_depth += 1
    try:
        yield
    finally:
        trace.host_depth -= 1
