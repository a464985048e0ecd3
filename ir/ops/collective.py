"""Collective communication: MindSpore's AllReduce, AllGather, ReduceScatter, Broadcast and Barrier, and
the two halves of a bucketed, non-blocking AllReduce (nn.DistributedGradReducer).

    AllReduce(x) {op, group}                     every member gets op(x of all members): sum max min prod
    AllGather(x) {group, rank_size}              the members' x concatenated on axis 0, in rank order
    ReduceScatter(x) {op, group, rank_size}      op over the members, then member r keeps rows block r
    Broadcast(x, ...) {root_rank, group}         every member gets the root's tensors
    Barrier(token) {group}                       waits until every member arrives; the i32[1] token passes
    AllReduceStart(g, ...) {op, group, bucket}   packs the gradients of a bucket into its flat buffer and
                                                 starts their AllReduce; the result is a token
    AllReduceWait(token) {group, bucket, shapes, dtypes}
                                                 waits for that AllReduce; the reduced gradients

They are HOST ops placed "comm" (`placement`): never fused, never folded or merged (cse, constant_fold),
a boundary between device subgraphs as a host op is (`device_regions`), but they read and write the
device's buffers themselves, so the partition puts no copies around them. The work is the process's
communicator's (`set_communicator`): graphkernel.communication installs its MPI one at init(); until
then, and in a process that is a group by itself, `Alone` answers as a group of one (every collective
is the identity; AllGather and ReduceScatter need rank_size 1). A group is named by a string (MindSpore's
"hccl_world_group" and the names create_group gives), resolved by the communicator when the op runs;
the shapes that depend on a group's size take it as the `rank_size` attribute, fixed at construction.

The gradient rules are MindSpore's (mindspore/ops/_grad_experimental/grad_comm_ops.py): AllReduce(sum)
of the cotangent (times x == out for max and min; out / x for prod), AllGather <-> ReduceScatter(sum),
Broadcast the identity.
"""
from __future__ import annotations

import numpy as np

from ir.dtypes import DType, as_dtype
from ir.errors import AttrError, ExecutionError, ShapeError
from ir.graph import TensorType
from ir.ops.checks import is_int, is_str
from ir.ops.registry import Api, Attr, OpDef, Pattern, Precision, register

REDUCE_OPS = ("sum", "max", "min", "prod")
COMM = Precision("black", True, "a collective: every member sends the dtype it computed")


class Alone:
    """The communicator of a process that is a group by itself (no launcher, or before init())."""

    def __init__(self):
        self._pending: dict[int, list] = {}
        self._next = 0

    def all_reduce(self, x, op, group):
        return np.array(x)

    def all_gather(self, x, group):
        return np.array(x)

    def reduce_scatter(self, x, op, group):
        return np.array(x)

    def broadcast(self, xs, root, group):
        return [np.array(x) for x in xs]

    def barrier(self, group):
        return None

    def start_all_reduce(self, arrays, op, group, bucket) -> int:
        self._next += 1
        self._pending[self._next] = [np.array(a) for a in arrays]
        return self._next

    def wait_all_reduce(self, handle, group, bucket) -> list:
        try:
            return self._pending.pop(int(handle))
        except KeyError:
            raise ExecutionError(unknown_token(handle, bucket)) from None


def unknown_token(handle, bucket) -> str:
    return (f"AllReduceWait of bucket {bucket!r}: token {int(handle)} names no AllReduceStart still in flight "
            "(a token comes from an AllReduceStart of the same step and is waited once)")


_COMMUNICATOR = [Alone()]


def set_communicator(comm) -> None:
    """Install the process's communicator (graphkernel.communication.init); None: a group of one again."""
    _COMMUNICATOR[0] = Alone() if comm is None else comm


def communicator():
    return _COMMUNICATOR[0]


# -- attribute checks ---------------------------------------------------------------------------------

def _group(v):
    if not isinstance(v, str) or not v:
        raise TypeError("expected a group name (a non-empty string)")
    return v


def _rank_size(v):
    v = is_int(v)
    if v < 1:
        raise ValueError("must be at least 1")
    return v


def _shapes(v):
    return tuple(tuple(int(d) for d in s) for s in v)


def _dtypes(v):
    return tuple(as_dtype(d) for d in v)


GROUP = Attr("group", "hccl_world_group", _group)
OP = Attr("op", "sum", is_str(*REDUCE_OPS))


def _float_or_int(t: TensorType, what: str = "x") -> None:
    if t.dtype == DType.bool:
        raise AttrError(f"{what} is {t}: a collective reduces numbers (float or int), not {t.dtype}")
    if t.dtype == DType.bfloat16:   # what the transport carries: MPI has no bfloat16
        raise AttrError(f"{what} is {t}: a collective carries float16/32/64 or integers, not bfloat16; Cast it "
                        "to float32 first")


def _same(types, attrs):
    _float_or_int(types[0])
    return (types[0],)


def _gather_infer(types, attrs):
    (x,) = types
    _float_or_int(x)
    if not x.shape:
        raise ShapeError(f"x is {x}: AllGather concatenates on axis 0, x needs at least one dimension")
    return (TensorType((x.shape[0] * attrs["rank_size"], *x.shape[1:]), x.dtype),)


