"""graph_ir.from_distributed: a tf.distribute step lowered to one GE graph per rank (SPMD), as Ascend runs data-parallel
training: one process per device, each running the same graph, HCCL's Hcom ops doing the collectives (graph_ir/opset/
hcom.py). The split by replica is graph_ir/lowering/spmd.py, the collectives' mapping graph_ir/lowering/ops/hcom.py."""

from __future__ import annotations

from typing import Any

from graph_ir.ir.errors import LoweringError
from graph_ir.ir.graph import Graph
from graph_ir.lowering.entry import lower_step
from graph_ir.lowering.replicas import Replicas, container, replicas_of
from graph_ir.lowering.spmd import rank_steps
from graph_ir.lowering.spmd_match import align, signature
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
    check_spmd(graphs, replicas)  # and every rank's graph made rank 0's, names and order (spmd_match.py)
    check_uniform_branches(graphs)
    return graphs


def _strategy_of(step) -> Any:
    for _, _, var in step.variables.values():
        owner = container(var)
        if owner is not None:
            return owner._distribute_strategy
    raise LoweringError("the step captures no distributed variable: pass strategy= (the tf.distribute strategy it "
                        "runs under)")


def structure(graph: Graph) -> list[tuple]:
    """What must agree between the ranks' graphs, in the graph's order: each node's signature (spmd_match.py), its
    inputs' positions and its subgraphs'."""
    order = {id(n): k for k, n in enumerate(graph.nodes.values())}
    return [(signature(node), [(order.get(id(h.node)), h.index) if h is not None else None for h in node.inputs],
             [structure(g) for g in node.subgraph_graphs]) for node in graph.nodes.values()]


def check_spmd(graphs: list[Graph], replicas: Replicas) -> None:
    """Makes every rank's graph rank 0's (names and order: spmd_match.align); refuses ranks whose graphs differ, as
    HCCL pairs the ranks' collectives by order, so different graphs hang or mix tensors."""
    for k, graph in enumerate(graphs[1:], start=1):
        differing = align(graph, graphs[0])
        if differing is None:
            continue
        where = differing.origins[0] if differing.origins else differing.name
        raise LoweringError(f"the graph of rank {replicas.first_rank + k} differs from rank {replicas.first_rank}'s "
                            f"at GE {differing.type} {differing.name!r} (TF {where!r}): every rank must run the same "
                            "graph (SPMD), or HCCL pairs the wrong collectives; a step whose replicas compute "
                            "differently (a branch on the replica id) cannot run as one graph per rank")
