"""`compare(cell, *inputs)`: which kernel disagrees with the numpy reference? One call answers.

    compile     the cell for these inputs as a call would (cell.compile: the current context, on the
                emulated AI Core, device_target "Ascend"), so the kernels are those a call runs (in
                PYNATIVE_MODE: those a GRAPH_MODE call would run)
    reference   ir.reference_values of the final graph (after fusion): the value of every input and
                output of every kernel, composites interpreted through their subgraphs; all of them are
                held at once, so a comparison needs about the memory of every value of the graph
    kernels     each step of the lowered Program alone (kernels.Program.run_step), fed copies of the
                reference's values of its inputs: an error cannot travel from one kernel to the next,
                so the first kernel beyond tolerance is the guilty one, and those after it are judged
                on their own
    compare     each kernel's outputs with the reference's (graphkernel.settings.tolerance: the dtype's
                tolerance, max abs / rel error, max ulp)

Every launch is a row, in execution order: generated kernels, MatMul/Transpose on numpy, host ops and
host<->device copies. Parameters and the caller's arrays are never written. Example:

    >>> import numpy as np
    >>> from graphkernel import Tensor, context
    >>> from graphkernel.tools import debug
    >>> from graphkernel.nn import Cell
    >>> from graphkernel.ops import operations as P
    >>> class Net(Cell):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.matmul, self.softmax = P.MatMul(), P.Softmax()
    ...     def construct(self, x, w):
    ...         return self.softmax(self.matmul(x * 2.0 + 1.0, w))
    >>> context.set_context(enable_graph_kernel=True)
    >>> x, w = np.ones((4, 8), np.float32), np.ones((8, 16), np.float32)
    >>> result = debug.compare(Net(), Tensor(x), Tensor(w))
    >>> [row.ops for row in result.rows]
    [('Mul', 'Add'), ('MatMul',), ('ReduceMax', 'Sub', 'Exp', 'ReduceSum', 'RealDiv')]
    >>> result.first_bad is None
    True
    >>> print(result)            # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
    3 kernels compared with the numpy reference, each fed the reference's inputs
      #  name                                         ops      target  max_abs  max_rel  max_ulp  ok  kernel
      0  Fused_Mul_Add_0                              Mul Add  device        0        0        0  ok  Fused_Mul_Add_...
      1  Default/MatMul-op2                           MatMul   device        0        0        0  ok
      2  Fused_ReduceMax_Sub_Exp_ReduceSum_RealDiv_1  ...      device        0        0        0  ok  Fused_...
    every kernel within tolerance

`compare(..., verbose=True)` prints the table too; `graphkernel run MODEL.onnx --check` does the same for
an ONNX model and exits with status 1 when a kernel disagrees.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ir.errors import ExecutionError, GraphKernelError
from ir.interpret import reference_values
from ir.printer import printable
from ir.specialize import corresponding_values, specialize
from kernels.executor import Conditional
from graphkernel import context
from graphkernel.cell import Cell
from graphkernel.observation.launches import Launch, launches
from graphkernel.tensor import Tensor
from graphkernel.settings.tolerance import Errors, measure, tolerance_text

NAME_LIMIT = 100        # characters of a name shown in the table and in messages
OPS_SHOWN = 8           # ops of a kernel listed before "... (N ops)"


class CompareError(GraphKernelError, ValueError):
    """compare() cannot run as asked (not a Cell, not the emulated AI Core)."""


@dataclass(frozen=True)
class KernelRow:
    """One kernel launch against the reference."""
    index: int                  # position in execution order (Program.steps, CompiledGraph.kernels)
    name: str                   # the node's name: a scope name (Default/.../Sub-op3) or a composite's
                                # Fused_<ops>_<n>, as the dumps, the profiler and the fusion log name it
    kernel: str                 # the generated kernel it runs (structure and hash), "" for none
    ops: tuple[str, ...]
    target: str                 # device, host or copy
    variant: str                # elementwise | rows | split | columns | numpy | reference | ...
    dtypes: tuple[str, ...]     # of its outputs
    max_abs: float
    max_rel: float
    max_ulp: int | None         # None: no floating-point output
    ok: bool

    def describe(self) -> str:
        """One line: which kernel, and by how much it misses."""
        ulp = "" if self.max_ulp is None else f", max ulp {self.max_ulp}"
        rules = "; ".join(f"{d}: {tolerance_text(d)}" for d in dict.fromkeys(self.dtypes))
        kernel = f", kernel {printable(self.kernel, NAME_LIMIT)}" if self.kernel else ""
        return (f"kernel #{self.index} {printable(self.name, NAME_LIMIT)} ({_ops_text(self.ops)}{kernel}) "
                f"disagrees with the reference: max abs error {self.max_abs:.3g}, max rel error "
                f"{self.max_rel:.3g}{ulp} (tolerance {rules})")


@dataclass(frozen=True)
class Comparison:
    """Every kernel of one compiled graph against the reference, in execution order."""
    rows: tuple[KernelRow, ...]
    graph_id: int | None = None

    @property
    def first_bad(self) -> KernelRow | None:
        """The first kernel, in execution order, beyond its dtype's tolerance; None when all agree."""
        return next((r for r in self.rows if not r.ok), None)

    @property
    def ok(self) -> bool:
        return self.first_bad is None

    def table(self) -> str:
        head = ("#", "name", "ops", "target", "max_abs", "max_rel", "max_ulp", "ok", "kernel")
        body = [(str(r.index), printable(r.name, NAME_LIMIT), _ops_text(r.ops, " "), r.target,
                 f"{r.max_abs:.3g}", f"{r.max_rel:.3g}", "-" if r.max_ulp is None else str(r.max_ulp),
                 "ok" if r.ok else "BAD", printable(r.kernel, NAME_LIMIT))
                for r in self.rows]
        widths = [max(len(row[c]) for row in [head, *body]) for c in range(len(head))]
        left = {1, 2, 8}    # text columns; numbers align right

        def line(cells):
            return "  " + "  ".join(c.ljust(w) if i in left else c.rjust(w)
                                    for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

        n = len(self.rows)
        lines = [f"{n} kernel{'s' * (n != 1)} compared with the numpy reference, each fed the reference's "
                 "inputs", line(head), *map(line, body)]
        bad = self.first_bad
        lines.append("every kernel within tolerance" if bad is None else
                     f"first disagreeing {bad.describe()}")
        return "\n".join(lines)

    __str__ = table


def _ops_text(ops: tuple[str, ...], sep: str = "+") -> str:
    shown = [printable(op, 40) for op in ops[:OPS_SHOWN]]
    more = f"{sep}... ({len(ops)} ops)" if len(ops) > OPS_SHOWN else ""
    return sep.join(shown) + more


def _tensor(x, k: int) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (np.ndarray, np.generic)):
        return Tensor(x)    # shares the array: nothing below writes it
    raise CompareError(f"compare: input {k} is a {type(x).__name__}; pass Tensors or numpy arrays")


