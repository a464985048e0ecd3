"""Reduction kernels: units over the kept axes, sweeps ("passes") over the reduce axes.

    rows    a unit is one position of the kept axes; each block takes a share of the units and walks
            them one by one; per unit one pass over the reduce axes per phase (Softmax: max,
            sum of exp, output). A sweep computes each reduction's operand into a scratch row (the
            UB) in a plain loop (past LOOP_MAX_WRITES arrays written, a loop per LOOP_MAX_WRITES
            scratch rows), SWEEP_CHUNK elements at a time, and accumulates it into the reduction's
            64 lanes (kernels.lanes: element j into lane j % 64, the lanes folded in a fixed
            tree); an operand that is an input row, or a value kept for a later pass, is
            accumulated where it lies. A costly value a later pass needs stays in a scratch row
            too, instead of being computed again.
    split   one-pass reductions of a long row over few units: the row is cut into chunks of `tile`
            elements, a fixed size, each chunk reduced on its own into a partial, the partials
            folded in chunk order afterwards (the hardware's atomic add, in a fixed order)

No order depends on block_dim or on the thread count, so results are bitwise stable.
"""
from __future__ import annotations

from ir.dtypes import DType
from ir.ops import Cost, Pattern, get
from kernels.emitters import NP_NAME, REDUCERS, compute_dtype, half_round
from kernels.lanes import LANES
from kernels.layout import KernelSpec
from kernels.elementwise import KernelTemplate, product

LANES_OP = {"ReduceSum": "sum", "ReduceMax": "max", "ReduceMin": "min"}   # kernels.lanes' lanes_<op>, fold_<op>
SWEEP_CHUNK = 1024   # elements of a computed operand's scratch row: a multiple of LANES, 4 KB of float32
LOOP_MAX_WRITES = 4  # a loop writing more arrays (scratch rows, accumulators, outputs) is split into loops
                     # of this many scratch rows: LLVM's runtime alias checks run out and it left 8 writes
                     # scalar; up to this many share one loop, so values they have in common are computed
                     # once (the mixed-precision BERT test's 40 kernels build in 0.87 of the time one
                     # loop per row took, and run as fast)


