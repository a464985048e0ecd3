"""Communication schedule: each bucket's AllReduce starts as soon as its gradients exist and is waited for
only where its results are first read, so the transfer overlaps the rest of the backward.

    backward:  dW4  dW3 | dW2  dW1 | ...          optimizer(dW1..dW4)
    traced:    ... dW1 | Start(b0: dW4,dW3) Start(b1: dW2,dW1) | Wait(b0) Wait(b1) | Momentum ...
    scheduled: dW4 dW3 Start(b0) | dW2 dW1 Start(b1) | ... | Wait(b0) Momentum(W4,W3) Wait(b1) Momentum(W2,W1)

The traced graph holds the reducer's nodes where construct called it, after the whole backward
(nn.DistributedGradReducer). This pass moves every AllReduceStart to just after the last node that
produces one of its inputs, and every AllReduceWait to just before the first node that reads one of its
results (the executor runs the nodes in this order: kernels/lower.py lowers them in turn). Between a
Start and its Wait the backward's kernels run while the communicator's thread reduces the bucket
(graphkernel/communication/engine.py).

Every process must start its collectives in the same order (MPI's rule): every rank compiles the same
graph and this pass is a pure function of it (positions, never hashes or addresses), so every rank
schedules alike. The reducer traces its buckets in the order the backward completes them (the last
Parameters' first). It runs at the end of the simplify stage and again after fusion (which may regroup
the backward).
"""
from __future__ import annotations

from ir.graph import Graph, Node
from graphkernel.settings.options import CompileOptions

START, WAIT = "AllReduceStart", "AllReduceWait"


def comm_schedule(graph: Graph, opts: CompileOptions) -> Graph:
    """The same nodes with the Starts as early and the Waits as late as their data allow."""
    starts = [n for n in graph.nodes if n.op == START]
    waits = [n for n in graph.nodes if n.op == WAIT]
    if not starts and not waits:
        return graph
    order = [n for n in graph.nodes if n.op not in (START, WAIT)]
    producer = {v: v.node for n in graph.nodes for v in n.outputs}
    placed: set = set()
    for s in starts:   # in graph order; two Starts after one node keep that order
        position = {n: k for k, n in enumerate(order)}
        at = max((position[producer[v]] + 1 for v in s.inputs if producer.get(v) in position), default=0)
        while at < len(order) and order[at] in placed:
            at += 1
        order.insert(at, s)
        placed.add(s)
    for w in waits:   # in order: a later Wait aiming at the same node lands after an earlier one
        results = set(w.outputs)
        readers = {n for n in graph.nodes if any(v in results for v in n.inputs)}
        start = producer.get(w.inputs[0])
        token = order.index(start) + 1 if start in order else 0
        first = next((k for k, n in enumerate(order) if n in readers), len(order))
        order.insert(max(first, token), w)
    return Graph(graph.inputs, order, graph.outputs)
