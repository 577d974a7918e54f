"""The checks family's TF -> GE mappings (prototypes: graph_ir/opset/checks.py): tf.debugging.check_numerics's
CheckNumerics onto GE CheckNumerics with its message; tf.ensure_shape's EnsureShape, checked when lowering (graph_ir's
shapes are static, so its run-time check is decided then) and an Identity where the shape agrees."""

from __future__ import annotations

from graph_ir.ir.errors import LoweringError
from graph_ir.lowering.ops.common import maps_to, same


@maps_to("Identity")
def _ensure_shape(ctx, node, inputs):
    wanted = node.attr["shape"].shape
    shape = inputs[0].shape
    dims = [d.size for d in wanted.dim]
    if not wanted.unknown_rank and (len(dims) != len(shape) or any(w >= 0 and w != d for w, d in zip(dims, shape))):
        raise LoweringError(f"TF EnsureShape {node.name!r}: its input has shape {list(shape)}, which is not the "
                            f"shape {dims} it requires (-1: any); TF would refuse it when the step runs")
    return ctx.add("Identity", inputs)


LOWERINGS = {"CheckNumerics": same("CheckNumerics", message="message"), "EnsureShape": _ensure_shape}