class Reduction(KernelTemplate):
    """rows and split variants: units over the kept axes, sweeps over the reduce axes."""

    def __init__(self, spec, variant, helpers=frozenset()):
        super().__init__(spec, variant, helpers)
        self.kept = [a for a in range(spec.rank) if not spec.reduce_axes[a]]
        red = [a for a in range(spec.rank) if spec.reduce_axes[a]]
        self.inner, self.outer_red = red[-1], red[:-1]
        self.reductions = [n for n, node in enumerate(spec.nodes) if get(node.op).pattern == Pattern.REDUCE]
        self.have_unit: set[int] = set()
        self.stash: dict = {}   # rows: costly values kept in a scratch row for a later pass

    def inner_present(self, buf: tuple) -> bool:
        return self.pres[buf][self.inner]

    def acc(self, n: int) -> str:
        return self.names("acc", n)

    def row_view(self, buf: tuple, length: str) -> str:
        """The view of buf's `length` elements along the inner reduce axis from its current offset."""
        return self.view(self.name(buf), self.at(buf), length, self.stride(buf, self.inner))

    def acc_dtype(self, n: int) -> DType:
        node = self.spec.nodes[n]
        return REDUCERS[node.op].acc_dtype(node.in_dtypes[0])

    def emit_finish_lanes(self, n: int, target: str) -> None:
        """Fold the lanes of reduction n in a fixed tree (lane k with lane k + h, h halving)."""
        self.w(f"{target} = fold_{LANES_OP[self.spec.nodes[n].op]}({self.acc(n)})")

    def direct_row(self, n: int) -> tuple | None:
        """The row reduction n accumulates where it lies (the key of the view the sweep names), or
        None when its operand is computed into its scratch row ("scr", n) first: an input row with
        unit stride, or a value kept for a later pass ("keep", k), already in the accumulator's dtype."""
        ref = self.spec.nodes[n].args[0]
        acc = self.acc_dtype(n)
        if ref[0] == "in":
            buf = ("in", ref[1])
            if (self.pres[buf][self.inner] and self.stride(buf, self.inner) == "1" and self.dtype_of(buf) == acc
                    and self.load(buf, "x") == "x"):   # half-float rows hold bits, converted as they load
                return buf
        elif ref in self.stash and NP_NAME[self.spec.nodes[ref[1]].dtypes[0]] == NP_NAME[acc]:
            return ("keep", ref[1])
        return None

    def alloc_scratch(self) -> None:
        """Per block: a scratch row of SWEEP_CHUNK elements for each reduction whose operand is computed."""
        for n in self.reductions:
            if self.direct_row(n) is None:
                self.w(f"{self.name(('scr', n))} = np.empty({SWEEP_CHUNK}, {NP_NAME[self.acc_dtype(n)]})")

    def cast_result(self, n: int, expr: str) -> str:
        node = self.spec.nodes[n]
        if node.dtypes[0].is_half:  # a half float accumulates in float32 and rounds once
            return half_round(expr, node.dtypes[0])
        return f"{NP_NAME[node.dtypes[0]]}({expr})" if self.acc_dtype(n) != node.dtypes[0] else expr

    def ensure_unit(self, ref) -> str:
        """Emit (once) the unit-level computation of a reduced value; returns its expression."""
        if ref[0] == "in":
            buf = ("in", ref[1])
            return self.load(buf, f"{self.name(buf)}[{self.offset(buf, self.kept_index) if self.kept else '0'}]")
        n = ref[1]
        if n in self.consts:
            return self.const(n)
        if n not in self.have_unit:
            node = self.spec.nodes[n]
            if get(node.op).pattern == Pattern.REDUCE:
                raise AssertionError(f"reduction {n} used before its pass")  # codegen invariant
            args = [self.ensure_unit(a) for a in node.args]
            self.w(f"{self.unit_name(ref)} = {self.node_expr(n, args)}")
            self.have_unit.add(n)
        return self.unit_name(ref)

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
        stack = list(reversed(refs))   # depth first in operand order, without recursion (deep chains)
        while stack:
            ref = stack.pop()
            if ref in seen or ref[0] == "in" or ref[1] in self.consts:
                continue
            seen.add(ref)
            if self.unit_level(ref):
                found.append(ref)
                continue
            stack.extend(reversed(self.spec.nodes[ref[1]].args))
        return found

    def emit_sweep(self, reds, outs, refs, length: str) -> None:
        """One sweep over `length` elements of the inner reduce axis: a plain loop from 0 computing the
        outputs, the values kept for later passes and the operands of reductions that need computing
        (into their scratch rows, SWEEP_CHUNK elements at a time), and every reduction accumulating
        its row (or chunk) into its lanes."""
        w, names = self.w, self.names
        used_inputs = self.inputs_of(refs)
        walked = []
        for buf, pres in self.buffers:
            kind, index = buf
            if (kind == "in" and index in used_inputs) or (kind == "out" and index in outs):
                if pres[self.inner]:
                    w(f"{self.viewed(buf)} = {self.row_view(buf, length)}")
                    walked.append(buf)
                elif kind == "in":
                    w(f"{self.broadcast_load(index)} = {self.load(buf, f'{self.name(buf)}[{self.at(buf)}]')}")
        for ref in sorted(self.stash_load | self.stash_store):
            key = ("keep", ref[1])
            w(f"{self.viewed(key)} = {self.view(self.name(key), '0', length)}")
            walked.append(key)
        rows = {n: self.direct_row(n) for n in reds}
        computed = [n for n in reds if rows[n] is None]
        operands = {n: self.spec.nodes[n].args[0] for n in reds}
        targets = [operands[n] for n in reds if n in computed or operands[n] in self.stash_store]
        targets += [self.spec.results[k] for k in outs]
        if not computed:
            if targets:
                with w.block(f"for j in range({length}):"):
                    self.emit_element([], outs, targets, "t", "j")
            for n in reds:
                w(f"lanes_{LANES_OP[self.spec.nodes[n].op]}({self.acc(n)}, {self.viewed(rows[n])})")
            return
        # operands computed into scratch rows a chunk at a time (SWEEP_CHUNK, a multiple of the 64
        # lanes: element j still goes to lane j % 64), so the scratch stays in the L1 cache
        with w.block(f"for q in range(0, {length}, {SWEEP_CHUNK}):"):
            w(f"cnt = min({SWEEP_CHUNK}, {length} - q)")
            for key in walked:
                w(f"{names('ch', *key)} = {self.view(self.viewed(key), 'q', 'cnt')}")
            for n in computed:
                w(f"{names('ch', 'scr', n)} = {self.view(self.name(('scr', n)), '0', 'cnt')}")
            writes = len(computed) + len(outs) + len(self.stash_store)
            if writes <= LOOP_MAX_WRITES:
                with w.block("for j in range(cnt):"):
                    self.emit_element(computed, outs, targets, "ch", "j", into_rows=True)
            else:   # loops of at most LOOP_MAX_WRITES scratch rows, and one for the outputs and kept values
                for at in range(0, len(computed), LOOP_MAX_WRITES):
                    group = computed[at:at + LOOP_MAX_WRITES]
                    with w.block("for j in range(cnt):"):
                        self.emit_element(group, [], [operands[n] for n in group], "ch", "j", into_rows=True)
                stashed = [r for r in targets if r in self.stash_store and r not in {operands[n] for n in computed}]
                rest = stashed + [self.spec.results[k] for k in outs]   # an output may be an operand too
                if rest:
                    with w.block("for j in range(cnt):"):
                        self.emit_element([], outs, rest, "ch", "j", into_rows=True)
            for n in reds:
                row = ("scr", n) if n in computed else rows[n]
                w(f"lanes_{LANES_OP[self.spec.nodes[n].op]}({self.acc(n)}, {names('ch', *row)})")

    def emit_element(self, reds, outs, refs, views: str, index: str, lane: str = "k",
                     into_rows: bool = False) -> None:
        """The body for one element: `refs` computed, each reduction's operand combined into its
        accumulator acc_<n>[lane] (or, `into_rows`, stored into its scratch row), the outputs written.
        `views` ("t" or "ch") names the views the element is read from and written to."""
        exprs = self.emit_lane(refs, (), index, views)
        for n in reds:
            node = self.spec.nodes[n]
            val = exprs[node.args[0]]
            if self.acc_dtype(n) != node.in_dtypes[0]:
                val = f"{NP_NAME[self.acc_dtype(n)]}({val})"
            if into_rows:
                self.w(f"{self.names(views, 'scr', n)}[{index}] = {val}")
            else:
                combine = REDUCERS[node.op].combine
                acc = f"{self.acc(n)}[{lane}]"
                self.w(f"{acc} = {combine(acc, val, self.acc_dtype(n))}")
        for k in outs:
            buf = ("out", k)
            target = (f"{self.names(views, *buf)}[{index}]" if self.pres[buf][self.inner]
                      else f"{self.name(buf)}[{self.at(buf)}]")
            self.w(f"{target} = {self.store(buf, exprs[self.spec.results[k]])}")

    def inputs_of(self, refs) -> set[int]:
        found, seen = set(), set()
        stack = list(refs)
        while stack:
            ref = stack.pop()
            if ref in seen:
                continue
            seen.add(ref)
            if ref[0] == "in":
                found.add(ref[1])
            elif not self.unit_level(ref):
                stack.extend(self.spec.nodes[ref[1]].args)
        return found

    def alloc_lanes(self, count: str = str(LANES)) -> None:
        """Per block: one array of `count` accumulators per reduction."""
        for n in self.reductions:
            self.w(f"{self.acc(n)} = np.empty({count}, {NP_NAME[self.acc_dtype(n)]})")

    def init_lanes(self, reds) -> None:
        for n in reds:
            ident = REDUCERS[self.spec.nodes[n].op].identity(self.acc_dtype(n))
            self.w(f"lanes_fill({self.acc(n)}, {ident})")

    def write_reduced_outputs(self, phase: int) -> None:
        spec = self.spec
        for k, (_, pres) in enumerate(spec.outputs):
            ref = spec.results[k]
            if not spec.full_buffer(pres) and spec.phase_of(ref) == phase:
                buf = ("out", k)
                self.w(f"{self.name(buf)}[{self.offset(buf, self.kept_index) if self.kept else '0'}] = "
                       f"{self.store(buf, self.ensure_unit(ref))}")

    def emit_unit_start(self, flat: str) -> None:
        self.kept_index = self.decompose(flat, self.kept)
        self.have_unit = set()

    def emit_offsets(self, bufs, red_index: dict[int, str], inner_start: str | None) -> None:
        for buf, pres in self.buffers:
            if buf in bufs:
                index = dict(self.kept_index)
                index.update(red_index)
                if inner_start is not None:
                    index[self.inner] = inner_start
                self.w(f"{self.at(buf)} = {self.offset(buf, index)}")

    def pass_buffers(self, refs, outs) -> set[tuple]:
        return {("in", i) for i in self.inputs_of(refs)} | {("out", k) for k in outs}


