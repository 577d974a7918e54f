"""Lowering of the multi-tensor ops: GE has no multi-tensor operator (neither has the Ascend device), so one
TfPluginResourceApplyMulti* call becomes one GE optimizer op per variable. The flat state variables (m, v, s) are
split into one GE Variable per variable and slot, named "<flat GE name>/<variable's GE name>" and holding that
variable's part of the flat value; Graph.flat_state_parts(flat_variable) lists them."""

from __future__ import annotations

import numpy as np

from graph_ir.ir.errors import LoweringError
from graph_ir.ir.nodes import Node
from graph_ir.lowering.capture import attr_value, parse_tensor
from graph_ir.lowering.table import MULTI_LOWERINGS, multi_input_names


def input_names(node) -> list[str]:
    """The names of a multi-tensor node's data inputs, N-expanded, in TF order ("vars", ..., "m", ..., "grads", ...)."""
    return multi_input_names(MULTI_LOWERINGS[node.op][0], int(attr_value(node, "N")))


def state_inputs(node) -> list[str]:
    """The tensors a multi-tensor node writes: its variables and its flat state."""
    sig = MULTI_LOWERINGS[node.op][0]
    return [t for name, t in zip(input_names(node), node.input) if sig.input(name).state]


def flat_inputs(node) -> list[str]:
    """The data inputs of a multi-tensor node that are flat state (they are split, never lowered whole)."""
    sig = MULTI_LOWERINGS[node.op][0]
    data = [t for t in node.input if not t.startswith("^")]
    return [t for name, t in zip(input_names(node), data) if name in sig.flat_state]


def lower_multi(lowerer, node, data: list[str], controls: list[Node]) -> list[Node]:
    """The GE optimizer ops of one multi-tensor node, one per variable, in vars order."""
    sig, single = MULTI_LOWERINGS[node.op]
    n = int(attr_value(node, "N"))
    names = input_names(node)
    if len(data) != len(names):
        raise LoweringError(f"{node.op} {node.name!r}: {len(data)} inputs, expected {len(names)}")
    by_kind: dict[str, list[str]] = {}
    for name, tensor in zip(names, data):
        by_kind.setdefault(name, []).append(tensor)
    variables = []
    for k, tensor in enumerate(by_kind["vars"]):
        source = parse_tensor(tensor)[0]
        if source not in lowerer.variables:
            raise LoweringError(f"{node.op} {node.name!r}: vars[{k}] ({tensor!r}) is not a captured variable")
        variables.append(lowerer.variables[source])
    sizes = [int(np.asarray(v[1]).size) for v in variables]
    offsets = [int(x) for x in attr_value(node, "state_offsets").i] if "state_offsets" in node.attr else []
    starts = offsets or [int(x) for x in np.cumsum([0, *sizes[:-1]])]
    no_decay = {int(x) for x in attr_value(node, "no_decay").i} if "no_decay" in node.attr else set()
    parts = {name: _split(lowerer, node, name, by_kind[name][0], variables, starts, sizes, exact=not offsets)
             for name in sig.flat_state}
    out = []
    for k in range(n):
        by_name = {"var": by_kind["vars"][k], "grad": by_kind["grads"][k]}
        by_name.update({i.name: by_kind[i.name][0] for i in sig.inputs if not i.state and not i.many})
        state = {name: parts[name][k].output(0) for name in sig.flat_state}
        override = {"weight_decay": 0.0} if k in no_decay else {}
        out.append(lowerer.update_node(node, single, by_name, controls, name=f"{node.name}/{k}", state=state,
                                       attrs_override=override))
    return out


def _split(lowerer, node, slot: str, tensor: str, variables, starts, sizes, exact: bool) -> list[Node]:
    source = parse_tensor(tensor)[0]
    if source not in lowerer.variables:
        raise LoweringError(f"{node.op} {node.name!r}: {slot} ({tensor!r}) is not a captured variable")
    flat_name, flat_value, flat_var = lowerer.variables[source]
    flat_value = np.asarray(flat_value)
    total = sum(sizes)
    if flat_value.ndim != 1 or (exact and flat_value.size != total) or \
            any(a < 0 or a + s > flat_value.size for a, s in zip(starts, sizes)):
        raise LoweringError(f"{node.op} {node.name!r}: {slot} has shape {list(flat_value.shape)}, which does not "
                            f"hold the state of the {len(sizes)} variables ({total} elements)")
    nodes = []
    for (var_name, value, _), start, size in zip(variables, starts, sizes):
        name = f"{flat_name}/{var_name}"
        part = flat_value[start:start + size].reshape(np.shape(value))
        if name in lowerer.graph.nodes:
            raise LoweringError(f"{node.op} {node.name!r}: the state {name!r} is updated twice in one step")
        nodes.append(lowerer.graph.add_node("Variable", (), {"value": part.copy(), "shared_name": name}, name=name,
                                            exact_name=True))
        if flat_var is not None:
            lowerer.graph._flat_parts.setdefault(id(flat_var), []).append((name, start, tuple(np.shape(value))))
    lowerer.split_flat.add(source)
    return nodes
