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

import math
import warnings
from dataclasses import dataclass, replace

import numpy as np

from ir.autodiff import phase_of, update_nodes
from ir.graph import Graph, Node, TensorType, Value
from ir.interpret import interpret
from ir.printer import printable
from ir.ops import Pattern, branches, evaluate, get, placement
from ir.ops.host import COPY_OPS, is_host, run_host
from kernels import aicore
from kernels.background import KernelBuildWarning, PendingLaunch
from kernels.cache import default_cache_dir, usable_dir
from kernels.compile import multi_tensor_signature, signature
from kernels.conv import spatial_kernel
from kernels.emitters import EMITTERS, REDUCERS, float16_supported
from kernels.executor import Conditional, KernelInfo, Program, Step, Storage
from kernels.in_place import plan_in_place
from kernels.launch import build_kernel, choose_launch, launch_of, threads_for, ub_bytes
from kernels.layout import describe
from kernels.matmul import gemm_fn
from kernels.multi_tensor import describe_multi, launcher, local_aliases, multi_parts
from kernels.random import dropout_fn
from kernels.reduction import split_partials
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
        self.kernels: dict[tuple, tuple] = {}   # (Graph.key() of a kernel's subgraph, aliases) -> its launch
        self.background = cfg.background
        self.exact_programs: dict[tuple, Program] = {}   # the stand-ins' single-op programs (`exact`)
        self.updates_only = update_nodes(graph)  # the optimizer phase

    def storage(self, kind: str, type_, **kw) -> int:
        self.storages.append(Storage(kind, type_.dtype.np, type_.size, **kw))
        return len(self.storages) - 1

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
        return Program(self.graph, self.steps, self.storages, inputs, results, self.cfg.max_device_memory,
                       assigned=[self.storages[self.where[n.inputs[0]]].index for n in assigns])

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
        elif (sub := self.kernel_graph(node)) is not None:
            self.generated(node, sub, node.inputs, printable(node.name or node.op, 200))
        elif node.op in ("MatMul", "BatchMatMul"):
            self.numpy_step(node, gemm_fn(node), "numpy", blas=True)
        elif node.op == "Transpose":
            self.numpy_step(node, _transpose_fn(node), "numpy")
        elif (spatial := spatial_kernel(node)) is not None:   # convolutions, pooling: kernels/conv.py
            fn, variant = spatial
            self.numpy_step(node, fn, variant, blas=variant == "conv")
        elif node.op == "UnsortedSegmentSum":
            x, ids = node.inputs
            self.numpy_step(node, segment_sum_fn(x.shape, ids.shape, node.attr("num_segments"), x.dtype.np),
                            "scatter")
        elif node.op == "Dropout":
            self.numpy_step(node, dropout_fn(node.attr("keep_prob"), node.attr("seed"), node.attr("op_id"),
                                             node.out.dtype.np), "random")
        elif node.op in COPY_OPS:  # a real copy across the host/device boundary
            self.numpy_step(node, _copy, "copy")
        elif is_host(node):
            self.numpy_step(node, _reference_fn(node, run_host), "host")
        else:
            self.numpy_step(node, _reference_fn(node), "reference")

    def conditional(self, node: Node) -> None:
        then, else_ = (_Builder(g, self.cfg, self.progress).build() for g in branches(node))
        fn = Conditional(then, else_, tuple(v.shape for v in node.inputs[1:]))
        info = KernelInfo(printable(node.name or node.op, 200), (node.op,), 1, tuple(v.type for v in node.inputs),
                          node.types, "device", None, "branch", phase=phase_of(node, self.updates_only))
        self.steps.append(Step(info, fn, tuple(self.where[v] for v in node.inputs), self.outputs_of(node),
                               values_in=node.inputs, values_out=node.outputs))

    def outputs_of(self, node: Node) -> tuple[int, ...]:
        """Fresh temps, or the buffer of the Parameter a result updates in place (kernels/in_place.py)."""
        for v in node.outputs:
            ref = self.in_place.get(v)
            self.where[v] = self.where[ref] if ref is not None else self.storage("temp", v.type)
        return tuple(self.where[v] for v in node.outputs)

    def numpy_step(self, node: Node, fn, variant: str, blas: bool = False) -> None:
        target = placement(node)
        info = KernelInfo(node.name or node.op, (node.op,), 1, tuple(v.type for v in node.inputs),
                          node.types, target, None, variant, phase=phase_of(node, self.updates_only))
        ins = tuple(self.where[v] for v in node.inputs)
        self.steps.append(Step(info, fn, ins, self.outputs_of(node), values_in=node.inputs,
                               values_out=node.outputs, blas=blas))

    def generated(self, node: Node, sub: Graph, ext: tuple[Value, ...], label: str) -> None:
        # a node writing a Parameter in place must compute all its results before writing any: the
        # reference, never single-op kernels (kernels/in_place.py)
        in_place = any(v in self.in_place for v in node.outputs)
        if not float16_supported() and _touches_float16(sub):  # no kernel to build: no warning
            if node.subgraph is not None and not in_place:
                self.inline(node)
            else:
                self.numpy_step(node, _reference_fn(node), "reference")
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
                self.numpy_step(node, _reference_fn(node), "reference")
            return
        self._advance(origin)
        self.steps.append(step)

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

    def build_kernel(self, node: Node, sub: Graph, ext: tuple[Value, ...]) -> tuple[Step, str]:
        """The step launching the kernel of `node`, and where the kernel came from ("compiled", "disk",
        "memory": the kernel cache's answer, or this program's own earlier kernel of that structure)."""
        sub, ext = _inline_scalar_consts(sub, tuple(ext))
        ins = tuple(self.where[v] for v in ext)
        # result k updates the Parameter the kernel reads as input i: stored through that input's slice
        # (kernels/in_place.py)
        homes = [self.where[self.in_place[v]] if v in self.in_place else None for v in node.outputs]
        parts = multi_parts(sub)
        if parts is not None:
            return self.multi_tensor_step(node, sub, parts, ext, ins, homes)
        aliases = tuple((k, ins.index(s)) for k, s in enumerate(homes) if s in ins)
        key = (sub.key(), aliases)
        origin = "memory"
        if key not in self.kernels:
            spec, sizes = describe(sub)
            spec = replace(spec, in_place=aliases)
            variant, block_dim, tile, lanes = choose_launch(spec, sizes, self.cfg.core_num)
            dtypes = [d for d, _ in spec.inputs] + [d for k, (d, _) in enumerate(spec.outputs)
                                                     if k not in spec.aliased]
            partials = split_partials(spec, sizes, tile) if variant == "split" else []
            fold = variant == "split"
            sig = signature(dtypes + [d for d, _ in partials], len(sizes) + 5 + fold)
            built = self._build(spec, variant, sig)
            origin = built.origin
            n_threads = threads_for(spec, math.prod(sizes), block_dim, self.cfg.parallel_min_elements)
            ints = tuple(sizes) + (block_dim, tile, lanes)
            fn, extra = launch_of(built.fn, block_dim, n_threads, ints, fold)
            if built.job is not None:   # building in the background: the stand-in runs meanwhile
                fn = PendingLaunch(built.job, StandIn(sub, aliases, self.exact),
                                   lambda d: launch_of(d, block_dim, n_threads, ints, fold)[0])
            info = KernelInfo(built.name, spec.op_names, block_dim, tuple(v.type for v in sub.inputs),
                              tuple(v.type for v in sub.outputs), "device", built.source, variant,
                              kernel=built.name, tile=tile, ub_bytes=ub_bytes(spec, sizes, variant, tile))
            self.kernels[key] = info, fn, extra, n_threads, partials
        info, fn, extra, n_threads, partials = self.kernels[key]
        info = replace(info, name=node.name or node.op, phase=phase_of(node, self.updates_only))   # the launch is its node's
        scratch = tuple(self.scratch(dtype, count) for dtype, count in partials)
        return Step(info, fn, ins, self.outputs_of(node), extra=extra, threads=n_threads, values_in=tuple(ext),
                    values_out=node.outputs, in_place=aliases, scratch=scratch), origin

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

    def scratch(self, dtype, count: int) -> int:
        """A temp of `count` elements a launch uses while it runs (a split kernel's partials)."""
        self.storages.append(Storage("temp", dtype.np, count))
        return len(self.storages) - 1

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
                self.steps.append(self._copy_step(f"Copy_old_{printable(node.name or 'Assign', 200)}", node,
                                                  value, aside))
                value = aside
            staged.append((node, ref, value))
        for node, ref, value in staged:
            self.steps.append(self._copy_step(printable(node.name or "Assign", 200), node, value, ref))

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
            self.steps.append(Step(info, _copy, (s,), (out,), values_in=(v,), values_out=(v,)))
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


def _transpose_fn(node: Node):
    shape, perm, out_shape = node.inputs[0].shape, node.attr("perm"), node.out.shape

    def transpose(x, out):
        np.copyto(out.reshape(out_shape), x.reshape(shape).transpose(perm))
    return transpose


def _reference_fn(node: Node, run=evaluate):
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
