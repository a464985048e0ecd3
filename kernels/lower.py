"""lower(graph, DeviceConfig) -> Program: every top-level node becomes a launch, a view or a constant.

    Const                       a constant buffer (scalars are inlined into the kernels that read them)
    Reshape                     a view: shares its input's buffer, no launch
    Composite                   one generated kernel for its subgraph
    If                          a Conditional step: each branch lowered to a Program of its own, the
                                condition picks the one that runs (kernels/executor.py)
    elementwise/broadcast/reduce primitive
                                one generated kernel for a one-node subgraph: the same codegen as a
                                composite, so fusion on and off compute the same bits
    MatMul, BatchMatMul         numpy's BLAS, large products split over the threads (kernels/matmul.py)
    Transpose                   a numpy copy
    Conv2D and its gradients,   im2col + BLAS GEMM, and strided numpy passes per window tap
    pooling and theirs          (kernels/conv.py, kernels/pool.py)
    Composite of a Conv2D and   the conv's GEMMs, then one generated elementwise kernel reading the
    its epilogue                GEMM result in place of the conv's output pass (kernels/conv.py
                                conv_epilogue; graphkernel/passes/conv_epilogue.py makes them)
    UnsortedSegmentSum          a numba scatter-add loop (kernels/scatter.py)
    Dropout                     a numba loop regenerating its mask from counters (kernels/random.py)
    CopyToHost, CopyToDevice    a real copy into the destination buffer (target "copy")
    a host op (PyFunc, HostCall) the numpy reference on the host (target "host"); an error names the node
    anything else               (an unexpanded composite op) the numpy reference

Each launch's KernelInfo is named after the node it computes (`name`: a composite's `Fused_<ops>_<n>`,
a primitive's scope name); the generated kernel it runs, built once per structure and shared, is
`kernel` (`Fused_Mul_Add_<hash>`, the name of its source file and cache entry).

A kernel that fails to build does not fail the run: a composite is inlined back into single-op
kernels, a single op falls back to the numpy reference, each with a KernelBuildWarning naming it.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

import numpy as np

from ir.autodiff import phase_of, update_nodes
from ir.graph import Graph, Node, TensorType, Value
from ir.symbolic import SIZE_VALUE, Dim, evaluate as value_at, evaluate_shape, has_dims, shape_function
from ir.specialize import is_dynamic, specialize, symbols_of
from ir.interpret import interpret
from ir.printer import printable
from ir.ops import Pattern, branches, evaluate, get, placement
from ir.ops.host import COPY_OPS, is_host, run_host
from kernels import aicore
from kernels.background import KernelBuildWarning, PendingLaunch
from kernels.cache import default_cache_dir, usable_dir
from kernels.compile import multi_tensor_signature
from kernels.conv import Geometry, conv_epilogue, epilogue_conv, epilogue_graph, spatial_kernel
from kernels.emitters import EMITTERS, REDUCERS, float16_supported
from kernels.executor import Conditional, KernelInfo, Step, Storage
from kernels.in_place import plan_in_place
from kernels.launch import build_kernel, choose_launch, launch_of, threads_for, ub_bytes
from kernels.layout import describe, scalar_values
from kernels.plan import KernelLaunch, Planner, Program, alone
from kernels.matmul import gemm_fn
from kernels.multi_tensor import describe_multi, launcher, local_aliases, multi_parts
from kernels.random import dropout_fn
from kernels.scatter import segment_sum_fn
from kernels.standin import StandIn


@dataclass(frozen=True)
class DeviceConfig:
    core_num: int = aicore.DEFAULT_CORE_NUM
    deterministic: int = 0      # every launch is deterministic already, GEMMs too (kernels/matmul.py)
    cache_mode: str = "enable"  # enable | disable | force
    cache_dir: str | None = None
    source_dir: str | None = None
    max_device_memory: int | None = None   # bytes one value, or one call's buffers, may take
    parallel_min_elements: int = aicore.PARALLEL_MIN_ELEMENTS  # smaller launches run on one thread
    compile_mode: str = "wait"  # wait: build every kernel now; background: kernels missing from the
                                # cache build in worker processes, their launches run stand-ins meanwhile

    @property
    def background(self) -> bool:
        """Whether missing kernels build in the background: asked for, and a disk cache to hand them over."""
        return self.compile_mode == "background" and self.cache_mode == "enable" and \
            usable_dir(self.cache_dir or default_cache_dir()) is not None


def _inline_scalar_consts(sub: Graph, ext: tuple[Value, ...]) -> tuple[Graph, tuple[Value, ...]]:
    """Scalar constants feeding the kernel from outside become Const nodes inside it."""
    keep_in, keep_ext, consts, remap = [], [], [], {}
    for v_in, v_ext in zip(sub.inputs, ext):
        if v_ext.node.op == "Const" and v_ext.type.size == 1:
            c = Node("Const", (), v_ext.node.attrs, (v_in.type,))
            consts.append(c)
            remap[v_in] = c.out
        else:
            keep_in.append(v_in)
            keep_ext.append(v_ext)
    if not consts:
        return sub, ext
    nodes = list(consts)
    for node in sub.nodes:
        new_inputs = tuple(remap.get(v, v) for v in node.inputs)
        new = node if new_inputs == node.inputs else node.replace(inputs=new_inputs)
        nodes.append(new)
        remap.update(zip(node.outputs, new.outputs))
    return Graph(keep_in, nodes, [remap.get(v, v) for v in sub.outputs]), tuple(keep_ext)


def _one_node_graph(node: Node) -> Graph:
    inputs = Graph.with_inputs([v.type for v in node.inputs])
    inner = node.replace(inputs=inputs, name="")
    return Graph(inputs, [inner], inner.outputs)


def _kernel_op(node: Node) -> bool:
    d = get(node.op)
    return d.pattern <= Pattern.REDUCE and d.pattern != Pattern.INJECTIVE and (
        node.op in EMITTERS or node.op in REDUCERS)


class _Builder:
    def __init__(self, graph: Graph, cfg: DeviceConfig, progress=None):
        self.graph, self.cfg, self.progress = graph, cfg, progress
        self.storages: list[Storage] = []
        self.where: dict[Value, int] = {}
        self.steps: list[Step] = []
        self.kernels: dict[tuple, KernelLaunch] = {}   # (Graph.key() of a kernel's subgraph, aliases) -> it
        self.background = cfg.background
        self.exact_programs: dict[tuple, Program] = {}   # the stand-ins' single-op programs (`exact`)
        self.updates_only = update_nodes(graph)  # the optimizer phase
        # symbolic sizes (ir/symbolic.py): steps whose work depends on them keep a template, evaluated
        # per shape by kernels/plan.py's Planner; lowering itself sees the representative sizes
        self.dynamic = is_dynamic(graph)
        self.hints = symbols_of(graph) if self.dynamic else {}
        self.templates: list = []

    def storage(self, kind: str, type_, **kw) -> int:
        self.storages.append(Storage(kind, type_.dtype.np, type_.size, **kw))
        return len(self.storages) - 1

    def add_step(self, step: Step, template=None) -> None:
        """A step, and (with symbolic sizes) how to make it at other sizes: `template(sizes, storages)`;
        None: the step is the same at every size (a copy over flat buffers)."""
        self.steps.append(step)
        self.templates.append(template)

    def build(self) -> Program:
        inputs = []
        for k, v in enumerate(self.graph.inputs):
            self.where[v] = self.storage("input", v.type, index=k)
            inputs.append(self.where[v])
        self.in_place = plan_in_place(self.graph, self.kernel_graph)
        assigns = [n for n in self.graph.nodes if n.op == "Assign"]
        for node in self.graph.nodes:
            if node.op != "Assign":
                self.lower_node(node)
        results = self.claim_outputs()
        self.lower_assigns(assigns)
        assigned = [self.storages[self.where[n.inputs[0]]].index for n in assigns]
        planner = Planner(self.graph, self.steps, self.templates, self.storages, inputs, results,
                          self.cfg.max_device_memory, assigned) if self.dynamic else None
        return Program(self.graph, self.steps, self.storages, inputs, results, self.cfg.max_device_memory,
                       assigned=assigned, planner=planner)

    @staticmethod
    def kernel_graph(node: Node) -> Graph | None:
        """The subgraph of the generated kernel computing top-level `node`; None when it runs otherwise."""
        if node.subgraph is not None:
            return node.subgraph
        return _one_node_graph(node) if _kernel_op(node) else None

    # --- nodes ---------------------------------------------------------------------------
    def lower_node(self, node: Node) -> None:
        if node.op == "Const":
            arr = np.array(node.attr("value").array, dtype=node.out.dtype.np).reshape(-1)
            self.where[node.out] = self.storage("const", node.out.type, array=arr)
        elif node.op == "Reshape":
            self.where[node.out] = self.where[node.inputs[0]]
        elif branches(node):
            self.conditional(node)
        elif (conv := epilogue_conv(node)) is not None:
            self.conv_with_epilogue(node, conv)
        elif (sub := self.kernel_graph(node)) is not None:
            self.generated(node, sub, node.inputs, printable(node.name or node.op, 200))
        elif node.op == SIZE_VALUE:   # a size: a constant of each plan (kernels/plan.py)
            size = node.attr("size")
            if isinstance(size, Dim):
                self.where[node.out] = self.storage("size", node.out.type, value=size)
            else:
                self.where[node.out] = self.storage("const", node.out.type,
                                                    array=np.array([size], node.out.dtype.np))
        elif node.op in ("MatMul", "BatchMatMul"):
            self.numpy_step(node, _gemm_fn, "numpy", blas=True)
        elif node.op == "Transpose":
            self.numpy_step(node, _transpose_fn, "numpy")
        elif (spatial := spatial_kernel(node)) is not None:   # convolutions, pooling: kernels/conv.py
            variant = spatial[1]
            self.numpy_step(node, _spatial_fn, variant, blas=variant == "conv")
        elif node.op == "UnsortedSegmentSum":
            self.numpy_step(node, _segment_sum_fn, "scatter")
        elif node.op == "Dropout":
            self.numpy_step(node, _dropout_fn, "random")
        elif node.op in COPY_OPS:  # a real copy across the host/device boundary
            self.numpy_step(node, _copy_fn, "copy")
        elif is_host(node):
            self.numpy_step(node, _host_fn, "host")
        else:
            self.numpy_step(node, _reference_fn, "reference")

    def conditional(self, node: Node) -> None:
        then, else_ = (_Builder(g, self.cfg, self.progress).build() for g in branches(node))
        in_shapes = tuple(v.shape for v in node.inputs[1:])
        fn = Conditional(then, else_, in_shapes)
        info = KernelInfo(printable(node.name or node.op, 200), (node.op,), 1, tuple(v.type for v in node.inputs),
                          node.types, "device", None, "branch", phase=phase_of(node, self.updates_only))
        step = Step(info, fn, tuple(self.where[v] for v in node.inputs), self.outputs_of(node),
                    values_in=node.inputs, values_out=node.outputs)

        def at(sizes, storages):   # each branch's program plans itself from the arrays it is given
            branch = Conditional(then, else_, tuple(evaluate_shape(s, sizes) for s in in_shapes))
            branch.position = fn.position
            return replace(step, fn=branch)
        self.add_step(step, at if self.dynamic else None)

    def outputs_of(self, node: Node) -> tuple[int, ...]:
        """Fresh temps, or the buffer of the Parameter a result updates in place (kernels/in_place.py)."""
        for v in node.outputs:
            ref = self.in_place.get(v)
            self.where[v] = self.where[ref] if ref is not None else self.storage("temp", v.type)
        return tuple(self.where[v] for v in node.outputs)

    def numpy_step(self, node: Node, make, variant: str, blas: bool = False) -> None:
        """A step calling `make(node, shapes)`, a function of flat buffers, `shapes` the node's input and
        output shapes; with symbolic sizes, made again per plan at its sizes (a function that needs
        more than the shapes gets the node itself at those sizes: kernels/plan.py alone). `blas`: it
        calls BLAS (Step.blas)."""
        target = placement(node)
        info = KernelInfo(node.name or node.op, (node.op,), 1, tuple(v.type for v in node.inputs),
                          node.types, target, None, variant, phase=phase_of(node, self.updates_only))
        ins, outs = tuple(self.where[v] for v in node.inputs), self.outputs_of(node)
        types = [v.type for v in node.inputs] + list(node.types)
        symbolic = self.dynamic and any(isinstance(d, Dim) for t in types for d in t.shape) or (
            self.dynamic and any(has_dims(v) for _, v in node.attrs))

        getters = [shape_function(tuple(t.shape)) for t in types]

        def fn_at(sizes):
            shapes = [get(sizes) for get in getters] if symbolic else [t.shape for t in types]
            return make(node if not symbolic or make in SHAPE_FUNCTIONS else alone(node, sizes), shapes)
        step = Step(info, fn_at(self.hints), ins, outs, values_in=node.inputs, values_out=node.outputs, blas=blas)

        def at(sizes, storages):
            return Step(info, fn_at(sizes), ins, outs, values_in=node.inputs, values_out=node.outputs, blas=blas)
        self.add_step(step, at if symbolic else None)

    def generated(self, node: Node, sub: Graph, ext: tuple[Value, ...], label: str) -> None:
        # a node writing a Parameter in place must compute all its results before writing any: the
        # reference, never single-op kernels (kernels/in_place.py)
        in_place = any(v in self.in_place for v in node.outputs)
        if not float16_supported() and _touches_float16(sub):  # no kernel to build: no warning
            if node.subgraph is not None and not in_place:
                self.inline(node)
            else:
                self.numpy_step(node, _reference_fn, "reference")
            self._advance("reference")
            return
        try:
            step, origin = self.build_kernel(node, sub, ext)
        except Exception as e:  # noqa: BLE001 - any build failure must leave the run alive
            self._advance("failed")
            ops = [n.op for n in sub.nodes if n.op != "Const"]
            if node.subgraph is not None and len(ops) > 1 and not in_place:
                warnings.warn(f"kernel of {label} ({_ops_text(ops)}) failed to build "
                              f"({type(e).__name__}: {_first_line(e)}); inlined into single-op kernels",
                              KernelBuildWarning, stacklevel=4)
                self.inline(node)
            else:
                warnings.warn(f"kernel of {label} failed to build ({type(e).__name__}: {_first_line(e)}); "
                              "computed by the numpy reference", KernelBuildWarning, stacklevel=4)
                self.numpy_step(node, _reference_fn, "reference")
            return
        self._advance(origin)
        self.add_step(*step)

    def conv_with_epilogue(self, node: Node, conv: Node) -> None:
        """A composite of a Conv2D and its elementwise epilogue: one step, the conv's GEMMs then the
        epilogue's kernel over the GEMM result (built now: no stand-in reads a GEMM layout). With
        symbolic sizes, a Parameter written in place, no half-float kernels, or a kernel that fails
        to build (with a KernelBuildWarning), its ops run as kernels of their own."""
        label = printable(node.name or node.op, 200)
        if self.dynamic or any(v in self.in_place for v in node.outputs) or (
                not float16_supported() and _touches_float16(node.subgraph)):
            self.inline(node)
            return
        sub, reads, conv_inputs = epilogue_graph(node.subgraph, conv)
        try:
            order = Geometry(conv.inputs[0].shape, conv.inputs[1].shape, conv.attr_dict).result_order
            spec, sizes = describe(sub, const_arguments=True, layouts={0: order})
            build = lambda *a: build_kernel(*a, self.cfg.cache_mode, self.cfg.cache_dir,  # noqa: E731
                                            self.cfg.source_dir, background=False)
            launch = KernelLaunch(spec, build, self.cfg.core_num, self.cfg.parallel_min_elements,
                                  scalar_values(sub))
            built, fn, extra, _, _, origin = launch.at(tuple(sizes))
        except Exception as e:  # noqa: BLE001 - any build failure must leave the run alive
            self._advance("failed")
            warnings.warn(f"epilogue kernel of {label} failed to build ({type(e).__name__}: {_first_line(e)}); "
                          "inlined into single-op kernels", KernelBuildWarning, stacklevel=4)
            self.inline(node)
            return
        half = tuple(v.dtype.is_half for v in sub.inputs + sub.outputs)
        step_fn = conv_epilogue(node, conv, conv_inputs, reads, fn, extra, half)
        ops = tuple(n.op for n in node.subgraph.nodes if n.op != "Const")
        info = replace(built, name=node.name or node.op, op_types=ops, inputs=tuple(v.type for v in node.inputs),
                       outputs=node.types, variant="conv", phase=phase_of(node, self.updates_only))
        self.add_step(Step(info, step_fn, tuple(self.where[v] for v in node.inputs), self.outputs_of(node),
                           values_in=node.inputs, values_out=node.outputs, blas=True))
        self._advance(origin)

    def _advance(self, origin: str) -> None:
        if self.progress is not None:
            self.progress.update(origin)

    def inline(self, node: Node) -> None:
        """The composite's primitives as launches of their own (counted as one kernel of the progress)."""
        for v_sub, v_ext in zip(node.subgraph.inputs, node.inputs):
            self.where[v_sub] = self.where[v_ext]
        progress, self.progress = self.progress, None
        try:
            for inner in node.subgraph.nodes:
                self.lower_node(inner)
        finally:
            self.progress = progress
        for v, v_sub in zip(node.outputs, node.subgraph.outputs):
            self.where[v] = self.where[v_sub]

    def build_kernel(self, node: Node, sub: Graph, ext: tuple[Value, ...]) -> tuple[tuple, str]:
        """(the step launching the kernel of `node` and its template, or None), and where the kernel
        came from ("compiled", "disk", "memory": the kernel cache's answer, or this program's own earlier
        kernel of that structure). The launch choices are KernelLaunch.at's (kernels/plan.py), at the
        collapsed sizes: evaluated per plan when they are symbolic."""
        sub, ext = _inline_scalar_consts(sub, tuple(ext))
        ins = tuple(self.where[v] for v in ext)
        # result k updates the Parameter the kernel reads as input i: stored through that input's slice
        # (kernels/in_place.py)
        homes = [self.where[self.in_place[v]] if v in self.in_place else None for v in node.outputs]
        parts = multi_parts(sub)
        if parts is not None:
            if self.dynamic and any(isinstance(d, Dim) for v in ext for d in v.shape):
                raise ValueError("a multi-tensor kernel over symbolic sizes (its tensors' offsets are fixed)")
            mstep, origin = self.multi_tensor_step(node, sub, parts, ext, ins, homes)
            return (mstep, None), origin
        aliases = tuple((k, ins.index(s)) for k, s in enumerate(homes) if s in ins)
        key = (sub.key(), aliases)
        launch = self.kernels.get(key)
        if launch is None:
            spec, sizes = describe(sub, const_arguments=True)
            launch = KernelLaunch(replace(spec, in_place=aliases), self._build, self.cfg.core_num,
                                  self.cfg.parallel_min_elements, scalar_values(sub))
            launch.sizes = sizes
            self.kernels[key] = launch
        sizes = launch.sizes
        phase = phase_of(node, self.updates_only)
        in_types, out_types = tuple(v.type for v in sub.inputs), tuple(v.type for v in sub.outputs)
        outs = self.outputs_of(node)

        named: dict = {}   # the launch's KernelInfo per launch choice, named after this node

        def step_at(values: tuple, storages: list | None, standin) -> tuple[Step, str]:
            info, fn, extra, n_threads, partials, origin = launch.at(values, standin)
            if id(info) not in named:
                named[id(info)] = (info, replace(info, name=node.name or node.op, phase=phase, inputs=in_types,
                                                 outputs=out_types))
            info = named[id(info)][1]
            scratch = tuple(self.scratch(dtype, count, storages) for dtype, count in partials)
            return Step(info, fn, ins, outs, extra, n_threads, tuple(ext), node.outputs, aliases, scratch), origin

        if not any(isinstance(d, Dim) for d in sizes):
            step, origin = step_at(tuple(sizes), None, lambda: StandIn(sub, aliases, self.exact))
            return (step, None), origin
        # a kernel building in the background: its stand-in at each plan's sizes (made only then)
        step, origin = step_at(tuple(value_at(d, self.hints) for d in sizes), None,
                               lambda: StandIn(specialize(sub, self.hints), aliases, self.exact))

        sizes_at = shape_function(tuple(sizes))

        def at(plan_sizes, storages):
            return step_at(sizes_at(plan_sizes), storages,
                           lambda: StandIn(specialize(sub, plan_sizes), aliases, self.exact))[0]
        return (step, at), origin

    def _build(self, spec, variant: str, sig: tuple):
        """The one build path of every generated kernel (kernels.launch.build_kernel) with this
        program's cache and source settings; a kernel missing from the cache comes back pending when
        it builds in the background."""
        return build_kernel(spec, variant, sig, self.cfg.cache_mode, self.cfg.cache_dir, self.cfg.source_dir,
                            background=self.background)

    def exact(self, node: Node):
        """A stand-in's computation of one node with its kernel's bits (kernels/standin.py): the node's
        single-op kernel (built now, once: the kernel cache keeps it), in a program per operand shapes
        (a stand-in may run a node on slices of its operands)."""
        positions = [k for k, v in enumerate(node.inputs) if v.node.op != "Const"]

        def run(arrays):
            program = self._exact_program(node, tuple(arrays[k].shape for k in positions))
            return program.run([np.ascontiguousarray(arrays[k]) for k in positions])
        self._exact_program(node, tuple(node.inputs[k].shape for k in positions))
        return run

    def _exact_program(self, node: Node, shapes: tuple) -> Program:
        ins = [v for v in node.inputs if v.node.op != "Const"]
        inputs = Graph.with_inputs([TensorType(shape, v.dtype) for shape, v in zip(shapes, ins)])
        consts = {v: Node("Const", (), v.node.attrs, (v.type,)) for v in node.inputs if v.node.op == "Const"}
        remap = dict(zip(ins, inputs))
        remap.update((v, c.out) for v, c in consts.items())
        shape = tuple(np.broadcast_shapes(*shapes, *(v.shape for v in consts)))
        inner = node.replace(inputs=tuple(remap[v] for v in node.inputs), name="",
                             types=tuple(TensorType(shape, t.dtype) for t in node.types))
        graph = Graph(inputs, list(consts.values()) + [inner], inner.outputs)
        key = graph.key()
        if key not in self.exact_programs:   # one per op, operands and shapes: its buffers are shared too
            self.exact_programs[key] = lower(graph, replace(self.cfg, compile_mode="wait", source_dir=None))
        return self.exact_programs[key]

    def scratch(self, dtype, count: int, storages: list | None = None) -> int:
        """A temp of `count` elements a launch uses while it runs (a split kernel's partials): in this
        program's storages, or in a plan's (kernels/plan.py)."""
        storages = self.storages if storages is None else storages
        storages.append(Storage("temp", dtype.np, count))
        return len(storages) - 1

    def multi_tensor_step(self, node: Node, sub: Graph, parts, ext, ins, homes) -> tuple[Step, str]:
        """One launch of the kernel the parts share over every part's tensors (kernels/multi_tensor.py)."""
        described = describe_multi(parts)
        if described is None:
            raise ValueError(f"the {len(parts)} disjoint parts of the composite are not one elementwise kernel")
        mspec, counts = described
        aliases = local_aliases(parts, mspec, ins, homes)
        mspec = replace(mspec, spec=replace(mspec.spec, in_place=aliases))
        total = sum(counts)
        variant, block_dim, tile, lanes = choose_launch(mspec.spec, (total,), self.cfg.core_num)
        built = self._build(mspec, "multi_tensor", multi_tensor_signature(mspec))
        pairs = tuple((p.outputs[k], p.inputs[i]) for p in parts for k, i in aliases)
        stored = {k for k, _ in pairs}
        passed = [k for k in range(len(node.outputs)) if k not in stored]
        n_threads = threads_for(mspec.spec, total, block_dim, self.cfg.parallel_min_elements)

        def launch(dispatcher):
            packed = launcher(dispatcher, parts, mspec, np.array(counts, np.int64), len(ins), passed)
            return launch_of(packed, block_dim, n_threads, (block_dim, tile, lanes), False)
        if built.job is None:
            fn, extra = launch(built.fn)
        else:   # building in the background: the stand-in runs meanwhile
            extra = launch(None)[1]
            fn = PendingLaunch(built.job, StandIn(sub, pairs, self.exact), lambda d: launch(d)[0])
        info = KernelInfo(node.name or node.op, mspec.op_names, block_dim, tuple(v.type for v in ext),
                          node.types, "device", built.source, "multi_tensor", kernel=built.name,
                          phase=phase_of(node, self.updates_only), tile=tile,
                          ub_bytes=ub_bytes(mspec.spec, (total,), variant, tile))
        return Step(info, fn, ins, self.outputs_of(node), extra=extra, threads=n_threads,
                    values_in=tuple(ext), values_out=node.outputs, in_place=pairs), built.origin

    # --- Parameter updates ---------------------------------------------------------------
    def lower_assigns(self, assigns: list[Node]) -> None:
        """Each Assign(ref, value) not written in place by the step computing `value`
        (kernels/in_place.py): a copy at the end writes it into ref's input buffer, after every step
        has run (a value that is itself an assigned input is first copied aside: a swap stays a swap)."""
        copies = [(node, *(self.where[v] for v in node.inputs)) for node in assigns
                  if node.inputs[1] not in self.in_place]
        assigned = {ref for _, ref, _ in copies}
        staged = []
        for node, ref, value in copies:
            if value in assigned:   # the old value of an input another copy overwrites
                aside = self.storage("temp", node.out.type)
                self.add_step(self._copy_step(f"Copy_old_{printable(node.name or 'Assign', 200)}", node,
                                              value, aside))
                value = aside
            staged.append((node, ref, value))
        for node, ref, value in staged:
            self.add_step(self._copy_step(printable(node.name or "Assign", 200), node, value, ref))

    def _copy_step(self, name: str, node: Node, src: int, dst: int) -> Step:
        t = node.out.type
        info = KernelInfo(name, ("Assign",), 1, (t,), (t,), "device", None, "copy", phase="optimizer")
        return Step(info, _copy, (src,), (dst,), values_in=(node.inputs[1],), values_out=(node.out,))

    # --- outputs -------------------------------------------------------------------------
    def claim_outputs(self) -> list[int]:
        """Output storages: a kernel writes an output directly when its buffer is a temp no other
        output has claimed; otherwise (an input, a constant, a repeat) a copy fills it. The outputs
        that are Assigns are the updates of inputs, not results (`lower_assigns`)."""
        ids = []
        for k, v in enumerate(self.graph.outputs):
            if v.node.op == "Assign":
                continue
            s = self.where[v]
            st = self.storages[s]
            if st.kind == "temp":
                st.kind, st.index, st.shape = "output", k, tuple(v.shape)
                ids.append(s)
                continue
            out = self.storage("output", v.type, index=k, shape=tuple(v.shape))
            info = KernelInfo(f"Copy_output{k}", ("Copy",), 1, (v.type,), (v.type,), "device", None, "numpy")
            self.add_step(Step(info, _copy, (s,), (out,), values_in=(v,), values_out=(v,)))
            ids.append(out)
        return ids


