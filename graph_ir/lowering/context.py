"""What the op families' lowerings (graph_ir/lowering/ops) build with: the GE handle of a TF tensor, and `add`, which
adds a GE node for the TF node being lowered and folds it into Consts when its result is known at lowering time.

Constant folding is our session's own arithmetic run early: a node whose inputs are all small Consts (shape plumbing
such as Prod of a shape, BroadcastGradientArgs, Cast of a count) is executed by graph_ir's executor for its op and
replaced by Consts of the results, and the shape ops (Shape, ShapeN, Size) always are, since graph_ir's shapes are
static. So a folded graph computes what the unfolded one would, and shape-like inputs (Reshape's shape, Tile's
multiples, reduction axes) become the Consts GE's shape inference needs. A value still unknown there is refused by
the verifier, which the lowering reports as a LoweringError naming the TF node (a data-dependent shape).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from graph_ir.executors.folding import fold_values, known_value, replace_by_consts
from graph_ir.ir.errors import LoweringError
from graph_ir.ir.graph import Graph
from graph_ir.ir.nodes import Handle, Node
from graph_ir.lowering.capture import parse_tensor

# The lowering of TF's functional ops (If/Case/While: graph_ir/lowering/control.py), fn(ctx, node_def, inputs).
FunctionalLowering = Callable[["LoweringContext", Any, list[Handle]], Any]


class LoweringContext:
    """The lowering's GE graph and the GE counterparts of the TF nodes lowered so far."""

    def __init__(self, name: str, nodes: dict[str, Any], functional: FunctionalLowering | None = None):
        self.nodes = nodes  # TF node name -> NodeDef
        # It lowers the functions of If/While with sub-lowerings, so it sits above them and is handed down: given to
        # the root lowering by graph_ir.lowering.from_tensorflow, passed on to each sub-lowering (lowering/functions.py).
        self.functional = functional
        self.graph = Graph(name)
        # TF node name -> its GE node (outputs in TF order), the GE handles of its outputs, or None (no outputs).
        self.lowered: dict[str, Node | list[Handle] | None] = {}
        self.current: Any = None  # the NodeDef being lowered
        self.current_controls: list[Node] = []
        self._readers: dict[str, list[Any]] | None = None  # TF node name -> the TF nodes reading it (sole_reader)
        # The size unknown dims take in this lowering (graph_ir/dynamic/probe.py), or None when every dim is known.
        self.probe: int | None = None

    def handle(self, tensor: str) -> Handle:
        """The GE handle of TF tensor "name:k"."""
        name, index = parse_tensor(tensor)
        lowered = self.lowered.get(name)
        outputs = lowered if isinstance(lowered, list) else \
            [lowered.output(k) for k in range(len(lowered.output_descs))] if lowered is not None else []
        if index >= len(outputs):
            raise LoweringError(f"tensor {tensor!r} has no GE counterpart (node {name!r}, {self.nodes[name].op})")
        return outputs[index]

    def sole_reader(self, name: str) -> Any:
        """The one TF node reading TF node `name` (NodeDef), or None when several (or none) do, one reads it as a
        control input, or the step returns it: for a lowering that fuses a node into its reader."""
        if self._readers is None:
            self._readers = {}
            for node in self.nodes.values():
                for tensor in node.input:
                    self._readers.setdefault(parse_tensor(tensor)[0], []).append(node)
        readers = self._readers.get(name, [])
        returned = name in {parse_tensor(t)[0] for t in getattr(self, "outputs", ())}
        if len(readers) != 1 or returned or f"^{name}" in readers[0].input:
            return None
        return readers[0]

    def handle_now(self, tensor: str) -> Handle:
        """The GE handle of TF tensor "name:k", lowering its node (after what it depends on) now if the walk has not
        reached it: for a lowering that takes in an input of its reader (the conv family fusing a BiasAdd)."""
        name = parse_tensor(tensor)[0]
        if name not in self.lowered:
            current, controls = self.current, self.current_controls
            self._lower_from(name)  # graph_ir/lowering/lowerer.py's walk
            self.current, self.current_controls = current, controls
        return self.handle(tensor)

    def _lower_from(self, root: str) -> None:
        raise NotImplementedError

    def _stamp(self, name: str, added: int) -> None:
        """Records TF node `name` as the origin of the GE nodes its lowering added (the last `added`)."""
        for node in itertools.islice(reversed(self.graph.nodes.values()), max(added, 0)):
            if not node.origins and node.type not in ("Data", "Variable"):
                node.origins = [name]

    def nodes_of(self, name: str) -> list[Node]:
        """The GE nodes that stand for TF node `name` (for control edges)."""
        lowered = self.lowered.get(name)
        if isinstance(lowered, list):
            return list({id(h.node): h.node for h in lowered}.values())
        return [lowered] if lowered is not None else []

    @staticmethod
    def value(handle: Handle) -> np.ndarray | None:
        """The value of a handle known at lowering time (a Const's, or a value known at the probe size), else
        None."""
        return known_value(handle)

    def _name(self, suffix: str) -> str:
        """The GE name for the TF node being lowered: its own, plus `suffix` for a helper node."""
        return f"{self.current.name}/{suffix}" if suffix else self.current.name

    def const(self, value: Any, suffix: str = "") -> Handle:
        """A Const named after the TF node being lowered (plus `suffix` for a second one)."""
        return self.graph.add_node("Const", (), {"value": np.asarray(value)}, name=self._name(suffix),
                                   control_inputs=self.current_controls).output(0)

    def add(self, ge_type: str, inputs: list[Handle | None], attrs: dict | None = None, *,
            suffix: str = "") -> Node | list[Handle]:
        """Adds the GE node `ge_type` for the TF node being lowered (named after it, plus `suffix` for a helper
        node), with its control inputs; returns the node, or the handles of the Consts it was folded into."""
        node = self.graph.add_node(ge_type, inputs, attrs or {}, name=self._name(suffix),
                                   control_inputs=self.current_controls)
        return self._folded(node)

    def _folded(self, node: Node) -> Node | list[Handle]:
        values = fold_values(node)
        if values is None:
            return node
        if self.probe is not None and self._depends_on_arguments(node):
            node.known_values = values  # known at this probe size only: it stays a node (graph_ir/dynamic)
            return node
        return replace_by_consts(self.graph, node, values)

    def _depends_on_arguments(self, node: Node) -> bool:
        """Whether the node's value (or, for Shape, Size and ShapeN, its input's shape) depends on a Data node:
        with unknown dims (a probe lowering) such values hold only at the probe size."""
        stack, seen = [h.node for h in node.inputs if h is not None], set()
        while stack:
            source = stack.pop()
            if id(source) in seen or source.type in ("Const", "Variable"):
                continue
            if source.type in ("Data", "RefData") or source.subgraph_graphs or source.op.outputs_from == "valued":
                return True
            seen.add(id(source))
            stack.extend(h.node for h in source.inputs if h is not None)
        return False
