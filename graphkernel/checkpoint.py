"""Checkpoints: a Cell's Parameters saved to a file and loaded back, with MindSpore's API.

    import graphkernel as ms
    ms.save_checkpoint(net, "net.ckpt", append_dict={"epoch": 3})
    param_dict = ms.load_checkpoint("net.ckpt")                # name -> Parameter
    param_not_load, ckpt_not_load = ms.load_param_into_net(net, param_dict)

Format. A checkpoint is a safetensors file: an 8-byte little-endian header length, a JSON header giving
each entry's name, dtype, shape and byte offsets, then the raw little-endian bytes of the entries. The
header's `__metadata__` holds {"format": "graphkernel-checkpoint", "version": "1", "crc32": ...}; the
CRC-32 covers every entry's name, dtype, shape and bytes, so a flipped byte that still parses is caught.
Why safetensors: it is the open convention of current frameworks (MindSpore 2.x writes it too, with
`format="safetensors"`), any tool can read it without our code, reading it runs no code (pickle does) and
parses no protobuf, and the `safetensors` package validates the header against the file size, which
catches a truncated file. MindSpore's own safetensors checkpoints (metadata format "ms") load as well.

Writing is atomic: the bytes go to a temporary file beside the target, are fsynced, and `os.replace`
puts them in place; on any error the target is untouched and the temporary file removed. A process killed
while it writes (SIGKILL, a power cut) leaves its temporary file, named `.<target name>.<12 hex>.tmp` and
locked (flock) while the save runs: the next save or load of that target removes the ones no save holds,
and loading such a file by name is refused (it is no checkpoint). We write the safetensors layout
ourselves (an 8-byte header length, the JSON header, the raw bytes), straight into that file: no second
temporary file, no copy of the whole checkpoint in memory. Everything is
checked before a byte is written: the path (not a directory, its directory exists), the names (strings,
each once) and the dtypes (float16/32/64, int8/16/32/64, uint8, bool; a bfloat16 Parameter is cast to
float32 before saving).

Loading into a net is checked whole before any Parameter is written: a shape or dtype mismatch anywhere is
a CheckpointError naming every mismatched Parameter with both shapes or dtypes, and the net is left as it
was. Loading writes with `Parameter.set_data`, so each Parameter keeps its storage (compiled graphs keep
reading it).

strict_load, as MindSpore documents it (load_param_into_net): with False (the default), (1) a Parameter
the dict lacks by its own name is looked for under a prefix: a key `prefix + name` of the dict, the
prefix found from the first key that ends with "." + a missing name, then applied to every missing
Parameter, again while new prefixes turn up (a checkpoint of a wrapper, "network.dense.weight", loads
into the bare net's "dense.weight"); (2) a dtype of the same family is converted (float32 -> float16,
int64 -> int32). With True, names must match exactly and dtypes must be equal. Three decisions differ
from MindSpore's code: a prefix must end at a "." (MindSpore's plain endswith would let "xbias" load
"bias"), a key already loaded is not reused through a prefix, and a conversion that does not fit (a value
beyond float16's range, an int64 beyond int32) is a mismatch rather than inf or a wrapped integer.
ckpt_not_load leaves out keys loaded through a prefix (MindSpore's list keeps them).
"""
from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import os
import re
import secrets
import struct
import zlib

import numpy as np
import safetensors
from safetensors import safe_open

from ir.dtypes import DType, as_dtype
from ir.errors import DTypeError, GraphKernelError
from graphkernel.cell import Cell
from graphkernel.tensor import Parameter, Tensor

FORMAT = "graphkernel-checkpoint"
VERSION = "1"
MINDSPORE_FORMAT = "ms"   # the metadata of MindSpore 2.x's save_checkpoint(..., format="safetensors")

_SAFETENSORS_DTYPES = frozenset({"F16", "F32", "F64", "I8", "I16", "I32", "I64", "U8", "BOOL"})   # graphkernel's
_SUPPORTED = "float16, float32, float64, int8, int16, int32, int64, uint8, bool (bfloat16: cast it to float32)"
# the dtypes of _SAFETENSORS_DTYPES: safetensors' numpy side has no bfloat16
_CHECKPOINT_DTYPES = frozenset({DType.float16, DType.float32, DType.float64, DType.int8, DType.int16, DType.int32,
                                DType.int64, DType.uint8, DType.bool})


