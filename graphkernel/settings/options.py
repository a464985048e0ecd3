"""CompileOptions: everything a compile depends on, frozen and compared by value; and PassContext,
what the passes of one compile share besides: the fusion log they append their decisions to.

compiler.options_from_context() builds the options from the context, once per compile; the passes, the
compiler and the device read them, never the context: a compile does what its options say, whatever
the context holds while it runs (the dumps it writes, the kernel cache it uses included).
compile_graph opens one PassContext per compile (`with PassContext() as ctx:`), as TVM's PassContext
scopes a build; a pass finds it with `PassContext.current()`.
"""
from __future__ import annotations

import contextvars
from dataclasses import dataclass, field

from graphkernel.settings.dump_settings import DataDumpOptions
from graphkernel.settings.flags import GraphKernelFlags
from graphkernel.settings.jit_config import FusionSwitch


@dataclass
class FusionRecord:
    """One fusion considered: the candidates, the pass, the cost figures, the decision and why; an
    accepted one names the composite(s) holding what it fused, as the compiled graph names them."""
    stage: str
    candidates: tuple[str, ...]
    accepted: bool
    reason: str
    figures: dict = field(default_factory=dict)
    composites: tuple[str, ...] = ()
    earlier: tuple[str, ...] = ()      # names those composites had before a later pass renamed or merged them

    def __str__(self) -> str:
        figs = " ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                        for k, v in sorted(self.figures.items()))
        verdict = "fuse" if self.accepted else "refuse"
        into = f" -> {', '.join(self.composites)}" if self.composites else ""
        return f"[{self.stage}] {verdict} {' + '.join(self.candidates)}{into}: {self.reason}" + (
            f" ({figs})" if figs else "")


class FusionLog(list):
    """A list of FusionRecord, in the order the passes decided. `switch` is the FusionSwitch of the compile
    (the log file's first line: which switch decided)."""

    switch: FusionSwitch | None = None

    def add(self, stage, candidates, accepted, reason, **figures) -> FusionRecord:
        record = FusionRecord(stage, tuple(candidates), accepted, reason, figures)
        self.append(record)
        return record

    def follow(self, renamed: dict) -> None:
        """A pass renamed composites, or merged them into others (composites are numbered per graph):
        `renamed` maps an old name to the names of the composites holding its work now."""
        if not renamed:
            return
        for record in self:
            if record.composites:
                moved = tuple(old for old in record.composites if renamed.get(old, (old,)) != (old,))
                record.earlier = tuple(dict.fromkeys(record.earlier + moved))
                record.composites = tuple(dict.fromkeys(
                    new for old in record.composites for new in renamed.get(old, (old,))))


FUSION_STAGES = ("fuse_basic", "composite")   # stages that run only with enable_graph_kernel
# passes a flag opens below their opt_level
ENABLE_FLAGS = {"recompute": "enable_recompute_fusion", "parallel_fusion": "enable_parallel_fusion",
                "stitch_fusion": "enable_stitch_fusion", "low_precision": "enable_low_precision"}


@dataclass(frozen=True)
class CompileOptions:
    device_target: str = "Ascend"
    enable_graph_kernel: bool = False
    # which switch set enable_graph_kernel (set_context's, a jit_level, a JitConfig: graphkernel/settings/jit_config.py)
    fusion_switch: FusionSwitch | None = None
    flags: GraphKernelFlags = GraphKernelFlags()
    core_num: int = 32
    deterministic: int = 0
    precision_mode: str = "must_keep_origin_dtype"   # precision_mode_v2 already mapped onto it
    mixlist: object = None           # graphkernel.precision.Mixlist read from modify_mixlist, or None
    customize_dtypes: object = None  # graphkernel.precision.CustomizeDtypes read from customize_dtypes
    fusion_switch_off: frozenset = frozenset()   # pass names turned off by fusion_switch_file
    mix_compile_mode: bool = False   # host ops may compile next to device work (passes/partition.py)
    max_device_memory: int | None = None   # bytes one tensor, or one call's device buffers, may take
    # what the compile writes beside its result and where it keeps its kernels (no result depends on them)
    save_graphs: bool = False        # the stage dumps (not for a PYNATIVE one-op compile)
    save_graphs_path: str | None = "dot_out"
    data_dump: DataDumpOptions = DataDumpOptions()   # enable_dump, enable_dump_debug and their settings
    cache_mode: str = "enable"       # op_compiler_cache_mode: enable | disable | force
    cache_dir: str | None = None     # op_compiler_cache_dir (None: the user's cache directory)

    @property
    def opt_level(self) -> int:
        if not self.enable_graph_kernel:
            return 0
        return 2 if self.flags.opt_level is None else self.flags.opt_level

    @property
    def stitch_fusion(self) -> bool:
        """composite_fusion may stitch reduce-then-broadcast rows larger than the UB (an option of that
        pass, addressed by name like a pass: composite.stitch_fusion)."""
        return self.pass_enabled("composite.stitch_fusion", 3)

    def expand_enabled(self, op: str, default: bool = True) -> bool:
        """Whether the expander of `op` runs, per the *_expand_ops flags."""
        f = self.flags
        if f.enable_expand_ops_only is not None:
            return op in f.enable_expand_ops_only
        if op in f.disable_expand_ops:
            return False
        return default or op in f.enable_expand_ops

    def cluster_enabled(self, op: str, default: bool = True) -> bool:
        """Whether fusion may put `op` into a composite, per the *_cluster_ops flags."""
        f = self.flags
        if f.enable_cluster_ops_only is not None:
            return op in f.enable_cluster_ops_only
        if op in f.disable_cluster_ops:
            return False
        return default or op in f.enable_cluster_ops

    def pass_enabled(self, qualified: str, level: int) -> bool:
        """Whether pass `stage.name`, on by default from opt_level `level`, runs. fusion_switch_file and
        --disable_pass turn it off; --enable_pass or its --enable_*_fusion flag turn it on below its
        level; a fusion pass needs enable_graph_kernel."""
        stage, name = qualified.split(".", 1)
        if stage in FUSION_STAGES and not self.enable_graph_kernel:
            return False
        if qualified in self.flags.disable_pass or name in self.fusion_switch_off:
            return False
        if qualified in self.flags.enable_pass or getattr(self.flags, ENABLE_FLAGS.get(name, ""), False):
            return True
        return self.opt_level >= level


_current: contextvars.ContextVar = contextvars.ContextVar("graphkernel_pass_context", default=None)


class PassContext:
    """The state one compile's passes share: the fusion log. A pass run outside any context (a tool
    calling a pass by hand) logs into a fresh one that nobody reads."""

    def __init__(self):
        self.log = FusionLog()
        self._tokens: list = []

    def __enter__(self) -> "PassContext":
        self._tokens.append(_current.set(self))
        return self

    def __exit__(self, *exc) -> None:
        _current.reset(self._tokens.pop())

    @staticmethod
    def current() -> "PassContext":
        ctx = _current.get()
        return ctx if ctx is not None else PassContext()
