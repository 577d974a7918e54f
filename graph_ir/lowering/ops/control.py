"""The control-flow family's TF -> GE mappings: If, StatelessIf, Case, StatelessCase, While and StatelessWhile onto the
GE functional ops of the same names, their functions lowered into subgraphs (graph_ir/lowering/control.py;
prototypes: graph_ir/opset/control.py); and VariableShape (what tf.while_loop's gradient asks of the variables its
body reads), which is the variable's static shape: a Const."""

from __future__ import annotations

import numpy as np

from graph_ir.ir.errors import LoweringError
from graph_ir.lowering.ops.common import maps_to, tf_attr


def _functional(ge_type: str):
    @maps_to(ge_type)
    def lower(ctx, node, inputs):
        # The lowering itself (graph_ir/lowering/control.py) lowers the node's functions with sub-lowerings, so it
        # sits above the Lowerer and reaches this table through the context that the root lowering was given.
        if ctx.functional is None:
            raise LoweringError(f"TF {node.op} {node.name!r}: this lowering was made without the functional-op "
                                "lowering (graph_ir.lowering.control.lower_functional); use "
                                "graph_ir.lowering.from_tensorflow")
        return ctx.functional(ctx, node, inputs)

    return lower


@maps_to("Const")
def _variable_shape(ctx, node, inputs):
    variable = inputs[0]
    if variable.node.type != "Variable":
        raise LoweringError(f"TF VariableShape {node.name!r}: its input is not a variable (it comes from "
                            f"{variable.node.type} {variable.node.name!r})")
    return [ctx.const(np.array(variable.shape, dtype=tf_attr(node, "out_type").numpy))]


LOWERINGS = {
    **{t: _functional(t) for t in ("If", "StatelessIf", "Case", "StatelessCase", "While", "StatelessWhile")},
    "VariableShape": _variable_shape,
}
