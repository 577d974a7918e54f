"""TF op -> GE lowerings of everything a training step holds besides the optimizer ops and the plumbing of
graph_ir/lowering/table.py: one module per op family, beside its GE prototypes (graph_ir/opset) and executors
(graph_ir/executors). A lowering is `fn(ctx, node_def, inputs) -> GE node | [GE handles]`: `inputs` are the GE
handles of the TF node's data inputs, `ctx` (graph_ir/lowering/context.py) adds GE nodes for it."""

from __future__ import annotations

import numpy as np

from graph_ir.ir.errors import LoweringError
from graph_ir.lowering.inline import CALL_OPS
from graph_ir.lowering.ops import (
    activation,
    array,
    bucketize,
    checks,
    control,
    conv,
    ctc,
    depthwise,
    fft,
    hcom,
    image,
    linalg,
    logic,
    math,
    matrix,
    nn,
    norm,
    random,
    resize,
    scatter,
    segment,
    slicing,
    tensorlist,
    tensorlist_grads,
    trig,
    valued,
)
from graph_ir.lowering.table import ASSIGNS, MULTI_LOWERINGS, PLUMBING
from graph_ir.lowering.table import LOWERINGS as OPTIMIZERS

LOWERINGS = {**math.LOWERINGS, **array.LOWERINGS, **nn.LOWERINGS, **norm.LOWERINGS,
             **conv.LOWERINGS, **depthwise.LOWERINGS}
LOWERINGS.update({**activation.LOWERINGS, **logic.LOWERINGS, **matrix.LOWERINGS})
LOWERINGS.update({**slicing.LOWERINGS, **resize.LOWERINGS})
LOWERINGS.update({**random.LOWERINGS, **checks.LOWERINGS, **segment.LOWERINGS,
                  **linalg.LOWERINGS, **scatter.LOWERINGS,
                  **bucketize.LOWERINGS, **trig.LOWERINGS, **fft.LOWERINGS,
                  **image.LOWERINGS, **ctc.LOWERINGS})
LOWERINGS.update({**tensorlist.LOWERINGS, **control.LOWERINGS, **valued.LOWERINGS, **hcom.LOWERINGS})
# On list handles (tf.while_loop's gradients of loop lists), ZerosLike and AddN are TF's list kernels.
LOWERINGS["ZerosLike"] = tensorlist_grads.zeros_like(LOWERINGS["ZerosLike"])
LOWERINGS["AddN"] = tensorlist_grads.add_n(LOWERINGS["AddN"])
LOWERINGS["DivNoNan"] = fft.complex_div_no_nan(LOWERINGS["DivNoNan"])  # complex64: GE's DivNoNan declares none

# TF ops lowered here that write their first input, a variable, in place (graph_ir/lowering/lowerer.py's writes).
WRITES_VARIABLE = ("ResourceStridedSliceAssign",)

# TF ops refused with a reason of their own (anything else unknown gets the generic refusal).
_RANDOM = ("RngReadAndSkip", "RngSkip", "StatefulUniform", "StatefulStandardNormalV2")
# Ops on tf.lookup tables (captured resources that are no tf.Variable): host work, refused with REWRITES' advice.
HOST_TABLE_OPS = ("LookupTableFindV2", "LookupTableSizeV2", "LookupTableExportV2", "LookupTableImportV2",
                  "LookupTableInsertV2", "LookupTableRemoveV2")
_CONTROL_FLOW = ("Switch", "Merge", "Enter", "Exit", "NextIteration", "LoopCond")  # TF1's; TF2's are lowered
_DATA_DEPENDENT = ("Unique", "DynamicPartition", "Bincount", "BooleanMask", "NonMaxSuppressionV3")
# Ops whose condition is checked when lowering and which then become nothing (check_assert): only their first input
# is lowered (an Assert's other inputs are its message, string Consts GE graphs here do not take).
CHECKED_WHEN_LOWERING = ("Assert",)
# Known rewrites of steps holding an op without a lowering (said in its refusal and by graph_ir.missing_ops).
_HOST_TABLE = ("a lookup table (keras.layers.StringLookup, IntegerLookup, tf.lookup): on Ascend such preprocessing "
               "runs in the input pipeline, not in the GE graph; move the lookup into tf.data "
               "(dataset.map(lambda x, y: (lookup(x), y))) and lower the step from its output")