def compare(cell, *inputs, verbose: bool = False) -> Comparison:
    """Run `cell`'s compiled kernels one by one on the reference's values and compare each with the
    reference (see the module docstring). `inputs` are Tensors or numpy arrays, as for a call."""
    if not isinstance(cell, Cell):
        raise CompareError(f"compare takes a Cell and its inputs, got a {type(cell).__name__}")
    if context.get_context("device_target") != "Ascend":
        raise CompareError("compare checks the emulated AI Core's kernels against the numpy reference; "
                           "with device_target='CPU' every kernel is the reference: set "
                           "context.set_context(device_target='Ascend')")
    tensors = [_tensor(x, k) for k, x in enumerate(inputs)]
    compiled = cell.compile(*tensors)
    arrays = [t.asnumpy() for t in cell.compiled_inputs(*tensors)] + [p.asnumpy() for p in compiled.parameters]
    result = compare_compiled(compiled, arrays)
    if verbose:
        print(result.table())
    return result


def compare_compiled(compiled, arrays) -> Comparison:
    """The comparison of a CompiledGraph (Ascend target) on its full argument list: the call's arrays
    followed by the parameters' values."""
    program = compiled.program
    if program is None:
        raise CompareError("this graph was compiled for device_target='CPU': it has no kernels to compare")
    if program.planner is not None and program.planner.plan_for(arrays) is not program.plan:
        raise CompareError("a graph compiled for symbolic sizes (docs/shapes.md) is compared at the shapes it was "
                           f"compiled for (its first call's): {', '.join(str(list(s)) for s in program.plan.input_shapes)}")
    wanted = {v for step in program.steps for v in (*step.values_in, *step.values_out)}
    if program.planner is None:
        reference = reference_values(compiled.graph, arrays, wanted)
    else:   # the reference at the representative sizes, its values under the symbolic graph's
        at_sizes = specialize(compiled.graph, program.plan.sizes)
        same = corresponding_values(compiled.graph, at_sizes)
        values = reference_values(at_sizes, arrays, [same[v] for v in wanted])
        reference = {v: values[same[v]] for v in wanted}
    rows = []
    launch_list = launches(compiled)
    for k, step in enumerate(program.steps):
        if isinstance(step.fn, Conditional):   # an If: one row, the branch its reference condition takes
            launch = Launch(k, "", step.info.name, step.info.op_types, 1, step.info.inputs, step.info.outputs)
        else:
            launch = replace(launch_list[program.positions[k]], index=k)
        try:
            outs = program.run_step(k, [reference[v] for v in step.values_in])
        except GraphKernelError:
            raise
        except Exception as e:  # noqa: BLE001 - a kernel that crashes is named, not a numba traceback
            raise ExecutionError(f"While running kernel #{launch.index} {printable(launch.name, NAME_LIMIT)} "
                                 f"on the reference's inputs: {type(e).__name__}: "
                                 f"{printable(str(e), 300)}") from e
        errors = Errors.worst([measure(a, reference[v]) for a, v in zip(outs, step.values_out)])
        rows.append(KernelRow(launch.index, launch.name, launch.kernel, launch.op_types, step.info.target,
                              step.info.variant, tuple(str(v.dtype.np) for v in step.values_out),
                              errors.max_abs, errors.max_rel, errors.max_ulp, errors.ok))
    return Comparison(tuple(rows), compiled.graph_id)
