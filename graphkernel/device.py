"""The emulated Ascend device: lower a compiled graph to numba kernels (kernels.lower) and write the
`kernel_graph_<id>.dot` dump. The compile's cache and core options become a kernels.DeviceConfig."""
from __future__ import annotations

import os

from ir.ops import placement
from kernels import DeviceConfig, kernel_graph_dot, kernels_to_build, lower
from kernels.cache import set_lock_timeout
from graphkernel.observation.progress import CompileProgress
from graphkernel.settings.flags import compile_mode


def device_config(opts, source_dir: str | None = None, eager: bool = False, collectives: bool = False):
    """The kernels.DeviceConfig of a compile's CompileOptions. A PYNATIVE one-op run builds its kernel
    at once (it has no later step to swap a kernel in before); so does, unless --compile_mode says
    otherwise, a deterministic compile and a graph of collectives (settings/flags.compile_mode)."""
    same_bits = bool(opts.deterministic) or collectives
    return DeviceConfig(core_num=opts.core_num, deterministic=opts.deterministic, cache_mode=opts.cache_mode,
                        cache_dir=opts.cache_dir, source_dir=source_dir, max_device_memory=opts.max_device_memory,
                        compile_mode="wait" if eager else compile_mode(opts.flags, same_bits))


def lower_for_device(graph, opts, graph_id, dumper, eager: bool):
    """The kernels.Program that runs `graph` on the emulated device (its buffers planned against the
    memory limit); writes the kernel graph dump and, with --dump_as_text, the kernel sources. On a
    terminal a long build shows its progress (graphkernel/observation/progress.py; not for a PYNATIVE one-op run)."""
    set_lock_timeout(opts.cache_lock_timeout)   # the bound of a wait for another process
    source_dir = None
    if dumper.directory is not None and opts.flags.dump_as_text:
        source_dir = os.path.join(dumper.directory, f"kernels_{graph_id}")
    with CompileProgress(0 if eager else kernels_to_build(graph), f"graph {graph_id} kernels") as progress:
        collectives = any(placement(node) == "comm" for node in graph.nodes)   # ranks keep equal bits
        program = lower(graph, device_config(opts, source_dir, eager, collectives), progress)
    if not eager:
        stem = f"kernel_graph_{graph_id}"
        dumper.write(stem, kernel_graph_dot(program, stem))
    return program
