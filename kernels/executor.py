"""The executor: a lowered graph as a fixed list of kernel calls over planned buffers (a Plan; a
Program runs one, or one per shape of its calls: kernels/plan.py).

    plan (once per Plan)
      storages   every value lives in one: a user input, a constant, a temporary or an output;
                 a Reshape shares its input's storage (a view: kernels see flat arrays)
      temps      packed into arena blocks by liveness: a block freed after a value's last use
                 serves a later value, so the set of blocks is the peak, not the sum
      limit      with a memory limit, every value a kernel writes and one call's buffers together
                 (the arena and the outputs) are checked against it before anything is allocated
      runner     generated Python: one line per kernel call with its arguments spelled out,
                 so a call costs the kernel launches and little else
    per call
      inputs     checked (shape, dtype), flattened without copying when contiguous and writable
                 (a read-only one is copied: the kernels are compiled for writable arrays); never
                 written, except the `assigned` ones (Parameters a training step updates in place:
                 kernels/lower.py), which must be writable and C-contiguous
      temps      one buffer set per thread (threading.local), allocated on a thread's first call
      outputs    each output buffer is reused once the array returned in it is gone (its reference
                 count is back to the executor's own), else a fresh one is allocated
"""
from __future__ import annotations

import bisect
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, replace

import numpy as np

from ir.dtypes import HALF_NP, STORED_NP
from ir.errors import GraphKernelError
from ir.graph import Graph, TensorType
from ir.limits import ResourceLimitError, check_node, over_limit_message
from ir.specialize import specialize_type
from ir.symbolic import evaluate_shape
from kernels.background import PendingLaunch
from kernels.threads import blas_single_threaded


GENERATED = ("elementwise", "rows", "split", "columns", "multi_tensor")   # KernelInfo.variant of generated kernels
# what generated kernels see of a buffer whose dtype numba lacks: a half float's uint16 bits, a sub-byte
# integer's bytes (kernels/emitters.py load and store convert them)
BITS = {**{d: "U16" for d in HALF_NP}, **{d: "U8" for d in STORED_NP}}
BITS_NP = {"U16": np.dtype(np.uint16), "U8": np.dtype(np.uint8)}


class InputMismatchError(GraphKernelError, TypeError):
    """An input whose shape or dtype is not what the program was compiled for."""


@dataclass(frozen=True)
class KernelInfo:
    """One launch: `name` is the node it computes (a composite's `Fused_<ops>_<n>`, a primitive's scope
    name, else its op); `kernel` the compiled kernel it runs, named by its structure and a hash
    (`Fused_Mul_Add_<hash>`, shared by every launch of that structure), "" when no kernel is generated."""
    name: str
    op_types: tuple[str, ...]
    block_dim: int
    inputs: tuple[TensorType, ...]
    outputs: tuple[TensorType, ...]
    target: str                 # "device", "host" or "copy"
    source: str | None = None
    variant: str = ""           # elementwise | rows | split | columns | numpy | reference | copy ...
    kernel: str = ""
    phase: str = "forward"      # forward | backward (ir.autodiff.phase_of)
    tile: int = 0               # a generated kernel's tile: elements, or rows (rows, columns variants)
    ub_bytes: int = 0           # the UB bytes one tile keeps live (kernels.lower.ub_bytes), 0: no tiles
    standin: bool = False       # an observed launch ran its stand-in: the kernel was still building


@dataclass
class Storage:
    kind: str                   # input | const | temp | output | size (a SizeValue, a const per plan)
    dtype: np.dtype
    size: int                   # elements
    index: int = 0              # input/output position
    array: np.ndarray | None = None   # const: the flat data
    shape: tuple = ()           # output: the shape handed to the user
    value: object = None        # kind "size": the symbolic size whose value it holds (kernels/plan.py)


