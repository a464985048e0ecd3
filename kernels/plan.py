"""Plans per shape: a graph with symbolic sizes (ir/symbolic.py) lowered once, planned per call.

    lowering (once)         every node's kernel, its launch structure (KernelSpec) and where each
                            value lives are decided from the graph's structure; a step whose work
                            depends on sizes keeps a template: `template(sizes, storages) -> Step`
    Planner.plan_for(arrays) the Plan of a call: its inputs' shapes bound to the sizes (ir.symbolic.
                            bind: an input that does not fit is an InputMismatchError naming it), the
                            size relations the compile assumed checked, then every template at those
                            sizes: each generated kernel's variant, block_dim, tile and threads
                            (KernelLaunch.at, kernels/launch.py's choices), each GEMM's chunks
                            (kernels/matmul.py), every buffer's size, the arena and the runner
                            (kernels/executor.py Plan). Cached by the inputs' shapes (PLAN_CACHE of them,
                            the least recently used dropped), so a repeated shape costs a dict lookup

`Program` (what kernels.lower returns) runs a call: a static graph's one Plan, made at lowering; a
graph of symbolic sizes through its Planner, the thread's buffers one arena for all its plans.

A kernel is built once per structure and variant: the variant a new size needs (a reduction whose
rows grow long enough to split) is built the first time a plan needs it, from the kernel cache
when it holds it. `prepare(sizes)` plans (and so builds) ahead, for the shapes a declaration names
(gears, a range's bounds).
"""
from __future__ import annotations

import math
import threading
import time
import types
from collections import OrderedDict
from dataclasses import replace

import numpy as np

from ir.errors import ShapeError
from ir.graph import Graph, Node, TensorType, input_node
from ir.symbolic import Assumptions, Dim, evaluate, evaluate_shape, shape_function
from ir.specialize import bind, specialize_node, specialize_type, symbols_of
from kernels import aicore
from kernels.background import Arrival, PendingLaunch, rebind, wait, warn_failed
from kernels.compile import signature
from kernels.executor import Conditional, InputMismatchError, KernelInfo, Plan, Step, Storage
from kernels.launch import choose_launch, launch_of, ub_bytes, work_weight
from kernels.reduction import split_partials

PLAN_CACHE = 64     # plans kept per program (each a runner and its launches; buffers are shared)


class KernelLaunch:
    """One generated kernel structure: its launch at given collapsed sizes (cached per sizes), and its
    compiled kernel per variant, built the first time a launch needs that variant."""

    def __init__(self, spec, build, core_num: int, min_elements: int, scalars: tuple[float, ...] = ()):
        self.spec, self.build = spec, build     # build(spec, variant, sig) -> Built (kernels/launch.py)
        self.scalars = scalars                  # the constants the kernel takes (kernels.layout.scalar_values)
        self.core_num, self.min_elements = core_num, min_elements
        self.weight = work_weight(spec)
        self.dtypes = [d for d, _ in spec.inputs] + [d for k, (d, _) in enumerate(spec.outputs)
                                                     if k not in spec.aliased]
        self.built: dict = {}       # variant -> Built (kernels/launch.py)
        self.at_sizes: dict[tuple, tuple] = {}

    def kernel(self, variant: str, n_sizes: int, partials) -> tuple:
        """(Built, origin) of the kernel of `variant`: built (or fetched from the kernel cache) the first
        time, "memory" after. A kernel building in the background (origin "pending") is pending until
        its job is ready, then the job's kernel."""
        built = self.built.get(variant)
        if built is not None:
            if built.job is not None and built.job.state == "ready":   # arrived from the background
                built = self.built[variant] = replace(built, fn=built.job.dispatcher, origin="memory", job=None)
            return built, "memory"
        fold = variant == "split"
        sig = signature(self.dtypes + [d for d, _ in partials], n_sizes, len(self.scalars), fold)
        built = self.built[variant] = self.build(self.spec, variant, sig)
        return built, built.origin

    def at(self, sizes: tuple[int, ...], standin=None) -> tuple:
        """(KernelInfo without its node's name, callable, scalar arguments, threads, partials, origin) of a
        launch over the collapsed `sizes`. While its kernel builds in the background the callable is a
        PendingLaunch running `standin()` (kernels/standin.py, made for the call's shapes; a launch at
        the same collapsed sizes computes the same elements in the same order at any shape), swapped
        for the kernel's launch between calls (Program.arrive); a launch asked for after the kernel
        arrived is the kernel's."""
        hit = self.at_sizes.get(sizes)
        if hit is not None and not (isinstance(hit[1], PendingLaunch) and hit[1].job.state == "ready"):
            return hit[:5] + ("memory",)
        spec = self.spec
        variant, block_dim, tile, lanes = choose_launch(spec, sizes, self.core_num)
        partials = split_partials(spec, sizes, tile) if variant == "split" else []
        built, origin = self.kernel(variant, len(sizes), partials)
        # kernels.launch.threads_for, its work weight computed once
        n_threads = aicore.launch_threads(block_dim, math.prod(sizes), self.min_elements, self.weight)
        args, fold = tuple(sizes) + self.scalars + (block_dim, tile, lanes), variant == "split"
        fn, extra = launch_of(built.fn, block_dim, n_threads, args, fold)
        if built.job is not None:   # building in the background: the stand-in runs meanwhile
            if standin is None:
                raise ValueError(f"kernel {built.name} builds in the background and its launch has no stand-in")
            fn = PendingLaunch(built.job, standin(), lambda d: launch_of(d, block_dim, n_threads, args, fold)[0])
        info = KernelInfo(built.name, spec.op_names, block_dim, (), (), "device", built.source, variant,
                          kernel=built.name, tile=tile, ub_bytes=ub_bytes(spec, sizes, variant, tile))
        self.at_sizes[sizes] = (info, fn, extra, n_threads, partials)
        return info, fn, extra, n_threads, partials, origin


