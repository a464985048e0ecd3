"""set_context / get_context: the session's settings, each validated against one table.

A key is in the table with its default and a check that returns the canonical value (or raises with
what is accepted): nothing is silently ignored. Settings apply to graphs compiled after they are set (they are part of the compile cache key).
"""
from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass
from typing import Any, Callable

from ir.errors import GraphKernelError
from graphkernel import precision
from graphkernel.settings.config_file import file_version
from graphkernel.settings.dynamic_shapes import DynamicShapeSettingError, SessionShapes, session_shapes
from graphkernel.settings.dynamic_shapes import check_option as check_dynamic_option
from graphkernel.settings.dump_settings import DumpSettingError, check_dump_layer, check_dump_path, check_dump_step
from graphkernel.settings.flags import parse_flags
from graphkernel.settings.fusion_switch import read_fusion_switch
from graphkernel.settings.limits import ENV, MemorySettingError, machine_memory, parse_size
from graphkernel.passes.pipeline import check_flag_names
from graphkernel.settings.jit_config import check_context_jit_config, check_context_jit_level
from graphkernel.communication.parallel_context import (ParallelContextError, ParallelMode,  # noqa: F401  (context.<name>)
                                          get_auto_parallel_context, reset_auto_parallel_context,
                                          set_auto_parallel_context)

GRAPH_MODE = 0
PYNATIVE_MODE = 1


class ContextError(GraphKernelError, ValueError):
    """An unknown context key or a bad value for one."""


def _choice(*choices):
    def check(v):
        if v not in choices:
            raise ContextError(f"got {v!r}; accepted: {', '.join(map(repr, choices))}")
        return v
    return check


def _mode(v):
    if isinstance(v, bool) or v not in (GRAPH_MODE, PYNATIVE_MODE):
        raise ContextError(f"got {v!r}; accepted: context.GRAPH_MODE ({GRAPH_MODE}) or context.PYNATIVE_MODE "
                           f"({PYNATIVE_MODE})")
    return v


def _bool(v):
    if not isinstance(v, bool):
        raise ContextError(f"got {v!r}; accepted: True or False")
    return v


def _str(v):
    if not isinstance(v, str):
        raise ContextError(f"got {v!r}; accepted: a string")
    return v


def _deterministic(v):
    if isinstance(v, bool) or v not in (0, 1, "ON", "OFF"):
        raise ContextError(f"got {v!r}; accepted: 'ON' or 'OFF' (MindSpore 2.x), or 1 or 0")
    return v


def _path_or_none(v):
    if v is not None and not isinstance(v, (str, os.PathLike)):
        raise ContextError(f"got {v!r}; accepted: a file path or None")
    return None if v is None else os.fspath(v)


def _int_range(lo, hi):
    def check(v):
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise ContextError(f"got {v!r}; accepted: an integer in {lo}..{hi}")
        return v
    return check


def _positive_seconds(v):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < float("inf"):
        raise ContextError(f"got {v!r}; accepted: a positive number of seconds")
    return float(v)


def _flags(v):
    parse_flags(_str(v), read_env=False, check_names=check_flag_names)  # raises FlagError naming the flag
    return v


def _fusion_switch_file(v):
    v = _path_or_none(v)
    if v is not None:
        read_fusion_switch(v)  # raises naming the file and the key
    return v


def _precision_file(reader: str):
    def check(v):
        v = _path_or_none(v)
        if v is not None:
            getattr(precision, reader)(v)  # raises PrecisionConfigError naming the file and line or key
        return v
    return check


def _memory_size(v):
    if v is None:
        return None
    try:
        return parse_size(v)
    except MemorySettingError as e:
        raise ContextError(str(e)) from None


def _dump_setting(checker):
    def check(v):
        try:
            return checker(v)
        except DumpSettingError as e:   # names the bad part
            raise ContextError(str(e)) from None
    return check


def _dynamic_option(key: str):
    check = check_dynamic_option(key)

    def checked(v):
        try:
            return check(v)
        except DynamicShapeSettingError as e:
            raise ContextError(str(e)) from None
    return checked


@dataclass(frozen=True)
class Key:
    default: Any
    check: Callable[[Any], Any]
    compile: bool = True        # part of the compile cache key
    file: bool = False          # a path whose file's version is part of the compile cache key too