class Rows(Reduction):
    """A unit's passes run back to back; a costly value one pass computes and a later pass needs
    (Softmax's exp(x - max)) is kept in a per-block scratch row (the UB) instead of recomputed."""

    def closure(self, refs) -> set:
        seen = set()
        stack = list(refs)
        while stack:
            ref = stack.pop()
            if ref in seen or ref[0] == "in" or ref[1] in self.consts or self.unit_level(ref):
                continue
            seen.add(ref)
            stack.extend(self.spec.nodes[ref[1]].args)
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
        return {r: first[r] for r in first
                if count[r] > 1 and get(self.spec.nodes[r[1]].op).cost == Cost.TRANSCENDENTAL}

    def render(self, name: str) -> str:
        w, spec = self.w, self.spec
        with w.block(self.signature(name)):
            self.docstring(name)
            self.emit_consts()
            self.emit_strides()
            units = product(self.dims[a] for a in self.kept)
            m = self.dims[self.inner]
            with w.block(self.emit_grid_header(units)):
                self.emit_block_span()
                self.alloc_lanes()
                self.stash = self.plan_stash()
                for ref in sorted(self.stash):
                    w(f"{self.name(('keep', ref[1]))} = np.empty({m}, {NP_NAME[spec.nodes[ref[1]].dtypes[0]]})")
                self.alloc_scratch()
                with w.block("for p in range(start, stop):"):
                    self.emit_unit_start("p")
                    self.write_reduced_outputs(0)
                    for j in range(spec.num_passes):
                        self.emit_pass(j, m)
        return w.text()

    def emit_pass(self, j: int, m: str) -> None:
        w = self.w
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
            outer = product(self.dims[a] for a in self.outer_red)
            with w.block(f"for qo in range({outer}):"):
                self.emit_offsets(bufs, self.decompose("qo", self.outer_red), None)
                self.emit_sweep(reds, outs, refs, m)
        else:
            self.emit_offsets(bufs, {}, None)
            self.emit_sweep(reds, outs, refs, m)
        for n in reds:
            red = self.names("red", n)
            self.emit_finish_lanes(n, red)
            w(f"{self.unit_name(('v', n, 0))} = {self.cast_result(n, red)}")
            self.have_unit.add(n)
        self.write_reduced_outputs(j + 1)