REWRITES = {
    **{op: _HOST_TABLE for op in HOST_TABLE_OPS},
    "L2Loss": ("if it comes from tf.clip_by_global_norm / tf.linalg.global_norm, clip with the Keras optimizer's "
               "global_clipnorm= instead (its norm is a sum of squares, which lowers); for tf.nn.l2_loss(x), write "
               "tf.reduce_sum(tf.square(x)) / 2"),
}


def lowered_types() -> list[str]:
    """Every TF op type the lowering knows (function calls are inlined: graph_ir/lowering/inline.py)."""
    return sorted({*OPTIMIZERS, *MULTI_LOWERINGS, *ASSIGNS, *PLUMBING, *LOWERINGS, *CALL_OPS, *CHECKED_WHEN_LOWERING})


def check_assert(ctx, node, condition):
    """TF's Assert (tf.debugging.assert_*, tf.nn.compute_average_loss's check of its batch size), checked when
    lowering: a condition known then (a Const, or folded into one: shapes are static) that holds everywhere is the
    same check at every run, passed, so the Assert becomes nothing; one that fails is a LoweringError (TF would
    refuse every run). A condition computed from shapes known only at run time (a probe lowering, graph_ir/dynamic)
    becomes GE's Assert, which graph_ir checks at each call's shapes before anything runs; it is returned (kept in
    the graph). A condition computed from the step's data is refused: GE's Assert would check it while the step
    runs, and graph_ir cannot refuse the step then before any variable is written, while dropping the check would
    run a step TF refuses."""
    where = f"TF op Assert (node {node.name!r})"
    value = condition.node.attrs["value"] if condition.node.type == "Const" else None
    if value is None and ctx.value(condition) is not None:
        ctx.current, ctx.current_controls = node, []
        checked = ctx.add("Assert", [condition], {})
        ctx.stateful.append(checked)  # kept: the graph's NetOutput waits on it
        return checked
    if value is None:
        raise LoweringError(
            f"cannot lower {where}: its condition depends on the step's data, and a GE graph here cannot check it "
            "while the step runs and refuse the step before any variable is written (dropping the check would run "
            "steps TF refuses); remove the assertion from the step (tf.debugging.assert_* / tf.Assert on tensors), "
            "or check the data before the step")
    if not np.all(value):
        raise LoweringError(f"cannot lower {where}: its condition is false whatever the step's data (TF refuses "
                            "every run of this step with InvalidArgumentError)")
    return None


def refusal(op: str, node: str, stateful: bool) -> str:
    """Why TF op `op` (node `node`) cannot be lowered."""
    where = f"TF op {op} (node {node!r})"
    if op in _RANDOM:
        return (f"cannot lower {where}: the random ops of a tf.random.Generator draw from a generator variable's "
                "state that GE cannot reproduce; use the stateless ones (tf.random.stateless_*, Keras's layers and "
                "keras.random with a SeedGenerator) or seeded tf.random.uniform/normal, which lower and draw "
                "TensorFlow's values")
    if op in _CONTROL_FLOW:
        return (f"cannot lower {where}: TF1's dataflow control flow (Switch/Merge/Enter/Exit) is not lowered; GE "
                "takes the functional form: enable control flow v2 (tf.compat.v1.enable_control_flow_v2(), the "
                "default in TF2), whose If/While nodes lower to GE If/While")
    if op in _DATA_DEPENDENT:
        return (f"cannot lower {where}: its output shape depends on the data; graph_ir runs such sizes for Where "
                "only (tf.where with one argument, tf.boolean_mask: graph_ir/runtime/segments.py)")
    kind = "stateful " if stateful else ""
    hint = f"; {REWRITES[op]}" if op in REWRITES else ""
    return (f"cannot lower {kind}{where} to GE IR: the lowering has no mapping for it (`python -m graph_ir ops` "
            f"lists the {len(lowered_types())} it has; graph_ir.missing_ops(fn, *args) lists every op of a step "
            f"that has none){hint}")