class CheckpointError(GraphKernelError, ValueError):
    """A checkpoint that cannot be written, read or loaded into a net; the message names the file or entry."""


class CheckpointTypeError(CheckpointError, TypeError):
    """An argument of the wrong kind: a save_obj that is no Cell or list, a dict value that is no Tensor."""


# -- saving ---------------------------------------------------------------------------------------

def save_checkpoint(save_obj, ckpt_file_name, append_dict=None) -> None:
    """Save `save_obj` to `ckpt_file_name` (the path as given: no suffix is added), atomically.

    save_obj is a Cell (each of its Parameters once, under its name), a list of Parameters, a list of
    {"name": str, "data": Tensor | Parameter | ndarray}, or a dict name -> Tensor. append_dict maps names
    to int, float, bool or Tensor values saved as entries too (an int as int64, a float as float32)."""
    path, shown = _target(ckpt_file_name)
    items = list(_save_items(save_obj, shown))
    if append_dict is not None:
        if not isinstance(append_dict, dict):
            raise CheckpointTypeError(f"{shown}: append_dict must be a dict, not "
                                      f"{type(append_dict).__name__}")
        items += append_dict.items()
    arrays = {}
    for name, value in items:
        if not isinstance(name, str) or not name or name == "__metadata__":
            raise CheckpointError(f"{shown}: entry name {name!r} is not a usable name (a non-empty str other "
                                  "than '__metadata__')")
        if name in arrays:
            raise CheckpointError(f"{shown}: entry {name!r} appears twice; each name is saved once")
        arrays[name] = _entry_array(name, value, shown)
    metadata = {"format": FORMAT, "version": VERSION, "crc32": str(_crc32(arrays))}
    _write_atomically(path, shown, arrays, metadata)


def _target(ckpt_file_name) -> tuple[str, str]:
    """The real path to write and the name to show in messages; refuses a directory or a missing parent."""
    try:
        shown = os.fsdecode(os.fspath(ckpt_file_name))
    except TypeError:
        raise CheckpointTypeError(f"ckpt_file_name must be a str or a path, not "
                                  f"{type(ckpt_file_name).__name__}") from None
    path = os.path.realpath(shown)
    if os.path.isdir(path):
        raise CheckpointError(f"{shown}: is a directory; give the checkpoint a file name")
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise CheckpointError(f"{shown}: the directory {parent} does not exist")
    return path, shown


def _save_items(save_obj, shown):
    """(name, value) pairs of save_obj in MindSpore's forms."""
    if isinstance(save_obj, Cell):
        for p in save_obj.get_parameters():   # each Parameter once, however many paths reach it
            yield p.name, p
    elif isinstance(save_obj, dict):
        yield from save_obj.items()
    elif isinstance(save_obj, (list, tuple)):
        for i, item in enumerate(save_obj):
            if isinstance(item, Parameter):
                yield item.name, item
            elif isinstance(item, dict) and set(item) == {"name", "data"}:
                yield item["name"], item["data"]
            else:
                raise CheckpointTypeError(f"{shown}: save_obj[{i}] is a {type(item).__name__}; a list holds "
                                          "Parameters or {'name': str, 'data': Tensor} dicts")
    else:
        raise CheckpointTypeError(f"{shown}: save_obj is a {type(save_obj).__name__}; save a Cell, a list of "
                                  "Parameters or of {'name', 'data'} dicts, or a dict name -> Tensor")