class Split(Reduction):
    """One pass, one reduce axis: chunks of `tile` elements reduced apart, folded in order. The
    partials are arguments (`split_partials`: one buffer per reduction, a slot per chunk), so the
    chunks can run in several calls, one per chunk of blocks; the call with `fold` set folds them
    afterwards, in chunk order."""

    def arguments(self) -> list[str]:
        """The buffers, then the partials, then the sizes and launch arguments, and `fold` last."""
        args = super().arguments()
        at = len(self.buffers)
        return args[:at] + [self.names("part", n) for n in self.reductions] + args[at:] + ["fold"]

    def render(self, name: str) -> str:
        w, spec = self.w, self.spec
        reds, outs, refs = self.pass_targets(0)
        with w.block(self.signature(name)):
            self.docstring(name)
            self.emit_consts()
            self.emit_strides()
            units = product(self.dims[a] for a in self.kept)
            m = self.dims[self.inner]
            w(f"nch = max(1, ({m} + tile - 1) // tile)")
            with w.block(self.emit_grid_header(f"{units} * nch")):
                self.emit_block_span()
                self.alloc_lanes()
                self.alloc_scratch()
                with w.block("for unit in range(start, stop):"):
                    w("p = unit // nch")
                    w("q0 = (unit - p * nch) * tile")
                    w(f"qn = min(tile, {m} - q0)")
                    self.emit_unit_start("p")
                    self.init_lanes(reds)
                    self.emit_offsets(self.pass_buffers(refs, outs), {}, "q0")
                    self.emit_sweep(reds, outs, refs, "qn")
                    for n in reds:
                        self.emit_finish_lanes(n, f"{self.names('part', n)}[unit]")
            with w.block(f"for p in range({units} if fold else 0):"):
                self.emit_unit_start("p")
                for n in reds:
                    combine = REDUCERS[spec.nodes[n].op].combine
                    red, part = self.names("red", n), self.names("part", n)
                    w(f"{red} = {part}[p * nch]")
                    with w.block("for c in range(1, nch):"):
                        w(f"{red} = {combine(red, f'{part}[p * nch + c]', self.acc_dtype(n))}")
                    w(f"{self.unit_name(('v', n, 0))} = {self.cast_result(n, red)}")
                    self.have_unit.add(n)
                self.write_reduced_outputs(0)
                self.write_reduced_outputs(1)
        return w.text()


def split_partials(spec: KernelSpec, sizes: tuple[int, ...], tile: int) -> list[tuple[DType, int]]:
    """(dtype, elements) of each partials buffer a split kernel takes, in its argument order: per
    reduction, one accumulator per chunk of every unit."""
    kept = 1
    inner = max(a for a, r in enumerate(spec.reduce_axes) if r)
    for a, r in enumerate(spec.reduce_axes):
        kept *= 1 if r else sizes[a]
    chunks = kept * max(1, -(-sizes[inner] // tile))
    return [(compute_dtype(REDUCERS[node.op].acc_dtype(node.in_dtypes[0])), chunks) for node in spec.nodes
            if get(node.op).pattern == Pattern.REDUCE]


def split_supported(spec: KernelSpec) -> bool:
    return spec.has_reduce and spec.num_passes == 1 and sum(spec.reduce_axes) == 1
