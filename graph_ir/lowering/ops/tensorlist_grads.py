"""TF's list arithmetic in tf.while_loop's gradients, on list handles (tensorflow/core/kernels/list_kernels.h):
ZerosLike (TensorListZerosLike) and AddN (TensorListBinaryAdd), lowered onto the TensorList family's GE ops
(graph_ir/lowering/ops/tensorlist.py keeps what is known of each list)."""

from __future__ import annotations

import numpy as np

from graph_ir.ir.errors import LoweringError
from graph_ir.ir.nodes import Handle
from graph_ir.lowering.ops.common import maps_to
from graph_ir.lowering.ops.tensorlist import (
    ListInfo,
    _add,
    _read_shape,
    _read_shape_input,
    _record,
    _where,
    info,
    merge,
)


def zeros_like(tensor_lowering):
    """TF's ZerosLike, which on a list handle is TF's TensorListZerosLike (tensorflow/core/kernels/list_kernels.h): a
    list of the same length and declared element shape whose elements are zeros of the elements' shapes. What
    tf.while_loop's gradient starts a loop list's gradient from; lowered as TensorListFromTensor of zeros, the
    list's length and element shape being known when lowering. Any other tensor: `tensor_lowering`."""

    @maps_to(tensor_lowering.ge_type)
    def lower(ctx, node, inputs):
        if inputs[0].dtype.name != "variant":
            return tensor_lowering(ctx, node, inputs)
        lst = info(ctx, inputs[0])
        shape = _read_shape(ctx, lst, None)
        if lst.length is None or lst.dtype is None or not lst.known_declared:
            raise LoweringError(f"{_where(ctx)}: zeros like a list whose length, element dtype or element shape is not "
                                "known when lowering")
        if ctx.probe is not None:  # sized at run time: zeros like the stacked list
            stacked = _add(ctx, "TensorListStack", [inputs[0], _read_shape_input(ctx, lst, None)],
                           {"element_dtype": lst.dtype}, suffix="stacked")
            zeros = ctx.add("ZerosLike", [stacked.output(0)], suffix="zeros")
            return _from_stacked(ctx, zeros.output(0), lst, shape)
        zero = ctx.const(np.zeros((), lst.dtype.numpy), "zero")
        zeros = ctx.add("Fill", [ctx.const(np.array([lst.length, *shape], np.int64), "dims"), zero], suffix="zeros")
        zeros = zeros if isinstance(zeros, list) else [zeros.output(0)]
        return _from_stacked(ctx, zeros[0], lst, shape)

    return lower


def _from_stacked(ctx, stacked: Handle, lst: ListInfo, shape: tuple[int, ...]):
    """TensorListFromTensor of `stacked`, declared with the element shape `lst` declares."""
    declared = ctx.const(np.array(-1 if lst.declared is None else lst.declared, np.int32), "element_shape")
    ge = _add(ctx, "TensorListFromTensor", [stacked, declared], {"element_dtype": lst.dtype})
    return _record(ctx, ge, ListInfo(lst.dtype, lst.declared, True, shape, lst.length))


def add_n(tensor_lowering):
    """TF's AddN, which on list handles is TF's TensorListBinaryAdd (tensorflow/core/kernels/list_kernels.h): the
    lists' elements added one by one (what tf.while_loop's gradient sums two gradients of a loop list with);
    lowered as the stacked lists added (unset elements read as zeros) and made a list again, the lists' length and
    element shape being known when lowering. Any other tensors: `tensor_lowering`."""

    @maps_to(tensor_lowering.ge_type)
    def lower(ctx, node, inputs):
        if inputs[0].dtype.name != "variant":
            return tensor_lowering(ctx, node, inputs)
        lists = [info(ctx, h) for h in inputs]
        first = lists[0]
        shape = first.shape
        for lst in lists[1:]:
            shape = merge(shape, lst.shape, _where(ctx))
        if any(lst.length is None or lst.length != first.length for lst in lists) or first.dtype is None or \
                not first.known_declared or shape is None or min(shape, default=0) < 0:
            raise LoweringError(f"{_where(ctx)}: adds lists whose lengths or element shapes are not known (and equal) "
                                "when lowering")
        length = {} if ctx.probe is not None else {"num_elements": first.length}  # (a probe: GE's infer knows it)
        stacked = [_add(ctx, "TensorListStack", [h, _read_shape_input(ctx, lst, None, f"element_shape_{k}")],
                        {"element_dtype": first.dtype, **length}, suffix=f"stack_{k}").output(0)
                   for k, (h, lst) in enumerate(zip(inputs, lists))]
        total = ctx.add("AddN", stacked, {"N": len(stacked)}, suffix="sum")
        total = total[0] if isinstance(total, list) else total.output(0)
        return _from_stacked(ctx, total, first, shape)

    return lower
