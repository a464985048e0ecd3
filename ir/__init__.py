"""graphkernel's SSA IR: dtypes, values, nodes, graphs, the op registry, verifier, text form, .dot.

Needs numpy only; knows nothing of numba, kernels or the user API.
"""
from ir.dtypes import DType, as_dtype
from ir.errors import (AttrError, DTypeError, GraphKernelError, IRError, ParseError, ShapeError,
                       UnknownOpError, VerifyError)
from ir.graph import Graph, Literal, Node, TensorType, Value, input_node, live_nodes
from ir.ops import Pattern, make_node, evaluate, pattern_of

__all__ = ["DType", "as_dtype", "AttrError", "DTypeError", "GraphKernelError", "IRError", "ParseError",
           "ShapeError", "UnknownOpError", "VerifyError", "Graph", "Literal", "Node", "TensorType",
           "Value", "input_node", "live_nodes", "Pattern", "make_node", "evaluate", "pattern_of"]
