"""The op table as the docs show it (docs/ops.md), generated from the rows of ir/ops; a test checks the
file is current. Regenerate with `python -m graphkernel.tools.op_table > docs/ops.md`.
"""
from __future__ import annotations

from ir.ops import OPS, OpDef, Pattern
from ir.ops.registry import no_gradient
from graphkernel.ops import operations
from graphkernel.ops.operations import _grad_ops, signature

HEADER = """# Ops

Generated from the op table (`ir/ops`: one row per op, every fact about it in the row) by
`python -m graphkernel.tools.op_table > docs/ops.md`; a test checks that this file is current.

- **kind**: how output elements map to input elements (ELEMWISE < BROADCAST < INJECTIVE < REDUCE < OPAQUE <
  HOST; a composite op is expanded into primitives before fusion).
- **call**: MindSpore's primitive, attributes at construction, tensors (then call-time attributes) at the
  call (`G.`: `from graphkernel.ops.operations import _grad_ops as G`); also `ops.<functional>(...)` and `Tensor.<method>(...)` where named.
- **cost**: per element, for the cost model; **basic**: basic fusion clusters it; **f16 exact**: on float16
  operands its result needs no rounding.
- **list**: default mixed-precision list (white: float16 under allow_mix_precision; black: float32; gray:
  follows its inputs); **names**: other MindSpore spellings and CANN names accepted in precision files;
  **ONNX**: ONNX ops converted to exactly this op (others map to several of ours, see docs of the ONNX
  frontend); **grad**: the op's gradient rule (docs/gradients.md): `rule`, `zero` (locally constant: Floor,
  Sign, ...), or `-` (no float result a gradient reaches, or none: an error naming the op when one is asked).

| op | kind | call | functional / method | cost | basic | f16 exact | list | names | ONNX | grad |
|---|---|---|---|---|---|---|---|---|---|---|
"""


def _call(d: OpDef) -> str:
    cls = getattr(operations, d.name, None)
    if cls is not None:   # a class of its own (P.Dropout) says how it is called
        return f"`{getattr(cls, 'signature', None) or signature(d)}`"
    if d.name in _grad_ops.GRAD_PRIMITIVES:   # MindSpore's _grad_ops, imported as G
        return f"`G.{signature(d)[2:]}`"
    return "(internal)"


def _row(d: OpDef) -> str:
    kind = "composite" if d.expandable else d.pattern.name
    api = ", ".join(x for x in (f"`ops.{d.api.functional}`" if d.api.functional else "",
                                f"`Tensor.{d.api.method}`" if d.api.method else "") if x) or "-"
    names = ", ".join(f"`{n}`" for n in d.aliases + d.cann) or "-"
    onnx = ", ".join(d.onnx) or "-"
    yes = {True: "yes", False: "-"}
    grad = "-" if d.grad is None else "zero" if d.grad is no_gradient else "rule"
    return (f"| {d.name} | {kind} | {_call(d)} | {api} | {d.cost.name.lower()} | {yes[d.basic_fusion]} | "
            f"{yes[d.float16_exact]} | {d.precision.list} | {names} | {onnx} | {grad} |")


def render() -> str:
    order = sorted(OPS.values(), key=lambda d: (d.expandable, d.pattern if d.pattern != Pattern.HOST else 9, d.name))
    return HEADER + "\n".join(_row(d) for d in order) + "\n"


if __name__ == "__main__":
    print(render(), end="")
