"""MindSpore 2.x's compile-level switches: `jit_level`, `JitConfig`, the `jit` decorator's arguments, and
which of them turns graph-kernel fusion on.

Since MindSpore 2.3, graph-kernel fusion is what jit_level "O1" turns on. A compile asks, in order:

    1. enable_graph_kernel, when set_context set it: it decides (scripts set jit_level "O0" and then
       enable_graph_kernel=True, expecting fusion)
    2. the graph's own level: `@jit(jit_level=...)` given explicitly, the deprecated `@jit(jit_config=
       JitConfig(...))`, or `cell.set_jit_config(JitConfig(jit_level=...))`
    3. the session's level: `set_context(jit_level=...)` or `set_context(jit_config={"jit_level": ...})`,
       whichever was set last
    4. nothing set: fusion off

"O0" is fusion off, "O1" fusion on. "O2" (deprecated since MindSpore 2.9: whole-graph sink on GE) is
accepted where MindSpore 2.10 accepts it and compiles as "O1". The answer, with the switch that gave it,
is a `FusionSwitch`: part of the compile key and the first line of the fusion log.

Each spelling's check follows MindSpore 2.10's (accepted, warned or rejected there, the same here); one
difference: `set_context(jit_level=...)` is not checked by MindSpore at all, here a value other than
O0/O1/O2 is an error.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

from ir.errors import GraphKernelError

JIT_LEVELS = ("O0", "O1", "O2")
JIT_DECORATOR_LEVELS = ("O0", "O1")          # MindSpore 2.10's jit() refuses "O2"
CAPTURE_MODES = ("ast", "bytecode", "trace")
# jit(**options) MindSpore 2.10 knows (none changes a compile here); the deprecated ones it drops
JIT_OPTIONS = ("disable_format_transform", "exec_order", "ge_options", "infer_boost", "auto_offload")
DEPRECATED_JIT_OPTIONS = {"mode": "capture_mode", "input_signature": "dynamic", "hash_args": "",
                          "jit_config": "jit_level, fullgraph or options", "compile_once": ""}


class JitConfigError(GraphKernelError, ValueError):
    """A jit level, JitConfig argument or jit() argument MindSpore does not accept either."""


class JitConfigWarning(UserWarning):
    """A 2.x switch accepted but deprecated, or meaning nothing here (as MindSpore 2.10 warns)."""


def _warn(text: str) -> None:
    warnings.warn(text, JitConfigWarning, stacklevel=3)


def check_level(level, where: str, accepted=JIT_LEVELS) -> str:
    if level not in accepted:
        raise JitConfigError(f"{where}: jit_level {level!r} is not accepted; accepted: "
                             f"{', '.join(map(repr, accepted))}")
    return level


class JitConfig:
    """MindSpore's `JitConfig(jit_level="", exc_mode="auto", jit_syntax_level="", debug_level="RELEASE",
    infer_boost="off", **kwargs)`; give it to `cell.set_jit_config`. Only jit_level changes a compile here."""

    def __init__(self, jit_level="", exc_mode="auto", jit_syntax_level="", debug_level="RELEASE",
                 infer_boost="off", **kwargs):
        check_level(jit_level, "JitConfig", ("",) + JIT_LEVELS)
        for name, value, accepted in (("exc_mode", exc_mode, ("auto", "sink", "no_sink")),
                                      ("jit_syntax_level", jit_syntax_level, ("", "STRICT", "COMPATIBLE", "LAX")),
                                      ("debug_level", debug_level, ("RELEASE", "DEBUG")),
                                      ("infer_boost", infer_boost, ("", "on", "off"))):
            if value not in accepted:
                raise JitConfigError(f"JitConfig: {name} {value!r} is not accepted; accepted: "
                                     f"{', '.join(map(repr, accepted))}")
        if infer_boost == "on":
            _warn("JitConfig: infer_boost 'on' is deprecated since MindSpore 2.10 and has no effect here")
        self.jit_config_dict = dict(kwargs, jit_level=jit_level, exc_mode=exc_mode,
                                    jit_syntax_level=jit_syntax_level, debug_level=debug_level,
                                    infer_boost=infer_boost)
        if "backend" not in kwargs and jit_level:
            self.jit_config_dict["backend"] = "GE" if jit_level == "O2" else "ms_backend"

    @property
    def jit_level(self) -> str:
        return self.jit_config_dict["jit_level"]

    def __repr__(self) -> str:
        return f"JitConfig(jit_level={self.jit_level!r})"


def check_context_jit_config(value) -> dict:
    """set_context(jit_config={...}): keys jit_level and infer_boost, as MindSpore 2.10 checks them."""
    if not isinstance(value, dict):
        raise JitConfigError(f"jit_config must be a dict, got {type(value).__name__}")
    accepted = {"jit_level": JIT_LEVELS, "infer_boost": ("on", "off")}
    for key, v in value.items():
        if key not in accepted:
            raise JitConfigError(f"jit_config: key {key!r} is not accepted; accepted: jit_level, infer_boost")
        if v not in accepted[key]:
            raise JitConfigError(f"jit_config: {key} {v!r} is not accepted; accepted: "
                                 f"{', '.join(map(repr, accepted[key]))}")
    if "infer_boost" in value:
        _warn("set_context(jit_config=...): infer_boost is deprecated since MindSpore 2.10 and has no "
              "effect here")
        if value["infer_boost"] == "on" and value.get("jit_level") in ("O1", "O2"):
            raise JitConfigError("jit_config: infer_boost 'on' needs jit_level 'O0'")
    return dict(value)


def check_context_jit_level(value) -> str | None:
    if value is None:
        return None
    return check_level(value, "set_context(jit_level=...)")


def jit_decorator_level(capture_mode, jit_level, dynamic, fullgraph, backend, options: dict,
                        level_given: bool) -> tuple[str, str] | None:
    """Check `jit(...)`'s arguments as MindSpore 2.10 does; the (level, switch) the decorated graph
    compiles at, or None when the decorator sets no level (the session's decides)."""
    if capture_mode not in CAPTURE_MODES:
        raise JitConfigError(f"jit: capture_mode {capture_mode!r} is not accepted; accepted: "
                             f"{', '.join(map(repr, CAPTURE_MODES))}")
    check_level(jit_level, "jit", JIT_DECORATOR_LEVELS)
    if isinstance(dynamic, bool) or dynamic not in (0, 1):
        raise JitConfigError(f"jit: dynamic {dynamic!r} is not accepted; accepted: 0, 1")
    if not isinstance(fullgraph, bool):
        raise JitConfigError(f"jit: fullgraph {fullgraph!r} is not accepted; accepted: True, False")
    if not isinstance(backend, str):
        raise JitConfigError(f"jit: backend must be a string, got {type(backend).__name__}")
    decided = (jit_level, f"jit(jit_level={jit_level!r})") if level_given else None
    for name in sorted(options):
        if name in DEPRECATED_JIT_OPTIONS:
            use = DEPRECATED_JIT_OPTIONS[name]
            _warn(f"jit: the parameter {name!r} is deprecated since MindSpore 2.x" +
                  (f"; use {use}" if use else ""))
            if name == "jit_config" and not level_given:
                cfg = options[name]
                if not isinstance(cfg, JitConfig):
                    raise JitConfigError(f"jit: jit_config must be a JitConfig, got {type(cfg).__name__}")
                if cfg.jit_level:
                    decided = (cfg.jit_level, f"jit(jit_config=JitConfig(jit_level={cfg.jit_level!r}))")
        elif name in JIT_OPTIONS:
            if name == "infer_boost":
                _warn("jit: infer_boost is deprecated since MindSpore 2.10 and has no effect here")
        else:
            _warn(f"jit: the option {name!r} is not recognized (MindSpore 2.10 does not know it either); "
                  "it has no effect")
    return decided


@dataclass(frozen=True)
class FusionSwitch:
    """Whether a compile fuses, and the switch that decided (a set_context key, a jit argument, a
    JitConfig, or the default)."""
    enabled: bool
    decided_by: str

    def __str__(self) -> str:
        return f"graph-kernel fusion {'on' if self.enabled else 'off'}: {self.decided_by}"


def resolve(enable_graph_kernel: bool, explicit: bool, graph_level: tuple[str, str] | None,
            session_level: tuple[str, str] | None) -> FusionSwitch:
    """The precedence of the module docstring. Levels are (level, the switch that set it)."""
    if explicit:
        return FusionSwitch(enable_graph_kernel, f"set_context(enable_graph_kernel={enable_graph_kernel})")
    for chosen in (graph_level, session_level):
        if chosen is not None:
            level, switch = chosen
            return FusionSwitch(level in ("O1", "O2"), switch)
    return FusionSwitch(False, "default (no jit_level or enable_graph_kernel set)")
