"""graphkernel's SSA IR: dtypes, values, nodes, graphs, the op registry, GraphBuilder, verifier, text form, .dot.

Needs numpy only; knows nothing of numba, kernels or the user API.
"""
from ir.dtypes import DType, as_dtype
from ir.errors import (AttrError, DTypeError, ExecutionError, GraphKernelError, IRError, ParseError,
                       ShapeError, UnknownOpError, VerifyError)
from ir.graph import Graph, Literal, Node, TensorType, Value, input_node, live_nodes
from ir.ops import Pattern, make_node, evaluate, pattern_of
from ir.builder import GraphBuilder
from ir.printer import print_graph
from ir.parser import parse_graph
from ir.verify import verify
from ir.dot import to_dot
from ir.interpret import interpret, reference_values

__all__ = ["DType", "as_dtype", "AttrError", "DTypeError", "ExecutionError", "GraphKernelError", "IRError",
           "ParseError", "ShapeError", "UnknownOpError", "VerifyError", "Graph", "Literal", "Node", "TensorType",
           "Value", "input_node", "live_nodes", "Pattern", "make_node", "evaluate", "pattern_of", "GraphBuilder",
           "print_graph", "parse_graph", "verify", "to_dot", "interpret", "reference_values"]
