"""graph_ir: the GE (CANN Graph Engine) graph IR for tf_plugin's operators.

- the IR registry (graph_ir.ir) and one builder per op (graph_ir.ops), generated from it;
- graph_ir.Graph with the Data / Const / Variable builders, verified against the IR as nodes are added;
- serialization to CANN's ge.proto.ModelDef (Graph.serialize / save as .air or .pbtxt; graph_ir.load);
- graph_ir.from_tensorflow: TF graphs with PowerSign / FusedEmaAdam lowered to InplaceApplyPowerSign /
  ApplyFusedEmaAdam;
- graph_ir.Session, which executes GE graphs on graph_ir.kernels (the C++ kernels of the TF ops, via pybind11).
"""

from graph_ir import ir, kernels, ops
from graph_ir.graph import Const, Data, Graph, GraphError, Handle, Node, TensorDesc, Variable
from graph_ir.lowering import LoweringError, from_tensorflow
from graph_ir.serialize import load, loads
from graph_ir.session import Session

__all__ = ["Const", "Data", "Graph", "GraphError", "Handle", "LoweringError", "Node", "Session", "TensorDesc",
           "Variable", "from_tensorflow", "ir", "kernels", "load", "loads", "ops"]
