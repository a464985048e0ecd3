"""Builder: turns one ONNX node after another into IR inside the active trace, folding what is constant.

Every ONNX value is either a numpy array (a constant: small initializers, Constant nodes, Shape, and
anything computed only from constants) or an IR Value of the graph being traced. An op whose inputs are
all constants is evaluated at once with the op registry's numpy reference, so shape arithmetic
(`Shape -> Gather -> Unsqueeze -> Concat -> Reshape`) folds and a Reshape's target shape is static.
Nodes are made by an `ir.GraphBuilder` (`b.ir`) that names them with the trace and adds them to it;
what stays here is folding, the ONNX node's context in errors, and the values whose shapes were guessed.

    b = Builder(trace)
    y = b.op("Mul", [x, np.float32(2)])     # an IR Value, or an array when x is constant
    s = b.static(node_input, "shape")       # the array, or OnnxImportError if only known at run time

Scope names keep the ONNX node's name: `Default/<onnx node name>/<Op>-op<N>`, empty parts dropped
(`/matmul_2/MatMul` gives `Default/matmul_2/MatMul/MatMul-op1`; an unnamed node's scope is its op type).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ir.builder import GraphBuilder, constant_array
from ir.dtypes import DType, as_dtype
from ir.errors import DTypeError, GraphKernelError
from ir.symbolic import Dim, has_dims
from ir.graph import Value
from ir.limits import check_node
from ir.ops import evaluate
from graphkernel.onnx.types import OnnxImportError

@dataclass
class NodeInfo:
    """The ONNX node being converted: what its converter and its error messages need."""
    op_type: str
    name: str
    version: int                       # the op's since_version at the model's opset
    attrs: dict
    inputs: list                       # arrays, Values, or None for an omitted optional input
    num_outputs: int

    def attr(self, key: str, default=None):
        return self.attrs.get(key, default)

    def input(self, i: int):
        return self.inputs[i] if i < len(self.inputs) else None

    def where(self) -> str:
        return f"{self.op_type} node {self.name!r} (op version {self.version})"

    def error(self, message: str) -> OnnxImportError:
        return OnnxImportError(f"{self.where()}: {message}")


def shape_of(x) -> tuple[int, ...]:
    return tuple(x.shape)


def dtype_of(x) -> DType:
    return x.dtype if isinstance(x, Value) else as_dtype(x.dtype)


def is_const(x) -> bool:
    return isinstance(x, np.ndarray)


class Builder:
    def __init__(self, trace):
        self.trace = trace
        self.node: NodeInfo | None = None
        # values whose shapes were learnt from one trial run of a host op (NonZero's output), and all
        # computed from them: their shapes may differ at run time, so no shape may be folded from them
        self.guessed: set[Value] = set()
        self.ir = GraphBuilder(namer=trace.scope_name, emit=self.add)

    def add(self, node):
        """Add an IR node to the trace; its results are guessed when one of its inputs is."""
        node = self.trace.add(node)
        if self.guessed and any(v in self.guessed for v in node.inputs):
            self.guessed.update(node.outputs)
        return node

    def static_shape(self, x) -> tuple[int, ...]:
        """The shape of `x` as a compile-time fact (Shape, Size); OnnxImportError when it was guessed."""
        if isinstance(x, Value) and x in self.guessed:
            raise self.node.error("the shape of its input depends on run-time data (a host op's output shape "
                                  "was learnt from one trial run); graphkernel compiles static shapes only")
        return shape_of(x)

    # -- operands ---------------------------------------------------------------------------------
    def value(self, x) -> Value:
        """An IR Value for an operand (a constant becomes a Const node)."""
        if isinstance(x, Value):
            return x
        x = np.asarray(x)
        return self.ir.const(x, x.dtype, name="")

    def const(self, v, like) -> np.ndarray:
        """A 0-d constant of `like`'s dtype; OnnxImportError if an integer or bool dtype cannot hold `v`
        exactly (an attribute such as alpha=0.01 meeting an int tensor: ONNX allows floats only there)."""
        dtype = dtype_of(like)
        try:
            return constant_array(v, dtype)  # a float beyond float16's range is inf, as a cast makes it
        except DTypeError as e:
            raise self.node.error(f"{e}, and {dtype} is the dtype of the tensor it combines with (does the op "
                                  "take tensors of that type?)") from None

    def size(self, count, dtype: DType):
        """A count of elements as a 0-d operand of `dtype`: a constant, or (a symbolic size) its value at
        each call, a SizeValue node."""
        if isinstance(count, Dim):
            return self.ir.const(count, dtype, name="")
        return np.asarray(count, dtype=dtype.np)

    def static(self, x, what: str) -> np.ndarray:
        """The compile-time value of an input that must be known statically (shapes, axes, ...)."""
        if x is None:
            raise self.node.error(f"input {what!r} is missing")
        if not is_const(x):
            raise self.node.error(f"input {what!r} must be known at compile time (a constant, or computed "
                                  "from constants and shapes), but it depends on run-time data")
        return x

    def ints(self, x, what: str) -> list[int]:
        arr = self.static(x, what)
        if arr.dtype == object:   # shape data holding symbolic sizes (a dynamic dim's Shape)
            return [v if isinstance(v, Dim) else int(v) for v in arr.reshape(-1)]
        if arr.dtype.kind not in "iu":
            raise self.node.error(f"input {what!r} must hold integers, got {arr.dtype}")
        return [int(v) for v in arr.reshape(-1)]

    # -- emitting ---------------------------------------------------------------------------------
    def op(self, name: str, inputs, **attrs):
        """One IR op on `inputs`: folded to an array when they are all constants."""
        outs = self.ops(name, inputs, **attrs)
        return outs[0]

    def ops(self, name: str, inputs, **attrs) -> list:
        """Like op, for ops with several results."""
        inputs = list(inputs)
        if all(is_const(x) for x in inputs) and any(x.dtype == object for x in inputs):
            return [fold_shape_data(self.node, name, inputs, attrs)]
        if all(is_const(x) for x in inputs) and not any(has_dims(v) for v in attrs.values()):
            scratch = GraphBuilder(namer=self.trace.scope_name)  # the node folded is not added to the trace
            node = scratch.node(name, *[scratch.const(x, x.dtype, name="") for x in inputs], **attrs)
            check_node(node, self.trace.memory_limit)  # before folding allocates its result
            try:
                with np.errstate(all="ignore"):  # NaN and Inf fold as the interpreter computes them
                    return list(evaluate(node, inputs))
            except GraphKernelError:
                raise
            except Exception as e:  # numpy failing on the values (e.g. an index out of range)
                raise self.node.error(f"folding {name} on constants failed: {e}") from None
        return list(self.ir.ops(name, *[self.value(x) for x in inputs], **attrs))

    def cast(self, x, dtype: DType):
        return x if dtype_of(x) == dtype else self.op("Cast", [x], dtype=dtype)

    def reshape(self, x, shape):
        shape = tuple(d if isinstance(d, Dim) else int(d) for d in shape)
        return x if shape_of(x) == shape else self.op("Reshape", [x], shape=shape)

    def binary(self, name: str, a, b):
        """A binary op; a Python number becomes a constant of the other operand's dtype."""
        if not isinstance(a, (np.ndarray, Value)):
            a = self.const(a, b)
        if not isinstance(b, (np.ndarray, Value)):
            b = self.const(b, a)
        return self.op(name, [a, b])


