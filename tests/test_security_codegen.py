"""Model-controlled text never becomes kernel code (issue 9; kernels/source_text.py).

Names, attribute values and keys, and doc strings holding quotes, triple quotes, newlines, backslashes,
`__import__('os').system('touch CANARY')`, unicode and 10 KB of text go through an ONNX model, a Cell
and a hand-built IR graph (whose nodes carry string attributes no op accepts, the one way such text
reaches a kernel's spec). Each must run, match the numpy reference (device_target="CPU"), with fusion
on and --dump_as_text writing the sources, and leave the canary file absent. The gate (identifier,
doc_text, check_source) is tested on its own, and the kernel graph .dot on hostile names.
"""
import ast
import json
import os
import shutil
import subprocess
import warnings

import numpy as np
import pytest

from graphkernel import Tensor, context
from graphkernel.nn import Cell
from graphkernel.ops import operations as P
from graphkernel.tensor import Parameter
from ir.errors import GraphKernelError
from ir.graph import Graph, TensorType
from ir.dtypes import DType
from ir.ops import make_node
from kernels import DeviceConfig, KernelBuildWarning, lower
from kernels.codegen import kernel_stem
from kernels.layout import describe
from kernels.source_text import UnsafeSourceError, check_source, doc_text, identifier
from tests.kernel_graphs import fused, reference
from requires import needs_dot
from tolerance import assert_close

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import graphkernel.onnx as gx  # noqa: E402


def payloads(canary: str) -> dict[str, str]:
    """Hostile strings, each of which runs `touch canary` if it ever becomes code."""
    cmd = f"touch {canary}"
    call = f"__import__('os').system('{cmd}')"
    return {
        "quotes": f"'\"{call}\"'",
        "triple_double": f'""";__import__("os").system("{cmd}");"""',
        "triple_single": f"''';{call};'''",
        "newline": f"x\n{call}\n#",
        "backslash": f'\\";{call}#\\',
        "plain_call": call,
        "unicode": f"名前\u2028\u202e\x1b[31m\r{call}",
        "long": "x" * 10240 + f'""";__import__("os").system("{cmd}");"""',
    }


@pytest.fixture(scope="module")
def canary(tmp_path_factory):
    path = tmp_path_factory.mktemp("canary") / "CANARY"
    yield str(path)
    assert not path.exists(), "a model string ran as code"


@pytest.fixture(scope="module")
def hostile(canary):
    return payloads(canary)


def sources_in(directory) -> dict[str, str]:
    """File name -> text of the kernel sources in `directory`."""
    files = sorted(os.listdir(directory))
    assert files and all(f.endswith(".py") for f in files)
    return {f: open(os.path.join(directory, f), encoding="ascii").read() for f in files}


def kernel_dir(save_graphs_path) -> str:
    """The kernels_<graph id> directory --dump_as_text wrote (one compile on the Ascend target)."""
    (found,) = [d for d in os.listdir(save_graphs_path) if d.startswith("kernels_")]
    return os.path.join(save_graphs_path, found)


def assert_kernel_sources_safe(directory, canary: str) -> dict[str, str]:
    """Every written kernel passes the gate (model text only in docstrings, neutralised)."""
    sources = sources_in(directory)
    for source in sources.values():
        check_source(source)
    assert not os.path.exists(canary)
    return sources


# --- the gate itself ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["Fused_Mul_Add_0a1b2c3d4e", "Exp", "_x1"])
def test_identifier_accepts_plain_names(name):
    assert identifier(name) == name


@pytest.mark.parametrize("name", ["", "a b", "a;b", "a\nb", "1abc", "class", "match", "名前", "x" * 201,
                                  "__import__('os')", 'a"""b', None])
def test_identifier_refuses_anything_else(name):
    with pytest.raises(UnsafeSourceError):
        identifier(name)


def test_doc_text_neutralises_every_payload(hostile):
    for text in hostile.values():
        shown = doc_text(text)
        assert shown.isascii() and shown.isprintable() and '"' not in shown and "\\" not in shown
        module = f'"""key: {shown}"""\n'
        check_source(module)
        assert ast.literal_eval(module.strip()) == f"key: {shown}"   # still one string


def test_doc_text_is_capped():
    assert len(doc_text("y" * 100_000)) <= 20_003