@dataclass
class Step:
    info: KernelInfo
    fn: object                  # called as fn(*flat inputs, *flat outputs, *extra)
    ins: tuple[int, ...]        # storage ids
    outs: tuple[int, ...]
    extra: tuple = ()            # the scalars after the arrays: sizes, float constants, launch ints
    threads: int = 1            # threads the launch runs on (kernels/launch.py; fn is then a ParallelLaunch)
    values_in: tuple = ()       # IR values (for the kernel graph)
    values_out: tuple = ()
    in_place: tuple = ()        # (k, i): the kernel stores output k through input i, the same buffer,
                                # and takes no argument for it (kernels/in_place.py)
    scratch: tuple[int, ...] = ()   # temps the launch uses while it runs, passed after the outputs
                                    # (a split reduction's partials)
    blas: bool = False          # it calls BLAS (MatMul, convolutions: kernels/matmul.py's chunks)

    def call_outs(self) -> tuple[int, ...]:
        """The output storages passed to fn: those not stored through an input."""
        aliased = {k for k, _ in self.in_place}
        return tuple(s for k, s in enumerate(self.outs) if k not in aliased)


def _liveness(steps: list[Step], storages: list[Storage]) -> list[tuple[int, int, int]]:
    """(first step, last step, storage id) of every temp."""
    first, last = {}, {}
    for k, step in enumerate(steps):
        for s in step.outs:
            first.setdefault(s, k)
            last[s] = max(last.get(s, k), k)
        for s in step.ins:
            last[s] = k
        for s in step.scratch:
            first.setdefault(s, k)
            last[s] = k
    return sorted((first[s], last[s], s) for s in first if storages[s].kind == "temp")


def plan_arena(steps: list[Step], storages: list[Storage]) -> tuple[list[int], dict[int, tuple[int, int]]]:
    """Block sizes (bytes) and, per temp storage, (block, nbytes): blocks reused after last use.

    Best fit: a temp takes the smallest free block that holds it, else a new block of its size. The
    free blocks are kept sorted by size, so a temp costs a binary search (100,000 temps: no scan)."""
    blocks: list[int] = []
    free: list[tuple[int, int]] = []        # (size, block), sorted
    placed: dict[int, tuple[int, int]] = {}
    ending: dict[int, list[int]] = {}
    by_start: dict[int, list] = {}
    for first, last, s in _liveness(steps, storages):
        by_start.setdefault(first, []).append((last, s))
    for k in range(len(steps)):
        for last, s in by_start.get(k, []):
            nbytes = storages[s].size * storages[s].dtype.itemsize  # 0 for a zero-size tensor: an empty view
            i = bisect.bisect_left(free, (nbytes, -1))
            if i < len(free):
                b = free.pop(i)[1]
            else:
                b = len(blocks)
                blocks.append(nbytes)
            placed[s] = (b, nbytes)
            ending.setdefault(last, []).append(b)
        for b in ending.pop(k, []):
            bisect.insort(free, (blocks[b], b))
    return blocks, placed


def layout_arena(layout: dict[int, int], steps: list[Step], storages: list[Storage]) -> tuple[list[int], dict]:
    """plan_arena's result for a plan of symbolic sizes (kernels/plan.py) from another plan's `layout`
    (temp storage -> block): the same temps share a block (their liveness is the same at any size), each
    block as large as its largest temp here; a temp the layout does not hold (a plan's own scratch) takes
    a block of its own. One pass, no search: a new shape's plan stays cheap."""
    blocks = [0] * (max(layout.values(), default=-1) + 1)
    placed: dict[int, tuple[int, int]] = {}
    for s, b in layout.items():
        nbytes = storages[s].size * storages[s].dtype.itemsize
        placed[s] = (b, nbytes)
        if nbytes > blocks[b]:
            blocks[b] = nbytes
    for step in steps:
        for s in step.scratch:
            if s not in placed:
                placed[s] = (len(blocks), storages[s].size * storages[s].dtype.itemsize)
                blocks.append(placed[s][1])
    return blocks, placed


def _check_values(steps: list[Step], max_bytes: int | None) -> None:
    """ResourceLimitError naming the node whose result alone is larger than `max_bytes`."""
    if max_bytes is None:
        return
    for node in dict.fromkeys(v.node for step in steps for v in step.values_out):
        check_node(node, max_bytes)


def _check_storages(steps: list[Step], storages: list[Storage], max_bytes: int | None) -> None:
    """ResourceLimitError naming the launch whose result alone is larger than `max_bytes` (a plan's
    storages hold the values' sizes at its shape)."""
    if max_bytes is None:
        return
    for step in steps:
        for s in step.outs:
            nbytes = storages[s].size * storages[s].dtype.itemsize
            if nbytes > max_bytes:
                raise ResourceLimitError(over_limit_message(f"a result of {step.info.name}", nbytes, max_bytes))