def shape_data(dims) -> np.ndarray:
    """A shape as ONNX shape data: int64, or an object array when a dim is a symbolic size."""
    if any(isinstance(d, Dim) for d in dims):
        return np.array(list(dims) if dims else [], dtype=object).reshape(len(dims))
    return np.asarray(dims, dtype=np.int64)


def fold_shape_data(node, name: str, inputs: list, attrs: dict) -> np.ndarray:
    """`name` on shape data holding symbolic sizes: an object array again (int64 when no size is left)."""
    out = np.asarray(_fold_shape_data(node, name, inputs, attrs), dtype=object)
    if any(isinstance(v, Dim) for v in out.reshape(-1)):
        return out
    return out.astype(np.int64)


def _fold_shape_data(node, name: str, inputs: list, attrs: dict):
    """`name` on shape data holding symbolic sizes (object arrays of ints and ir.symbolic.Dims): the
    arithmetic ONNX graphs do on Shape's result (Gather, Concat, Unsqueeze, Mul, ...), kept symbolic.
    Anything else is an OnnxImportError naming the node."""
    arrays = [np.asarray(x, dtype=object) if x.dtype.kind in "iu" else x for x in inputs]
    try:
        if name == "Cast":
            if not attrs["dtype"].is_int:
                raise TypeError("a symbolic size cast to a non-integer dtype")
            return arrays[0]
        if name == "Reshape":
            return arrays[0].reshape(tuple(int(d) for d in attrs["shape"]))
        if name == "Concat":
            return np.concatenate(arrays, axis=attrs.get("axis", 0))
        if name == "Gather":
            return np.take(arrays[0], np.asarray(inputs[1]).astype(np.int64), axis=attrs.get("axis", 0))
        if name in ("Add", "Sub", "Mul"):
            return {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}[name](arrays[0], arrays[1])
        if name in ("FloorDiv", "RealDiv"):
            return np.floor_divide(arrays[0], arrays[1])
        if name == "Slice":
            return arrays[0][tuple(slice(b, e, st) for b, e, st in zip(attrs["begin"], attrs["end"], attrs["strides"]))]
        if name in ("Squeeze", "ExpandDims", "Transpose"):
            return {"Squeeze": lambda a: a.reshape(-1) if a.ndim else a,
                    "ExpandDims": lambda a: a.reshape(1) if a.ndim == 0 else a.reshape(a.shape + (1,)),
                    "Transpose": lambda a: a.transpose(attrs["perm"])}[name](arrays[0])
    except (TypeError, ValueError, IndexError, KeyError) as e:
        raise node.error(f"{name} on shape data holding a dynamic size: {e}") from None
    raise node.error(f"{name} on shape data holding a dynamic size ({', '.join(map(str, inputs[0].reshape(-1)))}) "
                     "is not supported: the model cannot keep that dim symbolic")
