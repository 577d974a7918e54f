"""The output descs of a node, inferred by its op's declared rule (IrOp.outputs_from: one rule per name; "infer"
takes the op's own function, as the op families of graph_ir/opset declare them) and checked against the descs a
builder or a file states."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from graph_ir.ir.dtypes import DType, as_dtype
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import Handle, TensorDesc
from graph_ir.ir.registry import IrOp
from graph_ir.ir.verify import broadcast_shape, check_shape, const_dims


def _from_value(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    value = attrs["value"]
    return [TensorDesc("y", as_dtype(value.dtype), tuple(value.shape))]


def _from_refs(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    refs = op.refs
    if len(refs) != len(op.outputs):
        raise GraphError(f"{op.type} {node!r}: cannot infer its outputs")
    return [inputs[refs[k]].desc.renamed(o.name) for k, o in enumerate(op.outputs)]


def _same(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    return [inputs[0].desc.renamed(op.outputs[0].name)]


def _cast(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    dst: DType = attrs["dst_type"]
    return [TensorDesc("y", dst, inputs[0].shape)]


def _fill(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    return [TensorDesc("y", inputs[1].dtype, check_shape(node, "dims", const_dims(op, node, inputs[0], "dims")))]


def _reshape(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    """TF's rule (tensorflow/core/kernels/reshape_op.h, ValidateSizes): a -1 takes the input's element count over the
    product of the other dims; when `shape` holds a 0, the input's zero dims are left out of that count, so that
    [0, 3] reshaped to [0, -1] gives [0, 3]."""
    shape = const_dims(op, node, inputs[1], "shape")
    x = inputs[0]
    if shape.count(-1) > 1 or any(d < -1 for d in shape):
        raise GraphError(f"Reshape {node!r}: shape {shape} may hold one -1 and otherwise dims >= 0")
    if -1 in shape:
        has_zero = 0 in shape
        product = math.prod(d for d in shape if d > 0)
        count = math.prod(d for d in x.shape if d > 0 or not has_zero)
        shape[shape.index(-1)] = count // product
    if math.prod(shape) != x.desc.num_elements:
        raise GraphError(f"Reshape {node!r}: cannot reshape {list(x.shape)} to {shape}")
    return [TensorDesc("y", x.dtype, tuple(shape))]


def _broadcast(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    return [TensorDesc(op.outputs[0].name, inputs[0].dtype, broadcast_shape(op, node, inputs))]


def _compare(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    return [TensorDesc("y", as_dtype("bool"), broadcast_shape(op, node, inputs))]


def _select(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    return [TensorDesc(op.outputs[0].name, inputs[1].dtype, broadcast_shape(op, node, inputs))]


def _each(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    return [h.desc.renamed(f"{op.outputs[0].name}{k}") for k, h in enumerate(inputs)]


OUTPUT_RULES: dict[str, Callable[..., list[TensorDesc]]] = {
    "broadcast": _broadcast,
    "compare": _compare,
    "select": _select,
    "each": _each,
    "fill": _fill,
    "value": _from_value,
    "refs": _from_refs,
    "same": _same,
    "cast": _cast,
    "reshape": _reshape,
    "none": lambda op, node, inputs, attrs: [],
    "subgraphs": lambda op, node, inputs, attrs: _needs_subgraphs(op, node),
}


def _needs_subgraphs(op: IrOp, node: str) -> list[TensorDesc]:
    raise GraphError(f"{op.type} {node!r}: its outputs come from its subgraphs ({', '.join(op.graphs)}); pass them as "
                     "Graph.add_node(..., subgraphs=[...])")


def infer_outputs(op: IrOp, node: str, inputs: Sequence[Handle | None], attrs: dict[str, Any],
                  given: list[TensorDesc] | None = None) -> list[TensorDesc]:
    """The node's output descs by its op's rule. `given` are the descs a builder or a file states: required for
    graph inputs (Data, RefData), and otherwise checked against the inferred ones."""
    if op.outputs_from == "given":
        if given is None or len(given) != len(op.outputs):
            raise GraphError(f"{op.type} {node!r}: needs exactly {len(op.outputs)} output desc (its dtype and shape), "
                             f"got {0 if given is None else len(given)}")
        for d in given:
            if d.dtype.name not in op.outputs[0].dtypes:
                raise GraphError(f"{op.type} {node!r}: output dtype {d.dtype} is not allowed")
            check_shape(node, "output_desc", d.shape)
        return list(given)
    if op.outputs_from == "valued":
        if given is None:
            raise GraphError(f"{op.type} {node!r}: its output sizes depend on its input's values; give its output "
                             "descs (-1 for a size known only at run time)")
        return op.infer(op, node, inputs, attrs, list(given))
    rule = op.infer if op.outputs_from == "infer" else OUTPUT_RULES[op.outputs_from]
    inferred = rule(op, node, inputs, attrs)
    if given is not None:
        if len(given) != len(inferred):
            raise GraphError(f"{op.type} {node!r}: has {len(given)} output descs, expected {len(inferred)}")
        for k, (g, want) in enumerate(zip(given, inferred)):
            if (g.dtype, g.shape) != (want.dtype, want.shape):
                raise GraphError(f"{op.type} {node!r}: output_desc {k} says {g.dtype}{list(g.shape)}, but the node "
                                 f"produces {want.dtype}{list(want.shape)}")
    return inferred
