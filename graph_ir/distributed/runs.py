"""The world group, how a graph_ir.Session's graphs join it, and how its runs reach it.

world() is every process `mpiexec -n N` started (MPI.COMM_WORLD), as HCCL's "hccl_world_group" is every rank of the
job. The group works on its own duplicate of that communicator, so a program's own MPI messages never meet the
session's.

Joining (Session.add_graph of a graph holding Hcom nodes): every rank adds its graph; each checks its Hcom nodes
against the group (`group` its name, `rank_size` its size, `root_rank` one of its ranks), then the ranks exchange the
graph's Hcom sequence, the signature HCCL relies on (every rank issues the same collectives in the same order): per
Hcom node, in run order (the root graph's topological order, then its subgraphs'), its type, its attributes
(group, reduction, root_rank, rank_size, fusion, fusion_id) and its inputs' dtypes and shapes. Ranks whose
sequences differ are refused, on every rank, with a GraphError naming the first differing node and which ranks hold
which version, before the graph is planned or any Variable created. Ranks running different graphs are the
hang HCCL's users meet (a graph recompiled on some ranks only); here it is an error at add_graph.

Running: the session runs each graph inside running(group, joined); the Hcom executors ask current(node) for the
group. At the start of each run the ranks post the comparison of the digest of the graph they are running (one small
collective per run, waited for by the run's first collective), so that ranks running different graphs at the same
time fail there, naming the ranks, instead of using mismatched tensors. A session without a group refuses an Hcom
node by name (add_graph already does).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterator

import numpy as np

from graph_ir.distributed.group import Group, check_timeout, mpi
from graph_ir.distributed.waiting import bounded
from graph_ir.ir.errors import GraphError
from graph_ir.ir.graph import Graph
from graph_ir.ir.nodes import Node
from graph_ir.opset.hcom import HCOM_OPS

_DIGEST = 32  # bytes of a sha256 digest
_SIGNED = ("group", "reduction", "root_rank", "rank_size", "fusion", "fusion_id")
_NO_GROUP = ("this Session has no group: make it with graph_ir.Session(group=graph_ir.distributed.world()) and "
             "start one process per rank with mpiexec (docs/distributed.md)")


def hcom_nodes(graph: Graph) -> list[Node]:
    """The graph's Hcom nodes in run order: the root graph's topological order, then each subgraph's."""
    graphs = [graph, *sorted(graph.subgraphs.values(), key=lambda g: g.name)]
    return [n for g in graphs for n in g.topological_order() if n.type in HCOM_OPS]


def signature(node: Node) -> dict:
    """What every rank's node at this place of the sequence must agree on (its name is reported, not compared)."""
    return {"type": node.type, **{a: node.attrs[a] for a in _SIGNED if a in node.attrs},
            "inputs": [f"{h.dtype.name}{list(h.shape)}" for h in node.inputs if h is not None]}


def _describe(node: str, entry: dict | None) -> str:
    if entry is None:
        return "no Hcom node (its sequence is shorter)"
    attrs = ", ".join(f"{k}={v!r}" for k, v in entry.items() if k not in ("type", "inputs"))
    return f"{entry['type']} {node!r} ({attrs}; inputs {', '.join(entry['inputs'])})"


def allgather_bytes(group: Group, data: bytes, what: str) -> list[bytes]:
    """Every rank's `data`, in rank order (two bounded collectives: the lengths, then the bytes)."""
    from mpi4py import MPI

    lengths = np.empty(group.size, np.int64)
    bounded(group, group.comm.Iallgather([np.array([len(data)], np.int64), MPI.INT64_T], [lengths, MPI.INT64_T]), what)
    everything = np.empty(int(lengths.sum()), np.uint8)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    sent = np.frombuffer(data, np.uint8) if data else np.empty(0, np.uint8)
    bounded(group, group.comm.Iallgatherv([sent, MPI.BYTE], [everything, (lengths, offsets), MPI.BYTE]), what)
    return [everything[o:o + n].tobytes() for o, n in zip(offsets, lengths)]


@dataclasses.dataclass(frozen=True)
class Joined:
    """A graph that joined its group: the digest of its Hcom sequence, and its first Hcom node (for messages)."""

    digest: bytes
    first: str


def join(group: Group | None, graph: Graph) -> Joined | None:
    """Checks `graph`'s Hcom nodes against `group` and the other ranks' graphs (see the module docstring); returns
    what its runs need to check that every rank runs it (None for a graph without Hcom nodes, which needs no
    group)."""
    nodes = hcom_nodes(graph)
    if not nodes:
        return None
    if group is None:
        raise GraphError(f"{_describe_node(nodes[0])}: {_NO_GROUP}")
    for node in nodes:
        where = f"rank {group.rank}: graph {graph.name!r}: {_describe_node(node)}"
        if node.attrs["group"] != group.name:
            raise GraphError(f"{where}: attribute 'group' is {node.attrs['group']!r}; this session's group is "
                             f"{group.name!r} (graph_ir runs the world group only)")
        if "rank_size" in node.attrs and node.attrs["rank_size"] != group.size:
            raise GraphError(f"{where}: attribute 'rank_size' is {node.attrs['rank_size']}, but group "
                             f"{group.name!r} has {group.size} ranks")
        if "root_rank" in node.attrs and node.attrs["root_rank"] >= group.size:
            raise GraphError(f"{where}: root_rank {node.attrs['root_rank']} is not a rank of group {group.name!r} "
                             f"({group.size} ranks)")
    mine = [[n.name, signature(n)] for n in nodes]
    text = json.dumps(mine, sort_keys=True).encode()
    theirs = [json.loads(t) for t in allgather_bytes(group, text, f"graph {graph.name!r} joining group "
                                                                  f"{group.name!r} (add_graph)")]
    signed = [[entry for _, entry in t] for t in theirs]  # names are reported, not compared
    if any(t != signed[0] for t in signed):
        raise GraphError(_mismatch(graph, theirs))
    return Joined(hashlib.sha256(json.dumps(signed[0], sort_keys=True).encode()).digest(), _describe_node(nodes[0]))