def _scatter_infer(types, attrs):
    (x,) = types
    _float_or_int(x)
    n = attrs["rank_size"]
    if not x.shape or x.shape[0] % n:
        raise ShapeError(f"x is {x}: ReduceScatter splits axis 0 into rank_size={n} equal blocks; its length "
                         "must be a multiple of the group's size")
    return (TensorType((x.shape[0] // n, *x.shape[1:]), x.dtype),)


def _broadcast_infer(types, attrs):
    for t in types:
        _float_or_int(t, f"input {t}")
    return tuple(types)


def _barrier_infer(types, attrs):
    if types[0] != TensorType((1,), DType.int32):
        raise AttrError(f"the token must be an i32[1], got {types[0]}")
    return (types[0],)


def _start_infer(types, attrs):
    for k, t in enumerate(types):
        if not t.dtype.is_float:
            raise AttrError(f"gradient {k} is {t}: a bucket holds float gradients")
    return (TensorType((), DType.int32),)


def _wait_infer(types, attrs):
    (token,) = types
    if token != TensorType((), DType.int32):
        raise AttrError(f"the token must be the i32[] of an AllReduceStart, got {token}")
    shapes, dtypes = attrs["shapes"], attrs["dtypes"]
    if len(shapes) != len(dtypes) or not shapes:
        raise AttrError(f"shapes ({len(shapes)}) and dtypes ({len(dtypes)}) must list the bucket's gradients alike")
    return tuple(TensorType(s, d) for s, d in zip(shapes, dtypes))


# -- references: the communicator does the work ----------------------------------------------------

def _all_reduce(a, attrs):
    return communicator().all_reduce(a[0], attrs["op"], attrs["group"])


def _all_gather(a, attrs):
    return communicator().all_gather(a[0], attrs["group"])


def _reduce_scatter(a, attrs):
    return communicator().reduce_scatter(a[0], attrs["op"], attrs["group"])


def _broadcast(a, attrs):
    return tuple(communicator().broadcast(list(a), attrs["root_rank"], attrs["group"]))


def _barrier(a, attrs):
    communicator().barrier(attrs["group"])
    return np.array(a[0])


def _start(a, attrs):
    return np.array(communicator().start_all_reduce(list(a), attrs["op"], attrs["group"], attrs["bucket"]),
                    np.int32)


def _wait(a, attrs):
    return tuple(communicator().wait_all_reduce(int(a[0]), attrs["group"], attrs["bucket"]))


# -- gradient rules (MindSpore's) -----------------------------------------------------------------------

def _all_reduce_grad(b, node, douts):
    (x,), (d,), group = node.inputs, douts, node.attr("group")
    op = node.attr("op")
    if op == "prod":
        return (b.op("RealDiv", b.op("AllReduce", b.op("Mul", d, node.out), op="sum", group=group), x),)
    dx = b.op("AllReduce", d, op="sum", group=group)
    if op == "sum":
        return (dx,)
    return (b.op("Mul", dx, b.cast(b.op("Equal", x, node.out), dx.dtype)),)


def _all_gather_grad(b, node, douts):
    return (b.op("ReduceScatter", douts[0], op="sum", group=node.attr("group"), rank_size=node.attr("rank_size")),)


def _reduce_scatter_grad(b, node, douts):
    if node.attr("op") != "sum":
        raise AttrError(f"ReduceScatter(op={node.attr('op')!r}) has no gradient (MindSpore's rule: op='sum' only)")
    return (b.op("AllGather", douts[0], group=node.attr("group"), rank_size=node.attr("rank_size")),)


def _collective(name, arity, infer, reference, attrs, doc, grad=None):
    register(OpDef(name, Pattern.HOST, arity, infer, reference, attrs, doc=doc, precision=COMM, grad=grad,
                   collective=True, domain="any", api=Api(primitive=False)))   # P.<name>: graphkernel/ops/collective.py


_collective("AllReduce", 1, _same, _all_reduce, (OP, GROUP),
            "op(x) over the group's members, the same result on each", _all_reduce_grad)
_collective("AllGather", 1, _gather_infer, _all_gather, (GROUP, Attr("rank_size", 1, _rank_size)),
            "the members' x concatenated on axis 0, in rank order", _all_gather_grad)
_collective("ReduceScatter", 1, _scatter_infer, _reduce_scatter,
            (OP, GROUP, Attr("rank_size", 1, _rank_size)),
            "op(x) over the members, split on axis 0; member r keeps block r", _reduce_scatter_grad)
_collective("Broadcast", None, _broadcast_infer, _broadcast, (Attr("root_rank", 0, is_int), GROUP),
            "the root member's tensors on every member", lambda b, node, douts: tuple(douts))
_collective("Barrier", 1, _barrier_infer, _barrier, (GROUP,),
            "waits until every member of the group arrives; the token x (i32[1]) passes through")
_collective("AllReduceStart", None, _start_infer, _start, (OP, GROUP, Attr("bucket", check=is_str())),
            "packs a bucket's gradients into its flat buffer and starts their AllReduce; a token")
_collective("AllReduceWait", 1, _wait_infer, _wait,
            (GROUP, Attr("bucket", check=is_str()), Attr("shapes", check=_shapes), Attr("dtypes", check=_dtypes)),
            "waits for the AllReduce the token started; the bucket's reduced gradients")

COLLECTIVE_OPS = ("AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Barrier", "AllReduceStart",
                  "AllReduceWait")
