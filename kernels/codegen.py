"""Render a KernelSpec as the Python source of one numba kernel. Source text and nothing else.

Every kernel is a grid of `block_dim` blocks (`prange` in the parallel variant, `range` in the
sequential one); arrays are flat arguments, sizes, block_dim and the tile are run-time arguments:

    elementwise   each block takes a contiguous share of the flat iteration space (aicore.block_range)
                  and walks it in segments of at most `tile` elements that stay inside one row of the
                  last axis; a segment is sliced out of every buffer and looped over from 0
                  (a loop from 0 vectorizes, `range(s, e)` does not)
    rows          reductions: a unit is one position of the kept axes; each block takes a share of
                  the units and walks them `tile` at a time; per unit, one sweep ("pass") over the
                  reduce axes per phase (Softmax: max, sum of exp, output), reductions accumulated in
                  `lanes` (64) independent accumulators, element j in lane j % lanes, folded in a
                  fixed tree; the chunk loop over lanes vectorizes without reassociating anything
    split         one-pass reductions of a long row over few units: the row is cut into chunks of
                  `tile` elements, a fixed size (never derived from block_dim or threads), each chunk
                  reduced on its own into a partial, the partials folded in chunk order afterwards

No order depends on block_dim or on the thread count, so every variant is deterministic.
"""
from __future__ import annotations

import hashlib
from contextlib import contextmanager

from ir.dtypes import DType
from ir.ops import Pattern, get
from kernels.emitters import NP_NAME, REDUCERS, Operands, const_literal, emit, f16_round, math_functions
from kernels.layout import KernelSpec

LANES = 64  # accumulator lanes of a reduction over a long row (a power of two)


def lanes_for(row: int) -> int:
    """Accumulator lanes for reduced rows of `row` elements: 64, fewer for short rows (a 16-element
    row would spend more on 64 lanes than on its data). Depends on the shape only, never on block_dim
    or threads, so results stay bitwise stable; a kernel fused or alone sees the same row."""
    lanes = LANES
    while lanes > 1 and lanes * 4 > row:
        lanes //= 2
    return lanes
VARIANTS = ("elementwise", "rows", "split")


def kernel_stem(spec: KernelSpec) -> str:
    """`Fused_Mul_Add` for composites, the op for single-op kernels; a hash of the source follows."""
    ops = spec.op_names or ("Copy",)
    return (ops[0] if len(ops) == 1 else "Fused_" + "_".join(_dedup(ops)))[:80]


def _dedup(ops):
    seen = []
    for op in ops:
        if op not in seen:
            seen.append(op)
    return seen


