"""The elementwise kernel, and the template pieces every generated kernel shares.

    KernelTemplate  buffer names and strides, offsets and multi-indices of the collapsed axes, the
                    grid of blocks (block_range), and the per-element body built from the emitters
    Elementwise     each block takes a contiguous share of the flat iteration space and walks it in
                    segments of at most `tile` elements inside one row of the last axis; a segment is
                    a view of every buffer (kernels.views) looped over from 0 (a loop from 0
                    vectorizes, `range(s, e)` does not)
"""
from __future__ import annotations

from contextlib import contextmanager

from ir.dtypes import DType
from kernels import emitters
from kernels.emitters import Operands, const_literal, emit
from kernels.layout import KernelSpec, const_value
from kernels.names import Names


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
    """Shared pieces: buffer names, strides, constants, the per-element body.

    A buffer is a key, ("in", i) or ("out", k); scratch rows are keys too, ("scr", n) and ("keep", n).
    Every keyed name comes from `self.names` (kernels.names), so no two roles can share one."""

    def __init__(self, spec: KernelSpec, variant: str, helpers: set[str] = frozenset()):
        self.spec, self.variant = spec, variant
        self.w = Writer()
        self.names = Names(helpers)
        # an output stored into an input's buffer (KernelSpec.in_place) is that input: no argument of its own
        self.home = {("out", k): ("in", i) for k, i in spec.in_place}
        outputs = [(("out", k), p) for k, (_, p) in enumerate(spec.outputs)]
        self.buffers = [(("in", i), p) for i, (_, p) in enumerate(spec.inputs)] + \
                       [(b, p) for b, p in outputs if b not in self.home]
        self.pres = dict(self.buffers + outputs)
        self.orders = {("in", i): order for i, order in getattr(spec, "layouts", ())}   # stored in another order
        self.dims = [self.names("d", a) for a in range(spec.rank)]
        self.consts = {n: node for n, node in enumerate(spec.nodes) if node.op == "Const"}
        # the constants passed as arguments (kernels.layout.argument_consts), in node order
        self.scalars = [n for n, node in self.consts.items() if const_value(node) is None]
        self.stash_load: set = set()    # refs read back from the block's row scratch in this pass
        self.stash_store: set = set()   # refs computed in this pass and kept for later passes

    # --- names -----------------------------------------------------------------------------
    def name(self, key: tuple) -> str:
        """The array a key names: a buffer argument or a scratch row."""
        return self.names(*self.home.get(key, key))

    def viewed(self, key: tuple) -> str:
        """The view of `key` the current loop walks."""
        return self.names("t", *self.home.get(key, key))

    def at(self, key: tuple) -> str:
        """The flat offset of buffer `key` at the current position."""
        return self.names("o", *self.home.get(key, key))

    def const(self, n: int) -> str:
        return self.names("cst", n)

    @staticmethod
    def view(array: str, start: str, count: str, step: str = "1") -> str:
        """The source of array[start:start + count * step:step], made by kernels.views (a slice costs
        numba's general slicing code in every build)."""
        if step == "1":
            return f"view({array}, {start}, {count})"
        return f"view_strided({array}, {start}, {count}, {step})"

    # --- layout arithmetic ---------------------------------------------------------------
    def after(self, buf: tuple, axis: int) -> list[str]:
        """The dims of the axes buf stores inside `axis` (those it is present on): the iteration
        order's, or its own (KernelSpec.layouts)."""
        pres = self.pres[buf]
        order = self.orders.get(buf, range(self.spec.rank))
        inner = order[list(order).index(axis) + 1:]
        return [self.dims[a] for a in inner if pres[a]]

    def stride(self, buf: tuple, axis: int) -> str:
        """Name of buf's stride on axis (emitted at the top), '1' when innermost."""
        return self.names("s", *buf, axis) if self.after(buf, axis) else "1"

    def emit_strides(self) -> None:
        for buf, pres in self.buffers:
            for a in range(self.spec.rank):
                if pres[a] and self.stride(buf, a) != "1":
                    self.w(f"{self.stride(buf, a)} = {product(self.after(buf, a))}")

    def offset(self, buf: tuple, index: dict[int, str], base: str | None = None) -> str:
        """Flat offset of buf at the axis indices given (others contribute nothing)."""
        terms = [base] if base else []
        for a, idx in index.items():
            if self.pres[buf][a]:
                s = self.stride(buf, a)
                terms.append(idx if s == "1" else f"{idx} * {s}")
        return " + ".join(terms) if terms else "0"

    def decompose(self, flat: str, axes: list[int]) -> dict[int, str]:
        """Emit the multi-index of `flat` over `axes` (row-major); returns axis -> variable."""
        if not axes:
            return {}
        if len(axes) == 1:
            return {axes[0]: flat}
        self.w(f"rest = {flat}")
        out = {}
        for a in reversed(axes[1:]):
            out[a] = self.names("ix", a)
            self.w(f"{out[a]} = rest % {self.dims[a]}")
            self.w(f"rest = rest // {self.dims[a]}")
        out[axes[0]] = self.names("ix", axes[0])
        self.w(f"{out[axes[0]]} = rest")
        return out

    def emit_block_span(self) -> None:
        """Block blk's share, as aicore.block_range computes it."""
        self.w("b = np.int64(blk)")
        self.w("start = b * share + min(b, extra)")
        self.w("stop = start + share + (1 if b < extra else 0)")

    def emit_grid_header(self, total: str) -> str:
        """The loop over this call's blocks, [block_lo, block_hi) of the launch's block_dim: a launch
        runs its blocks in chunks on the threads of kernels.threads, one call per chunk."""
        self.w(f"share = {total} // block_dim")
        self.w(f"extra = {total} - share * block_dim")
        return "for blk in range(block_lo, block_hi):"

    # --- the per-element body ------------------------------------------------------------
    def operand_consts(self, node) -> tuple:
        out = []
        for ref in node.args:
            if ref[0] == "v" and ref[1] in self.consts:
                out.append(const_value(self.consts[ref[1]]))
            else:
                out.append(None)
        return tuple(out)

    def node_expr(self, n: int, args: list[str]) -> str:
        node = self.spec.nodes[n]
        return emit(node.op, Operands(args, node.in_dtypes, node.dtypes, dict(node.attrs),
                                      self.operand_consts(node)))

    # --- memory: half-float buffers hold uint16 bits, converted exactly on load and store -------
    def dtype_of(self, buf: tuple) -> DType:
        kind, index = buf
        return (self.spec.inputs if kind == "in" else self.spec.outputs)[index][0]

    def load(self, buf: tuple, element: str) -> str:
        return emitters.load(self.dtype_of(buf), element)

    def store(self, buf: tuple, value: str) -> str:
        return emitters.store(self.dtype_of(buf), value)

    def unit_level(self, ref) -> bool:
        """A value computed once per unit (reduced, after a reduction), not per element."""
        return (self.spec.has_reduce and ref[0] == "v" and self.spec.nodes[ref[1]].reduced
                and self.spec.phase_of(ref) >= 1)

    def unit_name(self, ref) -> str:
        """How the body reads a unit-level value."""
        return self.names("u", ref[1])

    def broadcast_load(self, i: int) -> str:
        """Input i loaded once for the segment or row it is constant along."""
        return self.names("bc", i)

    def emit_lane(self, targets, lane: tuple, index: str, views: str = "t") -> dict:
        """Statements computing `targets` (refs) for one element; returns ref -> expression. `lane` is
        appended to the names of the element's values; `views` ("t" or "ch") names the views read."""
        exprs: dict = {}
        names = self.names

        def leaf(ref) -> str | None:
            """The name of a value read rather than computed here (its load emitted), else None."""
            if ref[0] == "in":
                i = ref[1]
                if not self.inner_present(("in", i)):
                    return self.broadcast_load(i)
                name, element = names("ld", i, *lane), f"{names(views, 'in', i)}[{index}]"
                self.w(f"{name} = {self.load(('in', i), element)}")
                return name
            if ref[1] in self.consts:
                return self.const(ref[1])
            if self.unit_level(ref):
                return self.unit_name(ref)
            if ref in self.stash_load:
                name = names("v", ref[1], *lane)
                self.w(f"{name} = {names(views, 'keep', ref[1])}[{index}]")
                return name
            return None

        # depth first, each operand before its user and in operand order, without recursion: a chain
        # of thousands of ops (--composite_op_limit_size) is as deep
        for target in targets:
            stack = [(target, False)]
            while stack:
                ref, operands_done = stack.pop()
                if ref in exprs:
                    continue
                if not operands_done:
                    name = leaf(ref)
                    if name is not None:
                        exprs[ref] = name
                        continue
                    stack.append((ref, True))
                    stack.extend((a, False) for a in reversed(self.spec.nodes[ref[1]].args))
                    continue
                n = ref[1]
                name = names("v", n, *lane)
                self.w(f"{name} = {self.node_expr(n, [exprs[a] for a in self.spec.nodes[n].args])}")
                if ref in self.stash_store:
                    self.w(f"{names(views, 'keep', n)}[{index}] = {name}")
                exprs[ref] = name
        return exprs

    def emit_consts(self) -> None:
        """Each constant in its compute dtype: a literal, or its float64 argument converted (exactly:
        the value is one of that dtype)."""
        for n, node in self.consts.items():
            value = const_value(node)
            if value is None:
                dtype = emitters.compute_dtype(node.dtypes[0])
                self.w(f"{self.const(n)} = {emitters.NP_NAME[dtype]}({self.names('sc', n)})")
            else:
                self.w(f"{self.const(n)} = {const_literal(value, node.dtypes[0])}")

    def arguments(self) -> list[str]:
        """The kernel's parameters: its buffers, the collapsed sizes, the constants it takes as
        arguments, the launch's block_dim, tile and width, and the blocks this call runs."""
        return ([self.name(b) for b, _ in self.buffers] + self.dims + [self.names("sc", n) for n in self.scalars]
                + ["block_dim", "tile", "width", "block_lo", "block_hi"])

    def signature(self, name: str) -> str:
        return f"def {name}({', '.join(self.arguments())}):"

    def docstring(self, name: str) -> None:
        axes = ", ".join(f"{d}{' (reduce)' if r else ''}" for d, r in zip(self.dims, self.spec.reduce_axes))
        self.w(f'"""{name}: {self.variant} kernel over collapsed axes ({axes}).')
        for b, pres in self.buffers:
            shown = ", ".join(d if p else "1" for d, p in zip(self.dims, pres))
            self.w(f"    {self.name(b)}: {self.dtype_of(b)}[{shown}]")
        for (_, k), (_, i) in self.home.items():
            self.w(f"    output {k}: stored into {self.name(('in', i))} (a Parameter updated in place)")
        self.w('"""')


