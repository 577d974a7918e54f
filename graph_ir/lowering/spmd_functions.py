"""TF collectives inside the functions of If/Case nodes (tf.cond in tf.distribute's code: cross_device_utils.py's
all-gather of IndexedSlices pads to the largest replica's rows in one branch), for graph_ir/lowering/spmd.py.

Each collective of a function keeps its data input and group_size (as in the step's own graph) and is marked with the
number of ranks; the functional nodes then drop the arguments that only fed the dropped key inputs (TF passes the
instance_key placeholders and the ordering_token resource into the branches), from their inputs, their `Tin` and
their branches' signatures, so that neither reaches the rank's graph."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tensorflow.core.framework import types_pb2

from graph_ir.lowering.ops.hcom import COLLECTIVES, GATHERS, REDUCES, SPMD_ATTR

_KEPT = {**{op: 2 for op in (*REDUCES, *GATHERS)}, "CollectiveBcastSend": 1, "CollectiveBcastSendV2": 2,
         "CollectiveBcastRecv": 0}  # CollectiveBcastRecvV2: group_size and shape (inputs 0 and 3)
_BRANCHING = {"If": ("then_branch", "else_branch"), "StatelessIf": ("then_branch", "else_branch"),
              "Case": ("branches",), "StatelessCase": ("branches",)}


def strip(node, ranks: int) -> None:
    """A collective node keeps its data input (and group_size, shape) and its control inputs, marked with `ranks`."""
    data = [t for t in node.input if not t.startswith("^")]
    controls = [t for t in node.input if t.startswith("^")]
    keep = [data[0], data[3]] if node.op == "CollectiveBcastRecvV2" else data[:_KEPT[node.op]]
    del node.input[:]
    node.input.extend([*keep, *controls])
    node.attr[SPMD_ATTR].i = ranks


def unique_controls(inputs) -> list[str]:
    """A node's inputs with its control inputs made unique: a data input stays however often it comes (tf.Sub(x, x),
    as clip_by_global_norm's `use_norm - use_norm`, tensorflow/python/ops/clip_ops.py), data inputs first as TF
    requires."""
    inputs = list(inputs)
    return [*(t for t in inputs if not t.startswith("^")), *dict.fromkeys(t for t in inputs if t.startswith("^"))]


def _branches(node) -> list[str]:
    names = []
    for attr in _BRANCHING.get(node.op, ()):
        value = node.attr[attr]
        names += [f.name for f in value.list.func] if value.WhichOneof("value") == "list" else [value.func.name]
    return names


def _unused(function) -> set[int]:
    """The positions of a function's arguments that no node and no return value reads."""
    read = {t.lstrip("^").split(":")[0] for n in function.node_def for t in n.input}
    read |= {t.split(":")[0] for t in function.ret.values()}
    return {k for k, arg in enumerate(function.signature.input_arg) if arg.name not in read}


def _drop_arguments(function, dropped: set[int]) -> None:
    kept = [k for k in range(len(function.signature.input_arg)) if k not in dropped]
    args = [function.signature.input_arg[k] for k in kept]
    del function.signature.input_arg[:]
    function.signature.input_arg.extend(args)
    attrs = {new: function.arg_attr[old].SerializeToString() for new, old in enumerate(kept)
             if old in function.arg_attr}
    ids = {new: function.resource_arg_unique_id[old] for new, old in enumerate(kept)
           if old in function.resource_arg_unique_id}
    function.arg_attr.clear()
    function.resource_arg_unique_id.clear()
    for new, text in attrs.items():
        function.arg_attr[new].ParseFromString(text)
    function.resource_arg_unique_id.update(ids)


def _prune(node, library: dict[str, Any], callers: Counter) -> bool:
    """Drops the arguments no branch of `node` reads; whether there were any."""
    branches = _branches(node)
    if not branches or any(b not in library or callers[b] != 1 for b in branches):
        return False  # a function other nodes call too is left as it is
    dropped = set.intersection(*(_unused(library[b]) for b in branches))
    if not dropped:
        return False
    data = [t for t in node.input if not t.startswith("^")]
    controls = [t for t in node.input if t.startswith("^")]
    del node.input[:]
    node.input.extend([data[0], *(t for k, t in enumerate(data[1:]) if k not in dropped), *controls])
    types = [t for k, t in enumerate(node.attr["Tin"].list.type) if k not in dropped]
    del node.attr["Tin"].list.type[:]
    node.attr["Tin"].list.type.extend(types)
    for b in branches:
        _drop_arguments(library[b], dropped)
    return True


