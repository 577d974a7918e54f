"""The lowerer: walks a TF GraphDef from what must run (the outputs and every stateful op) and adds the GE nodes.
Every stateful TF op it reaches is lowered (a GE Assign / AssignAdd / AssignSub or optimizer op on the Variable) or
raises a LoweringError that names it; nothing is dropped. Control edges are kept (NoOps pass theirs through), so
reads happen before the writes they precede in TensorFlow."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from graph_ir.ir.dtypes import TENSOR_DTYPES, from_tf
from graph_ir.ir.errors import GraphError, LoweringError
from graph_ir.ir.graph import Graph
from graph_ir.ir.nodes import Handle, Node, TensorDesc
from graph_ir.lowering import ops
from graph_ir.lowering.capture import attr_value, parse_tensor
from graph_ir.lowering.context import FunctionalLowering, LoweringContext
from graph_ir.lowering.inline import is_stateful
from graph_ir.lowering.lr_tensor import fused_ema_adam_with_lr_tensor
from graph_ir.lowering.multi import flat_inputs, input_names, lower_multi, state_inputs
from graph_ir.lowering.table import ASSIGNS, IDENTITIES, INPUTS, LOWERINGS, MULTI_LOWERINGS, OpLowering


class Lowerer(LoweringContext):
    """One lowering. `variables` maps the TF nodes that stand for variables (resource placeholders, VarHandleOp,
    VariableV2) to (GE name, value, TF variable object or None); `args` are the Placeholders fed by position."""

    empty_ok = False  # whether a graph that runs and returns nothing is fine (a function lowered into a subgraph)

    def __init__(self, graph_def, name: str, *, args: list[str], variables: dict[str, tuple[str, np.ndarray, Any]],
                 outputs: list[str], must_run: list[str], functional: FunctionalLowering | None = None,
                 freeze_learning_rate: bool = True, never_frozen: frozenset[str] = frozenset(),
                 probe: int | None = None):
        super().__init__(name, {n.name: n for n in graph_def.node}, functional)
        self.probe = probe  # the size the arguments' unknown dims take (graph_ir/dynamic/probe.py), if any
        self.args, self.variables, self.outputs, self.must_run = args, variables, outputs, must_run
        # Learning-rate variables frozen into ApplyFusedEmaAdam's lr attribute (GE name -> where), unless the option
        # is off or the variable is one found read or written elsewhere in the step (graph_ir.lowering.from_tensorflow
        # lowers again with it in never_frozen).
        self.freeze_learning_rate, self.never_frozen = freeze_learning_rate, never_frozen
        self.passthrough: dict[str, list[Node]] = {}  # a NoOp -> the GE nodes its control inputs stand for
        self.stateful: list[Node] = []
        self.split_flat: set[str] = set()  # flat-state variable nodes split per variable (graph_ir/lowering/multi.py)
        self.scalar_only = self._scalar_only_sources()
        # Hooks of the control-flow lowering (graph_ir/lowering/control.py): the functions that If/While nodes name,
        # and what is known of each TensorList handle (graph_ir/lowering/ops/tensorlist.py).
        self.library = {f.signature.name: f for f in graph_def.library.function}
        self.tensor_lists: dict = {}
        # Variable nodes the step writes (their values are not known when lowering).
        self.written = {parse_tensor(t)[0] for n in self.nodes.values() for t in self._writes(n)}

    # -- inputs of a node -----------------------------------------------------------------------------------------

    @staticmethod
    def _writes(node) -> list[str]:
        """The variable tensors a node writes."""
        if node.op in MULTI_LOWERINGS:
            return state_inputs(node)
        return node.input[:1] if node.op in (*ASSIGNS, *LOWERINGS, *ops.WRITES_VARIABLE) else []

    def _through_identities(self, name: str) -> str:
        while self.nodes[name].op in IDENTITIES and self.nodes[name].op != "ReadVariableOp":
            name = parse_tensor(self.nodes[name].input[0])[0]
        return name

    def _scalar_only_sources(self) -> set[str]:
        """Consts and Placeholders read only by the scalar inputs of optimizer ops: they take shape [1] (the scalar
        policy of CANN's samples). Other rank-0 tensors reach those inputs through a Reshape to [1]."""
        scalar_uses, other_uses = set(), set()
        for node in self.nodes.values():
            if node.op in LOWERINGS:
                lowering, names = LOWERINGS[node.op], LOWERINGS[node.op].tf_inputs
            elif node.op in MULTI_LOWERINGS:
                lowering, names = MULTI_LOWERINGS[node.op][1], input_names(node)
            else:
                lowering, names = None, ()
            for k, tensor in enumerate(t for t in node.input if not t.startswith("^")):
                source = parse_tensor(tensor)[0]
                is_scalar = lowering is not None and k < len(names) and names[k] in lowering.scalar_inputs
                (scalar_uses if is_scalar else other_uses).add(source)
        return scalar_uses - other_uses

    def _controls(self, node_def) -> list[Node]:
        out = []
        for tensor in node_def.input:
            if tensor.startswith("^"):
                name = parse_tensor(tensor)[0]
                out.extend(self.nodes_of(name) if self.lowered.get(name) is not None else
                           self.passthrough.get(name, []))
        return out

    # -- the walk -------------------------------------------------------------------------------------------------

    def run(self) -> Graph:
        # Every argument becomes a Data node, read or not, so that run_graph takes the step's own arguments.
        roots = [parse_tensor(t)[0] for t in self.outputs] + self.must_run + self.args
        for root in roots:
            self._lower_from(root)
        outputs = [self.handle(t) for t in self.outputs]
        for name in self.split_flat:
            if self.lowered.get(name) is not None:
                raise LoweringError(f"the flat optimizer state {name!r} is read outside the multi-tensor op that "
                                    "updates it; GE holds it per variable, so such a read cannot be lowered")
        if not self.stateful and not outputs and not self.empty_ok:
            raise LoweringError("the TF graph runs no update and returns nothing: there is nothing to lower")
        self.graph.set_outputs(outputs, control_inputs=self.stateful)
        # The reads that only fed frozen attributes go, the frozen Variables with them.
        self.graph.remove_unread(("Const", "Identity", "Cast", "Reshape"), variables=set(self.graph.frozen_variables))
        return self.graph

    def _lower_from(self, root: str) -> None:
        """Lowers `root` after everything it depends on (an iterative post-order walk)."""
        stack, visiting = [(root, False)], set()
        while stack:
            name, inputs_done = stack.pop()
            if name in self.lowered:
                continue
            if name not in self.nodes:
                raise LoweringError(f"an input refers to node {name!r}, which the graph does not have")
            if inputs_done:
                before = len(self.graph.nodes)
                self.lowered[name] = self._lower_one(self.nodes[name])
                self._stamp(name, len(self.graph.nodes) - before)
                visiting.discard(name)
                continue
            if name in visiting:
                raise LoweringError(f"the TF graph has a cycle through node {name!r} ({self.nodes[name].op}): "
                                    "control flow loops cannot be lowered")
            node = self.nodes[name]
            if node.op in ops.HOST_TABLE_OPS:  # refused before its table handle (no tf.Variable) is reached
                raise LoweringError(ops.refusal(node.op, name, is_stateful(node.op)))
            visiting.add(name)
            stack.append((name, True))
            skip = set(flat_inputs(node)) if node.op in MULTI_LOWERINGS else set()  # split, never lowered whole
            if node.op in ops.CHECKED_WHEN_LOWERING:  # only the condition (and the control inputs)
                skip.update(t for t in node.input[1:] if not t.startswith("^"))
            stack.extend((parse_tensor(t)[0], False) for t in reversed(node.input)
                         if parse_tensor(t)[0] not in self.lowered and t not in skip)

    def _lower_one(self, node) -> Node | None:
        data = [t for t in node.input if not t.startswith("^")]
        controls = self._controls(node)
        op = node.op
        try:
            if op in LOWERINGS:
                return self._update(node, LOWERINGS[op], data, controls)
            if op in MULTI_LOWERINGS:
                self.passthrough[node.name] = lower_multi(self, node, data, controls)
                return None
            if op == "NoOp" or op in ops.CHECKED_WHEN_LOWERING:
                checked = ops.check_assert(self, node, self.handle(data[0])) if op in ops.CHECKED_WHEN_LOWERING else None
                self.passthrough[node.name] = controls if checked is None else [*controls, checked]
                return None
            if op in INPUTS:
                return self._input(node)
            if op == "Const":
                value = tf.make_ndarray(node.attr["value"].tensor)
                if value.shape == () and node.name in self.scalar_only:
                    value = value.reshape(1)
                if value.dtype == np.complex64:
                    return ops.fft.complex_constant(self.graph, node.name, value, controls)
                return self.graph.add_node("Const", (), {"value": value}, name=node.name,
                                           control_inputs=controls)
            if op in IDENTITIES:
                source = self.handle(data[0])
                if self.value(source) is not None and not controls:
                    return [source]  # a known value (a Const: nothing writes it) stays known
                return self.graph.add_node("Identity", [source], name=node.name, control_inputs=controls)
            if op == "IdentityN":
                return self.graph.add_node("IdentityN", [self.handle(t) for t in data], name=node.name,
                                           control_inputs=controls)
            if op in ASSIGNS:
                return self._assign(node, data, controls)
            if op in ops.LOWERINGS:
                self.current, self.current_controls = node, controls
                return ops.LOWERINGS[op](self, node, [self.handle(t) for t in data])
        except LoweringError:
            raise
        except GraphError as e:
            raise LoweringError(f"lowering TF {op} {node.name!r}: {e}") from None
        except (ValueError, TypeError, KeyError, IndexError) as e:  # e.g. a dtype graph_ir has no type for
            raise LoweringError(f"lowering TF {op} {node.name!r}: {type(e).__name__}: {e}") from e
        raise LoweringError(ops.refusal(op, node.name, is_stateful(op)))

    # -- the kinds of node ----------------------------------------------------------------------------------------

    def _input(self, node) -> Node:
        if node.name in self.variables:
            ge_name, value, var = self.variables[node.name]
            if ge_name in self.graph.nodes:
                raise LoweringError(f"two TF nodes stand for the GE Variable {ge_name!r}")
            ge_node = self.graph.add_node("Variable", (), {"value": value, "shared_name": ge_name}, name=ge_name,
                                          exact_name=True)
            if var is not None:
                self.graph._variable_names[id(var)] = ge_name
            return ge_node
        if node.op != "Placeholder":
            raise LoweringError(f"{node.op} {node.name!r}: the lowering has no value for this variable")
        if node.name not in self.args:
            raise LoweringError(f"Placeholder {node.name!r} is neither a function argument nor a captured variable")
        tf_dtype = tf.dtypes.as_dtype(attr_value(node, "dtype"))
        if tf_dtype.name not in TENSOR_DTYPES:
            raise LoweringError(f"argument {node.name!r} has dtype {tf_dtype.name}, which graph_ir has no GE type "
                                f"for; it takes {', '.join(TENSOR_DTYPES)}")
        dtype = from_tf(tf_dtype.as_datatype_enum)
        shape_proto = node.attr["shape"].shape
        if shape_proto.unknown_rank:
            raise LoweringError(f"argument {node.name!r} has an unknown rank (tf.TensorSpec(None)); give its rank, "
                                "with None for each dim known only at run time")
        unknown = [k for k, d in enumerate(shape_proto.dim) if d.size < 0]
        if unknown and self.probe is None:
            raise LoweringError(f"argument {node.name!r} has unknown dims {unknown}; this lowering needs them known")
        shape = tuple(self.probe if d.size < 0 else d.size for d in shape_proto.dim)
        if shape == () and node.name in self.scalar_only:
            shape = (1,)
        return self.graph.add_node("Data", (), {"index": self.args.index(node.name)}, name=node.name,
                                   output_descs=[TensorDesc("y", dtype, shape)])

    def _assign(self, node, data: list[str], controls: list[Node]) -> Node:
        target = self.lowered.get(parse_tensor(data[0])[0])
        if target is None or target.type != "Variable":
            raise LoweringError(f"{node.op} {node.name!r} writes {data[0]!r}, which is not a lowered variable")
        ge_node = self.graph.add_node(ASSIGNS[node.op], [target.output(0), *(self.handle(t) for t in data[1:])],
                                      name=node.name, control_inputs=controls)
        self.stateful.append(ge_node)
        return ge_node

    def _scalar(self, tensor: str) -> Handle:
        """A handle of shape [] or [1] for a GE scalar input: rank 0 becomes [1] (a Reshape when the source is
        computed in the graph)."""
        h = self.handle(tensor)
        if h.shape != ():
            return h
        shape = self.graph.add_node("Const", (), {"value": np.array([1], np.int64)},
                                    name=f"{h.node.name}/shape_one")
        return self.graph.add_node("Reshape", [h, shape.output(0)], name=f"{h.node.name}/as_shape_one").output(0)

    def _update(self, node, lowering: OpLowering, data: list[str], controls: list[Node]) -> Node:
        if len(data) != len(lowering.tf_inputs):
            raise LoweringError(f"{node.op} {node.name!r}: {len(data)} inputs, expected {len(lowering.tf_inputs)}")
        return self.update_node(node, lowering, dict(zip(lowering.tf_inputs, data)), controls, name=node.name)

    def update_node(self, node, lowering: OpLowering, by_name: dict[str, str], controls: list[Node], *, name: str,
                    state: dict[str, Handle] | None = None, attrs_override: dict | None = None) -> Node:
        """The GE optimizer op for TF node `node`: by_name maps its TF inputs to tensors; `state` gives GE handles
        for state inputs that have no TF tensor of their own (the split flat state)."""
        state = state or {}
        attrs = {a: attr_value(node, a) for a in lowering.tf_attrs if a in node.attr}
        attrs.update(attrs_override or {})
        tensor_attrs = {}
        for a in lowering.attr_inputs:
            value = self._attribute(by_name[a], name)
            if value is None:
                tensor_attrs[a] = self.handle(by_name[a])
                continue
            if value.size != 1:
                raise LoweringError(f"{node.op} {node.name!r}: {a} must be a scalar, got shape {list(value.shape)}")
            attrs[a] = float(value.reshape(()))
        if tensor_attrs:  # only FusedEmaAdam's lr is an attribute input (op_spec's GeSide.attr_inputs)
            handles = {n: state[n] if n in state else self.handle(by_name[n]) for n in lowering.ge_inputs}
            assigns = fused_ema_adam_with_lr_tensor(self.graph, name, attrs, lr=tensor_attrs["lr"],
                                                    controls=controls, **handles)
            self.stateful.extend(assigns)
            return assigns[-1]
        inputs = [state[n] if n in state else self._scalar(by_name[n]) if n in lowering.scalar_inputs
                  else self.handle(by_name[n]) for n in lowering.ge_inputs]
        ge_node = self.graph.add_node(lowering.ge_type, inputs, attrs, name=name, control_inputs=controls)
        self.stateful.append(ge_node)
        return ge_node

    def _attribute(self, tensor: str, consumer: str) -> np.ndarray | None:
        """The value of a TF input that becomes a GE attribute: a Const (or folded into one), or, with
        freeze_learning_rate, the current value of a variable that the step does not write, through Identity,
        ReadVariableOp and Cast (the variable is then frozen: left out of the graph). None where it is known only
        when the step runs (computed, an argument, a variable the step writes or one not to freeze)."""
        known = self.value(self.handle(tensor))
        if known is not None:
            return np.asarray(known)
        name = parse_tensor(tensor)[0]
        casts = []
        while True:
            node = self.nodes[name]
            if node.op == "Cast":
                casts.append(from_tf(attr_value(node, "DstT")).numpy)
            elif node.op not in IDENTITIES:
                break
            name = parse_tensor(node.input[0])[0]
        if node.op == "Const":
            value = tf.make_ndarray(node.attr["value"].tensor)
        elif name in self.variables and name not in self.written and self.freeze_learning_rate and \
                self.variables[name][0] not in self.never_frozen:
            value = self.variables[name][1]
            self.graph.frozen_variables.setdefault(self.variables[name][0], []).append(consumer)
        else:
            return None
        for dtype in reversed(casts):
            value = np.asarray(value).astype(dtype)
        return np.asarray(value)
