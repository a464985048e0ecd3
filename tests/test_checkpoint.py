"""Checkpoints (graphkernel/checkpoint.py): save_checkpoint, load_checkpoint, load_param_into_net.

Round trips bit for bit; atomic writes; damaged files refused with the file's name; loading checked whole
before a Parameter is written; MindSpore's return lists, filters and strict_load rules."""
import errno
import json
import os
import struct

import numpy as np
import pytest
import safetensors
import safetensors.numpy

import graphkernel as ms
from graphkernel import checkpoint, nn, ops
from graphkernel.checkpoint import CheckpointError, CheckpointTypeError
from graphkernel.tensor import Parameter, Tensor


class Optimizer(nn.Cell):
    """An optimizer's state is Parameters of its Cell: one moment per trained Parameter."""

    def __init__(self, params):
        super().__init__()
        for i, p in enumerate(params):
            setattr(self, f"moment{i}", Parameter(np.zeros(p.shape, p.dtype.np), requires_grad=False))


class TrainNet(nn.Cell):
    """Two Dense layers (the second float16), an int32 step counter and the optimizer's state."""

    def __init__(self, out=3):
        super().__init__()
        self.net = nn.SequentialCell(nn.Dense(4, 8, activation="relu"), nn.Dense(8, out, dtype=ms.float16))
        self.step = Parameter(np.array([7, -3], np.int32), requires_grad=False)
        self.opt = Optimizer(self.net.trainable_params())

    def construct(self, x):
        return self.net[1](ops.cast(self.net[0](x), ms.float16))


def build(seed, out=3):
    ms.set_seed(seed)
    return TrainNet(out)


def snapshot(net) -> dict:
    return {p.name: p.asnumpy() for p in net.get_parameters()}


def assert_same_bits(got: dict, want: dict):
    assert list(got) == list(want)
    for name in want:
        a, b = np.asarray(got[name]), np.asarray(want[name])
        assert a.dtype == b.dtype and a.shape == b.shape, name
        assert a.tobytes() == b.tobytes(), name


def saved(tmp_path, obj=None, name="net.ckpt", **kwargs):
    path = tmp_path / name
    ms.save_checkpoint(build(0) if obj is None else obj, str(path), **kwargs)
    return path


# -- round trips ----------------------------------------------------------------------------------------

def test_round_trip_bit_for_bit(tmp_path):
    net = build(0)
    w = net.net[1].weight   # float16 specials survive: inf, -inf, nan, -0.0, the smallest subnormal
    special = w.asnumpy()
    special.flat[:5] = [np.inf, -np.inf, np.nan, -0.0, np.float16(2.0 ** -24)]
    w.set_data(special)
    net.opt.moment0.set_data(np.full((8, 4), 0.25, np.float32))
    path = saved(tmp_path, net)

    loaded = ms.load_checkpoint(path)
    assert sorted(loaded) == sorted(snapshot(net))
    assert {n: loaded[n].dtype for n in ("net.1.weight", "step", "net.0.weight")} == {
        "net.1.weight": ms.float16, "step": ms.int32, "net.0.weight": ms.float32}
    assert all(isinstance(p, Parameter) and p.name == n and p.requires_grad for n, p in loaded.items())
    assert_same_bits({n: loaded[n].asnumpy() for n in snapshot(net)}, snapshot(net))

    fresh = build(1)
    assert snapshot(fresh)["net.0.weight"].tobytes() != snapshot(net)["net.0.weight"].tobytes()
    assert ms.load_param_into_net(fresh, loaded) == ([], [])
    assert_same_bits(snapshot(fresh), snapshot(net))


def test_load_keeps_each_parameters_storage(tmp_path):
    path = saved(tmp_path)
    fresh = build(1)
    ptrs = {p.name: p.data_ptr() for p in fresh.get_parameters()}
    arrays = {p.name: p._array for p in fresh.get_parameters()}
    ms.load_checkpoint(path, net=fresh)
    assert {p.name: p.data_ptr() for p in fresh.get_parameters()} == ptrs
    assert all(p._array is arrays[p.name] for p in fresh.get_parameters())
    assert_same_bits(snapshot(fresh), snapshot(build(0)))


