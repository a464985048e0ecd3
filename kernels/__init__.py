"""Lowering to numba for the emulated Ascend AI Core: codegen, kernel cache, executor.

    from kernels import DeviceConfig, lower
    program = lower(graph, DeviceConfig(core_num=32))   # graph: ir.Graph after the pass pipeline
    outs = program.run([x])                              # numpy arrays in, numpy arrays out
    program.run_step(k, arrays)                          # step k alone, on copies of its inputs
    program.kernels                                      # KernelInfo per launch
    kernel_graph_dot(program, "kernel_graph_0")          # the kernel graph dump
"""
from kernels.cache import STATS as CACHE_STATS, CacheWarning
from kernels.executor import InputMismatchError, KernelInfo
from kernels.plan import Program
from kernels.kernel_graph import kernel_graph_dot
from kernels.lower import DeviceConfig, KernelBuildWarning, kernels_to_build, lower

__all__ = ["CACHE_STATS", "CacheWarning", "DeviceConfig", "InputMismatchError", "KernelBuildWarning",
           "KernelInfo", "Program", "kernel_graph_dot", "kernels_to_build", "lower"]
