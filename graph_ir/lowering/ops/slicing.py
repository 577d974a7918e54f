"""The slicing family's TF -> GE mappings (prototypes: graph_ir/opset/slicing.py), as Ascend's TF adapter maps them
(hicann/tensorflow tf_adapter, AutoMapping by position): each TF op onto the GE op of the same name, inputs in TF
order, attributes by name (Split's num_split, Unpack's num and axis, MirrorPad's mode, Cumsum's exclusive and
reverse, StridedSliceGrad's masks). TF's shape-like inputs (paddings, sizes, axes) arrive as Consts after folding
(graph_ir/lowering/context.py); one computed in the step is refused by the prototype, naming the node and input.
StridedSliceGrad's begin and end may be computed in the step where its slice's size is constant (lowering/ops/
dynamic_slice.py: `action_probs[0, action]`'s gradient); its output's shape is the Const `shape` all the same.
So may ResourceStridedSliceAssign's and TensorStridedSliceUpdate's (slice_update.py), and a Pad's paddings where
each row sums to a constant (tf.slice's gradient at a computed begin: graph_ir/opset/slicing.py)."""

from __future__ import annotations

from graph_ir.lowering.ops.common import count, same, same_bool_as_bytes
from graph_ir.lowering.ops.dynamic_slice import strided_slice_grad
from graph_ir.lowering.ops.slice_update import resource_strided_slice_assign, tensor_strided_slice_update

LOWERINGS = {
    "Slice": same_bool_as_bytes("Slice"),
    **{t: same(t) for t in ("Pad", "PadV2", "InvertPermutation", "GatherNd",
                            "TensorScatterUpdate", "ReverseV2")},
    "MirrorPad": same("MirrorPad", mode="mode"),
    "MirrorPadGrad": same("MirrorPadGrad", mode="mode"),
    "Split": same("Split", num_split="num_split"),
    "SplitV": same("SplitV", num_split="num_split"),
    "Unpack": same("Unpack", num="num", axis="axis"),
    "ConcatOffset": same("ConcatOffset", N=count),
    "StridedSliceGrad": strided_slice_grad,  # begin and end may be computed: dynamic_slice.py
    "ResourceStridedSliceAssign": resource_strided_slice_assign,  # writes the Variable (ops.WRITES_VARIABLE)
    "TensorStridedSliceUpdate": tensor_strided_slice_update,
    "Cumsum": same("Cumsum", exclusive="exclusive", reverse="reverse"),
}
