"""The CTC family's GE prototype, as CANN's REG_OP declares it (metadef's ctc_ops.h, in third_party/cann/ge_reg_ops.txt):
CTCLoss, TensorFlow's tf.compat.v1.nn.ctc_loss (what keras.backend.ctc_batch_cost calls).

    loss[b]           = -log p(labels[b] | inputs[:seq_len[b], b, :])      (Graves' thesis, Eq. 7.26)
    gradient[t, b, c] = d loss[b] / d inputs[t, b, c] = softmax(inputs[t, b])[c] - occupancy[t, b, c]

`inputs` are time-major unnormalized logits [max_time, batch, num_classes] (the op takes their softmax over the
classes), the blank is the last class (num_classes - 1), and the labels come as a SparseTensor's `labels_indices`
[n, 2] (batch, position) and `labels_values` [n]. The outputs need only `inputs`' shape: the number of labels `n`
may be unknown (-1) in a graph whose labels are computed (tf.where). Executor: graph_ir/executors/ctc.py; TF
mapping: graph_ir/lowering/ops/ctc.py."""

from __future__ import annotations

from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.ir.registry import IrAttr, IrInput, IrOp, IrOutput, register

CTC_FLOATS = ("float32", "float64")  # the REG_OP's and TF's CPU kernel's (tensorflow/core/kernels/ctc_loss_op.cc)


def _known(a: int, b: int) -> bool:
    """Two dims that are both known (>= 0) and differ."""
    return a >= 0 and b >= 0 and a != b


def _ctc_loss(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    """loss [batch] and gradient (inputs' shape), after TF's shape checks (ctc_ops.cc's shape function)."""
    x, indices, values, seq_len = inputs
    if len(x.shape) != 3:
        raise GraphError(f"{op.type} {node!r}: input 'inputs' must have rank 3 [max_time, batch, num_classes], got "
                         f"shape {list(x.shape)}")
    if len(indices.shape) != 2 or _known(indices.shape[1], 2):
        raise GraphError(f"{op.type} {node!r}: input 'labels_indices' must have shape [n, 2] (batch, position), got "
                         f"{list(indices.shape)}")
    if len(values.shape) != 1:
        raise GraphError(f"{op.type} {node!r}: input 'labels_values' must be a vector [n], got shape "
                         f"{list(values.shape)}")
    if _known(indices.shape[0], values.shape[0]):
        raise GraphError(f"{op.type} {node!r}: inputs 'labels_indices' and 'labels_values' must have as many rows, "
                         f"got {indices.shape[0]} and {values.shape[0]}")
    if len(seq_len.shape) != 1 or _known(seq_len.shape[0], x.shape[1]):
        raise GraphError(f"{op.type} {node!r}: input 'sequence_length' must have shape [batch] = [{x.shape[1]}], got "
                         f"{list(seq_len.shape)}")
    if x.shape[2] == 0:
        raise GraphError(f"{op.type} {node!r}: input 'inputs' must have at least one class (the blank), got shape "
                         f"{list(x.shape)}")
    return [TensorDesc("loss", x.dtype, (x.shape[1],)), TensorDesc("gradient", x.dtype, x.shape)]


register(IrOp("CTCLoss",
              (IrInput("inputs", CTC_FLOATS), IrInput("labels_indices", ("int64",)),
               IrInput("labels_values", ("int32",)), IrInput("sequence_length", ("int32",))),
              (IrOutput("loss", CTC_FLOATS), IrOutput("gradient", CTC_FLOATS)),
              (IrAttr("preprocess_collapse_repeated", "bool", False), IrAttr("ctc_merge_repeated", "bool", True),
               IrAttr("ignore_longer_outputs_than_inputs", "bool", False)),
              outputs_from="infer", infer=_ctc_loss,
              doc="loss[b] = -log p(labels[b] | softmax(inputs[:seq_len[b], b])), blank = the last class; "
                  "gradient = d loss / d inputs = softmax(inputs) - the labels' occupancy (TF's CTCLoss)."))