def _touches_float16(sub: Graph) -> bool:
    """Whether a kernel holds a half float (float16 or bfloat16)."""
    return any(v.dtype.is_half for v in sub.inputs) or any(t.dtype.is_half for n in sub.nodes for t in n.types)


def _ops_text(ops: list[str], shown: int = 8) -> str:
    """`Mul+Add+...`: the first ops of a kernel, then how many there are (a warning stays one line)."""
    return "+".join(ops) if len(ops) <= shown else "+".join(ops[:shown]) + f"+... ({len(ops)} ops)"


def _first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return printable(text[0], 200) if text else ""


def _copy(src, dst):
    dst[:] = src


def _gemm_fn(node: Node, shapes):
    return gemm_fn(node, shapes)


def _segment_sum_fn(node: Node, shapes):
    x, ids = node.inputs
    return segment_sum_fn(shapes[0], shapes[1], shapes[2][0], x.dtype.np)   # num_segments: the result's rows


def _dropout_fn(node: Node, shapes):
    return dropout_fn(node.attr("keep_prob"), node.attr("seed"), node.attr("op_id"), node.out.dtype.np)


def _copy_fn(node: Node, shapes):
    return _copy


def _spatial_fn(node: Node, shapes):
    return spatial_kernel(node)[0]   # from the node (at a plan's sizes: kernels/plan.py alone)


