"""File names made from model strings stay inside their directory and never overwrite each other
(issue 9; ir/filenames.py): `../`, absolute paths, NUL, Windows device names, very long names, and
names that sanitize alike, through safe_filename/path_in and through every writer that uses them
(data and overflow dumps, stage dumps, --dump_as_text kernel sources, the profiler's tables)."""
import os
from types import SimpleNamespace

import numpy as np
import pytest

from graphkernel import Profiler, Tensor, context
from graphkernel.observation.datadump import DataDump, file_stem
from graphkernel.observation.dump import StageDumper
from graphkernel.observation.launches import Launch
from graphkernel.observation.overflow import OverflowCheck
from ir.dtypes import DType
from ir.filenames import HASH_CHARS, NAME_LIMIT, UnsafePathError, path_in, safe_filename
from ir.graph import TensorType
from kernels.launch import write_source as _write_source

HOSTILE = {
    "parent": "../../../../escaped",
    "absolute": "/tmp/graphkernel-escaped",
    "windows_absolute": "C:\\Windows\\escaped",
    "nul": "a\x00b",
    "dots": "..",
    "dot": ".",
    "empty": "",
    "con": "CON",
    "nul_device": "nul",
    "com1": "COM1",
    "lpt9": "Lpt9",
    "con_ext": "CON.txt",
    "long": "x" * 10240,
    "long_unicode": "名" * 5000,
    "newline": "a\nb",
    "surrogate": "\ud800",
    "looks_hashed": "a_0123456789ab",
}
# groups of different names that sanitize to the same characters
ALIKE = [("a/b", "a_b", "a.b", "a\\b", "a b", "a\x00b"), ("x" * 200, "x" * 199 + "y"), ("", "unnamed", "_")]


def inside(directory, path) -> bool:
    root = os.path.realpath(directory)
    return os.path.commonpath([root, os.path.realpath(path)]) == root


def written_files(directory) -> list[str]:
    return [os.path.join(d, f) for d, _, files in os.walk(directory) for f in files]