class Elementwise(KernelTemplate):
    def inner_present(self, buf: tuple) -> bool:
        return self.pres[buf][-1]

    def render(self, name: str) -> str:
        w = self.w
        with w.block(self.signature(name)):
            self.docstring(name)
            self.emit_consts()
            self.emit_strides()
            with w.block(self.emit_grid_header(product(self.dims))):
                self.emit_block_span()
                self.emit_walk("start", "stop")
        return w.text()

    def emit_walk(self, first: str, last: str) -> None:
        """Walk flat positions [first, last) in segments inside one row of the last axis."""
        w, r = self.w, self.spec.rank
        w(f"i = {first}")
        with w.block(f"while i < {last}:"):
            inner = self.dims[-1]
            if r > 1:
                w(f"row = i // {inner}")
                w(f"col = i - row * {inner}")
                w(f"n = min({last} - i, {inner} - col, tile)")
                index = self.decompose("row", list(range(r - 1)))
                index[r - 1] = "col"
            else:
                w(f"n = min({last} - i, tile)")
                index = {0: "i"}
            for buf, pres in self.buffers:
                off = "i" if all(pres) and buf not in self.orders else self.offset(buf, index)
                w(f"{self.at(buf)} = {off}")
                if pres[-1]:
                    w(f"{self.viewed(buf)} = {self.view(self.name(buf), self.at(buf), 'n')}")
            self.emit_loop(self.spec)
            w("i += n")

    def emit_loop(self, spec) -> None:
        w = self.w
        inner_outs = [k for k, (_, p) in enumerate(spec.outputs) if p[-1]]
        outer_outs = [k for k, (_, p) in enumerate(spec.outputs) if not p[-1]]
        for i, (_, pres) in enumerate(spec.inputs):
            if not pres[-1]:
                buf = ("in", i)
                w(f"{self.broadcast_load(i)} = {self.load(buf, f'{self.name(buf)}[{self.at(buf)}]')}")
        with w.block("for j in range(n):"):
            exprs = self.emit_lane([spec.results[k] for k in inner_outs], (), "j")
            for k in inner_outs:
                buf = ("out", k)
                w(f"{self.viewed(buf)}[j] = {self.store(buf, exprs[spec.results[k]])}")
        if outer_outs:  # outputs constant along the segment: their operands are too
            exprs = self.emit_lane([spec.results[k] for k in outer_outs], ("seg",), "0")
            for k in outer_outs:
                buf = ("out", k)
                w(f"{self.name(buf)}[{self.at(buf)}] = {self.store(buf, exprs[spec.results[k]])}")
