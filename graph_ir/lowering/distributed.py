"""graph_ir.from_distributed: a tf.distribute step lowered to one GE graph per rank (SPMD), as Ascend runs data-parallel
training: one process per device, each running the same graph, HCCL's Hcom ops doing the collectives (graph_ir/opset/
hcom.py). The split by replica is graph_ir/lowering/spmd.py, the collectives' mapping graph_ir/lowering/ops/hcom.py."""

from __future__ import annotations

from typing import Any

from graph_ir.ir.errors import LoweringError
from graph_ir.ir.graph import Graph
from graph_ir.lowering.entry import lower_step
from graph_ir.lowering.ops.hcom import UNIFORM_SUFFIX
from graph_ir.lowering.replicas import Replicas, container, replicas_of
from graph_ir.lowering.spmd import rank_steps
from graph_ir.lowering.trace import lowering_errors, prepare
from graph_ir.lowering.uniform import check_uniform_branches


def from_distributed(fn: Any, *args: Any, strategy: Any = None, freeze_learning_rate: bool = True) -> list[Graph]:
    """Lowers a step traced under a tf.distribute strategy to one GE graph per local replica (rank).

    Args:
      fn: a tf.function (traced with `args`) or ConcreteFunction whose body runs strategy.run (a custom training loop),
        traced under MirroredStrategy (one graph holding every replica) or on one MultiWorkerMirroredStrategy worker.
      *args: the arguments to trace `fn` with: tensors or specs every replica reads, or distributed values
        (strategy.experimental_distribute_values_from_function), of which rank k reads replica k's.
      strategy: the strategy `fn` runs under; by default the one of the first distributed variable the step captures.
      freeze_learning_rate: as for graph_ir.from_tensorflow.
    Returns:
      [graph of rank first_rank + k for each local replica k]: the same GE graph on every rank (node names and
      all; a replica's own constants may hold other values); TF's collectives became Hcom ops of HCCL's world
      group. Save each as the rank's .air (graph.save(f"rank{r}.air")).
    Raises:
      LoweringError: naming what cannot be lowered, or the rank whose graph differs from rank 0's.
    """
    with lowering_errors("lowering the distributed step"):
        step = prepare(fn, args, None, None)
        replicas = replicas_of(strategy if strategy is not None else _strategy_of(step))
        parts = rank_steps(step, replicas)
    graphs = [lower_step(part, freeze_learning_rate) for part in parts]
    check_spmd(graphs, replicas)
    for graph in graphs[1:]:
        _named_like(graph, graphs[0])
    check_uniform_branches(graphs)
    return graphs


def _named_like(graph: Graph, reference: Graph) -> None:
    """Gives each node of `graph` the name of the node at its place in `reference` (the same structure: check_spmd):
    every rank's graph is then the same graph, node names and all (SPMD), as the ranks' Hcom nodes must be named
    alike for a group to pair them; only the values of Consts (a replica's own constants) may differ."""
    renamed = {}
    for node, like in zip(list(graph.nodes.values()), reference.nodes.values(), strict=True):
        node.name = like.name
        renamed[like.name] = node
        for sub, sub_like in zip(node.subgraph_graphs, like.subgraph_graphs, strict=True):
            sub.name = sub_like.name
            _named_like(sub, sub_like)
    graph.nodes = renamed
    graph._next_suffix = dict(reference._next_suffix)
    graph.subgraphs = dict(zip(reference.subgraphs, graph.subgraphs.values(), strict=True))


def _strategy_of(step) -> Any:
    for _, _, var in step.variables.values():
        owner = container(var)
        if owner is not None:
            return owner._distribute_strategy
    raise LoweringError("the step captures no distributed variable: pass strategy= (the tf.distribute strategy it "
                        "runs under)")


def structure(graph: Graph) -> list[tuple]:
    """What must agree between the ranks' graphs: each node's type, attributes other than values, output descs and
    inputs' positions, in the graph's order (HCCL matches the ranks' collectives by their order)."""
    order = {id(n): k for k, n in enumerate(graph.nodes.values())}
    out = []
    for node in graph.nodes.values():
        attrs = {k: v for k, v in node.attrs.items() if k not in ("value",) and not hasattr(v, "shape")}
        if node.name.endswith(UNIFORM_SUFFIX):  # a gather folded on the premise that every rank gathers this value
            attrs["value"] = node.attrs["value"].tolist()
        if node.type == "Variable":
            attrs["name"] = node.name
        inputs = [(order.get(id(h.node)), h.index) if h is not None else None for h in node.inputs]
        descs = [(d.dtype.name, tuple(d.shape)) for d in node.output_descs]
        subgraphs = [structure(g) for g in node.subgraph_graphs]
        out.append((node.type, sorted(attrs.items(), key=lambda kv: kv[0]).__repr__(), inputs, descs, subgraphs))
    return out


def check_spmd(graphs: list[Graph], replicas: Replicas) -> None:
    """Refuses ranks whose graphs differ: HCCL pairs collectives by order, so different graphs hang or mix tensors."""
    first = structure(graphs[0])
    for k, graph in enumerate(graphs[1:], start=1):
        other = structure(graph)
        if other == first:
            continue
        at = next((i for i, (a, b) in enumerate(zip(first, other)) if a != b), min(len(first), len(other)))
        nodes = [list(g.nodes.values()) for g in (graphs[0], graph)]
        names = [n[at].name if at < len(n) else "(none)" for n in nodes]
        raise LoweringError(f"the graph of rank {replicas.first_rank + k} differs from rank {replicas.first_rank}'s at "
                            f"node {at} ({names[1]!r} against {names[0]!r}): every rank must run the same graph "
                            "(SPMD), or HCCL pairs the wrong collectives; a step whose replicas compute differently "
                            "(a branch on the replica id) cannot run as one graph per rank")
