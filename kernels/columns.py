"""Column reductions: the reduced axes are outer ones, the last axis is kept.

    ReduceSum(x[4096, 1024], axis=0)  ->  collapsed (d0 reduce, d1 kept)

A unit is a tile of up to `width` consecutive positions of the last axis (at one position of the
other kept axes). Per pass it walks the reduced positions in order and, for each, updates one
accumulator per column from a contiguous view of the row: the column loop vectorizes and every
cache line is used whole, where a sweep down each column would stride through memory. Past
LOOP_MAX_WRITES accumulators and outputs, the updates go LOOP_MAX_WRITES accumulators to a loop and the
outputs into a loop of their own. Each column
accumulates in the order of the reduced positions whatever block_dim is: results are bitwise stable.

Values computed after a reduction (unit level) are computed in one loop over the tile's columns
between two row loops (the unit loop: reduction results, what follows from them, the outputs they
write, the accumulators' reset), as scalars; a value a row loop or a later unit loop reads is kept
in an array over the tile's columns too. Which values those are, a first rendering finds (every value
kept); the kernel is the second. A loop and an array per value instead made the loss-scale cell's
bias-gradient kernels (twenty outputs) ~80 loops long, built in 12-18 s each (now 2.5-3.3 s).
"""
from __future__ import annotations

from kernels.emitters import NP_NAME, REDUCERS
from kernels.reduction import LOOP_MAX_WRITES, Reduction
from kernels.elementwise import Writer, product