def _entry_array(name: str, value, shown: str) -> np.ndarray:
    """The C-contiguous, native-order array to save for one entry (a Parameter's own storage: no copy)."""
    if isinstance(value, (Tensor, np.ndarray, np.generic)):
        arr = np.asarray(value)
    elif isinstance(value, (bool, int, float)):
        try:
            arr = Tensor(value).asnumpy()   # MindSpore's Tensor(value): int64, float32, bool
        except OverflowError:
            raise CheckpointError(f"{shown}: entry {name!r} is {value}, beyond int64") from None
    else:
        raise CheckpointTypeError(f"{shown}: entry {name!r} is a {type(value).__name__}; save Tensors, "
                                  "Parameters, arrays or (in append_dict) int, float, bool")
    arr = np.asarray(arr, dtype=arr.dtype.newbyteorder("="), order="C")   # keeps 0-d
    try:
        if as_dtype(arr.dtype) not in _CHECKPOINT_DTYPES:
            raise DTypeError(str(arr.dtype))
    except DTypeError:
        raise CheckpointError(f"{shown}: entry {name!r} has dtype {arr.dtype}; a checkpoint holds "
                              f"{_SUPPORTED}") from None
    return arr


def _crc32(arrays: dict) -> int:
    """CRC-32 of every entry's name, dtype, shape and little-endian bytes, in name order."""
    crc = 0
    for name in sorted(arrays):
        arr = arrays[name]
        crc = zlib.crc32(f"{name}:{arr.dtype.name}:{list(arr.shape)};".encode(), crc)
        little = np.asarray(arr, dtype=arr.dtype.newbyteorder("<"), order="C")
        crc = zlib.crc32(little.reshape(-1).view(np.uint8), crc)
    return crc


def _temp_name(base: str) -> re.Pattern:
    """The names of the temporary files of saves of `base`: `.<base>.<12 hex digits>.tmp`."""
    return re.compile(re.escape(f".{base}.") + r"[0-9a-f]{12}\.tmp")


_ANY_TEMP = re.compile(r"\.(.+)\.[0-9a-f]{12}\.tmp")


def remove_stale_temps(path: str) -> list[str]:
    """Remove the temporary files that interrupted saves of `path` left beside it (those no running save
    holds locked); returns their paths. A file that cannot be removed is left as it is."""
    directory, base = os.path.split(path)
    pattern, removed = _temp_name(base), []
    for candidate in glob.glob(os.path.join(glob.escape(directory), glob.escape(f".{base}.") + "*.tmp")):
        if not pattern.fullmatch(os.path.basename(candidate)):
            continue
        try:
            fd = os.open(candidate, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:   # gone meanwhile, or a symlink: not ours
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # fails while its save is running
            if os.path.samestat(os.fstat(fd), os.stat(candidate, follow_symlinks=False)):
                os.unlink(candidate)
                removed.append(candidate)
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def _write_atomically(path: str, shown: str, arrays: dict, metadata: dict) -> None:
    """Write to a fresh temporary file beside `path` (locked while written), fsync it, os.replace it onto
    `path`; the temporary files of saves of `path` that were killed are removed first."""
    directory, base = os.path.split(path)
    remove_stale_temps(path)
    tmp = os.path.join(directory, f".{base}.{secrets.token_hex(6)}.tmp")
    fd = None
    try:
        # a name of our own (O_EXCL), with the permissions the umask gives a new file
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)   # a running save: remove_stale_temps leaves it alone
        with os.fdopen(os.dup(fd), "wb") as f:
            _write_safetensors(f, arrays, metadata)
        os.fsync(fd)
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise CheckpointError(f"{shown}: could not write the checkpoint ({e}); the file is "
                                  "unchanged") from e
        raise
    finally:
        if fd is not None:
            os.close(fd)
    _fsync_directory(directory)


_ST_DTYPES = {"float16": "F16", "float32": "F32", "float64": "F64", "int8": "I8", "int16": "I16",
              "int32": "I32", "int64": "I64", "uint8": "U8", "bool": "BOOL"}
_WRITE_BLOCK = 1 << 26   # bytes handed to one write call