def alone(node: Node, sizes: dict) -> Node:
    """`node` at `sizes`, reading fresh inputs of its inputs' types there: what a numpy step's function
    is made from (kernels/lower.py)."""
    inputs = [input_node(k, specialize_type(v.type, sizes)).out for k, v in enumerate(node.inputs)]
    return specialize_node(node, sizes, inputs)


def symbolic_storage(storage: Storage) -> bool:
    return isinstance(storage.size, Dim) or storage.kind == "size" or any(isinstance(d, Dim) for d in storage.shape)


class Planner:
    """Makes and caches the Plans of a program whose graph has symbolic sizes (see the module doc)."""

    def __init__(self, graph: Graph, steps: list[Step], templates: list, storages: list[Storage],
                 input_ids: list[int], output_ids: list[int], max_bytes: int | None, assigned: list[int]):
        self.graph, self.steps, self.templates, self.storages = graph, steps, templates, storages
        self.input_ids, self.output_ids = input_ids, output_ids
        self.max_bytes, self.assigned = max_bytes, assigned
        self.types = [v.type for v in graph.inputs]
        self.names = [v.node.name for v in graph.inputs]
        self.dynamic_inputs = tuple(k for k, t in enumerate(self.types) if any(isinstance(d, Dim) for d in t.shape))
        self._static_shapes = [None if k in self.dynamic_inputs else tuple(t.shape) for k, t in enumerate(self.types)]
        # the plan cache's key: the dynamic inputs' shapes (a generated function: a call's one lookup)
        self._key = eval("lambda a: (" + "".join(f"a[{k}].shape, " for k in self.dynamic_inputs) + ")")  # noqa: S307
        self.hints = symbols_of(graph)
        self.assumptions: Assumptions | None = None   # the compile's (graphkernel/compiler.py sets it)
        self._plans: OrderedDict = OrderedDict()
        self._runners: dict = {}    # runner source -> its compiled code, shared by the plans
        self._symbolic = [(i, st, shape_function((st.size,)), shape_function(tuple(st.shape)))
                          for i, st in enumerate(storages) if symbolic_storage(st)]
        self._layout: dict | None = None   # temp storage -> arena block, from the first plan
        self._lock = threading.Lock()

    # --- plans ---------------------------------------------------------------------------------
    def representative(self) -> Plan:
        """The plan at the hints: the sizes the graph was compiled for (CompiledGraph.kernels shows it)."""
        shapes = tuple(evaluate_shape(self.types[k].shape, self.hints) for k in self.dynamic_inputs)
        plan = self._plans.get(shapes)
        if plan is None:
            plan = self._plans[shapes] = self.plan_at(dict(self.hints))
        return plan

    def plan_for(self, arrays) -> Plan:
        """The plan of a call on `arrays` (cached by their shapes)."""
        try:
            key = self._key(arrays)
        except (AttributeError, IndexError):
            key = tuple(np.shape(arrays[k]) if k < len(arrays) else None for k in self.dynamic_inputs)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        with self._lock:
            plan = self._plans.get(key)
            if plan is None:
                plan = self._new_plan(key, arrays)
            else:
                self._plans.move_to_end(key)
            return plan

    def _new_plan(self, key, arrays) -> Plan:
        if len(arrays) != len(self.types):
            raise InputMismatchError(f"the program takes {len(self.types)} inputs, got {len(arrays)}")
        shapes = [np.shape(a) for a in arrays]
        try:
            sizes = bind(self.types, shapes, self.names)
            if self.assumptions is not None:
                self.assumptions.check(sizes)
        except ShapeError as e:
            raise InputMismatchError(str(e)) from None
        plan = self.plan_at(sizes)
        self._plans[key] = plan
        if len(self._plans) > PLAN_CACHE:
            self._plans.popitem(last=False)
        return plan

    def prepare(self, sizes: dict) -> Plan:
        """The plan at `sizes` (every symbol given), made now: its kernels built ahead of a call."""
        shapes = tuple(evaluate_shape(self.types[k].shape, sizes) for k in self.dynamic_inputs)
        if self.assumptions is not None:
            self.assumptions.check(sizes)
        plan = self._plans.get(shapes)
        if plan is None:
            plan = self._plans[shapes] = self.plan_at(dict(sizes))
        return plan

    def plan_at(self, sizes: dict) -> Plan:
        storages = list(self.storages)
        for i, st, size_at, shape_at in self._symbolic:
            if st.kind == "size":   # a SizeValue: a constant of this plan
                storages[i] = Storage("const", st.dtype, 1, array=np.array([evaluate(st.value, sizes)], st.dtype))
            else:
                storages[i] = Storage(st.kind, st.dtype, size_at(sizes)[0], st.index, st.array, shape_at(sizes),
                                      st.value)
        steps = [step if t is None else t(sizes, storages) for step, t in zip(self.steps, self.templates)]
        shapes = list(self._static_shapes)
        for k in self.dynamic_inputs:
            shapes[k] = evaluate_shape(self.types[k].shape, sizes)
        plan = Plan(self.graph, steps, storages, self.input_ids, self.output_ids, self.max_bytes, self.assigned,
                    input_shapes=shapes, sizes=sizes, shared=self._runners, layout=self._layout)
        if self._layout is None:   # the first plan's arena layout serves the others (layout_arena)
            base = len(self.storages)
            self._layout = {s: b for s, (b, _) in plan._placed.items() if s < base}
        return plan


    def plans(self) -> list[Plan]:
        """The plans made so far (PLAN_CACHE at most)."""
        with self._lock:
            return list(self._plans.values())

    # --- buffers -------------------------------------------------------------------------------
    @staticmethod
    def state(st, plan: Plan):
        """A thread's buffers for `plan`: views of the thread's one arena (grown to the largest plan
        it ran), kept per plan (PLAN_CACHE of them) while the arena stays; the last plan's first."""
        if getattr(st, "plan", None) is plan:
            return st.state
        views = getattr(st, "views", None)
        if views is None:
            st.views = views = {}
            st.raw = np.empty(0, np.uint8)
        state = views.get(plan)
        if state is None:
            _, need = plan.arena_offsets()
            if need > st.raw.size or len(views) >= PLAN_CACHE:   # grown with headroom: shapes that grow
                st.raw = np.empty(max(need + need // 4, st.raw.size), np.uint8)   # a little reuse it
                views.clear()
            state = views[plan] = plan.new_state(types.SimpleNamespace(), st.raw)
        st.plan, st.state = plan, state
        return state


def symbolic_type(t: TensorType) -> bool:
    return any(isinstance(d, Dim) for d in t.shape)


# --- kernels arriving from the background: a plan's stand-ins (Program.arrive runs these) -----------
def standin_positions(plan: Plan) -> set[int]:
    """The launches (positions in `launch_list`) of `plan` that run a stand-in now."""
    return {k for k, step in enumerate(plan.launch_list) if isinstance(step.fn, PendingLaunch)}


def pending_jobs(plan: Plan) -> list:
    """The background jobs (kernels/background.py) of `plan`'s launches still on stand-ins."""
    jobs = []
    for fn in plan._pending.values():
        if isinstance(fn, Conditional):
            jobs += [j for p in fn.programs for j in p.pending_jobs()]
        else:
            jobs.append(fn.job)
    return jobs


def swap(plan: Plan) -> tuple[list, dict]:
    """Swap the real launch in for every stand-in of `plan` whose kernel is ready (its Program calls
    it before a call, under its lock). Returns the (job, launch name) of the kernels that failed to
    build (their launches keep their stand-in) and, per job that arrived, the positions of its
    launches. A step plans share (one the same at every size) may have been swapped in another plan
    already: this plan's runner is rebound all the same."""
    failed, arrived, swapped, still = [], {}, {}, {}
    for k, fn in plan._pending.items():
        if isinstance(fn, Conditional):   # its branches are Programs of their own: they swap theirs
            for p in fn.programs:
                failed += p.arrive()
            if any(p.building for p in fn.programs):
                still[k] = fn
            plan._observed_runner = None
            continue
        state = fn.job.state
        if state == "ready":
            swapped[k] = fn.launch()
            arrived.setdefault(fn.job, []).append(plan.positions[k])
        elif state == "failed":
            failed.append((fn.job, plan.steps[k].info.name))
        else:
            still[k] = fn
    plan._pending = still
    if swapped:
        for k, real in swapped.items():
            plan.steps[k].fn = real
        plan._runner = rebind(plan._runner, {f"k{k}": real for k, real in swapped.items()})
        plan._observed_runner = None
    return failed, arrived


class Program:
    """A lowered graph: `run(arrays, observer=None) -> list of arrays`, `kernels`, optional `profiler`.

    An observer sees every launch: `observer.kernel(index, info, inputs, outputs, seconds)` with the
    step's index in `steps`, its flat input and output arrays (float16 as float16; the buffers are
    reused, so read them during the call) and the launch's wall time. `profiler` is the older,
    narrower hook: `profiler.record(info, seconds)`. Without either, a call runs the plain runner:
    no timing, no per-kernel Python. `run_step(index, arrays)` launches one step alone, on copies of
    the arrays it is given.

    The work itself is a Plan's. A static graph has one, made here. A graph with symbolic sizes
    (ir/symbolic.py) has a `planner` (kernels/plan.py) that makes one per shape of its inputs, cached,
    the kernels' launch choices and the buffers' sizes evaluated at that shape; `plan` is then the plan
    of the representative sizes, which `steps`, `kernels` and the figures below describe. The
    temporaries of every plan a thread runs share one arena, grown to the largest; a plan's views of
    it and its output buffers are kept while the arena stays, so a repeated shape allocates nothing.

    Kernels building in the background (kernels/background.py) run stand-ins in the plans made before
    they arrive; before a call (never during one) `arrive` swaps each arrived kernel's launch in for
    its stand-ins in every plan of the program (swap), and records one Arrival per kernel in
    `arrivals`. A plan made after a kernel arrived launches it from the start (KernelLaunch.at).
    """

    def __init__(self, graph: Graph, steps: list[Step], storages: list[Storage],
                 input_ids: list[int], output_ids: list[int], max_bytes: int | None = None,
                 assigned: list[int] = (), planner=None):
        self.graph = graph
        self.profiler = None
        self.planner = planner
        self.plan = Plan(graph, steps, storages, input_ids, output_ids, max_bytes, assigned) if planner is None \
            else planner.representative()
        self._local = threading.local()
        self.launch_count = self.plan.launch_count
        self.nested = False             # a branch of a Conditional: its enclosing plan swaps for it
        self.calls = 0                  # top-level calls so far
        self.arrivals: list[Arrival] = []
        self._arrived: set = set()      # the jobs of `arrivals`
        self._building = bool(self.plan._pending)   # some plan had stand-ins at the last swap
        self._swap_lock = threading.Lock()

    # what a Plan tells, of the one plan (the representative one, with symbolic sizes)
    steps = property(lambda self: self.plan.steps)
    storages = property(lambda self: self.plan.storages)
    kernels = property(lambda self: self.plan.kernels)
    launch_list = property(lambda self: self.plan.launch_list)
    positions = property(lambda self: self.plan.positions)
    temp_bytes = property(lambda self: self.plan.temp_bytes)
    peak_bytes = property(lambda self: self.plan.peak_bytes)
    runner_source = property(lambda self: self.plan.runner_source)
    uses_blas = property(lambda self: self.plan.uses_blas)
    assigned = property(lambda self: self.plan.assigned)

    # --- kernels arriving from the background ----------------------------------------------
    def plans(self) -> list[Plan]:
        """Every plan of the program: its one, or those its planner made so far."""
        if self.planner is None:
            return [self.plan]
        plans = self.planner.plans()
        return plans if any(p is self.plan for p in plans) else [self.plan] + plans

    @property
    def building(self) -> bool:
        """Whether some launch still runs a stand-in: its kernel is building in the background (or has
        arrived and the next call swaps it in)."""
        return any(p._pending for p in self.plans())

    def standin_positions(self) -> set[int]:
        """The launches (positions in `launch_list`, the same in every plan) that run a stand-in now in
        some plan."""
        return set().union(*(standin_positions(p) for p in self.plans() if p._pending))

    def pending_jobs(self) -> list:
        """The background jobs of the launches still on stand-ins, in every plan, each once."""
        jobs = [j for p in self.plans() for j in pending_jobs(p)]
        return list({id(j): j for j in jobs}.values())

    def standins_at(self, arrays) -> bool:
        """Whether the plan of a call on `arrays` runs a stand-in (before its call swaps what arrived)."""
        plan = self.plan if self.planner is None else self.planner.plan_for(arrays)
        return bool(plan._pending)

    def wait_kernels(self, timeout: float | None = None) -> bool:
        """Wait until every kernel building for this program is done (built or failed); the next call
        swaps them in. False when `timeout` seconds passed first."""
        return wait(self.pending_jobs(), timeout)

    def arrive(self) -> list:
        """Swap the real launch in for every stand-in whose kernel is ready, in every plan (before a
        call: a step runs one set of launches from its start to its end). Returns the (job, launch
        name) of the kernels that failed to build: their launches keep their stand-in (run() warns)."""
        failed, arrived = [], {}
        with self._swap_lock:
            for plan in self.plans():
                if plan._pending:
                    f, a = swap(plan)
                    failed += f
                    for job, positions in a.items():
                        arrived.setdefault(job, set()).update(positions)
            now = time.perf_counter()
            for job, positions in arrived.items():
                if job not in self._arrived:   # a plan made before the kernel arrived, swapped later
                    self._arrived.add(job)
                    self.arrivals.append(Arrival(job.name, tuple(sorted(positions)), job.queued_at, job.done_at,
                                                 job.build_seconds, now, self.calls))
            self._building = self.building
        return failed

    def run(self, arrays, observer=None) -> list[np.ndarray]:
        planner = self.planner
        plan = self.plan if planner is None else planner.plan_for(arrays)
        if len(arrays) != len(plan._inputs):
            raise InputMismatchError(f"the program takes {len(plan._inputs)} inputs, got {len(arrays)}")
        if not self.nested:
            if plan._pending or self._building:
                warn_failed(self.arrive())
            self.calls += 1
        st = self._local
        if planner is None:
            if not hasattr(st, "outs"):
                plan.new_state(st)
            state = st
        else:
            state = planner.state(st, plan)
        if observer is None and self.profiler is not None:
            observer = _Recorder(self.profiler)
        return plan.run(arrays, state, observer)

    def run_step(self, index: int, arrays) -> list[np.ndarray]:
        """Step `index` alone (Plan.run_step) of the representative plan."""
        return self.plan.run_step(index, arrays)


class _Recorder:
    """The `profiler.record(info, seconds)` hook as an observer."""

    def __init__(self, profiler):
        self.record = profiler.record

    def kernel(self, index, info, inputs, outputs, seconds):
        self.record(info, seconds)