def test_shared_parameter_saved_once(tmp_path):
    class Shared(nn.Cell):
        def __init__(self):
            super().__init__()
            self.dense = nn.Dense(2, 2)
            self.w = self.dense.weight      # the same Parameter under a second path
    net = Shared()
    loaded = ms.load_checkpoint(saved(tmp_path, net))
    assert sorted(loaded) == ["dense.bias", "dense.weight"]


@pytest.mark.parametrize("mode", [ms.GRAPH_MODE, ms.PYNATIVE_MODE])
@pytest.mark.parametrize("target, fuse", [("CPU", False), ("Ascend", True)])
def test_loaded_net_computes_what_the_saved_one_did(tmp_path, mode, target, fuse):
    ms.set_context(mode=mode, device_target=target, enable_graph_kernel=fuse)
    x = Tensor(np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32))
    net = build(0)
    want = net(x).asnumpy()
    path = saved(tmp_path, net)

    fresh = build(1)
    before = fresh(x).asnumpy()             # compiled (GRAPH_MODE) before the load
    assert before.tobytes() != want.tobytes()
    traces = fresh.trace_count
    ms.load_checkpoint(path, net=fresh)
    got = fresh(x).asnumpy()
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    assert fresh.trace_count == traces      # the compiled graph reads the Parameters loaded in place


def test_append_dict_round_trip(tmp_path):
    scale = Tensor(np.array([1.5, -2.5], np.float16))
    path = saved(tmp_path, append_dict={"epoch": 3, "lr": 0.01, "done": True, "scale": scale})
    loaded = ms.load_checkpoint(path)
    want = {"epoch": np.array(3, np.int64), "lr": np.array(0.01, np.float32), "done": np.array(True),
            "scale": scale.asnumpy()}
    assert_same_bits({n: loaded[n].asnumpy() for n in want}, want)
    assert all(loaded[n].name == n and loaded[n].requires_grad for n in want)
    _, ckpt_not_load = ms.load_param_into_net(build(1), loaded)
    assert sorted(ckpt_not_load) == sorted(want)


def test_list_and_dict_forms(tmp_path):
    w = Parameter(np.arange(6, dtype=np.float32).reshape(2, 3), name="w")
    b = Parameter(np.array([1, 2], np.int64), name="b")
    forms = {
        "dicts": [{"name": "w", "data": w}, {"name": "t", "data": Tensor(np.array([True, False]))},
                  {"name": "a", "data": np.arange(4, dtype=np.float64).reshape(2, 2).T}],   # not contiguous
        "params": [w, b],
        "dict": {"w": w, "a": np.float16(3.0)},
    }
    want = {"dicts": {"a": np.arange(4.0).reshape(2, 2).T, "t": np.array([True, False]), "w": w.asnumpy()},
            "params": {"b": b.asnumpy(), "w": w.asnumpy()},
            "dict": {"a": np.array(3.0, np.float16), "w": w.asnumpy()}}
    for form, obj in forms.items():
        loaded = ms.load_checkpoint(saved(tmp_path, obj, f"{form}.ckpt"))
        assert_same_bits({n: p.asnumpy() for n, p in loaded.items()}, want[form])


def test_path_like_and_top_level_names(tmp_path):
    ms.save_checkpoint(build(0), tmp_path / "p.ckpt")
    assert sorted(ms.load_checkpoint(tmp_path / "p.ckpt")) == sorted(snapshot(build(0)))
    assert ms.load_param_into_net is checkpoint.load_param_into_net
    assert ms.CheckpointError is CheckpointError
    assert issubclass(CheckpointError, ms.GraphKernelError) and issubclass(CheckpointError, ValueError)


def test_the_file_is_safetensors_with_our_metadata(tmp_path):
    path = saved(tmp_path)
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    assert {k: v for k, v in header["__metadata__"].items() if k != "crc32"} == {
        "format": "graphkernel-checkpoint", "version": "1"}
    assert header["net.1.weight"]["dtype"] == "F16" and header["step"]["dtype"] == "I32"
    plain = safetensors.numpy.load_file(str(path))   # any safetensors reader reads it
    assert_same_bits({k: plain[k] for k in snapshot(build(0))}, snapshot(build(0)))


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_saved_file_has_the_umasks_permissions(tmp_path):
    mask = os.umask(0o022)
    try:
        path = saved(tmp_path)
    finally:
        os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o644