KEYS: dict[str, Key] = {
    "mode": Key(GRAPH_MODE, _mode, compile=False),
    "device_target": Key("Ascend", _choice("Ascend", "CPU")),
    "device_id": Key(0, _int_range(0, 4095), compile=False),   # one emulated device: any id names it
    # scope names: `Default/<attr>-<Class>/...` (True, MindSpore's default) or `Default/<attr>/...`
    "reserve_class_name_in_scope": Key(True, _bool),
    "enable_graph_kernel": Key(False, _bool),
    # MindSpore 2.x's switch of fusion (graphkernel/settings/jit_config.py: which one decides)
    "jit_level": Key(None, check_context_jit_level),
    "jit_config": Key(None, check_context_jit_config, compile=False),   # its jit_level goes to jit_level
    "graph_kernel_flags": Key("", _flags),
    "save_graphs": Key(False, _bool),
    "save_graphs_path": Key("dot_out", lambda v: _path_or_none(_str(v) if not isinstance(v, os.PathLike) else v)),
    "precision_mode": Key("must_keep_origin_dtype", _choice(*precision.MODES)),
    "precision_mode_v2": Key(None, _choice(None, *precision.V2_MODES)),
    "modify_mixlist": Key(None, _precision_file("read_mixlist"), file=True),
    "customize_dtypes": Key(None, _precision_file("read_customize_dtypes"), file=True),
    # "ON"/"OFF" (MindSpore 2.x) or 1/0 (seed 004's session option): bitwise-identical results for any
    # core_num and thread count; the device always gives them (kernels/matmul.py), the numpy reference
    # then runs its MatMuls on one BLAS thread
    "deterministic": Key(0, _deterministic),
    "mix_compile_mode": Key(False, _bool),
    "fusion_switch_file": Key(None, _fusion_switch_file, file=True),
    "enable_dump": Key(False, _bool),
    "dump_path": Key(None, _dump_setting(check_dump_path)),
    "dump_mode": Key("output", _choice("input", "output", "all")),
    "dump_step": Key(None, _dump_setting(check_dump_step)),
    "dump_layer": Key(None, _dump_setting(check_dump_layer)),
    "dump_data": Key("tensor", _choice("tensor", "stats")),
    "enable_dump_debug": Key(False, _bool),
    "dump_debug_mode": Key("all", _choice("aicore_overflow", "atomic_overflow", "all")),
    "op_compiler_cache_mode": Key("enable", _choice("enable", "disable", "force")),
    "op_compiler_cache_dir": Key(None, _path_or_none),
    # seconds a process waits for another holding a cache entry before building it in memory
    "op_compiler_cache_lock_timeout": Key(10.0, _positive_seconds, compile=False),
    # the compile cache (graphkernel/compile_cache.py); None: MS_COMPILER_CACHE_ENABLE / MS_COMPILER_CACHE_PATH
    "enable_compile_cache": Key(None, lambda v: None if v is None else _bool(v), compile=False),
    "compile_cache_path": Key(None, _path_or_none, compile=False),
    "core_num": Key(32, _int_range(1, 1024)),
    "max_device_memory": Key(None, _memory_size),   # bytes; None: GRAPHKERNEL_MAX_DEVICE_MEMORY or the machine's
    # training steps per launch of a compiled step (loop sinking: graphkernel.train.Model)
    "iterations_per_loop": Key(1, _int_range(1, 1 << 30), compile=False),
    # seed 004's dynamic shapes (graphkernel/settings/dynamic_shapes.py): gears, or ranges
    "input_shape": Key(None, _dynamic_option("input_shape")),
    "dynamic_dims": Key(None, _dynamic_option("dynamic_dims")),
    "dynamic_node_type": Key(None, _dynamic_option("dynamic_node_type")),
    "dynamic_input": Key(False, _bool),
    "dynamic_graph_execute_mode": Key(None, _dynamic_option("dynamic_graph_execute_mode")),
    "dynamic_inputs_shape_range": Key(None, _dynamic_option("dynamic_inputs_shape_range")),
}


def _check_together(settings: dict) -> None:
    """Rules between keys: loop sinking and mixed compute exclude each other (host ops between device
    subgraphs need the host every step)."""
    if settings["mix_compile_mode"] and settings["iterations_per_loop"] != 1:
        raise ContextError(f"iterations_per_loop={settings['iterations_per_loop']} with mix_compile_mode=True: "
                           "in mixed compute mode training loop sinking cannot be on, iterations_per_loop must "
                           "stay 1 (set one of them back)")


_settings: dict[str, Any] = {k: key.default for k, key in KEYS.items()}
# the fusion switches set_context was given: whether enable_graph_kernel was, and which spelling set
# jit_level last (graphkernel/settings/jit_config.py resolves them)
_switches: dict[str, Any] = {"enable_graph_kernel": False, "jit_level": None}


