"""Function calls inlined before lowering, as Ascend's TF adapter does (GE graphs have no function calls).

A call (`PartitionedCall`, `StatefulPartitionedCall`, or a node whose op is a function of the graph's library) is
replaced by the nodes of its FunctionDef, renamed "<call>/<node>", with the function's arguments read from the
call's inputs and the call's outputs read from the function's rets (TF's tensor naming in FunctionDefs,
"node:output_arg:index", is flattened to "node:k" with the op's OpDef, as tensorflow/core/framework/function.proto
describes). Calls inside the function are inlined too, at most MAX_DEPTH deep; a function that calls itself is a
LoweringError. The call node itself becomes a NoOp that waits for the function's stateful nodes and control rets, so
"^call" control edges keep their meaning; the call's own control inputs are given to every inlined node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tensorflow.core.framework import graph_pb2
from tensorflow.python.framework import op_def_registry

from graph_ir.ir.errors import LoweringError
from graph_ir.lowering.capture import parse_tensor

CALL_OPS = ("PartitionedCall", "StatefulPartitionedCall")
MAX_DEPTH = 32


def op_def(op: str, library: dict[str, Any]):
    """The OpDef of a TF op type, or the signature of a library function called as an op; None if unknown."""
    return library[op].signature if op in library else op_def_registry.get(op)


def is_stateful(op: str, library: dict[str, Any] | None = None) -> bool:
    """Whether TF must run the op even when nothing reads it (unknown ops count as stateful)."""
    if library and op in library:
        return True
    found = op_def_registry.get(op)
    return found is None or found.is_stateful


def callee(node, library: dict[str, Any]) -> str | None:
    """The name of the function node `node` calls, or None when it is not a call."""
    if node.op in CALL_OPS:
        return node.attr["f"].func.name
    return node.op if node.op in library else None


def _output_starts(node, library: dict[str, Any]) -> dict[str, int] | None:
    """Where each output arg of `node` starts among its flat outputs; None when its op is unknown."""
    definition = op_def(node.op, library)
    if definition is None:
        return None
    starts, k = {}, 0
    for arg in definition.output_arg:
        starts[arg.name] = k
        if arg.number_attr:
            k += int(node.attr[arg.number_attr].i)
        elif arg.type_list_attr:
            k += len(node.attr[arg.type_list_attr].list.type)
        else:
            k += 1
    return starts


class _Inliner:
    def __init__(self, graph_def):
        self.library = {f.signature.name: f for f in graph_def.library.function}
        self.taken = {n.name for n in graph_def.node}
        self.alias: dict[str, str] = {}  # "call:k" -> the tensor that holds it
        self.stateful_calls: list[str] = []
        self.nodes: list[Any] = []

    def run(self, graph_def) -> tuple[Any, list[str], Callable[[str], str]]:
        pending = [(node, ()) for node in reversed(graph_def.node)]
        while pending:
            node, chain = pending.pop()
            function = callee(node, self.library)
            if function is None:
                self.nodes.append(node)
                continue
            body = self._inline(node, function, chain)
            pending.extend((n, (*chain, function)) for n in reversed(body))
        out = graph_pb2.GraphDef()
        out.versions.CopyFrom(graph_def.versions)
        out.library.CopyFrom(graph_def.library)  # the functions that If/While nodes name (lowering/control.py)
        for node in self.nodes:
            copy = out.node.add()
            copy.CopyFrom(node)
            del copy.input[:]
            copy.input.extend(t if t.startswith("^") else self._resolve(t) for t in node.input)
        return out, self.stateful_calls, self._resolve

    def _resolve(self, tensor: str) -> str:
        seen = 0
        name, index = parse_tensor(tensor)
        while f"{name}:{index}" in self.alias:
            tensor = self.alias[f"{name}:{index}"]
            name, index = parse_tensor(tensor)
            seen += 1
            if seen > len(self.alias):
                raise LoweringError(f"the function calls' outputs refer to each other in a cycle at {tensor!r}")
        return f"{name}:{index}" if index else name

    def _prefix(self, call_name: str, body_names: list[str]) -> str:
        prefix, k = f"{call_name}/", 0
        while any(prefix + n in self.taken for n in body_names):
            k += 1
            prefix = f"{call_name}/inlined_{k}/"
        return prefix

    def _inline(self, call, function: str, chain: tuple[str, ...]) -> list[Any]:
        """The renamed body of `function` for call node `call`; records the call's outputs as aliases."""
        where = f"{call.op} {call.name!r}"
        if function not in self.library:
            raise LoweringError(f"{where} calls function {function!r}, which the graph's library does not have")
        if function in chain:
            raise LoweringError(f"{where} calls {function!r} recursively ({' -> '.join((*chain, function))}): "
                                "recursion cannot be inlined into a GE graph")
        if len(chain) >= MAX_DEPTH:
            raise LoweringError(f"{where}: function calls nested more than {MAX_DEPTH} deep ({' -> '.join(chain)})")
        fdef = self.library[function]
        if fdef.signature.attr:
            raise LoweringError(f"{where} calls {function!r}, which has attributes of its own "
                                f"({', '.join(a.name for a in fdef.signature.attr)}); only concrete functions inline")
        data = [t for t in call.input if not t.startswith("^")]
        controls = [t for t in call.input if t.startswith("^")]
        params = [a.name for a in fdef.signature.input_arg]
        if len(data) != len(params):
            raise LoweringError(f"{where} passes {len(data)} inputs to {function!r}, which takes {len(params)}")
        args = dict(zip(params, data))
        prefix = self._prefix(call.name, [n.name for n in fdef.node_def])
        starts = {n.name: _output_starts(n, self.library) for n in fdef.node_def}

        def rename(ref: str) -> str:
            control, ref = ref.startswith("^"), ref.lstrip("^")
            if ref in args:
                return "^" + parse_tensor(args[ref])[0] if control else args[ref]
            node, _, rest = ref.partition(":")
            if node not in starts:
                raise LoweringError(f"{where}: function {function!r} refers to {ref!r}, which it does not define")
            if control:
                return f"^{prefix}{node}"
            output, _, index = rest.partition(":")
            first = (starts[node] or {}).get(output, 0)
            return f"{prefix}{node}:{first + int(index or 0)}"

        body = []
        for node in fdef.node_def:
            copy = type(node)()
            copy.CopyFrom(node)
            copy.name = prefix + node.name
            del copy.input[:]
            inputs = [rename(t) for t in node.input]
            copy.input.extend(inputs + [c for c in controls if c not in inputs])
            self.taken.add(copy.name)
            body.append(copy)
        for k, out in enumerate(fdef.signature.output_arg):
            self.alias[f"{call.name}:{k}"] = rename(fdef.ret[out.name])
        # The call node stays, as a NoOp on what the function must run, for "^call" edges.
        waits = {prefix + n.name for n in fdef.node_def if is_stateful(n.op, self.library)}
        waits |= {prefix + n for n in fdef.control_ret.values()}
        noop = type(call)(name=call.name, op="NoOp")
        noop.input.extend(sorted(f"^{n}" for n in waits) if waits else controls)
        if is_stateful(call.op, self.library) and call.op != "PartitionedCall":
            self.stateful_calls.append(call.name)
        return [noop, *body]


def inline_calls(graph_def) -> tuple[Any, list[str], Callable[[str], str]]:
    """A copy of `graph_def` with every function call inlined (see the module docstring), the names of the NoOps
    that stand for stateful calls (TF runs those calls whether or not their outputs are read), and the map from a
    tensor name of `graph_def` to its name in the copy (a call's output is the tensor its function returns)."""
    library = {f.signature.name: f for f in graph_def.library.function}
    if not any(callee(n, library) for n in graph_def.node):
        return graph_def, [], lambda tensor: tensor
    return _Inliner(graph_def).run(graph_def)