def _info_at(info: KernelInfo, sizes: dict) -> KernelInfo:
    """A launch's KernelInfo with its types at `sizes` (ir/symbolic.py)."""
    return replace(info, inputs=tuple(specialize_type(t, sizes) for t in info.inputs),
                   outputs=tuple(specialize_type(t, sizes) for t in info.outputs))


class Conditional:
    """The launch of an If node (ir/ops/control.py): its condition picks one of two Programs, run on the
    If's captures; the other launches nothing. Called as a step: fn(cond, *captures, *outputs, obs=None),
    flat arrays. An observer sees the branch's own launches, numbered in the enclosing program's launch
    list (`Program.launch_list`: a branch's launches stand where the If stands, then's before else's)."""

    def __init__(self, then, else_, in_shapes):
        self.programs = (then, else_)
        then.nested = else_.nested = True   # their kernels arrive between the enclosing program's steps
        self.in_shapes = in_shapes
        self.offsets = (0, then.launch_count)   # of each branch's launches, from the If's position
        self.position = 0                       # the If's position in its program's launch list

    def __call__(self, cond, *arrays, obs=None):
        k = 0 if cond[0] else 1
        n = len(self.in_shapes)
        ins = [a.reshape(s) for a, s in zip(arrays[:n], self.in_shapes)]
        shifted = None if obs is None else _Shifted(obs, self.position + self.offsets[k])
        results = self.programs[k].run(ins, shifted)
        for r, out in zip(results, arrays[n:]):
            out[:] = r.reshape(-1)


class _Shifted:
    """An observer seeing a branch's launches: their indices moved to the enclosing program's list."""

    def __init__(self, obs, offset: int):
        self.obs, self.offset = obs, offset

    def kernel(self, index, info, inputs, outputs, seconds):
        self.obs.kernel(self.offset + index, info, inputs, outputs, seconds)


