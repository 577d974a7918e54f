"""graph_ir.from_tensorflow: lowers a TF graph with PowerSign / FusedEmaAdam updates to a GE graph.

The lowering table (LOWERINGS) maps TF op types to GE ops declaratively: the GE type, the TF inputs in GE IR order,
which TF inputs become GE attributes (FusedEmaAdam's lr, which must then be a constant), and the TF attributes
kept. It is built from tf_plugin/signatures.py, so it agrees with the TF registrations and the GE prototypes.
The plumbing around the updates lowers as TensorFlow's own GE adapter does it:

- A resource variable (a captured handle of a tf.function, or a VarHandleOp / VariableV2 in a tf.Graph or GraphDef)
  becomes a GE Variable with the variable's dtype and shape. It is named like the TF variable without ":0" and
  holds its current value in `value`. For a graph it is the constant its initializer assigns.
- ReadVariableOp and Identity become Identity. NoOp disappears and its control edges pass through. Const stays
  Const, and Cast stays Cast.
- Function arguments (and the Placeholders of a graph, in order) become Data nodes, by position.
- The function's outputs go to NetOutput. The updates are also NetOutput's control inputs, so nothing is pruned.

Scalar policy: a rank-0 TF tensor feeding a scalar input of a GE op (lr, logbase, sign_decay, beta, step) is
lowered with shape [1], as in CANN's GE-IR samples. Every other tensor keeps its TF shape (a scalar variable stays
[]). Any TF op not in the table and not plumbing is named in a LoweringError.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

from graph_ir import ir
from graph_ir.dtypes import from_tf
from graph_ir.graph import Graph, GraphError, Handle, TensorDesc
from tf_plugin import signatures


class LoweringError(GraphError):
    """A TF graph that cannot be lowered to GE IR; the message names the node."""


@dataclass(frozen=True)
class OpLowering:
    ge_type: str
    tf_inputs: tuple[str, ...]  # the TF op's inputs, in TF order
    ge_inputs: tuple[str, ...]  # the GE op's inputs, in IR order (names shared with tf_inputs)
    attr_inputs: tuple[str, ...] = ()  # TF inputs that are GE attributes: must be constants
    tf_attrs: tuple[str, ...] = ()  # TF attributes copied by name (AutoMapping semantics)

    @property
    def scalar_inputs(self) -> tuple[str, ...]:
        return tuple(i.name for i in ir.get(self.ge_type).inputs if i.scalar)


def _from_signature(sig: signatures.OpSignature) -> OpLowering:
    ge = sig.ge
    return OpLowering(
        ge_type=ge.type,
        tf_inputs=tuple(i.name for i in sig.inputs),
        ge_inputs=ge.input_order,
        attr_inputs=tuple(a.name for a in ge.attr_inputs),
        tf_attrs=tuple(a.name for a in sig.attrs if a.name not in ge.tf_only_attrs),
    )


_POWER_SIGN = _from_signature(signatures.POWER_SIGN)
_FUSED_EMA_ADAM = _from_signature(signatures.FUSED_EMA_ADAM)

# TF op type -> GE op. Stock ApplyPowerSign / ResourceApplyPowerSign have the same inputs as ours.
LOWERINGS: dict[str, OpLowering] = {
    "ApplyPowerSign": _POWER_SIGN,
    "ResourceApplyPowerSign": _POWER_SIGN,
    signatures.POWER_SIGN.ref_op: _POWER_SIGN,
    signatures.POWER_SIGN.resource_op: _POWER_SIGN,
    signatures.FUSED_EMA_ADAM.ref_op: _FUSED_EMA_ADAM,
    signatures.FUSED_EMA_ADAM.resource_op: _FUSED_EMA_ADAM,
}
PLUMBING = ("Placeholder", "Const", "Identity", "ReadVariableOp", "NoOp", "Cast", "VarHandleOp", "VariableV2",
            "AssignVariableOp", "Assign")


def _attr(node_def, name: str):
    value = node_def.attr[name]
    return getattr(value, value.WhichOneof("value"))


class _Lowerer:
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
                                          {"dst_type": from_tf(_attr(node, "DstT"))}, name=name,
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
        attrs = {a: _attr(node, a) for a in lowering.tf_attrs if a in node.attr}
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
        dtype = from_tf(_attr(node, "dtype"))
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


def _graph_variables(graph_def) -> dict[str, Any]:
    """VarHandleOp / VariableV2 nodes with a constant initializer (AssignVariableOp / Assign of a Const)."""
    nodes = {n.name: n for n in graph_def.node}
    out = {}
    for node in graph_def.node:
        if node.op not in ("AssignVariableOp", "Assign"):
            continue
        target, value = (t.partition(":")[0] for t in node.input[:2])
        source = nodes.get(value)
        while source is not None and source.op == "Identity":
            source = nodes.get(source.input[0].partition(":")[0])
        if nodes.get(target) is not None and nodes[target].op in ("VarHandleOp", "VariableV2") and \
                source is not None and source.op == "Const":
            var = nodes[target]
            name = _attr(var, "shared_name").decode() if var.op == "VarHandleOp" and \
                _attr(var, "shared_name") else var.name
            out[target] = (name, np.ascontiguousarray(tf.make_ndarray(source.attr["value"].tensor)))
    return out


def _variable_owning(handle) -> tf.Variable | None:
    """The tf.Variable whose handle a function captured, when it was passed as `v.handle` (so the function graph
    did not record the variable itself): found among the objects that refer to the handle."""
    if getattr(handle, "dtype", None) != tf.resource:
        return None
    for referrer in gc.get_referrers(handle):
        if isinstance(referrer, tf.Variable) and getattr(referrer, "_handle", None) is handle:
            return referrer
        if isinstance(referrer, dict):  # an instance __dict__ (before Python 3.11's inline dicts)
            for owner in gc.get_referrers(referrer):
                if isinstance(owner, tf.Variable) and getattr(owner, "_handle", None) is handle:
                    return owner
    return None


def from_tensorflow(fn: Any, *args: Any) -> Graph:
    """Lowers a TF graph to a GE graph (see the module docstring for the rules).

    Args:
      fn: a tf.function (traced with `args`: tensors or tf.TensorSpecs), a ConcreteFunction, a tf.Graph or a
        GraphDef.
      *args: the arguments to trace a tf.function with.
    Returns:
      a verified graph_ir.Graph.
    Raises:
      LoweringError: naming the TF node that cannot be lowered, or why (e.g. a non-constant FusedEmaAdam lr).
    """
    if hasattr(fn, "get_concrete_function") and not isinstance(fn, tf.Graph):
        fn = fn.get_concrete_function(*args)
    elif args:
        raise TypeError("arguments are only used to trace a tf.function")
    if hasattr(fn, "graph") and hasattr(fn, "captured_inputs"):  # a ConcreteFunction
        func_graph = fn.graph
        graph_def = func_graph.as_graph_def()
        by_handle = {id(v.handle): v for v in func_graph.variables}
        variables, captured = {}, set()
        for external, internal in func_graph.captures:
            captured.add(internal.op.name)
            var = by_handle.get(id(external))
            if var is None:
                var = _variable_owning(external)
            if var is not None:
                variables[internal.op.name] = (var.name.split(":")[0], np.array(var.numpy(), copy=True))
            elif internal.dtype == tf.resource:
                raise LoweringError(f"captured resource {internal.op.name!r} is not a tf.Variable of the function")
        args_order = [t.op.name for t in func_graph.inputs if t.op.name not in captured]
        outputs = [t.name for t in func_graph.outputs if t.dtype != tf.resource]
        name = func_graph.name
    else:
        graph_def = fn.as_graph_def() if isinstance(fn, tf.Graph) else fn
        variables = _graph_variables(graph_def)
        args_order = [n.name for n in graph_def.node if n.op == "Placeholder"]
        outputs, name = [], "graph"
    return _Lowerer(graph_def, name, args_order, variables, outputs).run()
