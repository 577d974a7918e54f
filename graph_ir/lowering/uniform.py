"""Which values of the ranks' graphs are the same on every rank, so that a branch around a collective is taken alike
everywhere: HCCL pairs the ranks' collectives by order, so a rank that skips one (its If went the other way) leaves
the others waiting (a hang; "ranks running different graphs" in Ascend's distributed-training FAQ).

Not the same on every rank: the Data inputs (each rank's own batch), a Const whose value differs between the ranks'
graphs (a replica's own constant: tf.distribute's replica_id_in_sync_group), a Variable some node writes with such a
value, and anything computed from these. The same again: the output of an Hcom op (every rank gets the same result).
An If or Case whose predicate is not the same everywhere, holding an Hcom op in a branch, is refused by name; so is a
While holding one whose condition is not (the condition is judged on the loop variables that stay the same on every
rank through every iteration: a rank's own batch may ride in the loop state, as long as the trip count does not
depend on it). (TensorFlow's own collectives hang the same way: cross_device_utils.py's
CollectiveReplicaLauncher orders them by a token, not by the branch taken.)"""

from __future__ import annotations

import numpy as np

from graph_ir.ir.errors import LoweringError
from graph_ir.ir.graph import Graph
from graph_ir.opset.hcom import HCOM_OPS

_READS = ("Identity", "IdentityN")  # reading a Variable is no write


def _differing_consts(graphs: list[Graph]) -> set[tuple[str, str]]:
    """(graph name, node name) of the Consts whose values are not the same in every rank's graph (named alike:
    graph_ir/lowering/distributed.py gives every rank rank 0's names)."""
    out = set()
    nests = [{g.name: g for g in (root, *root.subgraphs.values())} for root in graphs]
    for name, graph in nests[0].items():
        for node in graph.nodes_of_type("Const"):
            values = [nest[name].nodes[node.name].attrs["value"] for nest in nests]
            if any(v.shape != values[0].shape or not np.array_equal(v, values[0], equal_nan=True)
                   for v in values[1:]):
                out.add((name, node.name))
    return out


def _holds_hcom(graph: Graph) -> bool:
    return any(n.type in HCOM_OPS for g in (graph, *graph.subgraphs.values()) for n in g.nodes.values())


class _Uniformity:
    def __init__(self, differing: set[tuple[str, str]]):
        self.differing = differing
        self.variables: set[str] = set()  # Variables written with values that differ between ranks
        self.changed = False

    def walk(self, graph: Graph, inputs: list[bool]) -> list[bool]:
        """Whether each output of `graph` is the same on every rank, given whether its Data inputs are."""
        same: dict[int, bool] = {}
        for node in graph.topological_order():
            ins = [same[id(h.node)] for h in node.inputs if h is not None]
            if node.type in ("Data", "RefData"):
                index = node.attrs.get("index", 0)
                value = graph.parent_node is not None and index < len(inputs) and inputs[index]
            elif node.type == "Const":
                value = (graph.name, node.name) not in self.differing
            elif node.type == "Variable":
                value = node.name not in self.variables
            elif node.type in HCOM_OPS:
                value = True
            elif node.subgraph_graphs:
                value = self._functional(node, ins)
            else:
                value = all(ins)
            same[id(node)] = value
            if not all(ins) and node.type not in _READS:
                for h in node.inputs:
                    if h is not None and h.node.type == "Variable" and h.node.name not in self.variables:
                        self.variables.add(h.node.name)
                        self.changed = True
        outs = [n for n in graph.nodes.values() if n.type == "NetOutput"]
        return [same[id(h.node)] for n in outs for h in n.inputs if h is not None]

    def _functional(self, node, ins: list[bool]) -> bool:
        where = f"TF {node.origins[0] if node.origins else node.name!r} (GE {node.type} {node.name!r})"
        if node.type in ("If", "StatelessIf", "Case", "StatelessCase"):
            branches = [self.walk(g, ins[1:]) for g in node.subgraph_graphs]
            if not ins[0] and any(_holds_hcom(g) for g in node.subgraph_graphs):
                raise LoweringError(
                    f"cannot lower {where} for data-parallel ranks: its predicate is not the same on every rank (it "
                    "is computed from the rank's own batch or replica id) and a branch runs a collective; a rank "
                    "taking the other branch would leave the others waiting in HCCL. Make the predicate the same "
                    "everywhere: compute it from all-reduced values (as Ascend's NPULossScaleOptimizer with "
                    "is_distributed=True all-reduces its overflow flag), or move the collective out of the branch")
            return ins[0] and all(all(b) for b in branches)
        cond, body = node.subgraph_graphs  # While [cond, body]
        state = list(ins)  # which loop variables are the same on every rank at every iteration: a fixed point
        for _ in range(len(state) + 1):
            after = [a and b for a, b in zip(state, self.walk(body, state))]
            if after == state:
                break
            state = after
        if not all(self.walk(cond, state)) and any(_holds_hcom(g) for g in node.subgraph_graphs):
            raise LoweringError(f"cannot lower {where} for data-parallel ranks: its condition is not the same on "
                                "every rank and its body runs a collective, so the ranks could run it a different "
                                "number of times and hang in HCCL; compute the loop's bounds from all-reduced values")
        return all(state)


def check_uniform_branches(graphs: list[Graph]) -> None:
    """Refuses a branch or loop around an Hcom op that the ranks might take differently (module docstring)."""
    if not graphs or not _holds_hcom(graphs[0]):
        return
    uniformity = _Uniformity(_differing_consts(graphs))
    for _ in range(len(graphs[0].nodes_of_type("Variable")) + 2):  # until no Variable is newly found to differ
        uniformity.changed = False
        uniformity.walk(graphs[0], [])
        if not uniformity.changed:
            return
