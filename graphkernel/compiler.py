"""compile_graph: traced IR -> pipeline -> an executable CompiledGraph.

    CompiledGraph
      graph_id      the number of this compile in the process (dump file names use it)
      stages        the IR at the end of each stage ("validate", "expand", ..., "composite")
      graph         the final IR
      kernels       one entry per kernel launch: name (a composite's Fused_<ops>_<n>), op types,
                    block_dim, types, target, kernel (the compiled kernel it runs)
      dump_files    what save_graphs wrote
      log           the fusion log (every candidate, its figures, the decision and the reason)

device_target "CPU" runs the final IR on the numpy reference (ir.interpret; composites are interpreted
through their subgraphs). "Ascend" lowers it to numba kernels (kernels.lower).

A compile reads its CompileOptions and nothing else: `options_from_context` is the one place that reads
the context's settings (fusion, flags, precision, dumps, data dump, kernel cache) and freezes them.
"""
from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from ir.autodiff import phase_of, update_nodes
from ir.errors import GraphKernelError
from ir.errors import IRError, ShapeError
from ir.graph import Graph, TensorType
from ir.symbolic import Assumptions, Dim, evaluate_shape
from ir.specialize import bind, is_dynamic, specialize, symbols_of
from ir.verify import verify
from ir.interpret import interpret
from ir.limits import check_graph, check_reference_peak
from ir.ops import assigned_inputs, branches, placement
from kernels.commit import CommitPoint, commit_point
from kernels.threads import blas_single_threaded
from graphkernel import compile_cache, context
from graphkernel.context import max_device_memory
from graphkernel.observation.compile_record import compile_record, dumps as record_text, record_stem
from graphkernel.observation.datadump import DataDump, DumpError
from graphkernel.device import lower_for_device
from graphkernel.observation.dump import StageDumper
from graphkernel.settings.dump_settings import DataDumpOptions, parse_steps
from graphkernel.settings.flags import parse_flags
from graphkernel.settings.interrupts import HELD, step_committed
from graphkernel.settings.fusion_switch import read_fusion_switch
from graphkernel.settings.jit_config import resolve as resolve_fusion
from graphkernel.observation.launches import NOT_LAUNCHED, GraphObservation, observe_graph, run_observed
from graphkernel.observation.profiler import active_profiler
from graphkernel.settings.options import CompileOptions
from graphkernel.passes.pass_context import FusionLog, PassContext
from graphkernel.observation.overflow import OverflowCheck
from graphkernel.passes.pipeline import STAGE_DUMPS, check_flag_names, run_pipeline
from graphkernel.observation.report import write_page, write_report
from graphkernel.precision import effective_mode, read_customize_dtypes, read_mixlist, warn_unused_files
from graphkernel.tracing.tape import active_tape
from graphkernel.tensor import Tensor


class InputError(GraphKernelError, TypeError):
    """Inputs that do not match the compiled signature."""


SPECIALIZED_CACHE = 16   # graphs with symbolic sizes: the reference's specializations kept per compile


def fits(shape, type_: TensorType) -> bool:
    """Whether an array of `shape` can be a value of `type_` (a symbolic size takes any size >= 1)."""
    return len(shape) == type_.rank and all(
        n == d if not isinstance(d, Dim) else n >= 1 for n, d in zip(shape, type_.shape))


@dataclass(frozen=True)
class KernelSummary:
    """A launch on the CPU target (the Ascend target lists kernels.KernelInfo, with the same fields):
    `name` the node it computes (a composite's `Fused_<ops>_<n>`, a primitive's scope name), `kernel`
    the compiled kernel it runs ("" here: the numpy reference runs it)."""
    name: str
    op_types: tuple[str, ...]
    block_dim: int | None
    inputs: tuple[TensorType, ...]
    outputs: tuple[TensorType, ...]
    target: str  # "device", "host" or "copy" (a host<->device copy)
    kernel: str = ""
    phase: str = "forward"   # forward | backward: whether it computes any backward node (ir.autodiff)