# -- writing: refusals and atomicity --------------------------------------------------------------------

@pytest.mark.parametrize("case", ["directory", "no parent", "duplicate", "append duplicate", "dtype", "name",
                                  "big int"])
def test_refused_before_writing(tmp_path, case):
    target, obj, kwargs = tmp_path / "a.ckpt", build(0), {}
    if case == "directory":
        target = tmp_path / "dir"
        target.mkdir()
    elif case == "no parent":
        target = tmp_path / "missing" / "a.ckpt"
    elif case == "duplicate":
        obj = [Parameter(np.zeros(2, np.float32), name="w"), Parameter(np.ones(2, np.float32), name="w")]
    elif case == "append duplicate":
        kwargs = {"append_dict": {"step": 1}}
    elif case == "dtype":
        obj = [{"name": "pixels", "data": np.zeros(3, np.uint16)}]
    elif case == "name":
        obj = [{"name": "__metadata__", "data": np.zeros(3, np.float32)}]
    elif case == "big int":
        kwargs = {"append_dict": {"seed": 2 ** 70}}
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(CheckpointError) as info:
        ms.save_checkpoint(obj, str(target), **kwargs)
    message = str(info.value)
    assert str(target) in message
    assert {"duplicate": "'w'", "append duplicate": "'step'", "dtype": "'pixels'",
            "name": "__metadata__", "big int": "'seed'"}.get(case, str(target)) in message
    assert sorted(os.listdir(tmp_path)) == before


@pytest.mark.parametrize("obj", ["net", 3, [1.0], [{"name": "w"}]])
def test_save_obj_of_the_wrong_kind(tmp_path, obj):
    with pytest.raises(CheckpointTypeError) as info:
        ms.save_checkpoint(obj, str(tmp_path / "a.ckpt"))
    assert isinstance(info.value, TypeError) and "save_obj" in str(info.value)


@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()])
@pytest.mark.parametrize("previous", [True, False])
def test_failed_write_leaves_the_target_untouched(tmp_path, monkeypatch, error, previous):
    path = tmp_path / "net.ckpt"
    if previous:
        ms.save_checkpoint(build(0), str(path))
    old = path.read_bytes() if previous else None
    written = []

    def half_then_fail(f, tensors, metadata):
        data = safetensors.numpy.save(tensors, metadata=metadata)
        f.write(data[: len(data) // 2])
        f.flush()
        written.append(os.readlink(f"/proc/self/fd/{f.fileno()}"))
        raise error

    monkeypatch.setattr(checkpoint, "_write_safetensors", half_then_fail)
    with pytest.raises(CheckpointError if isinstance(error, OSError) else KeyboardInterrupt) as info:
        ms.save_checkpoint(build(1), str(path))
    if isinstance(error, OSError):
        assert str(path) in str(info.value) and "No space left" in str(info.value)
    assert written and os.path.dirname(written[0]) == str(tmp_path)   # the temporary file sat beside it
    assert os.listdir(tmp_path) == (["net.ckpt"] if previous else [])
    if previous:
        assert path.read_bytes() == old


# -- reading: damaged and foreign files -----------------------------------------------------------------

def damaged(path, case):
    raw = path.read_bytes()
    if case.startswith("cut"):
        return raw[: -int(case[3:])] if case[3:] != "all" else raw[:6]
    if case == "garbage":
        return bytes(np.random.default_rng(0).integers(0, 256, 300, dtype=np.uint8))
    if case == "empty":
        return b""
    if case == "json":
        return json.dumps({"net.0.weight": [[1.0, 2.0]], "format": "graphkernel-checkpoint"}).encode()
    if case == "flipped":   # one bit of the last entry's data: the file still parses
        return raw[:-1] + bytes([raw[-1] ^ 0x01])
    if case == "plain safetensors":
        return safetensors.numpy.save({"w": np.zeros(2, np.float32)})
    if case == "newer version":
        return safetensors.numpy.save({"w": np.zeros(2, np.float32)},
                                      metadata={"format": "graphkernel-checkpoint", "version": "2"})
    if case == "uint16 entry":
        return safetensors.numpy.save({"w": np.zeros(2, np.uint16)},
                                      metadata={"format": "graphkernel-checkpoint", "version": "1"})
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["cut1", "cut100", "cutall", "garbage", "empty", "json", "flipped",
                                  "plain safetensors", "newer version", "uint16 entry"])
def test_damaged_or_foreign_file_is_a_clear_error(tmp_path, case):
    path = saved(tmp_path)
    path.write_bytes(damaged(path, case))
    net = build(1)
    before = snapshot(net)
    with pytest.raises(CheckpointError) as info:
        ms.load_checkpoint(str(path), net=net)
    e = info.value
    assert str(path) in str(e)
    assert not isinstance(e, safetensors.SafetensorError) and e.__cause__ is None
    assert e.__context__ is None or e.__suppress_context__   # no safetensors traceback above ours
    want = {"flipped": "checksum", "plain safetensors": "not a checkpoint", "newer version": "version '2'",
            "uint16 entry": "'w' has dtype U16"}.get(case, "truncated, corrupted or not a safetensors file")
    assert want in str(e)
    assert_same_bits(snapshot(net), before)


def test_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="no such checkpoint file") as info:
        ms.load_checkpoint(str(tmp_path / "nope.ckpt"))
    assert str(tmp_path / "nope.ckpt") in str(info.value)
    with pytest.raises(CheckpointError, match="is not a file"):
        ms.load_checkpoint(str(tmp_path))