# modules codegen never writes: each must be refused, whatever got it there
REFUSED = {
    "docstring broken out": '"""key: (\'"""\n__import__(chr(111) + chr(115)).system(chr(58))\n"""\')"""\n',
    "a string literal": 'def k(a):\n    a[0] = "x"\n',
    "an f-string": 'def k(a):\n    a[0] = f"{a}"\n',
    "a call of __import__": "def k(a):\n    __import__(chr(111))\n",
    "a call of getattr": "def k(a):\n    b = getattr(np, chr(111))\n",
    "a private attribute": "def k(a):\n    b = np.__dict__\n",
    "an attribute of a value": "def k(a):\n    b = a.tofile\n",
    "import os": "import os\n",
    "from os import system": "from os import system\n",
    "a module-level call": "k = np.empty(3)\n",
    "a nested function": "def k(a):\n    def j():\n        pass\n",
    "a lambda": "def k(a):\n    b = lambda: 0\n",
    "a bytes literal": "def k(a):\n    b = b'x'\n",
    "non-ASCII": "def k(a):\n    b = 1  # é\n",
    "not Python": "def k(a):\n    b = (\n",
    "a docstring with a quote": 'def k(a):\n    """say "hi" """\n',
}


@pytest.mark.parametrize("what", list(REFUSED))
def test_check_source_refuses_what_codegen_never_writes(what):
    with pytest.raises(UnsafeSourceError):
        check_source(REFUSED[what])


def test_the_old_header_exploit_is_refused(hostile):
    """What codegen wrote before source_text existed: the key's repr inside the docstring."""
    key = repr(("attr", hostile["triple_double"]))
    module = f'"""Generated by graphkernel.\n\nkey: {key}\n"""\nimport math\n'
    with pytest.raises(UnsafeSourceError):
        check_source(module)


# --- a hand-built IR graph: hostile attrs (keys and values) and names -------------------------------
def hostile_graph(hostile: dict) -> Graph:
    """x * y + 1 -> exp -> sum over the last axis; every node carries every payload as an attribute
    (and one as an attribute key) and a payload as its name; the inputs are named with payloads."""
    texts = list(hostile.values())
    x, y = Graph.with_inputs([TensorType((3, 8), DType.float32)] * 2, names=texts[:2])
    extra = {f"note{i}": t for i, t in enumerate(texts)} | {texts[1]: texts[0]}

    def node(op, inputs, k, **attrs):
        made = make_node(op, inputs, attrs)
        return made.replace(attrs=dict(made.attrs) | extra, name=texts[k % len(texts)])

    one = make_node("Const", (), {"value": np.float32(1)})
    mul = node("Mul", (x, y), 2)
    add = node("Add", (mul.out, one.out), 3)
    exp = node("Exp", (add.out,), 4)
    red = node("ReduceSum", (exp.out,), 5, axis=(1,), keep_dims=True)
    return Graph([x, y], [one, mul, add, exp, red], [red.out, exp.out])


@pytest.mark.parametrize("fuse", [False, True], ids=["unfused", "fused"])
def test_ir_graph_with_hostile_attrs_and_names_runs_safely(hostile, canary, tmp_path, fuse):
    graph = hostile_graph(hostile)
    if fuse:
        graph = fused(graph, name=hostile["long"])
    arrays = [np.linspace(-1, 1, 24, dtype=np.float32).reshape(3, 8), np.full((3, 8), 0.5, np.float32)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", KernelBuildWarning)   # the kernels build: no fallback
        program = lower(graph, DeviceConfig(source_dir=str(tmp_path)))
    for got, want in zip(program.run(arrays), reference(graph, arrays)):
        assert_close(got, want)
    sources = assert_kernel_sources_safe(tmp_path, canary)
    assert len(sources) == (1 if fuse else 4)
    assert not any("system" in s for s in sources.values())   # undeclared attrs change no code, not even the key


def test_a_spec_whose_op_is_no_identifier_is_refused(hostile):
    x, y = Graph.with_inputs([TensorType((4,), DType.float32)] * 2)
    spec, _ = describe(Graph([x, y], [n := make_node("Add", (x, y))], [n.out]))
    bad = spec.nodes[0].__class__(**{**spec.nodes[0].__dict__, "op": hostile["plain_call"]})
    with pytest.raises(UnsafeSourceError):
        kernel_stem(spec.__class__(**{**spec.__dict__, "nodes": (bad,)}))


# --- a Cell: hostile sub-cell attribute names (scope names) and Parameter names --------------------
class Scale(Cell):
    def __init__(self, name: str):
        super().__init__()
        self.w = Parameter(np.linspace(0.5, 1.5, 16, dtype=np.float32).reshape(2, 8), name=name)
        self.mul, self.exp = P.Mul(), P.Exp()

    def construct(self, x):
        return self.exp(self.mul(x, self.w))


class HostileNet(Cell):
    def __init__(self, hostile: dict):
        super().__init__()
        self.names = list(hostile.values())
        for i, name in enumerate(self.names):
            setattr(self, name, Scale(self.names[(i + 1) % len(self.names)]))
        self.sum = P.ReduceSum(keep_dims=True)
        self.add = P.Add()

    def construct(self, x):
        y = x
        for name in self.names[:3]:
            y = self.add(getattr(self, name)(y), x)
        return self.sum(y, (1,))


def test_cell_with_hostile_scope_and_parameter_names_runs_safely(hostile, canary, tmp_path):
    x = Tensor(np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8))
    context.set_context(device_target="CPU")
    want = HostileNet(hostile)(x).asnumpy()
    context.set_context(device_target="Ascend", enable_graph_kernel=True, save_graphs=True,
                        save_graphs_path=str(tmp_path), graph_kernel_flags="--dump_as_text")
    assert_close(HostileNet(hostile)(x).asnumpy(), want)
    assert any(f.startswith("Fused_") for f in assert_kernel_sources_safe(kernel_dir(tmp_path), canary))