class _Writer:
    def __init__(self):
        self.lines: list[str] = []
        self.depth = 0

    def __call__(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    @contextmanager
    def block(self, header: str):
        self(header)
        self.depth += 1
        yield
        self.depth -= 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _product(terms) -> str:
    terms = list(terms)
    return " * ".join(terms) if terms else "1"


class _Kernel:
    """Shared pieces: buffer names, strides, constants, the per-element body."""

    def __init__(self, spec: KernelSpec, variant: str, parallel: bool):
        self.spec, self.variant, self.parallel = spec, variant, parallel
        self.w = _Writer()
        self.buffers = [(f"in{i}", p) for i, (_, p) in enumerate(spec.inputs)] + \
                       [(f"out{k}", p) for k, (_, p) in enumerate(spec.outputs)]
        self.pres = dict(self.buffers)
        self.dims = [f"d{a}" for a in range(spec.rank)]
        self.consts = {n: node for n, node in enumerate(spec.nodes) if node.op == "Const"}
        self.stash_load: set = set()    # refs read back from the block's row scratch in this pass
        self.stash_store: set = set()   # refs computed in this pass and kept for later passes

    # --- layout arithmetic ---------------------------------------------------------------
    def stride(self, buf: str, axis: int) -> str:
        """Name of buf's stride on axis (emitted at the top), '1' when innermost."""
        pres = self.pres[buf]
        after = [self.dims[a] for a in range(axis + 1, self.spec.rank) if pres[a]]
        return f"s_{buf}_{axis}" if after else "1"

    def emit_strides(self) -> None:
        for buf, pres in self.buffers:
            for a in range(self.spec.rank):
                if pres[a] and self.stride(buf, a) != "1":
                    after = [self.dims[x] for x in range(a + 1, self.spec.rank) if pres[x]]
                    self.w(f"s_{buf}_{a} = {_product(after)}")

    def offset(self, buf: str, index: dict[int, str], base: str | None = None) -> str:
        """Flat offset of buf at the axis indices given (others contribute nothing)."""
        terms = [base] if base else []
        for a, idx in index.items():
            if self.pres[buf][a]:
                s = self.stride(buf, a)
                terms.append(idx if s == "1" else f"{idx} * {s}")
        return " + ".join(terms) if terms else "0"

    def decompose(self, flat: str, axes: list[int], prefix: str) -> dict[int, str]:
        """Emit the multi-index of `flat` over `axes` (row-major); returns axis -> variable."""
        if not axes:
            return {}
        if len(axes) == 1:
            return {axes[0]: flat}
        self.w(f"k_ = {flat}")
        out = {}
        for a in reversed(axes[1:]):
            self.w(f"{prefix}{a} = k_ % {self.dims[a]}")
            self.w(f"k_ = k_ // {self.dims[a]}")
            out[a] = f"{prefix}{a}"
        self.w(f"{prefix}{axes[0]} = k_")
        out[axes[0]] = f"{prefix}{axes[0]}"
        return out

    def emit_block_span(self) -> None:
        """Block blk's share, as aicore.block_range computes it."""
        self.w("b = np.int64(blk)  # prange may type its index unsigned; int64 keeps the arithmetic integral")
        self.w("start = b * share + min(b, extra)")
        self.w("stop = start + share + (1 if b < extra else 0)")

    def emit_grid_header(self, total: str) -> str:
        self.w(f"share = {total} // block_dim")
        self.w(f"extra = {total} - share * block_dim")
        loop = "prange" if self.parallel else "range"
        return f"for blk in {loop}(block_dim):"

    # --- the per-element body ------------------------------------------------------------
    def operand_consts(self, node) -> tuple:
        out = []
        for ref in node.args:
            if ref[0] == "v" and ref[1] in self.consts:
                out.append(self.consts[ref[1]].attrs[0][2])
            else:
                out.append(None)
        return tuple(out)

    def node_expr(self, n: int, args: list[str]) -> str:
        node = self.spec.nodes[n]
        return emit(node.op, Operands(args, node.in_dtypes, node.dtypes, dict(node.attrs),
                                      self.operand_consts(node)))

    # --- memory: float16 buffers hold uint16 bits, converted exactly on load and store ----------
    def dtype_of(self, buf: str) -> DType:
        if buf.startswith("in"):
            return self.spec.inputs[int(buf[2:])][0]
        return self.spec.outputs[int(buf[3:])][0]

    def load(self, buf: str, element: str) -> str:
        return f"f16_bits_to_f32({element})" if self.dtype_of(buf) == DType.float16 else element

    def store(self, buf: str, value: str) -> str:
        return f"f32_to_f16_bits({value})" if self.dtype_of(buf) == DType.float16 else value

    def unit_level(self, ref) -> bool:
        """A value computed once per unit (reduced, after a reduction), not per element."""
        return (self.spec.has_reduce and ref[0] == "v" and self.spec.nodes[ref[1]].reduced
                and self.spec.phase_of(ref) >= 1)

    def emit_lane(self, targets, lane: str, index: str, loaded: set, prefix: str = "t") -> dict:
        """Statements computing `targets` (refs) for one element; returns ref -> expression."""
        exprs: dict = {}

        def expr(ref) -> str:
            if ref in exprs:
                return exprs[ref]
            if ref[0] == "in":
                i = ref[1]
                if self.inner_present(f"in{i}"):
                    name = f"x{i}_{lane}"
                    self.w(f"{name} = {self.load(f'in{i}', f'{prefix}_in{i}[{index}]')}")
                else:
                    loaded.add(i)
                    name = f"x{i}"
            elif ref[1] in self.consts:
                name = f"c{ref[1]}"
            elif self.unit_level(ref):
                name = f"u{ref[1]}"
            elif ref in self.stash_load:
                name = f"v{ref[1]}_{lane}"
                self.w(f"{name} = {prefix}_w{ref[1]}[{index}]")
            else:
                n = ref[1]
                args = [expr(a) for a in self.spec.nodes[n].args]
                name = f"v{n}_{lane}"
                self.w(f"{name} = {self.node_expr(n, args)}")
                if ref in self.stash_store:
                    self.w(f"{prefix}_w{n}[{index}] = {name}")
            exprs[ref] = name
            return name

        for ref in targets:
            expr(ref)
        return exprs

    def emit_consts(self) -> None:
        for n, node in self.consts.items():
            self.w(f"c{n} = {const_literal(node.attrs[0][2], node.dtypes[0])}")

    def signature(self, name: str) -> str:
        args = [b for b, _ in self.buffers] + self.dims + ["block_dim", "tile", "lanes"]
        return f"def {name}({', '.join(args)}):"

    def docstring(self, name: str) -> None:
        axes = ", ".join(f"{d}{' (reduce)' if r else ''}" for d, r in zip(self.dims, self.spec.reduce_axes))
        self.w(f'"""{name}: {self.variant} kernel over collapsed axes ({axes}).')
        for (b, pres), (dtype, _) in zip(self.buffers, self.spec.inputs + self.spec.outputs):
            shown = ", ".join(d if p else "1" for d, p in zip(self.dims, pres))
            self.w(f"    {b}: {dtype}[{shown}]")
        self.w('"""')


class _Elementwise(_Kernel):
    def inner_present(self, buf: str) -> bool:
        return self.pres[buf][-1]

    def render(self, name: str) -> str:
        w, spec, r = self.w, self.spec, self.spec.rank
        with w.block(self.signature(name)):
            self.docstring(name)
            self.emit_consts()
            self.emit_strides()
            total = _product(self.dims)
            with w.block(self.emit_grid_header(total)):
                self.emit_block_span()
                w("i = start")
                with w.block("while i < stop:"):
                    inner = self.dims[-1]
                    if r > 1:
                        w(f"row = i // {inner}")
                        w(f"col = i - row * {inner}")
                        w(f"n = min(stop - i, {inner} - col, tile)")
                        index = self.decompose("row", list(range(r - 1)), "i")
                        index[r - 1] = "col"
                    else:
                        w("n = min(stop - i, tile)")
                        index = {0: "i"}
                    for buf, pres in self.buffers:
                        off = "i" if all(pres) else self.offset(buf, index)
                        w(f"o_{buf} = {off}")
                        if pres[-1]:
                            w(f"t_{buf} = {buf}[o_{buf}:o_{buf} + n]")
                    self.emit_loop(spec)
                    w("i += n")
        return w.text()

    def emit_loop(self, spec) -> None:
        w = self.w
        inner_outs = [k for k, (_, p) in enumerate(spec.outputs) if p[-1]]
        outer_outs = [k for k, (_, p) in enumerate(spec.outputs) if not p[-1]]
        for i, (_, pres) in enumerate(spec.inputs):
            if not pres[-1]:
                w(f"x{i} = {self.load(f'in{i}', f'in{i}[o_in{i}]')}")
        with w.block("for j in range(n):"):
            exprs = self.emit_lane([spec.results[k] for k in inner_outs], "", "j", set())
            for k in inner_outs:
                w(f"t_out{k}[j] = {self.store(f'out{k}', exprs[spec.results[k]])}")
        if outer_outs:  # outputs constant along the segment: their operands are too
            exprs = self.emit_lane([spec.results[k] for k in outer_outs], "s", "0", set())
            for k in outer_outs:
                w(f"out{k}[o_out{k}] = {self.store(f'out{k}', exprs[spec.results[k]])}")


class _Reduction(_Kernel):
    """rows and split variants: units over the kept axes, sweeps over the reduce axes."""

    def __init__(self, spec, variant, parallel):
        super().__init__(spec, variant, parallel)
        self.kept = [a for a in range(spec.rank) if not spec.reduce_axes[a]]
        red = [a for a in range(spec.rank) if spec.reduce_axes[a]]
        self.inner, self.outer_red = red[-1], red[:-1]
        self.reductions = [n for n, node in enumerate(spec.nodes) if get(node.op).pattern == Pattern.REDUCE]
        self.have_unit: set[int] = set()

    def inner_present(self, buf: str) -> bool:
        return self.pres[buf][self.inner]

    def slice_expr(self, buf: str, length: str) -> str:
        s = self.stride(buf, self.inner)
        if s == "1":
            return f"{buf}[o_{buf}:o_{buf} + {length}]"
        return f"{buf}[o_{buf}:o_{buf} + {length} * {s}:{s}]"

    def acc_dtype(self, n: int) -> DType:
        node = self.spec.nodes[n]
        return REDUCERS[node.op].acc_dtype(node.in_dtypes[0])

    def emit_finish_lanes(self, n: int, target: str) -> None:
        """Fold the lanes of reduction n in a fixed tree (lane k with lane k + h, h halving)."""
        combine = REDUCERS[self.spec.nodes[n].op].combine
        w = self.w
        w("h = lanes // 2")
        with w.block("while h >= 1:"):
            with w.block("for k in range(h):"):
                w(f"acc{n}[k] = {combine(f'acc{n}[k]', f'acc{n}[k + h]', self.acc_dtype(n))}")
            w("h //= 2")
        w(f"{target} = acc{n}[0]")

    def cast_result(self, n: int, expr: str) -> str:
        node = self.spec.nodes[n]
        if node.dtypes[0] == DType.float16:  # float16 accumulates in float32 and rounds once
            return f16_round(expr)
        return f"{NP_NAME[node.dtypes[0]]}({expr})" if self.acc_dtype(n) != node.dtypes[0] else expr

    def ensure_unit(self, ref) -> str:
        """Emit (once) the unit-level computation of a reduced value; returns its expression."""
        if ref[0] == "in":
            buf = f"in{ref[1]}"
            return self.load(buf, f"{buf}[{self.offset(buf, self.kept_index, None) if self.kept else '0'}]")
        n = ref[1]
        if n in self.consts:
            return f"c{n}"
        if n not in self.have_unit:
            node = self.spec.nodes[n]
            if get(node.op).pattern == Pattern.REDUCE:
                raise AssertionError(f"reduction {n} used before its pass")  # codegen invariant
            args = [self.ensure_unit(a) for a in node.args]
            self.w(f"u{n} = {self.node_expr(n, args)}")
            self.have_unit.add(n)
        return f"u{n}"

    def pass_targets(self, j: int) -> tuple[list, list, list]:
        """(reductions accumulated, full outputs written, refs computed) in pass j."""
        spec = self.spec
        reds = [n for n in self.reductions if spec.nodes[n].phase == j]
        outs = [k for k, (_, pres) in enumerate(spec.outputs)
                if spec.full_buffer(pres) and spec.phase_of(spec.results[k]) == j]
        refs = [spec.nodes[n].args[0] for n in reds] + [spec.results[k] for k in outs]
        return reds, outs, refs

    def unit_refs(self, refs) -> list:
        """Unit-level values an in-loop computation of refs reads."""
        found, seen = [], set()

        def walk(ref):
            if ref in seen or ref[0] == "in" or ref[1] in self.consts:
                return
            seen.add(ref)
            if self.unit_level(ref):
                found.append(ref)
                return
            for a in self.spec.nodes[ref[1]].args:
                walk(a)
        for r in refs:
            walk(r)
        return found

    def emit_sweep(self, reds, outs, refs, length: str) -> None:
        """One sweep over `length` elements of the inner reduce axis. With reductions, element j
        goes to lane j % lanes, chunk by chunk (the chunk loop vectorizes: lanes are independent);
        without, a plain loop from 0."""
        w, spec = self.w, self.spec
        used_inputs = self.inputs_of(refs)
        sliced = []
        for buf, pres in self.buffers:
            if (buf.startswith("in") and int(buf[2:]) in used_inputs) or \
                    (buf.startswith("out") and int(buf[3:]) in outs):
                if pres[self.inner]:
                    w(f"t_{buf} = {self.slice_expr(buf, length)}")
                    sliced.append(buf)
                elif buf.startswith("in"):
                    w(f"x{buf[2:]} = {self.load(buf, f'{buf}[o_{buf}]')}")
        for ref in sorted(self.stash_load | self.stash_store):
            w(f"t_w{ref[1]} = w{ref[1]}[:{length}]")
            sliced.append(f"w{ref[1]}")
        if not reds:
            with w.block(f"for j in range({length}):"):
                self.emit_element(reds, outs, refs, "t", "j")
            return
        with w.block(f"for q in range(0, {length}, lanes):"):
            w(f"cnt = min(lanes, {length} - q)")
            for buf in sliced:
                w(f"s_{buf} = t_{buf}[q:q + cnt]")
            with w.block("for k in range(cnt):"):
                self.emit_element(reds, outs, refs, "s", "k")

    def emit_element(self, reds, outs, refs, prefix: str, index: str) -> None:
        exprs = self.emit_lane(refs, "", index, set(), prefix)
        for n in reds:
            node = self.spec.nodes[n]
            combine = REDUCERS[node.op].combine
            val = exprs[node.args[0]]
            if self.acc_dtype(n) != node.in_dtypes[0]:
                val = f"{NP_NAME[self.acc_dtype(n)]}({val})"
            self.w(f"acc{n}[k] = {combine(f'acc{n}[k]', val, self.acc_dtype(n))}")
        for k in outs:
            target = f"{prefix}_out{k}[{index}]" if self.pres[f"out{k}"][self.inner] else f"out{k}[o_out{k}]"
            self.w(f"{target} = {self.store(f'out{k}', exprs[self.spec.results[k]])}")

    def inputs_of(self, refs) -> set[int]:
        found, seen = set(), set()

        def walk(ref):
            if ref in seen:
                return
            seen.add(ref)
            if ref[0] == "in":
                found.add(ref[1])
            elif not self.unit_level(ref):
                for a in self.spec.nodes[ref[1]].args:
                    walk(a)
        for r in refs:
            walk(r)
        return found

    def alloc_lanes(self) -> None:
        """Per block: one array of `lanes` accumulators per reduction."""
        for n in self.reductions:
            self.w(f"acc{n} = np.empty(lanes, {NP_NAME[self.acc_dtype(n)]})")

    def init_lanes(self, reds) -> None:
        for n in reds:
            ident = REDUCERS[self.spec.nodes[n].op].identity(self.acc_dtype(n))
            with self.w.block("for k in range(lanes):"):
                self.w(f"acc{n}[k] = {ident}")

    def write_reduced_outputs(self, phase: int) -> None:
        spec = self.spec
        for k, (_, pres) in enumerate(spec.outputs):
            ref = spec.results[k]
            if not spec.full_buffer(pres) and spec.phase_of(ref) == phase:
                self.w(f"out{k}[{self.offset(f'out{k}', self.kept_index) if self.kept else '0'}] = "
                       f"{self.store(f'out{k}', self.ensure_unit(ref))}")

    def emit_unit_start(self, flat: str) -> None:
        self.kept_index = self.decompose(flat, self.kept, "i")
        self.have_unit = set()

    def emit_offsets(self, bufs, red_index: dict[int, str], inner_start: str | None) -> None:
        for buf, pres in self.buffers:
            if buf in bufs:
                index = dict(self.kept_index)
                index.update(red_index)
                if inner_start is not None:
                    index[self.inner] = inner_start
                self.w(f"o_{buf} = {self.offset(buf, index)}")

    def pass_buffers(self, refs, outs) -> set[str]:
        return {f"in{i}" for i in self.inputs_of(refs)} | {f"out{k}" for k in outs}


EXPENSIVE = {"Exp", "Log", "Tanh", "Erf", "Pow"}


class _Rows(_Reduction):
    """A unit's passes run back to back; a costly value one pass computes and a later pass needs
    (Softmax's exp(x - max)) is kept in a per-block scratch row (the UB) instead of recomputed."""

    def closure(self, refs) -> set:
        seen = set()

        def walk(ref):
            if ref in seen or ref[0] == "in" or ref[1] in self.consts or self.unit_level(ref):
                return
            seen.add(ref)
            for a in self.spec.nodes[ref[1]].args:
                walk(a)
        for r in refs:
            walk(r)
        return seen

    def plan_stash(self) -> dict:
        """ref -> the first pass computing it, for costly values used by two passes or more."""
        if self.outer_red:
            return {}
        first, count = {}, {}
        for j in range(self.spec.num_passes):
            for ref in self.closure(self.pass_targets(j)[2]):
                first.setdefault(ref, j)
                count[ref] = count.get(ref, 0) + 1
        return {r: first[r] for r in first if count[r] > 1 and self.spec.nodes[r[1]].op in EXPENSIVE}

    def render(self, name: str) -> str:
        w, spec = self.w, self.spec
        with w.block(self.signature(name)):
            self.docstring(name)
            self.emit_consts()
            self.emit_strides()
            units = _product(self.dims[a] for a in self.kept)
            m = self.dims[self.inner]
            with w.block(self.emit_grid_header(units)):
                self.emit_block_span()
                self.alloc_lanes()
                self.stash = self.plan_stash()
                for ref in sorted(self.stash):
                    w(f"w{ref[1]} = np.empty({m}, {NP_NAME[spec.nodes[ref[1]].dtypes[0]]})")
                with w.block("for t0 in range(start, stop, tile):"):
                    with w.block("for p in range(t0, min(t0 + tile, stop)):"):
                        self.emit_unit_start("p")
                        self.write_reduced_outputs(0)
                        for j in range(spec.num_passes):
                            self.emit_pass(j, m)
        return w.text()

    def emit_pass(self, j: int, m: str) -> None:
        w, spec = self.w, self.spec
        reds, outs, refs = self.pass_targets(j)
        if not refs:
            return
        for ref in self.unit_refs(refs):
            self.ensure_unit(ref)
        self.init_lanes(reds)
        used = self.closure(refs)
        self.stash_store = {r for r, first in self.stash.items() if first == j and r in used}
        self.stash_load = {r for r, first in self.stash.items() if first < j and r in used}
        bufs = self.pass_buffers(refs, outs)
        if self.outer_red:
            outer = _product(self.dims[a] for a in self.outer_red)
            with w.block(f"for qo in range({outer}):"):
                self.emit_offsets(bufs, self.decompose("qo", self.outer_red, "r"), None)
                self.emit_sweep(reds, outs, refs, m)
        else:
            self.emit_offsets(bufs, {}, None)
            self.emit_sweep(reds, outs, refs, m)
        for n in reds:
            self.emit_finish_lanes(n, f"r{n}")
            w(f"u{n} = {self.cast_result(n, f'r{n}')}")
            self.have_unit.add(n)
        self.write_reduced_outputs(j + 1)


class _Split(_Reduction):
    """One pass, one reduce axis: chunks of `tile` elements reduced apart, folded in order."""

    def render(self, name: str) -> str:
        w, spec = self.w, self.spec
        reds, outs, refs = self.pass_targets(0)
        with w.block(self.signature(name)):
            self.docstring(name)
            self.emit_consts()
            self.emit_strides()
            units = _product(self.dims[a] for a in self.kept)
            m = self.dims[self.inner]
            w(f"nch = max(1, ({m} + tile - 1) // tile)")
            for n in reds:
                w(f"part{n} = np.empty({units} * nch, {NP_NAME[self.acc_dtype(n)]})")
            with w.block(self.emit_grid_header(f"{units} * nch")):
                self.emit_block_span()
                self.alloc_lanes()
                with w.block("for u in range(start, stop):"):
                    w("p = u // nch")
                    w("q0 = (u - p * nch) * tile")
                    w(f"qn = min(tile, {m} - q0)")
                    self.emit_unit_start("p")
                    self.init_lanes(reds)
                    self.emit_offsets(self.pass_buffers(refs, outs), {}, "q0")
                    self.emit_sweep(reds, outs, refs, "qn")
                    for n in reds:
                        self.emit_finish_lanes(n, f"part{n}[u]")
            with w.block(f"for p in range({units}):"):
                self.emit_unit_start("p")
                for n in reds:
                    combine = REDUCERS[spec.nodes[n].op].combine
                    w(f"r{n} = part{n}[p * nch]")
                    with w.block("for c in range(1, nch):"):
                        w(f"r{n} = {combine(f'r{n}', f'part{n}[p * nch + c]', self.acc_dtype(n))}")
                    w(f"u{n} = {self.cast_result(n, f'r{n}')}")
                    self.have_unit.add(n)
                self.write_reduced_outputs(0)
                self.write_reduced_outputs(1)
        return w.text()


def split_supported(spec: KernelSpec) -> bool:
    return spec.has_reduce and spec.num_passes == 1 and sum(spec.reduce_axes) == 1


def render(spec: KernelSpec, variant: str, parallel: bool) -> tuple[str, str]:
    """(function name, module source) of the kernel. The name ends in a hash of the source (and of
    kernels/mathfn.py when the kernel calls it), so a changed emitter never reuses an old kernel."""
    cls = {"elementwise": _Elementwise, "rows": _Rows, "split": _Split}[variant]
    placeholder = "KERNEL_NAME"
    body = cls(spec, variant, parallel).render(placeholder)
    imports = "import math\n\nimport numpy as np\nfrom numba import prange\n"
    used = sorted(fn for fn in math_functions() if f"{fn}(" in body)
    if used:
        imports += f"\nfrom kernels.mathfn import {', '.join(used)}  # mathfn {mathfn_digest()}\n"
    mode = "parallel" if parallel else "sequential"
    digest = hashlib.sha256(f"{variant}|{mode}|{spec.key()}|{imports}{body}".encode()).hexdigest()[:10]
    name = f"{kernel_stem(spec)}_{digest}"
    header = f'"""Generated by graphkernel: {name} ({variant}, {mode}).\n\nkey: {spec.key()}\n"""\n'
    return name, header + imports + "\n\n" + body.replace(placeholder, name)


def mathfn_digest() -> str:
    import kernels.mathfn as module
    with open(module.__file__, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:12]
