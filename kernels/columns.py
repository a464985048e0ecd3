"""Column reductions: the reduced axes are outer ones, the last axis is kept.

    ReduceSum(x[4096, 1024], axis=0)  ->  collapsed (d0 reduce, d1 kept)

A unit is a tile of up to `lanes` consecutive positions of the last axis (at one position of the
other kept axes). Per pass it walks the reduced positions in order and, for each, updates one
accumulator per column from a contiguous slice of the row: the column loop vectorizes and every
cache line is used whole, where a sweep down each column would stride through memory. Values
computed after a reduction (unit level) are arrays over the tile's columns. Each column accumulates
in the order of the reduced positions whatever block_dim is: results are bitwise stable.
"""
from __future__ import annotations

from kernels.emitters import NP_NAME, REDUCERS
from kernels.reduction import Reduction
from kernels.template import product


class Columns(Reduction):
    def __init__(self, spec, variant, parallel):
        super().__init__(spec, variant, parallel)
        self.inner = spec.rank - 1                     # the vectorized axis: the kept last one
        self.outer_kept = [a for a in self.kept if a != self.inner]
        self.red_axes = [a for a in range(spec.rank) if spec.reduce_axes[a]]

    def unit_name(self, ref) -> str:
        return f"u{ref[1]}[c]"

    def emit_unit_start(self, flat: str) -> None:
        self.kept_index = self.decompose(flat, self.outer_kept, "i")
        self.have_unit = set()
        for buf, pres in self.buffers:
            base = self.offset(buf, self.kept_index)
            self.w(f"kb_{buf} = {base}{' + c0' if pres[self.inner] else ''}")

    def column(self, buf: str, base: str) -> str:
        return f"{buf}[{base} + c]" if self.pres[buf][self.inner] else f"{buf}[{base}]"

    def ensure_unit(self, ref) -> str:
        if ref[0] == "in":
            buf = f"in{ref[1]}"
            return self.load(buf, self.column(buf, f"kb_{buf}"))
        n = ref[1]
        if n in self.consts:
            return f"c{n}"
        if n not in self.have_unit:
            args = [self.ensure_unit(a) for a in self.spec.nodes[n].args]
            with self.w.block("for c in range(cw):"):
                self.w(f"u{n}[c] = {self.node_expr(n, args)}")
            self.have_unit.add(n)
        return f"u{n}[c]"

    def write_reduced_outputs(self, phase: int) -> None:
        spec = self.spec
        for k, (_, pres) in enumerate(spec.outputs):
            ref = spec.results[k]
            if not spec.full_buffer(pres) and spec.phase_of(ref) == phase:
                value = self.ensure_unit(ref)
                with self.w.block("for c in range(cw):"):
                    self.w(f"{self.column(f'out{k}', f'kb_out{k}')} = {self.store(f'out{k}', value)}")

    def render(self, name: str) -> str:
        w, spec = self.w, self.spec
        with w.block(self.signature(name)):
            self.docstring(name)
            self.emit_consts()
            self.emit_strides()
            last = self.dims[self.inner]
            w(f"tiles = ({last} + lanes - 1) // lanes")
            with w.block(self.emit_grid_header(f"{product(self.dims[a] for a in self.outer_kept)} * tiles")):
                self.emit_block_span()
                self.alloc_lanes("lanes")   # one accumulator per column of the unit
                for n, node in enumerate(spec.nodes):
                    if self.unit_level(("v", n, 0)):
                        w(f"u{n} = np.empty(lanes, {NP_NAME[node.dtypes[0]]})")
                with w.block("for t0 in range(start, stop, tile):"):
                    with w.block("for u in range(t0, min(t0 + tile, stop)):"):
                        w("p = u // tiles")
                        w("c0 = (u - p * tiles) * lanes")
                        w(f"cw = min(lanes, {last} - c0)")
                        self.emit_unit_start("p")
                        self.write_reduced_outputs(0)
                        for j in range(spec.num_passes):
                            self.emit_pass(j)
        return w.text()

    def emit_pass(self, j: int) -> None:
        w, spec = self.w, self.spec
        reds, outs, refs = self.pass_targets(j)
        if not refs:
            return
        for ref in self.unit_refs(refs):
            self.ensure_unit(ref)
        for n in reds:
            ident = REDUCERS[spec.nodes[n].op].identity(self.acc_dtype(n))
            with w.block("for c in range(cw):"):
                w(f"acc{n}[c] = {ident}")
        used = self.inputs_of(refs)
        with w.block(f"for r in range({product(self.dims[a] for a in self.red_axes)}):"):
            index = self.decompose("r", self.red_axes, "r")
            for buf, pres in self.buffers:
                if (buf.startswith("in") and int(buf[2:]) in used) or \
                        (buf.startswith("out") and int(buf[3:]) in outs):
                    w(f"o_{buf} = kb_{buf} + {self.offset(buf, index)}")
                    if pres[self.inner]:
                        w(f"t_{buf} = {buf}[o_{buf}:o_{buf} + cw]")
                    elif buf.startswith("in"):
                        w(f"x{buf[2:]} = {self.load(buf, f'{buf}[o_{buf}]')}")
            with w.block("for c in range(cw):"):
                self.emit_element(reds, outs, refs, "t", "c", lane="c")
        for n in reds:
            with w.block("for c in range(cw):"):
                w(f"u{n}[c] = {self.cast_result(n, f'acc{n}[c]')}")
            self.have_unit.add(n)
        self.write_reduced_outputs(j + 1)