def _host_fn(node: Node, shapes):
    return _reference_fn(node, shapes, run_host)


def _transpose_fn(node: Node, shapes):
    shape, perm, out_shape = shapes[0], node.attr("perm"), shapes[1]

    def transpose(x, out):
        np.copyto(out.reshape(out_shape), x.reshape(shape).transpose(perm))
    return transpose


def _reference_fn(node: Node, _shapes=None, run=evaluate):
    """The numpy reference of `node` (a composite: of its subgraph) writing into flat output buffers."""
    if node.subgraph is not None:
        run = lambda n, arrays: interpret(n.subgraph, arrays)  # noqa: E731
    shapes = [v.shape for v in node.inputs]
    n_in = len(shapes)

    def reference(*arrays):
        results = run(node, [a.reshape(s) for a, s in zip(arrays[:n_in], shapes)])
        for r, out in zip(results, arrays[n_in:]):
            out[:] = r.reshape(-1)
    return reference


# the numpy steps' functions that need only the shapes (others get the node at the plan's sizes)
SHAPE_FUNCTIONS = (_gemm_fn, _segment_sum_fn, _dropout_fn, _copy_fn, _transpose_fn)


def kernels_to_build(graph: Graph) -> int:
    """How many launches of `graph` (its branches' too) run a generated kernel: a compile's progress total."""
    count = 0
    for node in graph.nodes:
        if branches(node):
            count += sum(kernels_to_build(g) for g in branches(node))
        elif node.op not in ("Const", "Reshape") and _Builder.kernel_graph(node) is not None:
            count += 1
    return count


def lower(graph: Graph, cfg: DeviceConfig | None = None, progress=None) -> Program:
    """The Program that runs `graph` on generated kernels (see the module docstring). `progress`, when
    given, is told of each generated kernel as it is ready: `progress.update(origin)`, origin one of
    "compiled", "disk", "memory" (a cache hit), "failed" (run otherwise, with a KernelBuildWarning) or
    "reference" (float16 without a kernel: run otherwise, no warning)."""
    return _Builder(graph, cfg or DeviceConfig(), progress).build()