class Columns(Reduction):
    def __init__(self, spec, variant, helpers=frozenset()):
        super().__init__(spec, variant, helpers)
        self.inner = spec.rank - 1                     # the vectorized axis: the kept last one
        self.outer_kept = [a for a in self.kept if a != self.inner]
        self.red_axes = [a for a in range(spec.rank) if spec.reduce_axes[a]]
        self.unit_loop: list[str] = []       # the statements of the open unit loop
        self.in_loop: set[int] = set()       # unit values the open unit loop holds as scalars
        self.kept_arrays: set[int] | None = None   # unit values kept in arrays (None: every one)
        self.read_back: set[int] = set()     # unit values read from their arrays

    def unit_name(self, ref) -> str:
        """A unit value read from its array (by a row loop, or a unit loop after the one computing it)."""
        self.read_back.add(ref[1])
        return f"{self.names('u', ref[1])}[c]"

    def unit_base(self, buf: tuple) -> str:
        return self.names("kb", *buf)

    def emit_unit_start(self, flat: str) -> None:
        self.kept_index = self.decompose(flat, self.outer_kept)
        self.have_unit = set()
        for buf, pres in self.buffers:
            base = self.offset(buf, self.kept_index)
            self.w(f"{self.unit_base(buf)} = {base}{' + c0' if pres[self.inner] else ''}")

    def column(self, buf: tuple, base: str) -> str:
        return f"{self.name(buf)}[{base} + c]" if self.pres[buf][self.inner] else f"{self.name(buf)}[{base}]"

    def ensure_unit(self, ref) -> str:
        if ref[0] == "in":
            buf = ("in", ref[1])
            return self.load(buf, self.column(buf, self.unit_base(buf)))
        n = ref[1]
        if n in self.consts:
            return self.const(n)
        if n in self.in_loop:
            return self.names("uc", n)
        if n in self.have_unit:
            return self.unit_name(ref)
        args = [self.ensure_unit(a) for a in self.spec.nodes[n].args]
        return self.compute_unit(n, self.node_expr(n, args))

    def compute_unit(self, n: int, expr: str) -> str:
        """Unit value n computed in the open unit loop (kept in its array when something reads it there)."""
        name = self.names("uc", n)
        self.unit_loop.append(f"{name} = {expr}")
        if self.kept_arrays is None or n in self.kept_arrays:
            self.unit_loop.append(f"{self.names('u', n)}[c] = {name}")
        self.in_loop.add(n)
        self.have_unit.add(n)
        return name

    def close_unit_loop(self) -> None:
        if self.unit_loop:
            with self.w.block("for c in range(cw):"):
                for line in self.unit_loop:
                    self.w(line)
        self.unit_loop, self.in_loop = [], set()

    def write_reduced_outputs(self, phase: int) -> None:
        spec = self.spec
        for k, (_, pres) in enumerate(spec.outputs):
            ref = spec.results[k]
            if not spec.full_buffer(pres) and spec.phase_of(ref) == phase:
                buf = ("out", k)
                value = self.ensure_unit(ref)
                self.unit_loop.append(f"{self.column(buf, self.unit_base(buf))} = {self.store(buf, value)}")

    def render(self, name: str) -> str:
        self.render_kernel(name)                  # every unit value kept: finds those read back
        self.kept_arrays, self.w = set(self.read_back), Writer()
        return self.render_kernel(name)

    def render_kernel(self, name: str) -> str:
        w, spec = self.w, self.spec
        with w.block(self.signature(name)):
            self.docstring(name)
            self.emit_consts()
            self.emit_strides()
            last = self.dims[self.inner]
            w(f"tiles = ({last} + width - 1) // width")
            with w.block(self.emit_grid_header(f"{product(self.dims[a] for a in self.outer_kept)} * tiles")):
                self.emit_block_span()
                self.alloc_lanes("width")   # one accumulator per column of the unit
                for n, node in enumerate(spec.nodes):
                    # every reduced value may be a unit array: a reduction's result, what is computed
                    # after one, and what it reads that is computed from reduced-shape inputs only
                    if node.reduced and n not in self.consts and (self.kept_arrays is None or n in self.kept_arrays):
                        w(f"{self.names('u', n)} = np.empty(width, {NP_NAME[node.dtypes[0]]})")
                with w.block("for unit in range(start, stop):"):
                    w("p = unit // tiles")
                    w("c0 = (unit - p * tiles) * width")
                    w(f"cw = min(width, {last} - c0)")
                    self.emit_unit_start("p")
                    self.write_reduced_outputs(0)
                    for j in range(spec.num_passes):
                        self.emit_pass(j)
                    self.close_unit_loop()
        return w.text()

    def emit_pass(self, j: int) -> None:
        w, spec = self.w, self.spec
        reds, outs, refs = self.pass_targets(j)
        if not refs:
            return
        for ref in self.unit_refs(refs):
            self.ensure_unit(ref)
        for n in reds:
            self.unit_loop.append(f"{self.acc(n)}[c] = {REDUCERS[spec.nodes[n].op].identity(self.acc_dtype(n))}")
        self.close_unit_loop()
        used = self.inputs_of(refs)
        with w.block(f"for r in range({product(self.dims[a] for a in self.red_axes)}):"):
            index = self.decompose("r", self.red_axes)
            for buf, pres in self.buffers:
                kind, k = buf
                if (kind == "in" and k in used) or (kind == "out" and k in outs):
                    w(f"{self.at(buf)} = {self.unit_base(buf)} + {self.offset(buf, index)}")
                    if pres[self.inner]:
                        w(f"{self.viewed(buf)} = {self.view(self.name(buf), self.at(buf), 'cw')}")
                    elif kind == "in":
                        w(f"{self.broadcast_load(k)} = {self.load(buf, f'{self.name(buf)}[{self.at(buf)}]')}")
            if len(reds) + len(outs) <= LOOP_MAX_WRITES:
                with w.block("for c in range(cw):"):
                    self.emit_element(reds, outs, refs, "t", "c", lane="c")
            else:   # loops of LOOP_MAX_WRITES reductions' updates, and one for the outputs
                for at in range(0, len(reds), LOOP_MAX_WRITES):
                    group = reds[at:at + LOOP_MAX_WRITES]
                    with w.block("for c in range(cw):"):
                        self.emit_element(group, [], [spec.nodes[n].args[0] for n in group], "t", "c", lane="c")
                if outs:
                    with w.block("for c in range(cw):"):
                        self.emit_element([], outs, [spec.results[k] for k in outs], "t", "c", lane="c")
        for n in reds:
            self.compute_unit(n, self.cast_result(n, f"{self.acc(n)}[c]"))
        self.write_reduced_outputs(j + 1)
