"""Clusters.creates_cycle, the cycle check every fusion pass asks (through fusion_rules.can_fuse): paths
through another kernel are refused, however long and after whatever merges; independent pairs and
neighbours are not. Checked against a brute-force search over the contracted graph."""
import numpy as np
import pytest

from fusion_helpers import t
from ir import GraphBuilder
from graphkernel.passes.clusters import Clusters


def computing(graph):
    return [n for n in graph.nodes if n.op != "Const"]


def test_a_diamond_through_an_outside_node_is_a_cycle():
    g = GraphBuilder(t(4, 4), t(4, 4))
    x, w = g.inputs
    a = g.op("Neg", x)
    graph = g.graph(g.op("Add", g.op("MatMul", a, w), a))
    neg, matmul, add = graph.nodes
    clusters = Clusters(graph)
    assert clusters.creates_cycle(neg, add) and clusters.creates_cycle(add, neg)
    assert not clusters.creates_cycle(neg, matmul)
    assert not clusters.creates_cycle(matmul, add)


@pytest.mark.parametrize("length", [1, 2, 50, 2000])
def test_a_long_path_around_the_pair_is_a_cycle(length):
    """a -> n1 -> ... -> n_length -> b and a -> b."""
    g = GraphBuilder(t(4,))
    (x,) = g.inputs
    a = g.op("Neg", x)
    y = a
    for _ in range(length):
        y = g.op("Abs", y)
    graph = g.graph(g.op("Add", y, a))
    nodes = computing(graph)
    clusters = Clusters(graph)
    assert clusters.creates_cycle(nodes[0], nodes[-1])
    assert not clusters.creates_cycle(nodes[0], nodes[1]) and not clusters.creates_cycle(nodes[-2], nodes[-1])


def test_independent_pairs_are_no_cycle():
    g = GraphBuilder(t(4, 4))
    (x,) = g.inputs
    p, q = g.op("Neg", x), g.op("Exp", x)
    r = g.op("Abs", g.op("Tanh", x))
    graph = g.graph(p, q, r)
    neg, exp, tanh, abs_ = computing(graph)
    clusters = Clusters(graph)
    for a, b in [(neg, exp), (exp, neg), (neg, abs_), (tanh, exp), (neg, tanh)]:
        assert not clusters.creates_cycle(a, b)


def test_a_path_through_a_merged_cluster_is_a_cycle():
    """p and r are independent and merge; then {p, r} -> u -> w and {p, r} -> w: a cycle."""
    g = GraphBuilder(t(4, 4))
    (x,) = g.inputs
    p = g.op("Neg", x)
    u = g.op("Exp", p)
    r = g.op("Abs", x)
    graph = g.graph(g.op("Add", u, r))
    neg, exp, abs_, add = computing(graph)
    clusters = Clusters(graph)
    assert not clusters.creates_cycle(neg, abs_) and not clusters.creates_cycle(abs_, add)
    head = clusters.merge(neg, abs_)
    assert clusters.creates_cycle(head, add) and clusters.creates_cycle(add, head)
    assert not clusters.creates_cycle(head, exp) and not clusters.creates_cycle(exp, add)


def test_merging_along_the_path_removes_the_cycle():
    """a -> m -> c and a -> c: (a, c) is a cycle until m joins one of them."""
    g = GraphBuilder(t(4, 4))
    (x,) = g.inputs
    a = g.op("Neg", x)
    graph = g.graph(g.op("Add", a, g.op("Exp", a)))
    neg, exp, add = computing(graph)
    clusters = Clusters(graph)
    assert clusters.creates_cycle(neg, add)
    head = clusters.merge(exp, add)
    assert not clusters.creates_cycle(neg, head)


def brute_force_cycle(clusters, a, b):
    """A path from one of clusters a, b to the other through a third cluster, by walking every edge."""
    succ = {}
    for node, head in clusters.cluster_of.items():
        for v in node.inputs:
            source = clusters.cluster_of.get(v.node)
            if source is not None and source is not head:
                succ.setdefault(source, set()).add(head)

    def reaches(src, dst):
        stack = [c for c in succ.get(src, ()) if c is not dst]
        seen = set()
        while stack:
            c = stack.pop()
            if c is dst:
                return True
            if c not in seen:
                seen.add(c)
                stack.extend(succ.get(c, ()))
        return False
    return reaches(a, b) or reaches(b, a)


@pytest.mark.parametrize("seed", range(40))
def test_random_dags_and_merges_agree_with_a_brute_force_search(seed):
    rng = np.random.default_rng(seed)
    g = GraphBuilder(t(4,), t(4,))
    values = list(g.inputs)
    for _ in range(int(rng.integers(6, 24))):
        if rng.random() < 0.5:
            values.append(g.op("Neg", values[int(rng.integers(len(values)))]))
        else:
            i, j = rng.integers(len(values), size=2)
            values.append(g.op("Add", values[int(i)], values[int(j)]))
    graph = g.graph(*values[2:])
    clusters = Clusters(graph)
    refused = accepted = 0
    for _ in range(60):
        heads = list(clusters.members)
        if len(heads) < 2:
            break
        i, j = rng.choice(len(heads), size=2, replace=False)
        a, b = heads[int(i)], heads[int(j)]
        expected = brute_force_cycle(clusters, a, b)
        assert clusters.creates_cycle(a, b) == expected
        if expected:
            refused += 1
        else:
            accepted += 1
            clusters.merge(a, b)
    assert accepted > 0