def test_mindspores_safetensors_checkpoint_loads(tmp_path):
    # MindSpore 2.x's save_checkpoint(..., format="safetensors") writes metadata {"format": "ms"}, no crc
    path = tmp_path / "ms.safetensors"
    weight = np.arange(8, dtype=np.float32).reshape(2, 4)
    safetensors.numpy.save_file({"dense.weight": weight}, str(path), metadata={"format": "ms"})
    loaded = ms.load_checkpoint(str(path))
    assert_same_bits({"dense.weight": loaded["dense.weight"].asnumpy()}, {"dense.weight": weight})


# -- loading into a net ---------------------------------------------------------------------------------

def test_shape_mismatch_names_the_parameter_and_loads_nothing(tmp_path):
    path = saved(tmp_path)                   # its last layer has 3 outputs
    net = build(1, out=4)
    before = snapshot(net)
    ptrs = [p.data_ptr() for p in net.get_parameters()]
    with pytest.raises(CheckpointError) as info:
        ms.load_checkpoint(str(path), net=net)
    message = str(info.value)
    assert "net.1.weight: shape [3, 8] in the checkpoint, [4, 8] in the net" in message
    assert "net.1.bias: shape [3] in the checkpoint, [4] in the net" in message
    assert "Nothing was loaded" in message
    assert_same_bits(snapshot(net), before)   # net.0.* matched, yet were not written
    assert [p.data_ptr() for p in net.get_parameters()] == ptrs


def test_dtype_rules(tmp_path):
    class Single(nn.Cell):
        def __init__(self, dtype):
            super().__init__()
            self.dense = nn.Dense(3, 2, dtype=dtype)
    src = Single(ms.float32)
    params = ms.load_checkpoint(saved(tmp_path, src))

    strict = Single(ms.float16)
    before = snapshot(strict)
    with pytest.raises(CheckpointError, match=r"dense.weight: dtype float32 in the checkpoint, float16 in the "
                                              r"net \(strict_load=True"):
        ms.load_param_into_net(strict, params, strict_load=True)
    assert_same_bits(snapshot(strict), before)

    loose = Single(ms.float16)               # strict_load=False converts within floats, as MindSpore does
    assert ms.load_param_into_net(loose, params) == ([], [])
    assert_same_bits(snapshot(loose), {n: a.astype(np.float16) for n, a in snapshot(src).items()})

    too_big = dict(params, **{"dense.weight": Parameter(np.full((2, 3), 1e6, np.float32))})
    with pytest.raises(CheckpointError, match="dense.weight: dtype float32 .* does not fit in float16"):
        ms.load_param_into_net(Single(ms.float16), too_big)
    as_int = {n: Parameter(np.ones(p.shape, np.int32)) for n, p in params.items()}
    with pytest.raises(CheckpointError, match="dense.bias: dtype int32 in the checkpoint, float32 in the "):
        ms.load_param_into_net(Single(ms.float32), as_int)