# --- an ONNX model: hostile node and value names, doc strings, metadata -----------------------------
def hostile_model(hostile: dict, gelu: str = "tanh"):
    t = list(hostile.values())
    F = TensorProto.FLOAT
    w = numpy_helper.from_array(np.linspace(-1, 1, 96, dtype=np.float32).reshape(8, 12), t[2])
    gamma = numpy_helper.from_array(np.ones(12, np.float32), t[3])
    nodes = [
        helper.make_node("MatMul", [t[0], t[2]], [t[4]], name=t[5], doc_string=t[6]),
        helper.make_node("Gelu", [t[4]], [t[6]], name=t[7], approximate=gelu, doc_string=t[0]),
        helper.make_node("LayerNormalization", [t[6], t[3]], [t[7]], name=t[1], axis=-1, epsilon=1e-5),
        helper.make_node("Softmax", [t[7]], [t[1]], name=t[0] + "!", axis=-1, doc_string=t[7]),
    ]
    graph = helper.make_graph(nodes, t[4], [helper.make_tensor_value_info(t[0], F, [4, 8])],
                              [helper.make_tensor_value_info(t[1], F, [4, 12])], [w, gamma], doc_string=t[5])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], doc_string=t[3],
                              producer_name=t[2], domain=t[6])
    helper.set_model_props(model, {t[0]: t[7], t[1]: t[5]})
    return model


def test_onnx_model_with_hostile_names_and_doc_strings_runs_safely(hostile, canary, tmp_path):
    model = hostile_model(hostile)
    x = Tensor(np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8))
    context.set_context(device_target="CPU")
    want = gx.load(model)(x).asnumpy()
    context.set_context(device_target="Ascend", enable_graph_kernel=True, save_graphs=True,
                        save_graphs_path=str(tmp_path), graph_kernel_flags="--dump_as_text")
    cell = gx.load(model)
    assert_close(cell(x).asnumpy(), want)
    assert cell.input_names == [hostile["quotes"]]
    assert any(f.startswith("Fused_") for f in assert_kernel_sources_safe(kernel_dir(tmp_path), canary))


@pytest.mark.parametrize("which", ["triple_double", "plain_call", "unicode"])
def test_onnx_hostile_string_attribute_is_a_clear_error(hostile, canary, which):
    """A string attribute is data the converter compares, never code: a bad value names the node."""
    context.set_context(device_target="Ascend", enable_graph_kernel=True)
    x = Tensor(np.ones((4, 8), np.float32))
    with pytest.raises(GraphKernelError, match=r"Gelu node .*approximate="):
        gx.load(hostile_model(hostile, gelu=hostile[which]))(x)
    assert not os.path.exists(canary)


# --- the kernel graph .dot: a numpy launch is labelled with its node's (hostile) name ---------------
class MatMulAdd(Cell):
    def __init__(self):
        super().__init__()
        self.matmul, self.add = P.MatMul(), P.Add()

    def construct(self, x):
        return self.add(self.matmul(x, x), x)


DOT_NAMES = ['x\\"; image="/etc/passwd"; label="', "a\\", "\ud800\n\"q\\", "名前\u202e"]


@needs_dot
def test_kernel_graph_dot_of_hostile_names_is_one_picture_without_injected_attributes(tmp_path):
    class Net(Cell):
        def __init__(self):
            super().__init__()
            for name in DOT_NAMES:
                setattr(self, name, MatMulAdd())

        def construct(self, x):
            for name in DOT_NAMES:
                x = getattr(self, name)(x)
            return x

    context.set_context(device_target="Ascend", enable_graph_kernel=True, save_graphs=True,
                        save_graphs_path=str(tmp_path))
    compiled = Net().compile(Tensor(np.eye(3, dtype=np.float32)))
    text = (tmp_path / f"kernel_graph_{compiled.graph_id}.dot").read_text(encoding="utf-8")
    run = subprocess.run([shutil.which("dot"), "-Tjson"], input=text.encode(), capture_output=True, timeout=60)
    assert run.returncode == 0, run.stderr.decode(errors="replace")
    objects = json.loads(run.stdout)["objects"]
    assert len(objects) == len(compiled.kernels) + 2            # every launch, one input, one output
    assert not any("image" in o for o in objects)
