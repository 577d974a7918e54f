"""The CTC family's TF -> GE mapping (prototype: graph_ir/opset/ctc.py): TF's CTCLoss (tf.compat.v1.nn.ctc_loss,
keras.backend.ctc_batch_cost) onto GE's CTCLoss one to one, inputs by position and the three attributes by name, as
Ascend's TF adapter maps it (AutoMapping). Both outputs carry over: TF's registered gradient of CTCLoss is its second
output, `gradient`, times the incoming loss gradient (tensorflow/python/ops/ctc_ops.py, _CTCLossGrad), under a
PreventGradient (which lowers as Identity: graph_ir/lowering/table.py)."""

from __future__ import annotations

from graph_ir.lowering.ops.common import same

_ATTRS = ("preprocess_collapse_repeated", "ctc_merge_repeated", "ignore_longer_outputs_than_inputs")

LOWERINGS = {"CTCLoss": same("CTCLoss", **{name: name for name in _ATTRS})}
