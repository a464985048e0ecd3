"""The ONNX frontend: run an ONNX model through graphkernel's pipeline.

    import graphkernel.onnx
    cell = graphkernel.onnx.load("model.onnx")      # or bytes, or an onnx.ModelProto
    y = cell(Tensor(x))                             # traced, compiled per input signature, run

loader.py checks the model and finds a converter for every node (registry.py: the table that
ops_math.py, ops_reduce.py, ops_nn.py, ops_activation.py and ops_shape.py fill; converters.py imports
them all); cell.py replays the
graph through builder.py inside the Cell's trace; run.py is `graphkernel run`; examples.py builds
BERT-style models for the tests and benchmarks. `supported_ops()` lists the ONNX ops we convert.
"""
from graphkernel.onnx.cell import load
from graphkernel.onnx.converters import supported_ops
from graphkernel.onnx.types import OnnxImportError, OnnxInputError

__all__ = ["load", "supported_ops", "OnnxImportError", "OnnxInputError"]
