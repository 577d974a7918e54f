"""One TF function (a FunctionDef of the graph's library) lowered into a GE subgraph by the ordinary Lowerer, for the
functional ops of graph_ir/lowering/control.py (see its docstring for the rules): value arguments become Data nodes
with the parent's dtypes and shapes, resource arguments the parent's variables (GE Variables of the same names), the
results the subgraph's NetOutput, its stateful nodes and control outputs the NetOutput's control inputs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import graph_pb2, types_pb2
from tensorflow.python.framework.function_def_to_graph import function_def_to_graph_def

from graph_ir.executors.folding import known_value
from graph_ir.ir.errors import LoweringError
from graph_ir.ir.graph import Graph
from graph_ir.ir.nodes import Handle, TensorDesc
from graph_ir.lowering.capture import parse_tensor
from graph_ir.lowering.inline import inline_calls, is_stateful
from graph_ir.lowering.lowerer import Lowerer
from graph_ir.lowering.ops.tensorlist import UNKNOWN, ListInfo
from graph_ir.lowering.table import IDENTITIES


@dataclass
class Param:
    """One argument of a function: a value (its GE handle in the parent) or a variable (the parent's entry)."""

    handle: Handle | None = None
    variable: tuple[str, np.ndarray, Any] | None = None
    list_info: ListInfo = UNKNOWN
    invariant: bool = False  # a loop variable no iteration changes: its known value stays known in the loop


class FunctionLowerer(Lowerer):
    """Lowers one FunctionDef into a GE subgraph: value arguments are Data nodes with the parent's descs, resource
    arguments the parent's variables (see the module docstring)."""

    empty_ok = True  # a branch may do nothing (tf.cond's no-op side)

    def __init__(self, graph_def, name: str, *, params: dict[str, Param], value_args: list[str], outputs: list[str],
                 must_run: list[str], parent, optional_descs: dict[str, TensorDesc]):
        variables = {arg: p.variable for arg, p in params.items() if p.variable is not None}
        super().__init__(graph_def, name, args=value_args, variables=variables, outputs=outputs, must_run=must_run,
                         functional=parent.functional, freeze_learning_rate=parent.freeze_learning_rate,
                         never_frozen=parent.never_frozen)
        self.params, self.optional_descs = params, optional_descs
        self.passes_known = False  # set for an If's or Case's branches: a loop's state changes between iterations
        self.library, self.probe = parent.library, parent.probe
        self.scalar_only -= set(value_args)  # parameters keep the parent's shapes

    def _lower_one(self, node):
        """The Optionals tf.cond's gradient wraps the branches' intermediates in (TF's cond_v2) are lowered as its XLA
        path lowers them: OptionalFromValue and OptionalGetValue pass the value on, OptionalNone (the branch that
        does not compute it) gives zeros of the value's dtype and shape, which the gradient never reads (its If takes
        the same branch)."""
        if node.op in ("OptionalFromValue", "OptionalGetValue"):
            data = [t for t in node.input if not t.startswith("^")]
            if len(data) != 1 or (node.op == "OptionalGetValue" and len(node.attr["output_types"].list.type) != 1):
                raise LoweringError(f"TF {node.op} {node.name!r}: only an Optional of one tensor is lowered")
            return [self.handle(data[0])]
        if node.op == "OptionalNone":
            desc = self.optional_descs.get(node.name)
            if desc is None:
                raise LoweringError(f"TF OptionalNone {node.name!r}: no other branch says what it stands for")
            self.current, self.current_controls = node, self._controls(node)
            zero = self.const(np.zeros((), desc.dtype.numpy), "zero")
            dims = self.const(np.array(desc.shape, np.int64), "dims")
            return self.add("Fill", [dims, zero])
        return super()._lower_one(node)

    def _input(self, node):
        param = self.params.get(node.name)
        if param is None or param.handle is None:
            return super()._input(node)
        desc = param.handle.desc
        data = self.graph.add_node("Data", (), {"index": self.args.index(node.name)}, name=node.name,
                                   output_descs=[desc.renamed("y")])
        if desc.dtype.name == "variant":
            self.tensor_lists[data.output(0)] = param.list_info
        known = known_value(param.handle) if self.passes_known or param.invariant else None
        if known is not None:  # a shape passed into a branch (an IndexedSlices' dense_shape): still a static shape
            data.known_values = [known]
        return data


def loop_invariants(fdef) -> set[int]:
    """The positions at which a While body (FunctionDef) returns its argument unchanged (through Identity)."""
    args = [a.name for a in fdef.signature.input_arg]
    nodes = {n.name: n for n in fdef.node_def}
    unchanged = set()
    for k, out in enumerate(fdef.signature.output_arg):
        name = fdef.ret[out.name].split(":")[0]
        while name in nodes and nodes[name].op == "Identity" and nodes[name].input:
            name = nodes[name].input[0].split(":")[0]
        if k < len(args) and name == args[k]:
            unchanged.add(k)
    return unchanged


def function_of(ctx, node, attr: str, name: str):
    library = ctx.library
    if name not in library:
        raise LoweringError(f"TF {node.op} {node.name!r}: its {attr} names function {name!r}, which the graph's "
                            "library does not have")
    return library[name]


@dataclass
class _Known:
    """A library function as TF's function_def_to_graph_def looks one up in a graph (its FunctionDef)."""

    cached_definition: Any


def _graph_def_of(fdef, library: dict[str, Any]):
    """function_def_to_graph_def(fdef), with the library's functions known as op types: a function body may call
    another by name (tf.nn.ctc_loss's While body calls its cond function so), and TF resolves such an op type only
    among the functions of the default graph."""
    with tf.Graph().as_default() as graph:
        graph._functions.update({name: _Known(f) for name, f in library.items()})  # TF looks them up there
        return function_def_to_graph_def(fdef)


def lower_function(ctx, node, attr: str, fname: str, params: list[Param], role: str,
                   optionals: dict[int, TensorDesc] | None = None,
                   ) -> tuple[Graph, list[Handle | None], FunctionLowerer]:
    """The GE subgraph of function `fname` called with `params`; also the sub-lowering's handle for each function
    output (None for a resource output, which must be one of the resource arguments: checked by the caller).
    `optionals` gives the dtype and shape of the function's OptionalNone results by output position; without it,
    those results are left out (None)."""
    fdef = function_of(ctx, node, attr, fname)
    where = f"TF {node.op} {node.name!r} ({attr} {fname!r})"
    if len(fdef.signature.input_arg) != len(params):
        raise LoweringError(f"{where}: the function takes {len(fdef.signature.input_arg)} arguments, the node passes "
                            f"{len(params)}")
    graph_def, flat = _graph_def_of(fdef, ctx.library)
    library = graph_pb2.GraphDef()
    library.library.function.extend(ctx.library.values())
    graph_def.library.CopyFrom(library.library)
    graph_def, stateful_calls, renamed = inline_calls(graph_def)
    arg_names = [a.name for a in fdef.signature.input_arg]
    by_arg = dict(zip(arg_names, params))
    value_args = [a for a, p in by_arg.items() if p.handle is not None]
    rets = [renamed(flat[fdef.ret[a.name]]) for a in fdef.signature.output_arg]
    resource_out = [a.type == types_pb2.DT_RESOURCE for a in fdef.signature.output_arg]
    nones = {j: source.name for j, source in enumerate(_sources(graph_def, rets))
             if source is not None and source.op == "OptionalNone"}
    dropped = [j in nones and optionals is None for j in range(len(rets))]
    optional_descs = {source: optionals[j] for j, source in nones.items() if optionals is not None and j in optionals}
    must_run = [n.name for n in graph_def.node if is_stateful(n.op) and n.op != "Placeholder"] + stateful_calls
    must_run += list(fdef.control_ret.values())
    sub = FunctionLowerer(graph_def, f"{node.name}/{role}", params=by_arg, value_args=value_args,
                          outputs=[t for t, r, d in zip(rets, resource_out, dropped) if not (r or d)],
                          must_run=must_run, parent=ctx, optional_descs=optional_descs)
    sub.passes_known = node.op not in ("While", "StatelessWhile")
    try:
        graph = sub.run()
    except LoweringError as e:
        raise LoweringError(f"{where}: {e}") from None
    # The variables it captured (and flat optimizer state it split) are the root graph's to name.
    ctx.graph._variable_names.update(graph._variable_names)
    for frozen, nodes in graph.frozen_variables.items():
        ctx.graph.frozen_variables.setdefault(frozen, []).extend(nodes)
    for key, parts in graph._flat_parts.items():  # a flat state the function splits is held by its parts
        known = ctx.graph._flat_parts.setdefault(key, [])
        known.extend(p for p in parts if p not in known)
        ctx.graph._variable_names.pop(key, None)
    values = iter(graph.outputs)
    results = [None if r or d else next(values) for r, d in zip(resource_out, dropped)]
    for ret, is_resource in zip(rets, resource_out):
        if is_resource:
            _check_passthrough(sub, ret, by_arg, where)
    return graph, results, sub


def _sources(graph_def, tensors: list[str]) -> list[Any]:
    """The node each tensor comes from, through Identities."""
    nodes = {n.name: n for n in graph_def.node}
    out = []
    for tensor in tensors:
        name = parse_tensor(tensor)[0]
        while name in nodes and nodes[name].op == "Identity":
            name = parse_tensor(nodes[name].input[0])[0]
        out.append(nodes.get(name))
    return out


def _check_passthrough(sub: FunctionLowerer, ret: str, by_arg: dict[str, Param], where: str) -> str:
    """The resource argument a resource result is (through Identities); anything else is refused."""
    name = parse_tensor(ret)[0]
    while sub.nodes[name].op in IDENTITIES and sub.nodes[name].op != "ReadVariableOp":
        name = parse_tensor(sub.nodes[name].input[0])[0]
    if name not in by_arg or by_arg[name].variable is None:
        raise LoweringError(f"{where}: returns resource {ret!r}, which is not one of its resource arguments; a GE "
                            "subgraph returns values, and a variable can only pass through unchanged")
    return name