# --- the sanitizer --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_names_become_plain_files_inside_the_directory(name, tmp_path):
    safe = safe_filename(name)
    assert 0 < len(safe) <= NAME_LIMIT and safe.isascii() and not set(safe) - set(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
    assert safe.split(".")[0].upper() not in {"CON", "NUL", "PRN", "AUX", "COM1", "LPT9"}
    path = path_in(tmp_path, safe + ".output.0.npy")
    with open(path, "w") as f:
        f.write(repr(name))
    assert inside(tmp_path, path) and os.listdir(tmp_path) == [os.path.basename(path)]


def test_plain_names_are_kept_and_changed_names_carry_a_hash():
    assert safe_filename("Fused_Mul_Add_0a1b2c3d4e") == "Fused_Mul_Add_0a1b2c3d4e"
    assert safe_filename("Default/Mul-op0").startswith("Default_Mul-op0_")
    long = safe_filename(HOSTILE["long"])
    assert len(long) == NAME_LIMIT and long[-HASH_CHARS - 1] == "_"


@pytest.mark.parametrize("group", ALIKE, ids=["separators", "long", "empty"])
def test_names_that_sanitize_alike_do_not_overwrite_each_other(group, tmp_path):
    for k, name in enumerate(group):
        with open(path_in(tmp_path, safe_filename(name) + ".npy"), "w") as f:
            f.write(str(k))
    assert len(os.listdir(tmp_path)) == len(group)
    contents = {open(p).read() for p in written_files(tmp_path)}
    assert contents == {str(k) for k in range(len(group))}


def test_a_plain_name_never_takes_a_changed_names_file():
    changed = safe_filename("a/b")          # a_b_<hash of "a/b">
    assert safe_filename(changed) != changed    # the same text given as a name gets its own hash


@pytest.mark.parametrize("filename", ["../x.npy", "/etc/passwd", "a/b.npy", "", ".", "..", "x\x00.npy",
                                      "a..npy", ".hidden", "x" * 300])
def test_path_in_refuses_what_is_not_one_plain_file_name(filename, tmp_path):
    with pytest.raises(UnsafePathError):
        path_in(tmp_path, filename)


def test_path_in_refuses_a_symlink_that_leads_outside(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "dir").mkdir()
    os.symlink(tmp_path / "out" / "victim.npy", tmp_path / "dir" / "x.npy")
    with pytest.raises(UnsafePathError, match="resolves outside"):
        path_in(tmp_path / "dir", "x.npy")


# --- the writers ---------------------------------------------------------------------------------
def hostile_launches() -> list[Launch]:
    names = list(HOSTILE.values()) + [n for group in ALIKE for n in group]
    t = TensorType((2,), DType.float32)
    return [Launch(i, f"k{i}", name, ("Add",), 1, (t,), (t,)) for i, name in enumerate(names)]


@pytest.mark.parametrize("data", ["tensor", "stats"])
def test_data_dump_files_stay_inside_and_every_launch_has_its_own(data, tmp_path):
    launches = hostile_launches()
    dump = DataDump(0, {}, launches, str(tmp_path), "all", None, None, data)
    dump.begin_step(None, 0)
    for la in launches:
        dump.kernel(None, 0, la, [np.full(2, la.index, np.float32)], [np.full(2, -la.index, np.float32)], 0.0)
    dump.end_step(None, 0, 0.0, len(launches))
    files = written_files(tmp_path)
    assert all(inside(tmp_path, f) for f in files)
    if data == "tensor":
        assert len(files) == 1 + 2 * len(launches)     # kernels.csv, one input and one output each
        for la in launches:
            out = tmp_path / "graph_0" / "step_0" / f"{file_stem(la)}.output.0.npy"
            assert (np.load(out) == -la.index).all()
    else:
        assert len(files) == 2                          # kernels.csv, statistic.csv


def test_overflow_dumps_stay_inside(tmp_path):
    launches = hostile_launches()
    check = OverflowCheck(str(tmp_path), "all")
    compiled = SimpleNamespace(graph_id=0)
    check.begin_step(compiled, 0)
    for la in launches:
        check.kernel(compiled, 0, la, [np.ones(2, np.float32)], [np.full(2, np.nan, np.float32)], 0.0)
    assert all(inside(tmp_path, f) for f in written_files(tmp_path))
    assert len(written_files(tmp_path)) == 2 * len(launches)


@pytest.mark.parametrize("stem", list(HOSTILE.values()), ids=list(HOSTILE))
def test_stage_dumps_stay_inside(stem, tmp_path):
    dumper = StageDumper(str(tmp_path), 0, True, {})
    dumper.write(stem, dot="digraph {}\n", text="graph()\n")
    assert len(dumper.files) == 2 and all(inside(tmp_path, f) for f in written_files(tmp_path))


def test_stage_dumps_of_stems_that_sanitize_alike_do_not_overwrite(tmp_path):
    dumper = StageDumper(str(tmp_path), 0, False, {})
    for stem in ALIKE[0]:
        dumper.write(stem, dot=f"digraph {{ label={stem!r} }}\n".replace("\x00", ""))
    assert len(set(dumper.files)) == len(ALIKE[0]) == len(os.listdir(tmp_path))


@pytest.mark.parametrize("name", list(HOSTILE.values()), ids=list(HOSTILE))
def test_kernel_sources_stay_inside(name, tmp_path):
    _write_source(str(tmp_path / "kernels_0"), name, "x = 1\n")
    (written,) = written_files(tmp_path)
    assert inside(tmp_path / "kernels_0", written) and written.endswith(".py")


# --- end to end: an ONNX model whose node names are hostile -------------------------------------------
from onnx import TensorProto, helper  # noqa: E402

import graphkernel.onnx as gx  # noqa: E402


def hostile_model(outside: str):
    """y = -(exp(x * x + x) - x), its nodes named `../`, an absolute path into `outside`, a device name
    and two names that sanitize alike."""
    names = ["../../../../escaped", os.path.join(outside, "escaped"), "CON", *ALIKE[0][:2]]
    F = TensorProto.FLOAT
    nodes = [helper.make_node("Mul", ["x", "x"], ["m"], name=names[0]),
             helper.make_node("Add", ["m", "x"], ["a"], name=names[1]),
             helper.make_node("Exp", ["a"], ["e"], name=names[2]),
             helper.make_node("Sub", ["e", "x"], ["s"], name=names[3]),
             helper.make_node("Neg", ["s"], ["y"], name=names[4])]
    graph = helper.make_graph(nodes, "../../graph", [helper.make_tensor_value_info("x", F, [2, 3])],
                              [helper.make_tensor_value_info("y", F, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("target", ["CPU", "Ascend"])
def test_every_file_a_hostile_model_makes_stays_in_the_chosen_directories(target, tmp_path):
    outside, chosen = tmp_path / "outside", tmp_path / "a" / "b" / "c"
    outside.mkdir()
    dump_dir, graphs_dir, prof_dir = chosen / "dump", chosen / "graphs", chosen / "prof"
    context.set_context(device_target=target, enable_graph_kernel=False, save_graphs=True,
                        save_graphs_path=str(graphs_dir), graph_kernel_flags="--dump_as_text",
                        enable_dump=True, dump_path=str(dump_dir), dump_mode="output")
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    prof = Profiler(output_path=str(prof_dir))
    got = gx.load(hostile_model(str(outside)))(Tensor(x)).asnumpy()
    prof.analyse(print_table=False)
    np.testing.assert_allclose(got, -(np.exp(x * x + x) - x), rtol=1e-5)
    written = written_files(tmp_path)
    assert written and all(any(inside(d, p) for d in (dump_dir, graphs_dir, prof_dir)) for p in written)
    assert len([f for f in written if f.endswith(".output.0.npy")]) == 5     # one per launch
    assert sorted(os.listdir(prof_dir / "profiler")) == ["kernel_builds.csv", "kernel_details.csv", "step_trace.csv", "trace.json"]