def _dead_loop_variables(node, library: dict[str, Any]) -> set[int]:
    """The loop variables of a While that nothing reads: its cond reads none of them, its body passes them through
    unchanged and reads them nowhere else."""
    cond, body = (library.get(node.attr[a].func.name) for a in ("cond", "body"))
    if cond is None or body is None:
        return set()
    returned = {v.split(":")[0]: k for k, v in enumerate(body.ret[a.name] for a in body.signature.output_arg)}
    dead = set(_unused(cond))
    read = {t.lstrip("^").split(":")[0] for n in body.node_def for t in n.input}
    return {k for k in dead if k < len(body.signature.input_arg) and
            body.signature.input_arg[k].name not in read and returned.get(body.signature.input_arg[k].name) == k}


def _unkey_loops(graph_def, library: dict[str, Any]) -> None:
    """A top-level While's dead loop variables fed by a scalar Placeholder (the instance-key placeholders TF threads
    through a loop for its collectives, which the stripped collectives no longer read) take a Const 0 instead, so
    that the placeholder does not become an input of the rank's graph. The While's output for them must be unread."""
    placeholders = {n.name: n for n in graph_def.node if n.op == "Placeholder"}
    read = {t.lstrip("^") for n in graph_def.node for t in n.input}
    for node in [n for n in graph_def.node if n.op in ("While", "StatelessWhile")]:
        data = [t for t in node.input if not t.startswith("^")]
        for k in sorted(_dead_loop_variables(node, library)):
            source = placeholders.get(data[k].split(":")[0])
            if (source is None or source.attr["dtype"].type == types_pb2.DT_RESOURCE or source.attr["shape"].shape.dim
                    or f"{node.name}:{k}" in read or (k == 0 and node.name in read)):
                continue
            const = graph_def.node.add(name=f"{node.name}/unused_key_{k}", op="Const")
            const.attr["dtype"].type = source.attr["dtype"].type
            const.attr["value"].tensor.dtype = source.attr["dtype"].type
            const.attr["value"].tensor.tensor_shape.SetInParent()
            const.attr["value"].tensor.int64_val.append(0) if source.attr["dtype"].type == types_pb2.DT_INT64 else \
                const.attr["value"].tensor.int_val.append(0)
            node.input[list(node.input).index(data[k])] = const.name


def function_devices(node, library: dict[str, Any], depth: int = 0) -> set[str]:
    """The devices the nodes of a functional node's functions (and of theirs, nested) are placed on."""
    names = _branches(node) + ([node.attr[a].func.name for a in ("cond", "body") if a in node.attr])
    out = set()
    for name in names:
        for inner in library[name].node_def if name in library else ():
            if inner.device:
                out.add(inner.device)
            if depth < 16:
                out |= function_devices(inner, library, depth + 1)
    return out


def strip_functions(graph_def, ranks: int) -> None:
    """In place: the collectives of graph_def's functions stripped and marked, and the If/Case nodes (of the graph and
    of its functions) rid of the arguments that fed only what was stripped."""
    library = {f.signature.name: f for f in graph_def.library.function}
    if not any(n.op in COLLECTIVES for f in library.values() for n in f.node_def):
        return
    for function in library.values():
        for node in function.node_def:
            if node.op in COLLECTIVES:
                strip(node, ranks)
    node_lists = [graph_def.node, *(f.node_def for f in library.values())]
    callers = Counter(b for nodes in node_lists for n in nodes for b in _branches(n))
    for _ in range(16):  # an inner If's arguments go first, then the outer function's that fed them
        changed = False
        for node in (node for nodes in node_lists for node in nodes):
            changed = _prune(node, library, callers) or changed
        if not changed:
            break
    _unkey_loops(graph_def, library)
