"""TF ops whose output sizes depend on values (prototypes: graph_ir/opset/valued.py): Where (tf.where with one
argument, tf.boolean_mask) onto GE's Where. The lowering gives its count a size of its own at each probe
(graph_ir/dynamic/probe.py valued_size), so the template holds -1 there and graph_ir.Session runs the graph part by
part (graph_ir/runtime/segments.py); ScatterNd on bool (Keras's union of IndexedSlices rows, TF's scatter_nd on bool
is a logical or of the updates) through int32, as GE's ScatterNd takes no bool."""

from __future__ import annotations

import numpy as np

from graph_ir.dynamic.probe import valued_size
from graph_ir.ir.dtypes import as_dtype
from graph_ir.ir.errors import LoweringError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.lowering.ops.common import first, maps_to, same

VALUED_TF_OPS = ("Where",)


@maps_to("Where")
def _where(ctx, node, inputs):
    x = inputs[0]
    if ctx.probe is None:
        raise LoweringError(f"TF Where {node.name!r}: its count is known only at run time; it lowers in a probe "
                            "lowering (graph_ir.from_tensorflow finds Where nodes first)")
    count = valued_size(ctx.probe)
    made = ctx.graph.add_node("Where", [x], name=ctx._name(""), control_inputs=ctx.current_controls,
                              output_descs=[TensorDesc("y", as_dtype("int64"), (count, len(x.desc.shape)))])
    return ctx._folded(made)


@maps_to("ScatterNd")
def _scatter_nd(ctx, node, inputs):
    indices, updates, shape = inputs
    if updates.desc.dtype.name != "bool":
        return same("ScatterNd")(ctx, node, inputs)
    as_int = first(ctx.add("Cast", [updates], {"dst_type": "int32"}, suffix="int32"))
    summed = first(ctx.add("ScatterNd", [indices, as_int, shape], suffix="scatter"))
    return ctx.add("NotEqual", [summed, ctx.const(np.zeros((), np.int32), "zero")])


LOWERINGS = {"Where": _where, "ScatterNd": _scatter_nd}