def _unknown(key: str) -> ContextError:
    near = difflib.get_close_matches(key, KEYS, n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return ContextError(f"unknown context key {key!r}{hint}; accepted keys: {', '.join(KEYS)}")


def set_context(**kwargs) -> None:
    """Validate every given key, then apply them all (a bad key changes nothing)."""
    staged = {}
    for name, value in kwargs.items():
        if name not in KEYS:
            raise _unknown(name)
        key = KEYS[name]
        try:
            canonical = key.check(value)
        except ContextError as e:
            raise ContextError(f"set_context({name}=...): {e}") from None
        except GraphKernelError as e:
            raise type(e)(f"set_context({name}=...): {e}") from None
        staged[name] = canonical
    _check_together({**_settings, **staged})
    for name in staged:   # in the order given: the last spelling of jit_level wins, as in MindSpore
        if name != "jit_level":
            _settings[name] = staged[name]
        if name == "jit_config" and "jit_level" in staged[name]:
            _settings["jit_level"] = staged[name]["jit_level"]
            _switches["jit_level"] = f"set_context(jit_config={{'jit_level': {_settings['jit_level']!r}}})"
        elif name == "jit_level":
            _settings["jit_level"] = staged[name]
            _switches["jit_level"] = None if staged[name] is None else f"set_context(jit_level={staged[name]!r})"
        if name == "enable_graph_kernel":
            _switches["enable_graph_kernel"] = True
    _compile_key_cache.clear()


def set_device(device_target: str, device_id: int | None = None) -> None:
    """MindSpore 2.10's `set_device`: the same as set_context(device_target=...). `device_id` (one
    emulated device here) must be a non-negative int or None."""
    if device_id is not None and (isinstance(device_id, bool) or not isinstance(device_id, int) or device_id < 0):
        raise ContextError(f"set_device: device_id {device_id!r} is not accepted; accepted: an int >= 0 or None")
    set_context(device_target=device_target)


def set_deterministic(deterministic: bool) -> None:
    """MindSpore 2.x's `set_deterministic`: the same as set_context(deterministic="ON" or "OFF"). As in
    MindSpore 2.10 it takes a bool only; unlike it, it may be called again (tests flip it)."""
    if not isinstance(deterministic, bool):
        raise ContextError(f"set_deterministic: the parameter 'deterministic' must be a bool, got "
                           f"{type(deterministic).__name__}")
    set_context(deterministic="ON" if deterministic else "OFF")


def session_jit_level() -> tuple[str, str] | None:
    """(jit_level, the set_context spelling that set it), or None when none did."""
    level = _settings["jit_level"]
    return None if level is None else (level, _switches["jit_level"])


def enable_graph_kernel_set() -> bool:
    """Whether set_context was given enable_graph_kernel (then it decides whether fusion runs)."""
    return _switches["enable_graph_kernel"]


def get_context(key: str):
    if key not in KEYS:
        raise _unknown(key)
    return _settings[key]


def reset_context() -> None:
    """Every key back to its default (for tests)."""
    _settings.update({k: key.default for k, key in KEYS.items()})
    _switches.update(enable_graph_kernel=False, jit_level=None)
    reset_auto_parallel_context()
    _compile_key_cache.clear()


_compile_key_cache: dict = {}
_compile_key_ids: dict = {}


def compile_settings() -> tuple:
    """The settings a compile depends on, as a hashable tuple (part of the compile cache key). A
    configuration file counts with its version as of this call, MS_DEV_GRAPH_KERNEL_FLAGS with its
    value: after editing a file or the variable, call set_context again and Cells compiled before
    compile anew."""
    settings = tuple((k, _settings[k], file_version(_settings[k]) if key.file and _settings[k] else None)
                     for k, key in KEYS.items() if key.compile)
    return settings + (("fusion switches", tuple(sorted(_switches.items()))),
                       ("MS_DEV_GRAPH_KERNEL_FLAGS", os.environ.get("MS_DEV_GRAPH_KERNEL_FLAGS", "")),)


def compile_settings_id() -> int:
    """A small int standing for compile_settings(): equal settings, equal id (cheap on the call path)."""
    cached = _compile_key_cache.get("id")
    if cached is None:
        cached = _compile_key_ids.setdefault(compile_settings(), len(_compile_key_ids))
        _compile_key_cache["id"] = cached
    return cached


def describe() -> str:
    """The current settings as JSON (for `graphkernel demo` and bug reports)."""
    return json.dumps({k: _settings[k] for k in KEYS}, indent=1, default=str)


_graph_count = 0


def next_graph_id() -> int:
    """The id of the next compiled graph (0, 1, ...), as MindSpore numbers its dumps."""
    global _graph_count
    _graph_count += 1
    return _graph_count - 1


def reset_graph_id() -> None:
    """Restart graph numbering at 0 (for tests)."""
    global _graph_count
    _graph_count = 0


def dynamic_shapes_set() -> bool:
    """Whether any of seed 004's dynamic-shape options is set (cheap: on a call's path)."""
    cached = _compile_key_cache.get("dynamic set")
    if cached is None:
        cached = _compile_key_cache["dynamic set"] = any(_settings[k] not in (None, False) for k in _DYNAMIC_KEYS)
    return cached


_DYNAMIC_KEYS = ("input_shape", "dynamic_dims", "dynamic_node_type", "dynamic_input", "dynamic_graph_execute_mode",
                 "dynamic_inputs_shape_range")


def dynamic_shapes() -> SessionShapes | None:
    """The dynamic shapes seed 004's options declare (gears or ranges), None when none is set; an
    inconsistency between them is a DynamicShapeSettingError naming the option."""
    if "dynamic shapes" not in _compile_key_cache:
        _compile_key_cache["dynamic shapes"] = session_shapes(_settings)
    return _compile_key_cache["dynamic shapes"]


def max_device_memory() -> int | None:
    """The limit in bytes now: the context key, else the environment variable, else the machine's."""
    setting = get_context("max_device_memory")
    if setting is not None:
        return setting
    env = os.environ.get(ENV)
    if env:
        try:
            return parse_size(env)
        except MemorySettingError as e:
            raise MemorySettingError(f"environment variable {ENV}: {e}") from None
    return machine_memory()
