"""How kernels pass SimState: by reference.

numba passes a NamedTuple argument by value, flattened: SimState's ~60 arrays become ~450 LLVM
arguments at every kernel's entry and at every call (each array a struct of pointers, sizes and
strides). Building, printing and parsing that IR was most of the engine's cold compile, and a call
that LLVM did not inline stored all of it on the stack.

Here SimState has a numba type of its own (`SimStateType`, a NamedTuple type), whose value is a
pointer to the struct of its arrays: a kernel's `s` is one pointer argument, passed on unchanged to
the kernels it calls; `s.pages` loads that field through the pointer, marked invariant (the struct
is never written while a kernel runs: NamedTuples are immutable), so LLVM hoists and merges those
loads as it did with the values. Only the entry points' wrappers build the struct, on their stack,
from the Python object (unboxing as for any tuple), for the length of the call. Nothing else
changes: typing, attribute access and every array are as for a NamedTuple.
"""
from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.datamodel import models, register_default
from numba.core.extending import NativeValue, typeof_impl, unbox
from numba.core.imputils import impl_ret_borrowed, lower_getattr_generic


class SimStateType(types.NamedTuple):
    """The numba type of a SimState: a NamedTuple passed by reference."""

    def as_value_tuple(self) -> types.NamedTuple:
        """The same NamedTuple as numba types it (the struct the reference points to)."""
        return types.NamedTuple(self.types, self.instance_class)


@register_default(SimStateType)
class SimStateModel(models.PrimitiveModel):
    """A pointer to the struct numba would pass by value: the same value as argument, data and
    return (PrimitiveModel's identity conversions)."""

    def __init__(self, dmm, fe_type):
        struct = dmm.lookup(fe_type.as_value_tuple()).get_value_type()
        super().__init__(dmm, fe_type, struct.as_pointer())


@lower_getattr_generic(SimStateType)
def simstate_getattr(context, builder, typ, value, attr):
    """`s.<field>`: a load through the reference, invariant for the kernel's duration."""
    index = typ.fields.index(attr)
    ptr = builder.gep(value, [ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), index)], inbounds=True)
    res = builder.load(ptr)
    res.set_metadata("invariant.load", builder.module.add_metadata([]))
    return impl_ret_borrowed(context, builder, typ[index], res)


@unbox(SimStateType)
def unbox_simstate(typ, obj, c):
    """The Python SimState unboxed as numba unboxes the NamedTuple, into a struct on the wrapper's
    stack; the kernel gets its address."""
    native = c.unbox(typ.as_value_tuple(), obj)
    ptr = cgutils.alloca_once(c.builder, native.value.type)
    c.builder.store(native.value, ptr)
    return NativeValue(ptr, is_error=native.is_error, cleanup=native.cleanup)


def register(cls) -> None:
    """Type instances of the NamedTuple class `cls` as SimStateType."""
    @typeof_impl.register(cls)
    def typeof_simstate(val, c):
        tys = [typeof_impl(v, c) for v in val]
        if any(t is None for t in tys):
            return None
        return SimStateType(tys, cls)
