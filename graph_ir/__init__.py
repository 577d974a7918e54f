"""graph_ir: the GE (CANN Graph Engine) graph IR for tf_plugin's operators. It imports no TensorFlow: only
graph_ir.from_tensorflow does, on first use.

Packages, by layer (each imports only the ones above it; tests/packaging/test_layout.py holds the order):
  ir (the IR: dtypes, the op registry from op_spec and CANN's REG_OPs, nodes, the verifier, Graph, builders)
  -> opset (the GE op families' prototypes) -> files (.air and .pbtxt written, GE's ONNX-format dump) -> ops (one
  builder per IR op) -> kernels (the C++ kernels on NumPy arrays) -> distributed (the Hcom ops over MPI) -> executors
  -> dynamic (graphs with dims known only at run time) -> files.load, files.read -> runtime (the Session) -> lowering
  (TensorFlow -> GE IR), compare, cli.
"""

from typing import Any

from graph_ir import kernels, ops
from graph_ir.files.read import load, loads
from graph_ir.ir import registry
from graph_ir.ir.builders import Const, Data, Variable
from graph_ir.ir.errors import GraphError, LoweringError
from graph_ir.ir.graph import Graph
from graph_ir.ir.nodes import Handle, Node, TensorDesc
from graph_ir.runtime.session import Session


def from_tensorflow(fn: Any, *args: Any, fetches: Any = None, session: Any = None,
                    freeze_learning_rate: bool = True, input_shapes: Any = None) -> Graph:
    """Lowers a TensorFlow step to a GE graph; see graph_ir.lowering (which imports TensorFlow on first use).

    from_tensorflow(fn, *args): fn a tf.function (traced with `args`) or a ConcreteFunction: what it runs.
    from_tensorflow(graph, fetches=..., session=None): a tf.Graph or GraphDef: what Session.run(fetches) runs, with
    the variables' values from `session` (or their constant initializers).
    freeze_learning_rate: a FusedEmaAdam learning-rate variable that nothing else in the step reads or writes becomes
    ApplyFusedEmaAdam's lr attribute at its current value (True), or stays a Variable that drives every step (False).
    input_shapes: a ConcreteFunction's argument shapes by name where its dims are unknown, as ATC's --input_shape
    gives them ("x:8,12;y:8") or as a mapping ({"x": (8, 12)}).
    """
    from graph_ir import lowering  # TensorFlow is imported here, not by `import graph_ir`

    return lowering.from_tensorflow(fn, *args, fetches=fetches, session=session,
                                    freeze_learning_rate=freeze_learning_rate, input_shapes=input_shapes)


def from_distributed(fn: Any, *args: Any, strategy: Any = None, freeze_learning_rate: bool = True) -> list[Graph]:
    """Lowers a step traced under a tf.distribute MirroredStrategy (or on one MultiWorkerMirroredStrategy worker) to
    one GE graph per local replica (rank), each running that replica's part with Hcom ops for TF's collectives: the
    same graph on every rank (SPMD). See graph_ir.lowering.distributed.from_distributed."""
    from graph_ir.lowering.distributed import from_distributed as lower  # imports TensorFlow

    return lower(fn, *args, strategy=strategy, freeze_learning_rate=freeze_learning_rate)


def from_saved_model(path: Any, signature: str = "serving_default", *, input_shapes: Any = None,
                     freeze_learning_rate: bool = True) -> Graph:
    """Lowers a SavedModel's signature, or a tf.function saved in it with one input signature (a training step with
    its variables), to a GE graph; input_shapes gives unknown dims by argument name ("x:8,12", ATC's
    --input_shape). See graph_ir.lowering.entry.from_saved_model."""
    from graph_ir.lowering.entry import from_saved_model as lower  # imports TensorFlow

    return lower(path, signature, input_shapes=input_shapes, freeze_learning_rate=freeze_learning_rate)


def from_frozen_graph(path: Any, outputs: Any, *, input_shapes: Any = None) -> Graph:
    """Lowers a frozen GraphDef file (.pb) computing `outputs` (ATC's --out_nodes: "logits:0" or op names), its
    Placeholders' unknown dims given by input_shapes. See graph_ir.lowering.entry.from_frozen_graph."""
    from graph_ir.lowering.entry import from_frozen_graph as lower  # imports TensorFlow

    return lower(path, outputs, input_shapes=input_shapes)


def missing_ops(fn: Any, *args: Any, fetches: Any = None, session: Any = None) -> dict[str, list[str]]:
    """{TF op type: [node names]} of every op of the step that the lowering has no mapping for or refuses (an
    Assert on the step's data, a string tensor, an argument of unknown rank, a slice it cannot size): empty means
    from_tensorflow lowers the step (see graph_ir.lowering.report); takes what from_tensorflow takes."""
    from graph_ir.lowering.report import missing_ops as find  # imports TensorFlow

    return find(fn, *args, fetches=fetches, session=session)


__all__ = ["Const", "Data", "Graph", "GraphError", "Handle", "LoweringError", "Node", "Session", "TensorDesc",
           "Variable", "from_distributed", "from_frozen_graph", "from_saved_model", "from_tensorflow", "kernels", "load", "loads",
           "missing_ops", "ops", "registry"]
