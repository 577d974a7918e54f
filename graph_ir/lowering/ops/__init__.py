"""TF op -> GE lowerings of everything a training step holds besides the optimizer ops and the plumbing of
graph_ir/lowering/table.py: one module per op family, beside its GE prototypes (graph_ir/opset) and executors
(graph_ir/executors). A lowering is `fn(ctx, node_def, inputs) -> GE node | [GE handles]`: `inputs` are the GE
handles of the TF node's data inputs, `ctx` (graph_ir/lowering/context.py) adds GE nodes for it."""

from __future__ import annotations

from graph_ir.lowering.ops import array, conv, math, nn, norm
from graph_ir.lowering.table import ASSIGNS, MULTI_LOWERINGS, PLUMBING
from graph_ir.lowering.table import LOWERINGS as OPTIMIZERS

LOWERINGS = {**math.LOWERINGS, **array.LOWERINGS, **nn.LOWERINGS, **norm.LOWERINGS,
             **conv.LOWERINGS}

# TF ops refused with a reason of their own (anything else unknown gets the generic refusal).
_RANDOM = ("RandomUniform", "RandomStandardNormal", "TruncatedNormal", "RandomUniformInt", "StatelessRandomUniformV2",
           "StatelessRandomNormalV2", "StatelessRandomUniformFullIntV2", "StatelessTruncatedNormalV2",
           "StatelessRandomGetKeyCounter", "RngReadAndSkip", "RngSkip", "StatefulUniform", "StatefulStandardNormalV2")
_CONTROL_FLOW = ("If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase", "Switch", "Merge", "Enter",
                 "Exit", "NextIteration", "LoopCond")
_DATA_DEPENDENT = ("Where", "Unique", "DynamicPartition", "Bincount", "BooleanMask", "NonMaxSuppressionV3")


def lowered_types() -> list[str]:
    """Every TF op type the lowering knows."""
    return sorted({*OPTIMIZERS, *MULTI_LOWERINGS, *ASSIGNS, *PLUMBING, *LOWERINGS})


def refusal(op: str, node: str, stateful: bool) -> str:
    """Why TF op `op` (node `node`) cannot be lowered."""
    where = f"TF op {op} (node {node!r})"
    if op in _RANDOM:
        return (f"cannot lower {where}: random numbers (Dropout with training=True, random initializers, noise "
                "layers) cannot be lowered faithfully, since GE's generators do not draw TensorFlow's values; trace the "
                "step without them (e.g. training=False for Dropout, or a model without random layers)")
    if op in _CONTROL_FLOW:
        return (f"cannot lower {where}: control flow (tf.cond, tf.while_loop, Python conditions on tensors) is not "
                "covered by the lowering; write the step without data-dependent branches or loops")
    if op in _DATA_DEPENDENT:
        return f"cannot lower {where}: its output shape depends on the data, and GE graphs here have static shapes"
    kind = "stateful " if stateful else ""
    return (f"cannot lower {kind}{where} to GE IR: the lowering has no mapping for it "
            f"(graph_ir.lowering.ops.lowered_types() lists the {len(lowered_types())} it has)")
