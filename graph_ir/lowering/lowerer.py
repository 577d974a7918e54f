"""The lowerer: walks a TF GraphDef from the updates and the outputs and adds the GE nodes (graph_ir/lowering)."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from graph_ir.dtypes import from_tf
from graph_ir.errors import GraphError, LoweringError
from graph_ir.graph import Graph
from graph_ir.lowering.capture import attr_value
from graph_ir.lowering.table import LOWERINGS, PLUMBING, OpLowering
from graph_ir.nodes import Handle, TensorDesc


class Lowerer:
    def __init__(self, graph_def, name: str, arg_placeholders: list[str], variables: dict[str, Any],
                 outputs: list[str]):
        self.nodes = {n.name: n for n in graph_def.node}
        self.graph = Graph(name)
        self.arg_placeholders = arg_placeholders  # placeholder op names, by argument position
        self.variables = variables  # placeholder / VarHandleOp name -> (variable name, value)
        self.outputs = outputs  # TF tensor names
        self.lowered: dict[str, Any] = {}  # TF node name -> GE node (None for a NoOp or an initializer)
        self.controls: dict[str, list] = {}  # TF NoOp name -> the GE nodes its control edges stand for
        self.updates: list = []
        self.scalar_sources = self._scalar_sources()

    # -- helpers --------------------------------------------------------------------------------------------------

    def _source(self, tensor: str) -> tuple[str, int]:
        name, _, index = tensor.lstrip("^").partition(":")
        return name, int(index or 0)

    def _through_identities(self, name: str) -> str:
        while self.nodes[name].op == "Identity":
            name = self._source(self.nodes[name].input[0])[0]
        return name

    def _scalar_sources(self) -> set[str]:
        """TF nodes whose rank-0 output feeds a scalar input of a lowered op: lowered with shape [1]."""
        out = set()
        for node in self.nodes.values():
            lowering = LOWERINGS.get(node.op)
            if lowering is None:
                continue
            for tf_name, tensor in zip(lowering.tf_inputs, node.input):
                if tf_name in lowering.scalar_inputs:
                    out.add(self._through_identities(self._source(tensor)[0]))
        return out

    def _constant(self, tf_name: str, what: str, consumer) -> np.ndarray:
        src = self._through_identities(self._source(tf_name)[0])
        node = self.nodes[src]
        if node.op != "Const":
            raise LoweringError(
                f"{consumer.op} {consumer.name!r}: {what} becomes an attribute of GE "
                f"{LOWERINGS[consumer.op].ge_type}, so it must be a constant, but it comes from {node.op} node "
                f"{node.name!r}. Pass a Python float or a tf.constant (a schedule cannot be lowered).")
        return tf.make_ndarray(node.attr["value"].tensor)

    def handle(self, tensor: str) -> Handle:
        name, index = self._source(tensor)
        node = self.lower(name)
        if node is None or index >= len(node.output_descs):
            raise LoweringError(f"tensor {tensor!r} has no GE counterpart (node {name!r}, {self.nodes[name].op})")
        return node.output(index)

    def control(self, tensor: str) -> list:
        name = self._source(tensor)[0]
        node = self.lower(name)
        if node is None:
            return self.controls.get(name, [])
        return [node]

    # -- lowering -------------------------------------------------------------------------------------------------

    def lower(self, name: str):
        if name in self.lowered:
            return self.lowered[name]
        if name not in self.nodes:
            raise LoweringError(f"an input refers to node {name!r}, which the graph does not have")
        node = self.nodes[name]
        self.lowered[name] = None  # a cycle would recurse forever; TF graphs here are acyclic
        data_inputs = [t for t in node.input if not t.startswith("^")]
        controls = [c for t in node.input if t.startswith("^") for c in self.control(t)]
        lowering = LOWERINGS.get(node.op)
        if lowering is not None:
            ge_node = self._lower_update(node, lowering, data_inputs, controls)
        elif node.op == "NoOp":
            self.controls[name] = controls
            return None
        elif node.op in ("Placeholder", "VarHandleOp", "VariableV2"):
            ge_node = self._lower_input(node)
        elif node.op == "Const":
            value = tf.make_ndarray(node.attr["value"].tensor)
            if value.shape == () and name in self.scalar_sources:
                value = value.reshape(1)
            ge_node = self.graph.add_node("Const", (), {"value": np.ascontiguousarray(value)}, name=name)
        elif node.op in ("Identity", "ReadVariableOp"):
            ge_node = self.graph.add_node("Identity", [self.handle(data_inputs[0])], name=name,
                                          control_inputs=controls)
        elif node.op == "Cast":
            ge_node = self.graph.add_node("Cast", [self.handle(data_inputs[0])],
                                          {"dst_type": from_tf(attr_value(node, "DstT"))}, name=name,
                                          control_inputs=controls)
        elif node.op in ("AssignVariableOp", "Assign") and self._is_initializer(node):
            return None
        else:
            raise LoweringError(
                f"cannot lower TF op {node.op} (node {name!r}) to GE IR: the lowering covers "
                f"{', '.join(sorted(LOWERINGS))} and the plumbing {', '.join(PLUMBING)}")
        self.lowered[name] = ge_node
        return ge_node

    def _lower_update(self, node, lowering: OpLowering, data_inputs: list[str], controls: list):
        if len(data_inputs) != len(lowering.tf_inputs):
            raise LoweringError(f"{node.op} {node.name!r}: {len(data_inputs)} inputs, expected "
                                f"{len(lowering.tf_inputs)}")
        by_name = dict(zip(lowering.tf_inputs, data_inputs))
        attrs = {a: attr_value(node, a) for a in lowering.tf_attrs if a in node.attr}
        for a in lowering.attr_inputs:
            value = self._constant(by_name[a], a, node)
            if value.size != 1:
                raise LoweringError(f"{node.op} {node.name!r}: {a} must be a scalar, got shape {list(value.shape)}")
            attrs[a] = float(value.reshape(()))
        inputs = [self.handle(by_name[n]) for n in lowering.ge_inputs]
        try:
            ge_node = self.graph.add_node(lowering.ge_type, inputs, attrs, name=node.name, control_inputs=controls)
        except GraphError as e:
            raise LoweringError(f"lowering {node.op} {node.name!r}: {e}") from None
        self.updates.append(ge_node)
        return ge_node

    def _lower_input(self, node):
        if node.name in self.variables:
            var_name, value = self.variables[node.name]
            name = self.graph.unique_name(var_name)
            return self.graph.add_node("Variable", (), {"value": value, "shared_name": name}, name=name,
                                       exact_name=True)
        if node.op != "Placeholder":
            raise LoweringError(
                f"{node.op} {node.name!r}: the variable has no constant initializer in the graph, so its value is "
                "unknown; lower the tf.function (or its ConcreteFunction) to take the variable's current value")
        if node.name not in self.arg_placeholders:
            raise LoweringError(f"Placeholder {node.name!r} is neither a function argument nor a captured variable")
        dtype = from_tf(attr_value(node, "dtype"))
        shape_proto = node.attr["shape"].shape
        if shape_proto.unknown_rank or any(d.size < 0 for d in shape_proto.dim):
            raise LoweringError(f"argument {node.name!r} has an unknown shape; trace the function with a full "
                                "tf.TensorSpec (GE Data nodes need static shapes)")
        shape = tuple(d.size for d in shape_proto.dim)
        if shape == () and node.name in self.scalar_sources:
            shape = (1,)
        index = self.arg_placeholders.index(node.name)
        return self.graph.add_node("Data", (), {"index": index}, name=node.name,
                                   output_descs=[TensorDesc("y", dtype, shape)])

    def _is_initializer(self, node) -> bool:
        """An AssignVariableOp / Assign of a constant to a graph variable: its initializer, used as its value."""
        target = self._source(node.input[0])[0]
        return target in self.variables

    def run(self) -> Graph:
        for name in self.nodes:
            if self.nodes[name].op in LOWERINGS:
                self.lower(name)
        outputs = [self.handle(t) for t in self.outputs]
        if not self.updates and not outputs:
            raise LoweringError("the TF graph has no PowerSign or FusedEmaAdam update and no outputs to lower")
        self.graph.set_outputs(outputs, control_inputs=self.updates)
        return self.graph