def options_from_context(graph_level: tuple[str, str] | None = None) -> CompileOptions:
    """The options of a compile now: the one place a compile reads the context. `graph_level` is the
    (jit_level, switch) of the graph itself (a jit decorator's, a Cell's JitConfig), which comes
    before the session's (graphkernel/settings/jit_config.py)."""
    get = context.get_context
    switch, mixlist, dtypes = get("fusion_switch_file"), get("modify_mixlist"), get("customize_dtypes")
    mixlist = read_mixlist(mixlist) if mixlist else None
    dtypes = read_customize_dtypes(dtypes) if dtypes else None
    mode = effective_mode(get("precision_mode"), get("precision_mode_v2"))
    warn_unused_files(mode, mixlist, dtypes)
    fusion = resolve_fusion(get("enable_graph_kernel"), context.enable_graph_kernel_set(), graph_level,
                            context.session_jit_level())
    step = get("dump_step")
    return CompileOptions(
        device_target=get("device_target"),
        enable_graph_kernel=fusion.enabled,
        fusion_switch=fusion,
        flags=parse_flags(get("graph_kernel_flags"), check_names=check_flag_names),
        core_num=get("core_num"),
        deterministic=int(get("deterministic") in (1, "ON")),
        precision_mode=mode,
        mixlist=mixlist,
        customize_dtypes=dtypes,
        fusion_switch_off=read_fusion_switch(switch) if switch else frozenset(),
        mix_compile_mode=get("mix_compile_mode"),
        max_device_memory=max_device_memory(),
        save_graphs=get("save_graphs"),
        save_graphs_path=get("save_graphs_path"),
        data_dump=DataDumpOptions(get("enable_dump"), get("enable_dump_debug"), get("dump_path"), get("dump_mode"),
                                  None if step is None else parse_steps(step), get("dump_layer"), get("dump_data"),
                                  get("dump_debug_mode")),
        cache_mode=get("op_compiler_cache_mode"),
        cache_dir=get("op_compiler_cache_dir"),
        cache_lock_timeout=get("op_compiler_cache_lock_timeout"),
        compile_cache_dir=compile_cache.cache_dir(get("enable_compile_cache"), get("compile_cache_path")),
    )


def unflatten(tree, leaves: list):
    """construct's result rebuilt from the graph outputs: `tree` nests tuples and lists (Cell._trace);
    ("dict", [(key, tree), ...]) a dict, ("constant", value) a constant construct returned."""
    it = iter(leaves)

    def build(node):
        if node is None:
            return next(it)
        kind, items = node
        if kind == "constant":   # a constant construct returned (None, a string, a dtype, ...)
            return items
        if kind == "dict":
            return {k: build(i) for k, i in items}
        return kind(build(i) for i in items)

    return build(tree)


def summarize_kernels(graph: Graph, updates_only: frozenset | None = None) -> list[KernelSummary]:
    """The launches of `graph` on the reference: one per top-level node that computes; an If's are its
    branches' (then's, then else's: a call runs one of them)."""
    out = []
    updates_only = update_nodes(graph) if updates_only is None else updates_only
    for node in graph.nodes:
        if node.op in NOT_LAUNCHED:
            continue
        if branches(node):
            out += [k for g in branches(node) for k in summarize_kernels(g, frozenset())]
            continue
        ops = tuple(n.op for n in node.subgraph.nodes if n.op != "Const") if node.subgraph else (node.op,)
        out.append(KernelSummary(node.name or node.op, ops, None, tuple(v.type for v in node.inputs),
                                 node.types, placement(node), phase=phase_of(node, updates_only)))
    return out


# Calls of graphs that update Parameters run one at a time (any two may share a Parameter, the dropout
# generator's offset at least): two threads stepping a cell give the steps run one after the other.
_UPDATE_LOCK = threading.Lock()


