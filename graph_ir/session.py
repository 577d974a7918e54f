"""A session that executes GE graphs on graph_ir.kernels, as ge::Session does on the device.

Nodes run in topological order (data and control edges). Variables are session-held and shared by name across the
session's graphs, initialized from their `value` attr when the session first sees them. The optimizer ops write the
Variable's (or RefData's) own buffer: the kernels run in place, nothing is copied. run_graph returns copies of the
NetOutput values, so later runs cannot change what it returned. A Data input is copied when fed (an in-place op
on it writes the graph's copy, as GE would); a RefData input is the caller's array itself, written in place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from graph_ir import kernels
from graph_ir.graph import Graph, GraphError, Node


def _power_sign(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    var, m, lr, logbase, sign_decay, beta, grad = args
    kernels.inplace_apply_power_sign(var, m, lr.reshape(()), logbase.reshape(()), sign_decay.reshape(()),
                                     beta.reshape(()), grad)
    return [var, m]


def _fused_ema_adam(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    grad, var, m, v, s, step = args
    a = node.attrs
    kernels.apply_fused_ema_adam(grad, var, m, v, s, step, lr=a["lr"], ema_decay=a["ema_decay"], beta1=a["beta1"],
                                 beta2=a["beta2"], eps=a["eps"], mode=a["mode"],
                                 bias_correction=a["bias_correction"], weight_decay=a["weight_decay"])
    return [var, m, v, s]


def _cast(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    return [args[0].astype(node.attrs["dst_type"].numpy)]


def _reshape(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    return [args[0].reshape(node.output_descs[0].shape)]


_EXECUTORS: dict[str, Callable[[Node, list[np.ndarray]], list[np.ndarray]]] = {
    "InplaceApplyPowerSign": _power_sign,
    "ApplyFusedEmaAdam": _fused_ema_adam,
    "Identity": lambda node, args: [args[0].copy()],  # a snapshot: a later in-place update must not show through
    "Cast": _cast,
    "Reshape": _reshape,
}


class Session:
    """Runs GE graphs: add_graph, run_graph, get_variables, set_variables (the ge::Session calls)."""

    def __init__(self):
        self._graphs: dict[int, tuple[Graph, list[Node]]] = {}
        self._variables: dict[str, np.ndarray] = {}

    def add_graph(self, graph_id: int, graph: Graph) -> None:
        """Verifies the graph, plans its order, and creates the Variables this session does not hold yet."""
        if graph_id in self._graphs:
            raise ValueError(f"graph id {graph_id} is already added; remove_graph({graph_id}) first")
        graph.verify()
        order = graph.topological_order()
        for node in order:
            if node.type not in _EXECUTORS and node.type not in ("Data", "RefData", "Variable", "Const", "NetOutput"):
                raise GraphError(f"the session cannot execute {node.type} (node {node.name!r})")
        for node in graph.nodes_of_type("Variable"):
            value = node.attrs.get("value")
            held = self._variables.get(node.name)
            if held is None:
                self._variables[node.name] = np.array(value, copy=True, order="C")
            elif held.dtype != value.dtype or held.shape != value.shape:
                raise GraphError(f"Variable {node.name!r} is held as {held.dtype}{list(held.shape)}, but graph "
                                 f"{graph.name!r} declares {value.dtype}{list(value.shape)}")
        self._graphs[graph_id] = (graph, order)

    def remove_graph(self, graph_id: int) -> None:
        self._graphs.pop(graph_id)

    def _feeds(self, graph: Graph, inputs: Sequence[Any]) -> dict[str, np.ndarray]:
        feeds = {}
        data = graph.nodes_of_type("Data") + graph.nodes_of_type("RefData")
        wanted = max((n.attrs["index"] for n in data), default=-1) + 1
        if len(inputs) != wanted:
            raise ValueError(f"graph {graph.name!r} takes {wanted} inputs (by Data index), got {len(inputs)}")
        for node in data:
            index, desc = node.attrs["index"], node.output_descs[0]
            value = inputs[index]
            if node.type == "RefData":
                if not isinstance(value, np.ndarray) or not value.flags.writeable or not value.flags.c_contiguous:
                    raise ValueError(f"input {index} ({node.name}, RefData) must be a writable C-contiguous array: "
                                     "it is updated in place")
                array = value
            else:
                array = np.array(value, copy=True, order="C")  # a Data input is the graph's own copy
            if array.dtype != np.dtype(desc.dtype.numpy):
                raise TypeError(f"input {index} ({node.name}) has dtype {array.dtype}, expected {desc.dtype}")
            if array.shape != desc.shape:
                if array.size == 1 and int(np.prod(desc.shape)) == 1 and node.type == "Data":
                    array = array.reshape(desc.shape)
                else:
                    raise ValueError(f"input {index} ({node.name}) has shape {list(array.shape)}, expected "
                                     f"{list(desc.shape)}")
            feeds[node.name] = array
        return feeds

    def run_graph(self, graph_id: int, inputs: Sequence[Any] = ()) -> list[np.ndarray]:
        """Runs graph `graph_id` with `inputs` fed to its Data nodes by index; returns copies of its outputs."""
        if graph_id not in self._graphs:
            raise KeyError(f"no graph with id {graph_id}; add_graph it first")
        graph, order = self._graphs[graph_id]
        feeds = self._feeds(graph, inputs)
        values: dict[tuple[str, int], np.ndarray] = {}
        outputs: list[np.ndarray] = []
        for node in order:
            if node.type in ("Data", "RefData"):
                results = [feeds[node.name]]
            elif node.type == "Variable":
                results = [self._variables[node.name]]
            elif node.type == "Const":
                results = [node.attrs["value"]]
            elif node.type == "NetOutput":
                outputs = [np.array(values[(h.node.name, h.index)], copy=True) for h in node.inputs]
                continue
            else:
                args = [values[(h.node.name, h.index)] for h in node.inputs if h is not None]
                results = _EXECUTORS[node.type](node, args)
            for k, r in enumerate(results):
                values[(node.name, k)] = r
        return outputs

    def get_variables(self, names: Iterable[str]) -> list[np.ndarray]:
        """Copies of the named Variables' values."""
        out = []
        for name in names:
            if name not in self._variables:
                raise KeyError(f"the session holds no Variable {name!r}; it has {sorted(self._variables)}")
            out.append(self._variables[name].copy())
        return out

    def set_variables(self, values: Mapping[str, Any]) -> None:
        """Writes new values into held Variables, in their own buffers (dtype and shape must match)."""
        checked = {}
        for name, value in values.items():
            if name not in self._variables:
                raise KeyError(f"the session holds no Variable {name!r}; it has {sorted(self._variables)}")
            held, array = self._variables[name], np.asarray(value)
            if array.dtype != held.dtype or array.shape != held.shape:
                raise ValueError(f"Variable {name!r} is {held.dtype}{list(held.shape)}, got "
                                 f"{array.dtype}{list(array.shape)}")
            checked[name] = array
        for name, array in checked.items():
            np.copyto(self._variables[name], array)
