"""A hint to the CPU's caches: prefetch an array element that a later access will read.

`prefetch_item(arr, i)` emits LLVM's llvm.prefetch for the address of arr[i] (a read, kept in all
cache levels). It changes no value: a prefetch never faults and is dropped when the address is not
mapped, so results are the same with or without it; only the wait for the line moves earlier.
"""
from __future__ import annotations

from llvmlite import ir
from numba import config
from numba.core import cgutils, types
from numba.core.extending import intrinsic


@intrinsic
def prefetch_item(typingctx, arr, i):
    if not isinstance(arr, types.Array) or arr.ndim != 1 or not isinstance(i, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        # read (0), locality 3 (keep in every level), data cache (1)
        builder.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(arr, i), codegen


if config.DISABLE_JIT:
    def prefetch_item(arr, i):      # noqa: F811 -- pure Python (NUMBA_DISABLE_JIT=1): no cache to warm
        return None
