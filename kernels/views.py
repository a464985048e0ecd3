"""Views of part of a 1-D array, as numba code for generated kernels.

    view(a, start, count)                  a[start:start + count]
    view_strided(a, start, count, step)    a[start:start + count * step:step]    (step > 0)

A kernel cuts each buffer into the segments, rows and chunks its loops walk, a dozen views per segment.
numba lowers a slice through its general path (a slice object, clamping to the bounds, a negative
start or step, the view's layout found at run time), and optimizing that code was about a fifth of an
elementwise or rows kernel's build time; the loops over the views compile to the same machine code.
Here a view is its base's data pointer moved by `start` elements, `count` long, with the base's
stride (times `step`) and the base's owner, so it keeps the base alive as a numba slice does.

The caller guarantees what numba's slicing would have checked: 0 <= start, count >= 0, and the view
lies inside the array; a kernel's starts and counts come from the sizes its launch passes, as its
element indexes do (kernels are compiled without bounds checks either way).

`view` of a C-contiguous array is C-contiguous (kernels.lanes takes only those); `view_strided`'s is
of any layout. PYTHON holds the same functions in plain Python (slicing), what the tests use when
they run a kernel's source in pure Python.
"""
from __future__ import annotations

from numba import types
from numba.core import cgutils
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic
from numba.np.arrayobj import populate_array


def _make_view(context, builder, signature, args, step=None):
    basety, viewty = signature.args[0], signature.return_type
    base = context.make_array(basety)(context, builder, args[0])
    start, count = (context.cast(builder, v, t, types.intp) for v, t in zip(args[1:3], signature.args[1:3]))
    stride = cgutils.unpack_tuple(builder, base.strides, 1)[0]
    data = cgutils.pointer_add(builder, base.data, builder.mul(start, stride))
    if step is not None:
        stride = builder.mul(stride, context.cast(builder, step, signature.args[3], types.intp))
    out = context.make_array(viewty)(context, builder)
    populate_array(out, data=data, shape=[count], strides=[stride], itemsize=base.itemsize,
                   meminfo=base.meminfo, parent=base.parent)
    return impl_ret_borrowed(context, builder, viewty, out._getvalue())


def _is_vector(a) -> bool:
    return isinstance(a, types.Array) and a.ndim == 1


@intrinsic
def view(typingctx, a, start, count):
    if not (_is_vector(a) and isinstance(start, types.Integer) and isinstance(count, types.Integer)):
        return None
    viewty = a.copy(layout="C" if a.layout == "C" else "A")

    def codegen(context, builder, signature, args):
        return _make_view(context, builder, signature, args)
    return viewty(a, start, count), codegen


@intrinsic
def view_strided(typingctx, a, start, count, step):
    if not (_is_vector(a) and all(isinstance(t, types.Integer) for t in (start, count, step))):
        return None

    def codegen(context, builder, signature, args):
        return _make_view(context, builder, signature, args, step=args[3])
    return a.copy(layout="A")(a, start, count, step), codegen


FUNCTIONS = {"view": view, "view_strided": view_strided}

PYTHON = {"view": lambda a, start, count: a[start:start + count],
          "view_strided": lambda a, start, count, step: a[start:start + count * step:step]}