def _write_safetensors(f, arrays: dict, metadata: dict) -> None:
    """The safetensors layout of `arrays` (name -> native-order C array) into the binary file `f`: the
    header's length (8 bytes, little-endian), the JSON header (padded with spaces to 8 bytes), then each
    entry's little-endian bytes in name order, written from the arrays themselves (no copy)."""
    header, offset = {"__metadata__": metadata}, 0
    for name in sorted(arrays):
        arr = arrays[name]
        header[name] = {"dtype": _ST_DTYPES[arr.dtype.name], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    f.write(struct.pack("<Q", len(text)) + text)
    for name in sorted(arrays):
        little = np.asarray(arrays[name], dtype=arrays[name].dtype.newbyteorder("<"), order="C")
        data = memoryview(little.reshape(-1).view(np.uint8))
        for start in range(0, len(data), _WRITE_BLOCK):
            f.write(data[start:start + _WRITE_BLOCK])


def _fsync_directory(directory: str) -> None:
    """Make the rename itself durable (POSIX; a system that cannot open a directory skips it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# -- loading --------------------------------------------------------------------------------------

def load_checkpoint(ckpt_file_name, net=None, strict_load=False, filter_prefix=None,
                    choice_func=None) -> dict:
    """The checkpoint's entries as a dict name -> Parameter (named by its key, requires_grad True), in name
    order; with `net`, loaded into it too (load_param_into_net with strict_load).

    filter_prefix (a str or a list of them) drops the names starting with one; choice_func(name) -> bool
    keeps the names it is True for."""
    path = _source(ckpt_file_name)
    prefixes = _prefixes(filter_prefix)
    if choice_func is not None and not callable(choice_func):
        raise CheckpointTypeError(f"choice_func must be callable, not {type(choice_func).__name__}")
    params = {}
    for name, arr in _read(path).items():
        if name.startswith(prefixes) or (choice_func is not None and not choice_func(name)):
            continue
        params[name] = Parameter(arr, name=name, requires_grad=True)
    if net is not None:
        load_param_into_net(net, params, strict_load)
    return params


def _source(ckpt_file_name) -> str:
    """The path of an existing file to read."""
    try:
        shown = os.fsdecode(os.fspath(ckpt_file_name))
    except TypeError:
        raise CheckpointTypeError(f"ckpt_file_name must be a str or a path, not "
                                  f"{type(ckpt_file_name).__name__}") from None
    temp = _ANY_TEMP.fullmatch(os.path.basename(shown))
    if temp:
        raise CheckpointError(f"{shown}: the temporary file of an unfinished save of {temp.group(1)}, not a "
                              "checkpoint")
    remove_stale_temps(os.path.realpath(shown))   # interrupted saves of this file
    if not os.path.exists(shown):
        raise CheckpointError(f"{shown}: no such checkpoint file")
    if not os.path.isfile(shown):
        raise CheckpointError(f"{shown}: is not a file")
    return shown


def _prefixes(filter_prefix) -> tuple[str, ...]:
    if filter_prefix is None:
        return ()
    prefixes = (filter_prefix,) if isinstance(filter_prefix, str) else filter_prefix
    if not isinstance(prefixes, (list, tuple)) or not all(isinstance(p, str) and p for p in prefixes):
        raise CheckpointTypeError(f"filter_prefix must be a non-empty str or a list of them, not "
                                  f"{filter_prefix!r}")
    return tuple(prefixes)


def _read(path: str) -> dict:
    """name -> array of a checkpoint file, its format, dtypes and checksum checked."""
    try:
        with safe_open(path, framework="numpy") as f:
            metadata = f.metadata() or {}
            _check_format(metadata, path)
            names = sorted(f.keys())
            for name in names:
                kind = f.get_slice(name).get_dtype()
                if kind not in _SAFETENSORS_DTYPES:
                    raise CheckpointError(f"{path}: entry {name!r} has dtype {kind}; graphkernel has "
                                          f"{_SUPPORTED}")
            arrays = {name: f.get_tensor(name) for name in names}
    except safetensors.SafetensorError as e:
        raise CheckpointError(f"{path}: not a readable checkpoint: truncated, corrupted or not a safetensors "
                              f"file ({e})") from None
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read the checkpoint ({e.strerror or e})") from None
    if "crc32" in metadata and metadata["crc32"] != str(_crc32(arrays)):
        raise CheckpointError(f"{path}: the checksum does not match the data; the file is corrupted")
    return arrays


def _check_format(metadata: dict, shown: str) -> None:
    kind = metadata.get("format")
    if kind == FORMAT:
        if metadata.get("version") != VERSION:
            raise CheckpointError(f"{shown}: a graphkernel checkpoint of version "
                                  f"{metadata.get('version')!r}; this graphkernel reads version {VERSION}")
    elif kind != MINDSPORE_FORMAT:
        raise CheckpointError(f"{shown}: a safetensors file but not a checkpoint (its metadata format is "
                              f"{kind!r}, not {FORMAT!r})")


# -- into a net -----------------------------------------------------------------------------------

def load_param_into_net(net, parameter_dict, strict_load=False) -> tuple[list, list]:
    """Load `parameter_dict` (name -> Parameter) into `net`'s Parameters, in place (set_data).

    Returns (param_not_load, ckpt_not_load): the net's Parameters the dict had nothing for, and the dict's
    keys nothing was loaded from. Everything is checked first; a mismatch is a CheckpointError and the
    net is unchanged. strict_load: see the module doc."""
    if not isinstance(net, Cell):
        raise CheckpointTypeError(f"load_param_into_net: net is a {type(net).__name__}, not a Cell")
    if not isinstance(parameter_dict, dict):
        raise CheckpointTypeError(f"load_param_into_net: parameter_dict is a "
                                  f"{type(parameter_dict).__name__}, not a dict name -> Parameter")
    for key, value in parameter_dict.items():
        if not isinstance(value, Tensor):
            raise CheckpointTypeError(f"load_param_into_net: parameter_dict[{key!r}] is a "
                                      f"{type(value).__name__}, not a Parameter")
    params = net.get_parameters()
    pairs = [(p, p.name) for p in params if p.name in parameter_dict]
    used = {key for _, key in pairs}
    missing = [p for p in params if p.name not in parameter_dict]
    if missing and not strict_load:
        pairs += _match_by_prefix(missing, parameter_dict, used)

    writes, problems = [], []
    for p, key in pairs:
        arr, problem = _converted(p, parameter_dict[key], key, strict_load)
        if problem:
            problems.append(problem)
        else:
            writes.append((p, arr))
    if problems:
        raise CheckpointError("load_param_into_net: " + "; ".join(problems) + ". Nothing was loaded")
    for p, arr in writes:
        p.set_data(arr)
    loaded = {id(p) for p, _ in pairs}
    param_not_load = [p.name for p in params if id(p) not in loaded]
    ckpt_not_load = [key for key in parameter_dict if key not in used]
    return param_not_load, ckpt_not_load


def _match_by_prefix(missing: list, parameter_dict: dict, used: set) -> list:
    """strict_load=False: (Parameter, key) for missing Parameters found as `prefix + name` in the dict.

    A prefix comes from the first unused key ending in "." + a missing name; it is applied to every missing
    Parameter; repeated while new prefixes turn up. `missing` and `used` are updated."""
    pairs, tried = [], set()
    while missing:
        prefix = next((key[:-len(p.name)] for p in missing for key in parameter_dict
                       if key not in used and key.endswith("." + p.name) and key[:-len(p.name)] not in tried),
                      None)
        if prefix is None:
            break
        tried.add(prefix)
        for p in list(missing):
            key = prefix + p.name
            if key in parameter_dict and key not in used:
                pairs.append((p, key))
                used.add(key)
                missing.remove(p)
    return pairs


def _converted(p: Parameter, value: Tensor, key: str, strict_load: bool):
    """(array to write into p, None), or (None, why not)."""
    arr = np.asarray(value)
    where = p.name if key == p.name else f"{p.name} (from {key!r})"
    if tuple(arr.shape) != tuple(p.shape):
        return None, f"{where}: shape {list(arr.shape)} in the checkpoint, {list(p.shape)} in the net"
    src, dst = value.dtype, p.dtype
    if src == dst:
        return arr, None
    same_family = (src.is_float and dst.is_float) or (src.is_int and dst.is_int)
    why = f"{where}: dtype {src.value} in the checkpoint, {dst.value} in the net"
    if strict_load or not same_family:
        return None, why + (" (strict_load=True converts no dtype)" if same_family else "")
    with np.errstate(over="ignore", invalid="ignore"):
        out = arr.astype(dst.np)
        fits = np.isfinite(out) | ~np.isfinite(arr) if dst.is_float else out.astype(src.np) == arr
    if not np.all(fits):
        return None, why + f" and a value does not fit in {dst.value}"
    return out, None
