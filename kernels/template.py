"""The kernel template: the pieces every generated kernel shares, and the elementwise kernel.

    KernelTemplate  buffer names and strides, offsets and multi-indices of the collapsed axes, the
                    grid of blocks (block_range), and the per-element body built from the emitters
    Elementwise     each block takes a contiguous share of the flat iteration space and walks it in
                    segments of at most `tile` elements inside one row of the last axis; a segment is
                    sliced out of every buffer and looped over from 0 (a loop from 0 vectorizes,
                    `range(s, e)` does not)
"""
from __future__ import annotations

from contextlib import contextmanager

from ir.dtypes import DType
from kernels.emitters import Operands, const_literal, emit
from kernels.layout import KernelSpec


class Writer:
    """Lines of Python source with the current indentation."""

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


def product(terms) -> str:
    """The source of a product of size names ('1' when empty)."""
    terms = list(terms)
    return " * ".join(terms) if terms else "1"


class KernelTemplate:
    """Shared pieces: buffer names, strides, constants, the per-element body."""

    def __init__(self, spec: KernelSpec, variant: str, parallel: bool):
        self.spec, self.variant, self.parallel = spec, variant, parallel
        self.w = Writer()
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
                    self.w(f"s_{buf}_{a} = {product(after)}")

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

    def unit_name(self, ref) -> str:
        """How the body reads a unit-level value."""
        return f"u{ref[1]}"

    def emit_lane(self, targets, lane: str, index: str, prefix: str = "t") -> dict:
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
                    name = f"x{i}"
            elif ref[1] in self.consts:
                name = f"c{ref[1]}"
            elif self.unit_level(ref):
                name = self.unit_name(ref)
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


class Elementwise(KernelTemplate):
    def inner_present(self, buf: str) -> bool:
        return self.pres[buf][-1]

    def render(self, name: str) -> str:
        w, spec, r = self.w, self.spec, self.spec.rank
        with w.block(self.signature(name)):
            self.docstring(name)
            self.emit_consts()
            self.emit_strides()
            total = product(self.dims)
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
            exprs = self.emit_lane([spec.results[k] for k in inner_outs], "", "j")
            for k in inner_outs:
                w(f"t_out{k}[j] = {self.store(f'out{k}', exprs[spec.results[k]])}")
        if outer_outs:  # outputs constant along the segment: their operands are too
            exprs = self.emit_lane([spec.results[k] for k in outer_outs], "s", "0")
            for k in outer_outs:
                w(f"out{k}[o_out{k}] = {self.store(f'out{k}', exprs[spec.results[k]])}")