def _describe_node(node: Node) -> str:
    return f"{node.type} {node.name!r}"


def _mismatch(graph: Graph, sequences: list[list]) -> str:
    """The first place where the ranks' Hcom sequences differ, and which ranks hold which version of it."""
    k = next(k for k in range(max(map(len, sequences)))
             if len({json.dumps(s[k][1] if k < len(s) else None, sort_keys=True) for s in sequences}) > 1)
    versions: dict[str, list[int]] = {}
    for rank, s in enumerate(sequences):
        name, entry = s[k] if k < len(s) else ("", None)
        versions.setdefault(_describe(name, entry), []).append(rank)
    listed = "; ".join(f"ranks {ranks} have {text}" for text, ranks in versions.items())
    return (f"graph {graph.name!r}: the ranks' Hcom sequences differ at Hcom node #{k + 1} of the sequence: {listed}. "
            "Every rank must run the same collectives in the same order; the graph was not added on any rank")


_RUN: contextvars.ContextVar[Group | None] = contextvars.ContextVar("graph_ir_hcom_run", default=None)


@contextlib.contextmanager
def running(group: Group | None, joined: Joined | None) -> Iterator[None]:
    """The Hcom executors of the run inside see `group` (None: they refuse). A graph with Hcom nodes (`joined`, from
    join) starts its run by posting the ranks' check that they all run it (post_agreement): the first collective
    waits for it, and the work before that collective (a step's forward and backward passes) hides its latency; a
    run that reaches no collective waits for it at its end."""
    token = _RUN.set(group)
    if group is not None and joined is not None:
        rank = group.rank
        post_agreement(group, joined.digest, f"{joined.first} (checking that every rank runs this graph)",
                       lambda differ: f"rank {rank}: {joined.first}: ranks {differ} run a graph with another Hcom "
                                      "sequence in this run; every rank must run the same graph at the same time")
    try:
        yield
    except BaseException:
        if group is not None and group.before_wait is not None:  # the run failed before any collective: the ranks
            group.before_wait = None                             # are out of step now
            group.fail(f"rank {group.rank}: a run failed before its first collective (its graph check is posted)")
        raise
    else:
        if group is not None and group.before_wait is not None:  # no Hcom node ran: the check on its own
            check, group.before_wait = group.before_wait, None
            check()
    finally:
        _RUN.reset(token)


def current(node: Node) -> Group:
    """The running session's group, for `node`."""
    group = _RUN.get()
    if group is None:
        raise GraphError(f"{_describe_node(node)}: {_NO_GROUP}")
    return group


def post_agreement(group: Group, mine: bytes, what: str, mismatch: Callable[[list[int]], str]) -> None:
    """Posts the ranks' check that each holds the same `mine` (an MPI_Iallgather of its sha256 digest): the next
    collective this rank posts waits for it first (waiting.bounded), so its latency overlaps that collective's.
    Where some ranks differ, every rank fails by itself with mismatch(those ranks); the collective posted after the
    check is then unmatched, so the group is broken (no abort message: each rank finds it alone)."""
    if group.broken is not None:  # the collective that follows fails at once, saying why
        return
    MPI = mpi()
    digest = hashlib.sha256(mine).digest()
    digests = bytearray(group.size * _DIGEST)
    request = group.comm.Iallgather([digest, MPI.BYTE], [digests, MPI.BYTE])

    def check() -> None:
        bounded(group, request, what)
        if digests != digest * group.size:
            differ = [r for r in range(group.size) if digests[r * _DIGEST:(r + 1) * _DIGEST] != digest]
            raise group.fail(mismatch(differ), tell=False)

    group.before_wait = check


_WORLD: list[Group] = []


def world(timeout: float | None = None) -> Group:
    """The group of every process of the MPI job (mpiexec -n N: N ranks; a plain `python`: one rank), named
    "hccl_world_group". Made once per process, on a duplicate of MPI.COMM_WORLD; `timeout` (seconds, default
    GRAPH_IR_HCOM_TIMEOUT or 120) bounds every wait, making the duplicate included. A later call with a timeout sets
    the group's timeout."""
    if _WORLD:
        if timeout is not None:
            _WORLD[0].timeout = check_timeout(timeout)
        return _WORLD[0]
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError("graph_ir.distributed needs mpi4py and an MPI runtime: pip install mpi4py mpich "
                          f"({e})") from None
    base = Group(MPI.COMM_WORLD, timeout=timeout)
    comm, request = MPI.COMM_WORLD.Idup()
    bounded(base, request, "joining the world group (MPI_Comm_idup)")
    group = Group(comm, timeout=base.timeout)
    _WORLD.append(group)
    return group