def test_not_loaded_lists(tmp_path):
    class Extra(TrainNet):
        def __init__(self):
            super().__init__()
            self.temperature = Parameter(np.ones(1, np.float32))
    path = saved(tmp_path, append_dict={"epoch": 2, "lr": 0.5})
    net = Extra()
    param_not_load, ckpt_not_load = ms.load_param_into_net(net, ms.load_checkpoint(path))
    assert param_not_load == ["temperature"]
    assert ckpt_not_load == ["epoch", "lr"]


def test_filter_prefix_and_choice_func(tmp_path):
    path = saved(tmp_path)
    names = sorted(snapshot(build(0)))
    without_opt = [n for n in names if not n.startswith("opt.")]
    assert sorted(ms.load_checkpoint(path, filter_prefix="opt.")) == without_opt
    kept = ms.load_checkpoint(path, filter_prefix=["opt.", "net.0."])
    assert sorted(kept) == ["net.1.bias", "net.1.weight", "step"]
    assert sorted(ms.load_checkpoint(path, choice_func=lambda n: n.endswith("bias"))) == ["net.0.bias",
                                                                                           "net.1.bias"]
    net = build(1)
    before = snapshot(net)
    filtered = ms.load_checkpoint(path, filter_prefix="net.0.")
    param_not_load, ckpt_not_load = ms.load_param_into_net(net, filtered)
    assert param_not_load == ["net.0.weight", "net.0.bias"] and ckpt_not_load == []
    after = snapshot(net)
    assert after["net.0.weight"].tobytes() == before["net.0.weight"].tobytes()
    assert after["net.1.weight"].tobytes() == snapshot(build(0))["net.1.weight"].tobytes()
    for bad in ("", ["opt.", ""], 3):
        with pytest.raises(CheckpointTypeError, match="filter_prefix"):
            ms.load_checkpoint(path, filter_prefix=bad)


def test_prefix_of_a_wrapper_is_found_unless_strict(tmp_path):
    class Wrapper(nn.Cell):
        def __init__(self, net):
            super().__init__()
            self.network = net
    path = saved(tmp_path, Wrapper(build(0)))   # keys "network.net.0.weight", ...
    want = snapshot(build(0))

    strict = build(1)
    before = snapshot(strict)
    param_not_load, ckpt_not_load = ms.load_param_into_net(strict, ms.load_checkpoint(path), strict_load=True)
    assert param_not_load == list(want) and ckpt_not_load == ["network." + n for n in sorted(want)]
    assert_same_bits(snapshot(strict), before)

    loose = build(1)
    assert ms.load_param_into_net(loose, ms.load_checkpoint(path)) == ([], [])
    assert_same_bits(snapshot(loose), want)


def test_prefix_ends_at_a_dot_and_keys_are_not_reused():
    class Two(nn.Cell):
        def __init__(self):
            super().__init__()
            self.bias = Parameter(np.zeros(2, np.float32))
            self.dense = nn.Dense(2, 2)
    net = Two()
    before = snapshot(net)
    # "xbias" ends with "bias" but not at a "."; "dense.bias" loads dense.bias itself and is not reused
    params = {"xbias": Parameter(np.ones(2, np.float32)), "dense.bias": Parameter(np.ones(2, np.float32))}
    param_not_load, ckpt_not_load = ms.load_param_into_net(net, params)
    assert param_not_load == ["bias", "dense.weight"] and ckpt_not_load == ["xbias"]
    assert snapshot(net)["bias"].tobytes() == before["bias"].tobytes()
    assert np.array_equal(snapshot(net)["dense.bias"], np.ones(2, np.float32))


def test_load_param_into_net_argument_kinds():
    with pytest.raises(CheckpointTypeError, match="not a Cell"):
        ms.load_param_into_net({"a": 1}, {})
    with pytest.raises(CheckpointTypeError, match="not a dict"):
        ms.load_param_into_net(build(0), [])
    with pytest.raises(CheckpointTypeError, match=r"parameter_dict\['step'\] is a ndarray"):
        ms.load_param_into_net(build(0), {"step": np.zeros(2, np.int32)})
