"""graph_ir.Session's run loop, resolved at plan time: per node of the run order its kind, executor, input and
output value slots, snapshot copies and the slots that die after it (graph_ir/runtime/session.py plans these; the loop then
does no name lookups)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from graph_ir.executors import EXECUTORS
from graph_ir.executors.common import Executor
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import Node

# What a run does at each node (Step.kind).
FED, VARIABLE, CONST, OUTPUT, FUNCTIONAL, EXECUTOR = range(6)
_KINDS = {"Data": FED, "RefData": FED, "Variable": VARIABLE, "Const": CONST, "NetOutput": OUTPUT}


@dataclass
class Step:
    """One node of a run. A run's values live in a list, one slot per node output (slot `first + j` for output
    j)."""

    kind: int
    node: Node
    run: Executor | None  # the executor (kind EXECUTOR)
    inputs: list[int]  # the slots of the given data inputs, in IR order
    first: int  # the slot of output 0
    outputs: int  # how many outputs
    copy: list[int] | None  # the outputs that are snapshots to copy, if any
    drop: list[int]  # the slots no later node reads

    def store(self, values: list[Any], results: list[np.ndarray]) -> None:
        """The node's results into its slots, the snapshots among them copied."""
        if len(results) != self.outputs:
            raise GraphError(f"{self.node.type} {self.node.name!r}: its executor returned {len(results)} outputs; "
                             f"the node has {self.outputs}")
        if self.copy is not None:
            results = list(results)
            for j in self.copy:
                results[j] = np.array(results[j], copy=True)
        values[self.first:self.first + self.outputs] = results


def resolve_steps(order: list[Node], snapshot: set[tuple[str, int]],
                  drop_after: list[list[tuple[str, int]]]) -> tuple[list[Step], int]:
    """The steps and the slot count of a plan's run order, its snapshot outputs that copy ((node name, output index)
    pairs) and the values each position drops."""
    first: dict[str, int] = {}
    slots = 0
    for node in order:
        first[node.name] = slots
        slots += len(node.output_descs)
    steps = []
    for node, drops in zip(order, drop_after, strict=True):
        kind = _KINDS.get(node.type, FUNCTIONAL if node.subgraph_graphs else EXECUTOR)
        copy = [j for j in range(len(node.output_descs)) if (node.name, j) in snapshot]
        steps.append(Step(kind, node, EXECUTORS[node.type] if kind == EXECUTOR else None,
                          [first[h.node.name] + h.index for h in node.inputs if h is not None], first[node.name],
                          len(node.output_descs), copy or None, [first[name] + j for name, j in drops]))
    return steps, slots