class Plan:
    """One set of sizes of a lowered graph: its launches (each step's callable and scalar arguments), every
    buffer's size, the arena the temporaries share and the generated runner. A static graph has one;
    a graph with symbolic sizes one per shape its calls have had (kernels/plan.py makes them)."""

    def __init__(self, graph: Graph, steps: list[Step], storages: list[Storage],
                 input_ids: list[int], output_ids: list[int], max_bytes: int | None = None,
                 assigned: list[int] = (), input_shapes: list[tuple] | None = None, sizes: dict | None = None,
                 shared: dict | None = None, layout: dict | None = None):
        self.graph = graph
        self.sizes = sizes          # the symbolic sizes' values this plan is for (kernels/plan.py), or None
        self._shared = shared       # a planner's compiled runners by source (plans of one program share them)
        self.steps = steps
        self.storages = storages
        self.positions = []         # of each step in the launch list (an If: where its branches' start)
        self.launch_list: list[Step] = []   # the launches: each step, an If's replaced by its branches'
        for step in steps:
            self.positions.append(len(self.launch_list))
            if isinstance(step.fn, Conditional):
                step.fn.position = len(self.launch_list)
                for program in step.fn.programs:
                    self.launch_list += program.launch_list
            else:
                self.launch_list.append(step)
        self.launch_count = len(self.launch_list)
        self._kernels = None
        shapes = input_shapes if input_shapes is not None else [tuple(v.shape) for v in graph.inputs]
        self.input_shapes = shapes
        self._inputs = [(np.dtype(storages[i].dtype), shape) for i, shape in zip(input_ids, shapes)]
        self._input_ids = input_ids
        self.assigned = tuple(assigned)   # input positions the call updates in place (Parameters)
        self._output_ids = output_ids
        if sizes is None:
            _check_values(steps, max_bytes)
        else:   # a plan of symbolic sizes: its buffers' sizes are the values' (the nodes show hints)
            _check_storages(steps, storages, max_bytes)
        self._blocks, self._placed = plan_arena(steps, storages) if layout is None else \
            layout_arena(layout, steps, storages)
        if max_bytes is not None and self.peak_bytes > max_bytes:
            raise ResourceLimitError(over_limit_message(
                f"one call of this program (temporaries' peak {self.temp_bytes} bytes + outputs "
                f"{self.peak_bytes - self.temp_bytes} bytes)", self.peak_bytes, max_bytes))
        # a program computing GEMMs holds BLAS at one thread while it runs: kernels/matmul.py splits the
        # large ones over the pool (kernels/threads.py), and BLAS's own threads would compete with it
        self.uses_blas = any(s.blas for s in self.launch_list)
        self._runner = self._make_runner(observed=False)
        self._observed_runner = None    # generated on the first observed call
        # step -> the PendingLaunch (or If with one in a branch) it runs while its kernel builds in the
        # background; its Program swaps the kernel in before a call, in every plan (kernels/plan.py swap)
        self._pending = {k: step.fn for k, step in enumerate(steps) if isinstance(step.fn, PendingLaunch) or
                         isinstance(step.fn, Conditional) and any(p.building for p in step.fn.programs)}

    # --- planning ------------------------------------------------------------------------
    @property
    def kernels(self) -> list[KernelInfo]:
        """One KernelInfo per launch; a plan of symbolic sizes shows the types at its sizes (made when
        first asked: a profiler, a data dump or the kernel table)."""
        if self._kernels is None:
            infos = [s.info for s in self.launch_list]
            self._kernels = infos if self.sizes is None else [_info_at(i, self.sizes) for i in infos]
        return self._kernels

    @property
    def temp_bytes(self) -> int:
        """Bytes of one thread's temporaries (the planned peak)."""
        return sum(self._blocks)

    @property
    def peak_bytes(self) -> int:
        """Device memory of one call: the temporaries' peak plus the outputs (fused vs unfused:
        fusion must not raise it)."""
        return self.temp_bytes + sum(self.storages[s].size * self.storages[s].dtype.itemsize
                                     for s in self._output_ids)

    def _make_runner(self, observed: bool):
        """Generated Python for one call: check and flatten the inputs, pick the output buffers,
        launch every kernel with its arguments spelled out, return the outputs. The plans of one
        program (kernels/plan.py) share it: the scalars of each launch come from the environment, and the
        code is made once per layout of their scratch buffers."""
        shared = self._shared
        if shared is not None:
            cached = shared.get((observed, tuple(step.scratch for step in self.steps)))
            if cached is not None:
                env = self._runner_env(observed)
                exec(cached[0], env)
                if not observed:
                    self.runner_source = cached[1]
                return env["run"]
        temps = sorted(self._placed)
        names = {}
        for k, s in enumerate(self._input_ids):
            names.setdefault(s, f"i{k}")
        for k, s in enumerate(self._output_ids):
            names.setdefault(s, f"o{k}")
        for s in temps:
            names[s] = f"t{s}"
        env: dict = {"perf_counter": time.perf_counter, "getrefcount": sys.getrefcount,
                     "ndarray": np.ndarray, "checked": self._checked_input, "new_output": self._new_output,
                     **BITS_NP}
        for s, st in enumerate(self.storages):
            if st.kind == "const":
                names[s] = f"c{s}"
                env[f"c{s}"] = st.array
        n_in = len(self._input_ids)
        lines = ["def run(arrays, state, obs):"]
        if n_in:
            lines.append(f"    {', '.join(f'a{k}' for k in range(n_in))}, = arrays")
        for k, (dtype, shape) in enumerate(self._inputs):
            env[f"D{k}"], env[f"S{k}"] = dtype, shape
            contiguous = " or not a{k}.flags.c_contiguous" if k in self.assigned else ""
            lines += [f"    if (a{k}.__class__ is not ndarray or a{k}.dtype is not D{k} or a{k}.shape != S{k}"
                      f" or not a{k}.flags.writeable{contiguous.format(k=k)}):",
                      f"        a{k} = checked({k}, a{k})",
                      f"    i{k} = a{k}.reshape(-1)"]
        if temps:
            lines.append(f"    {', '.join(names[s] for s in temps)}, = state.temps")
        lines.append("    outs = state.outs")
        for k, s in enumerate(self._output_ids):
            # the owner is referenced by our list, its flat view and getrefcount's argument: 3;
            # more means the caller still holds the array we returned in it
            lines += [f"    p{k} = outs[{k}]", f"    if getrefcount(p{k}[0]) > 3:",
                      f"        p{k} = outs[{k}] = new_output({s})", f"    o{k} = p{k}[1]"]
        indent = "    "
        launch_infos = self.kernels if observed else None
        for k, step in enumerate(self.steps):
            env[f"k{k}"] = step.fn
            if observed and not isinstance(step.fn, Conditional):
                env[f"info{k}"] = _observed_info(launch_infos[self.positions[k]], step.fn)
            passed = step.ins + step.call_outs() + step.scratch
            call_args = [names[s] for s in passed]
            if step.info.variant in GENERATED:  # generated kernels see a half float or a sub-byte integer as its bits (BITS)
                call_args = [f"{a}.view({BITS[self.storages[s].dtype]})" if self.storages[s].dtype in BITS else a
                             for a, s in zip(call_args, passed)]
            if shared is None:   # ints spelled out; a kernel's float constants (inf, nan too) by name
                for j, x in enumerate(step.extra):
                    if isinstance(x, float):
                        env[f"x{k}_{j}"] = x
                    call_args.append(f"x{k}_{j}" if isinstance(x, float) else repr(x))
            elif step.extra:   # plans of one program share the runner's code: the scalars come from env
                env[f"e{k}"] = tuple(step.extra)
                call_args.append(f"*e{k}")
            if isinstance(step.fn, Conditional):   # its branch's launches are observed one by one
                call_args.append("obs=obs")
            call = f"k{k}({', '.join(call_args)})"
            if observed and isinstance(step.fn, Conditional):
                lines.append(f"{indent}{call}")
            elif observed:
                ins, outs = ([names[s] for s in ids] for ids in (step.ins, step.outs))
                if set(step.ins) & set(step.outs):   # written in place (a Parameter update): show the old value
                    ins = [f"{n}.copy()" if s in step.outs else n for n, s in zip(ins, step.ins)]
                    lines.append(f"{indent}old_ = {_tuple(ins)}")
                    ins = [f"old_[{i}]" for i in range(len(ins))]
                lines += [f"{indent}t_ = perf_counter()", f"{indent}{call}",
                          f"{indent}s_ = perf_counter() - t_",
                          f"{indent}obs.kernel({self.positions[k]}, info{k}, {_tuple(ins)}, {_tuple(outs)}, s_)"]
            else:
                lines.append(f"{indent}{call}")
        lines.append(f"    return [{', '.join(f'p{k}[0]' for k in range(len(self._output_ids)))}]")
        source = "\n".join(lines) + "\n"
        code = compile(source, "<graphkernel:runner>", "exec")
        if shared is not None:
            shared[(observed, tuple(step.scratch for step in self.steps))] = (code, source)
        exec(code, env)
        if not observed:
            self.runner_source = source
        return env["run"]

    def _runner_env(self, observed: bool) -> dict:
        """The names a shared runner's code reads (_make_runner writes the same ones)."""
        env: dict = {"perf_counter": time.perf_counter, "getrefcount": sys.getrefcount,
                     "ndarray": np.ndarray, "checked": self._checked_input, "new_output": self._new_output,
                     **BITS_NP}
        for s, st in enumerate(self.storages):
            if st.kind == "const":
                env[f"c{s}"] = st.array
        for k, (dtype, shape) in enumerate(self._inputs):
            env[f"D{k}"], env[f"S{k}"] = dtype, shape
        launch_infos = self.kernels if observed else None
        for k, step in enumerate(self.steps):
            env[f"k{k}"] = step.fn
            if observed and not isinstance(step.fn, Conditional):
                env[f"info{k}"] = _observed_info(launch_infos[self.positions[k]], step.fn)
            if step.extra:
                env[f"e{k}"] = tuple(step.extra)
        return env

    # --- per thread state ----------------------------------------------------------------
    def new_state(self, st, raw: np.ndarray | None = None):
        """Fill `st` (a thread's state) with this plan's temporaries, views of one arena, `raw` when it
        is given (at least arena_bytes long: kernels/plan.py shares one between plans), and its outputs."""
        offsets, total = self.arena_offsets()
        raw = np.empty(total, np.uint8) if raw is None else raw
        st.temps = tuple(raw[offsets[b]:offsets[b] + nbytes].view(self.storages[s].dtype)
                         for s, (b, nbytes) in sorted(self._placed.items()))
        st.outs = [self._new_output(s) for s in self._output_ids]
        return st

    def arena_offsets(self) -> tuple[list[int], int]:
        """The byte offset of every arena block in one buffer (64-byte aligned), and its length."""
        offsets, total = [], 0
        for n in self._blocks:
            offsets.append(total)
            total += -(-n // 64) * 64
        return offsets, total

    def _new_output(self, s: int):
        st = self.storages[s]
        owner = np.empty(st.shape, st.dtype)
        return [owner, owner.reshape(-1)]

    # --- a call ----------------------------------------------------------------------------
    def _checked_input(self, k: int, a) -> np.ndarray:
        """The slow path of an input that is not exactly an ndarray of the compiled dtype/shape."""
        dtype, shape = self._inputs[k]
        a = np.asarray(a)
        if a.dtype != dtype or a.shape != shape:
            raise InputMismatchError(
                f"input {k}: got {a.dtype}{list(a.shape)}, the program was compiled for "
                f"{dtype}{list(shape)}")
        if k in self.assigned:   # updated in place: a copy would lose the update
            raise InputMismatchError(f"input {k} is updated in place by the call: it must be a writable, "
                                     f"C-contiguous {dtype} array (a Parameter's own storage)")
        # numba's kernels are compiled for writable arrays: a read-only input is copied (we never write it)
        return a.astype(dtype, copy=not a.flags.writeable)

    def run(self, arrays, state, observer=None) -> list[np.ndarray]:
        """One call on `arrays` with a thread's buffers `state` (new_state)."""
        runner = self._runner
        if observer is not None:
            if self._observed_runner is None:
                self._observed_runner = self._make_runner(observed=True)
            runner = self._observed_runner
        if self.uses_blas:
            with blas_single_threaded():
                return runner(arrays, state, observer)
        return runner(arrays, state, observer)

    def run_step(self, index: int, arrays) -> list[np.ndarray]:
        """Launch step `index` alone on `arrays`, one per value of its `values_in` (shaped as that
        value), and return its outputs as fresh arrays shaped as its `values_out`. The kernel sees
        copies: the caller's arrays are never written, and no buffer of `run` is touched. Kernel by
        kernel debugging (graphkernel.tools.debug.compare) feeds each step the reference's inputs."""
        if not 0 <= index < len(self.steps):
            raise IndexError(f"step {index}: the program has {len(self.steps)} steps")
        step = self.steps[index]
        if len(arrays) != len(step.values_in):
            raise InputMismatchError(f"step {index} ({step.info.name}) takes {len(step.values_in)} inputs, "
                                     f"got {len(arrays)}")
        def shape(v):   # a plan of symbolic sizes: the value's shape at its sizes
            return tuple(v.shape) if self.sizes is None else evaluate_shape(v.shape, self.sizes)
        flat = []
        for k, (a, v) in enumerate(zip(arrays, step.values_in)):
            a = np.asarray(a)
            if a.dtype != v.dtype.np or a.shape != shape(v):
                raise InputMismatchError(f"step {index} ({step.info.name}) input {k}: got "
                                         f"{a.dtype}{list(a.shape)}, the kernel takes {v.dtype.np}{list(shape(v))}")
            flat.append(np.array(a, order="C").reshape(-1))   # a private, writable, contiguous copy
        outs = [np.empty(shape(v), v.dtype.np) for v in step.values_out]
        aliased = dict(step.in_place)
        flat_ins = flat
        flat = flat + [o.reshape(-1) for k, o in enumerate(outs) if k not in aliased]
        flat += [np.empty(self.storages[s].size, self.storages[s].dtype) for s in step.scratch]
        if step.info.variant in GENERATED:  # generated kernels see a half float or a sub-byte integer as its bits (BITS)
            flat = [a.view(BITS_NP[BITS[a.dtype]]) if a.dtype in BITS else a for a in flat]
        with blas_single_threaded() if self.uses_blas else nullcontext():
            step.fn(*flat, *step.extra)
        for k, i in aliased.items():   # stored through the copy of its input
            outs[k].reshape(-1)[:] = flat_ins[i]
        return outs


def _observed_info(info: KernelInfo, fn) -> KernelInfo:
    """The KernelInfo an observer sees for a launch running `fn`: marked when it is a stand-in."""
    return replace(info, standin=True) if isinstance(fn, PendingLaunch) else info


def _tuple(names: list[str]) -> str:
    """A tuple display of the names: `()`, `(a,)`, `(a, b,)` (a launch may read no buffer: a constant
    broadcast, every scalar inlined)."""
    return "(" + "".join(f"{n}, " for n in names).rstrip(" ") + ")"
