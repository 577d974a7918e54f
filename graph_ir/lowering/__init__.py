"""graph_ir.lowering (imported by graph_ir.from_tensorflow on first use; it imports TensorFlow): lowers TF training
steps to GE graphs.

- A tf.function (traced with its arguments) or a ConcreteFunction: everything the function runs is lowered: its
  outputs and every stateful op in it (TF runs them all). Captured variables become GE Variables holding their
  current values; arguments become Data nodes by position, except tf.Variable arguments, which become the GE
  Variables they are (graph_ir/lowering/trace.py). Keras's model.train_function lowers as one step of fit on the
  batch specs passed as `args` (graph_ir/lowering/keras_functions.py).
- A tf.Graph or GraphDef with `fetches`: exactly what tf.compat.v1.Session.run(fetches) would run (the fetches and
  what they depend on, data and control). Variable values come from `session` when given, else from each
  variable's own constant initializer, else a LoweringError; never from another Assign of the graph. Placeholders
  that the fetches need become Data nodes, in graph order.

Function calls (nested tf.functions, PartitionedCall / StatefulPartitionedCall) are inlined first
(graph_ir/lowering/inline.py). A tf.distribute step lowers with graph_ir.from_distributed to one graph per rank
(graph_ir/lowering/distributed.py, spmd.py). graph_ir.missing_ops(fn, *args) lists every op that has no lowering and
whatever else the lowering refuses; empty, the step lowers (graph_ir/lowering/report.py). The op mapping is in graph_ir/lowering/table.py, the naming of Variables in
graph_ir/lowering/capture.py (Graph.variable_name(v) gives a variable's GE name). FusedEmaAdam's lr is a GE
attribute, so an optimizer node is ApplyFusedEmaAdam where its lr is known when lowering: a constant, or (with
freeze_learning_rate, the default) the current value of a learning-rate variable that nothing else in the step reads
or writes, which is then frozen: left out of the graph (Graph.frozen_variables; lowering again picks up a new value).
Where lr is known only when the step runs (a schedule or callable computed in the step, an argument, or a variable
with freeze_learning_rate=False, which stays a GE Variable that drives every step), the update is GE elementwise ops
taking lr as a tensor, bitwise our kernel (graph_ir/lowering/lr_tensor.py). Scalar policy: a rank-0 tensor feeding
a GE scalar input (lr, logbase, sign_decay, beta, step) is given shape [1], as in CANN's GE-IR samples.
"""

from __future__ import annotations

from graph_ir.ir.errors import LoweringError
from graph_ir.lowering.distributed import from_distributed
from graph_ir.lowering.entry import from_tensorflow
from graph_ir.lowering.report import missing_ops, op_table
from graph_ir.lowering.table import LOWERINGS

__all__ = ["LOWERINGS", "LoweringError", "from_distributed", "from_tensorflow", "missing_ops", "op_table"]
