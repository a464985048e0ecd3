"""CompileOptions: everything a compile depends on, frozen and compared by value.

compiler.options_from_context() builds the options from the context, once per compile; the passes, the
compiler and the device read them, never the context: a compile does what its options say, whatever
the context holds while it runs (the dumps it writes, the kernel cache it uses included). What the
passes of one compile share besides, the fusion log, is in graphkernel/passes/pass_context.py.
"""
from __future__ import annotations

from dataclasses import dataclass

from graphkernel.settings.dump_settings import DataDumpOptions
from graphkernel.settings.flags import GraphKernelFlags
from graphkernel.settings.jit_config import FusionSwitch


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
    # what the compile writes beside its result and where it keeps its kernels and graphs (no result depends on them)
    save_graphs: bool = False        # the stage dumps (not for a PYNATIVE one-op compile)
    save_graphs_path: str | None = "dot_out"
    data_dump: DataDumpOptions = DataDumpOptions()   # enable_dump, enable_dump_debug and their settings
    cache_mode: str = "enable"       # op_compiler_cache_mode: enable | disable | force
    cache_dir: str | None = None     # op_compiler_cache_dir (None: the user's cache directory)
    cache_lock_timeout: float = 10.0   # op_compiler_cache_lock_timeout: seconds to wait for another process
    compile_cache_dir: str | None = None   # where compiled graphs are kept (graphkernel/compile_cache.py), None: off

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
        """Whether the expander of composite op `op` runs, per the *_expand_ops flags, then the
        *_cluster_ops flags naming it. MindSpore clusters a composite op it did not expand as one op of a
        fused kernel; here a composite op joins fused kernels through its expansion, so naming it in
        --enable_cluster_ops (or --enable_cluster_ops_only) expands it (BatchNorm too), and naming it in
        --disable_cluster_ops keeps it unexpanded, one kernel of its own, out of every fused kernel. An
        expand flag naming it as well wins (settings/flags.py warns)."""
        f = self.flags
        if f.enable_expand_ops_only is not None:
            return op in f.enable_expand_ops_only
        if op in f.disable_expand_ops:
            return False
        if op in f.enable_expand_ops:
            return True
        if op in f.disable_cluster_ops:
            return False
        if op in f.enable_cluster_ops or (f.enable_cluster_ops_only is not None and op in f.enable_cluster_ops_only):
            return True
        return default

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
