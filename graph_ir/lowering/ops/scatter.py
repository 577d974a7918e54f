"""The scatter family's TF -> GE mappings (prototypes: graph_ir/opset/scatter.py): tf.tensor_scatter_nd_add, _sub,
_max and _min onto the GE ops of the same names, inputs by position."""

from __future__ import annotations

from graph_ir.lowering.ops.common import same

LOWERINGS = {t: same(t) for t in ("TensorScatterAdd", "TensorScatterSub", "TensorScatterMax", "TensorScatterMin")}