@dataclass
class CompiledGraph:
    graph_id: int | None
    options: CompileOptions
    stages: dict[str, Graph]
    graph: Graph
    kernels: list
    dump_files: list[str]
    parameters: list = field(default_factory=list)
    out_tree: object = None
    program: object = None   # kernels.Program on the Ascend target
    observation: object = None   # graphkernel.observation.launches.GraphObservation: data dump, overflow check
    checks: list = field(default_factory=list)   # host callables run before each call (Trace.checks)
    log: FusionLog = field(default_factory=FusionLog)   # the passes' decisions (PassContext.log)
    assumptions: Assumptions | None = None   # size relations the compile relied on (ir/symbolic.py)

    def __post_init__(self):
        # symbolic sizes: the reference runs the graph specialized per shape, cached; the device's
        # Program plans per shape itself (kernels/plan.py)
        self.dynamic = is_dynamic(self.graph)
        self._specialized: OrderedDict = OrderedDict()
        # (result index, input index) of each Parameter the graph updates (its Assign outputs, last)
        self.updates = assigned_inputs(self.graph)
        self.result_count = len(self.graph.outputs) - len(self.updates)
        first = len(self.graph.inputs) - len(self.parameters)
        self.updated_parameters = [self.parameters[i - first] for _, i in self.updates]
        self._lock = _UPDATE_LOCK if self.updates else None
        self._updated_ids = {id(p._array) for p in self.updated_parameters}
        # the all-or-nothing step (docs/training.md): where the program starts writing Parameters, and
        # the inputs to copy first when a launch from there on can raise of its own accord (a host op)
        self.commit = commit_point(self.program) if self.program is not None and self.updates else \
            CommitPoint(None, False)
        self._snapshot = tuple(i for _, i in self.updates) if self.commit.may_raise else ()
        # a stand-in may raise (--compile_mode=background): asked again once every kernel has arrived
        self._recheck = bool(self._snapshot) and self.program is not None and self.program.building
        # a graph of symbolic sizes has a plan per shape, and a new shape's plan may run stand-ins of
        # kernels it alone needs (a split variant) after the rest arrived: its calls ask their plan
        self._per_plan = self.program is not None and self.program.planner is not None and \
            self.commit.launch is not None
        self._counted = self.graph_id is not None   # a graph call is a step; a PYNATIVE op is not

    @property
    def kernel_count(self) -> int:
        return len(self.kernels)

    def wait_for_kernels(self, timeout: float | None = None) -> bool:
        """With --compile_mode=background: wait until every kernel still building for this graph is
        built (or failed); the next call runs them. False when `timeout` seconds passed first."""
        return True if self.program is None else self.program.wait_kernels(timeout)

    def run_arrays(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """Run on numpy arrays: the call's inputs followed by the parameters' values. The results; the
        arrays of the Parameters the graph updates are written in place."""
        if self._lock is None:
            return self._run(arrays)
        with self._lock:
            return self._run(arrays)

    def _run(self, arrays):
        if self.options.deterministic and self.program is None:   # the reference's MatMuls on one BLAS thread
            with blas_single_threaded():
                return self._run_once(arrays)
        return self._run_once(arrays)

    def _run_once(self, arrays):
        """One step. A step that updates Parameters is all or nothing: signals wait for its end (HELD);
        an exception before its first Parameter write leaves every Parameter as it was, and one after it
        either waits for the last launch (an observer's) or puts the copies taken before back (a launch
        that can raise: `commit.may_raise`)."""
        for check in self.checks:
            check()
        if not self.updates:
            return self._launch(arrays, None)
        if self._recheck and not self.program.building:   # the stand-ins' kernels have arrived
            self._recheck = False
            self.commit = commit_point(self.program)
            self._snapshot = tuple(i for _, i in self.updates) if self.commit.may_raise else ()
        snapshot = self._snapshot
        if self._per_plan and not snapshot and self.program.standins_at(arrays):
            snapshot = tuple(i for _, i in self.updates)
        with HELD:
            saved = [arrays[i].copy() for i in snapshot]
            done = []   # set once every Parameter is written: from then on the step counts as done
            try:
                outs = self._launch(arrays, done)
            except BaseException:
                if done:
                    self._committed()
                else:
                    for i, old in zip(snapshot, saved):
                        np.copyto(arrays[i], old)
                raise
            self._committed()
            return outs

    def _committed(self):
        if self._counted:
            step_committed()

    def _launch(self, arrays, done: list | None):
        """The launches of one call; `done` (a list) gets True once every Parameter is written."""
        profiler = active_profiler()
        observed = self.observation is not None or profiler is not None
        if self.program is not None:   # the results; the program updates the Parameters in place
            return run_observed(self, arrays, profiler, done) if observed else self.program.run(arrays)
        outs = run_observed(self, arrays, profiler) if observed else interpret(self.graph_at(arrays), arrays)
        for k, i in self.updates:   # the reference returns every output, the new values last
            np.copyto(arrays[i], outs[k])
        if done is not None:
            done.append(True)
        return outs[:self.result_count]

    def sizes_of(self, arrays) -> dict:
        """The symbolic sizes' values at a call on `arrays` (an InputError naming an input that does not
        fit, or a size relation the compile assumed that does not hold)."""
        try:
            sizes = bind([v.type for v in self.graph.inputs], [np.shape(a) for a in arrays],
                         [v.node.name for v in self.graph.inputs])
            if self.assumptions is not None:
                self.assumptions.check(sizes)
        except ShapeError as e:
            raise InputError(f"compiled graph {self.graph_id}: {e}") from None
        return sizes

    def graph_at(self, arrays) -> Graph:
        """The final graph at the shapes of `arrays`: itself when static, else specialized (cached)."""
        if not self.dynamic:
            return self.graph
        key = tuple(np.shape(a) for a in arrays)
        graph = self._specialized.get(key)
        if graph is None:
            graph = self._specialized[key] = specialize(self.graph, self.sizes_of(arrays))
            if len(self._specialized) > SPECIALIZED_CACHE:
                self._specialized.popitem(last=False)
        return graph

    def prepare(self, sizes: dict, required: bool = False) -> None:
        """Plan (and build the kernels of) the call at `sizes` now: the gears and range bounds a
        declaration names compile with the graph, not at their first call. Sizes the graph cannot
        serve (a size relation it was compiled on does not hold there) are an InputError when
        `required` (a gear), else left to fail at a call that has them."""
        if not self.dynamic:
            return
        try:
            if self.assumptions is not None:
                self.assumptions.check(sizes)
        except ShapeError as e:
            if required:
                raise InputError(f"compiled graph {self.graph_id} cannot serve the declared sizes "
                                 f"{', '.join(f'{k}={v}' for k, v in sorted(sizes.items()))}: {e}") from None
            return
        if self.program is not None and self.program.planner is not None:
            self.program.planner.prepare(sizes)

    def run_steps(self, staged: list[np.ndarray]) -> list[np.ndarray]:
        """Loop sinking: `staged` holds the call's inputs of N steps, each stacked on a new first axis
        (N, *input shape). One call runs the N steps in order (the Parameters updated in place after
        each, the lock taken once) and returns each result stacked the same way: (N, *result shape)."""
        expected = self.graph.inputs[: len(self.graph.inputs) - len(self.parameters)]
        if len(staged) != len(expected) or not staged:
            raise InputError(f"compiled graph {self.graph_id} takes {len(expected)} staged inputs, got "
                             f"{len(staged)}")
        n = staged[0].shape[0] if staged[0].ndim else 0
        for i, (a, v) in enumerate(zip(staged, expected)):
            if not fits(a.shape[1:], v.type) or a.shape[:1] != (n,) or a.dtype != v.dtype.np:
                raise InputError(f"staged input {i}: got {a.dtype}{list(a.shape)}, expected "
                                 f"{v.dtype.value}{[n, *v.shape]} ({n} steps)")
        staged = [a.copy() if not a.flags.c_contiguous or not a.flags.writeable or any(
            np.may_share_memory(a, p._array) for p in self.updated_parameters) else a for a in staged]
        params = [p._array for p in self.parameters]
        results = None
        with self._lock or contextlib.nullcontext():
            for step in range(n):
                outs = self._run([a[step, ...] for a in staged] + params)   # views
                if results is None:   # (the shapes of a graph with symbolic sizes are the call's)
                    results = [np.empty((n, *o.shape), o.dtype) for o in outs]
                for r, out in zip(results, outs):
                    r[step] = out
        if results is None:   # no steps: empty results of the outputs' shapes
            sizes = self.sizes_of([np.empty(a.shape[1:], a.dtype) for a in staged] + params) if self.dynamic else {}
            results = [np.empty((0, *evaluate_shape(v.shape, sizes)), v.dtype.np)
                       for v in self.graph.outputs[:self.result_count]]
        return results

    def call_unchecked(self, tensors) -> object:
        """Run on Tensors known to match the signature (the Cell's cache checked them)."""
        arrays = [t._array for t in tensors]
        if self.updates:   # an input that is an updated Parameter's storage: the call reads its old value
            arrays = [a.copy() if id(a) in self._updated_ids or (a.base is not None and any(
                np.may_share_memory(a, p._array) for p in self.updated_parameters)) else a for a in arrays]
        arrays += [p._array for p in self.parameters]
        outs = [Tensor._wrap(a) for a in self.run_arrays(arrays)]
        tape = active_tape()
        if tape is not None:   # a PYNATIVE gradient is recording: it differentiates through this graph
            tape.record_graph(self.stages["validate"], tensors, self.parameters, outs)
        return self.structure(outs)

    def structure(self, outs: list):
        """The results as construct returned them: one Tensor, a tuple, or its nested tuples and lists."""
        if self.out_tree is None:
            return outs[0] if len(outs) == 1 else tuple(outs)
        return unflatten(self.out_tree, outs)

    def __call__(self, *tensors):
        expected = self.graph.inputs[: len(self.graph.inputs) - len(self.parameters)]
        if len(tensors) != len(expected):
            raise InputError(f"compiled graph {self.graph_id} takes {len(expected)} inputs, got {len(tensors)}")
        checked = []
        for i, (t, v) in enumerate(zip(tensors, expected)):
            arr = t.asnumpy() if isinstance(t, Tensor) else np.asarray(t)
            if not fits(arr.shape, v.type) or arr.dtype != v.dtype.np:
                raise InputError(f"input {i}: got {arr.dtype}{list(arr.shape)}, compiled for "
                                 f"{v.dtype.value}{list(v.shape)}")
            checked.append(t if isinstance(t, Tensor) else Tensor._wrap(arr))   # a Tensor stays itself (a tape knows it)
        return self.call_unchecked(checked)


def compile_graph(graph: Graph, opts: CompileOptions, *, parameters=(), out_tree=None, name: str = "",
                  eager: bool = False, checks=()) -> CompiledGraph:
    """Run the pipeline on a traced graph and prepare it to execute.

    An eager (PYNATIVE one-op) compile takes no graph id and writes no dumps. Every declared shape is
    checked against the memory limit first (a graph parsed from text was never traced).
    """
    check_graph(graph, opts.max_device_memory)
    graph_id = None if eager else context.next_graph_id()
    save = opts.save_graphs and not eager
    dumper = StageDumper(opts.save_graphs_path if save else None, graph_id or 0, opts.flags.dump_as_text,
                         STAGE_DUMPS)
    stages: dict[str, Graph] = {}

    def on_stage(stage: str, g: Graph) -> None:
        stages[stage] = g
        dumper(stage, g)

    # a graph of symbolic sizes compiles anew: the size relations its passes assumed (ir.symbolic.
    # Assumptions) are not in the stored graph, and its calls check them
    cache = None if eager or save or is_dynamic(graph) else opts.compile_cache_dir   # dumps need the passes
    key = compile_cache.key_of(graph, opts) if cache else None
    final = compile_cache.load(cache, key) if cache else None
    with PassContext() as passes, Assumptions() as assumed:
        passes.log.switch = opts.fusion_switch
        if final is None:
            final = run_pipeline(graph, opts, on_stage)
            if is_dynamic(final):
                check_generic(final, assumed)
            if cache:
                compile_cache.store(cache, key, final)
        else:   # the compile cache's graph: the pipeline's result for this very trace and these options
            stages.update(validate=graph, cached=final)
    if opts.flags.dump_as_text and save:
        lines = [f"[switch] {opts.fusion_switch}"] if opts.fusion_switch else []
        dumper.write(f"fusion_log_{graph_id}", text="\n".join(lines + [str(r) for r in passes.log]) + "\n")
        dumper.write_clusters(final)
    program = None
    if opts.device_target == "Ascend":
        with assumed:   # the kernels' layouts may tie sizes too (ir.symbolic.same_size)
            program = lower_for_device(final, opts, graph_id, dumper, eager)   # plans its buffers against the limit
        if program.planner is not None:
            program.planner.assumptions = assumed
    else:
        check_reference_peak(final, opts.max_device_memory)
    kernels = list(program.kernels) if program is not None else summarize_kernels(final)
    observation = None if eager else data_dump_observation(opts.data_dump, graph_id, stages, program, final)
    compiled = CompiledGraph(graph_id, opts, stages, final, kernels, dumper.files, list(parameters), out_tree,
                             program=program, observation=observation, checks=list(checks), log=passes.log,
                             assumptions=assumed if is_dynamic(final) else None)
    if dumper.directory is not None:
        write_record(compiled, dumper)
    return compiled


class SymbolicShapeError(GraphKernelError, ValueError):
    """A graph compiled for symbolic sizes that holds a size fixed at its representative value (a
    constant built from a dynamic size in Python, an op rule that does not keep the size symbolic)."""


def check_generic(graph: Graph, assumed: Assumptions) -> None:
    """The final graph, its sizes doubled, must still be well formed: every node's types re-inferred
    there (ir.verify) match its symbolic types evaluated there. A size fixed at its hint somewhere (a
    constant of the first call's shape, a rule that lost the symbol) fails here, at compile time,
    naming the node, not at a later call with a wrong result. Sizes where the relations the compile
    assumed do not hold (a shape that must be a multiple of another) are not probed."""
    probe = {name: 2 * hint for name, hint in symbols_of(graph).items()}
    try:
        assumed.check(probe)
    except ShapeError:
        return
    try:
        verify(specialize(graph, probe))
    except IRError as e:
        raise SymbolicShapeError(f"the graph does not stay correct at other sizes than the representative "
                                 f"ones ({', '.join(f'{k}={v // 2}' for k, v in sorted(probe.items()))}): at "
                                 f"{', '.join(f'{k}={v}' for k, v in sorted(probe.items()))}, {e}. A size was fixed "
                                 "where it should stay symbolic (a constant built from F.shape(x) in Python, "
                                 "e.g. np.ones(x.shape)?)") from None


def write_record(compiled: CompiledGraph, dumper: StageDumper) -> None:
    """The compile record beside the stage dumps; with --dump_as_html the graph's report page and the
    index of the pages in the directory too (graphkernel/observation/report.py)."""
    stage_files = [os.path.basename(f) for f in dumper.files if f.endswith(".dot")]
    dumper.write(record_stem(compiled.graph_id), record=record_text(compile_record(compiled, stage_files)))
    if compiled.options.flags.dump_as_html:
        dumper.files.append(write_page(dumper.directory, compiled.graph_id))
        dumper.files.append(write_report(dumper.directory, pages=False, recursive=False)[-1])


def data_dump_observation(dump: DataDumpOptions, graph_id: int, stages: dict, program,
                          graph: Graph) -> GraphObservation | None:
    """The observation state of a graph compiled with enable_dump or enable_dump_debug: its launches with
    the data dump and overflow check sinks (None: neither is on)."""
    if not (dump.enable_dump or dump.enable_dump_debug):
        return None
    if dump.path is None:
        which = "enable_dump" if dump.enable_dump else "enable_dump_debug"
        raise DumpError(f"{which}=True needs a dump directory: set_context(dump_path=DIR)")
    obs = observe_graph(program, graph)
    if dump.enable_dump:
        obs.sinks.append(DataDump(graph_id, stages, obs.launches, dump.path, dump.mode, dump.steps, dump.layer,
                                  dump.data))
    if dump.enable_dump_debug:
        obs.sinks.append(OverflowCheck(dump.path, dump.debug_mode))
    return obs


_eager_cache: dict = {}


def run_eager(graph: Graph, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Run a one-op graph (PYNATIVE_MODE) through the pipeline, caching the compile per op signature."""
    key = (graph.key(), context.compile_settings_id())
    compiled = _eager_cache.get(key)
    if compiled is None:
        compiled = compile_graph(graph, options_from_context(), eager=True)
        if len(_eager_cache) > 4096:
            _eager_cache.clear()
        _eager_cache[key] = compiled
    return compiled.run_arrays(arrays)
