"""The group a graph_ir.Session runs its Hcom ops in: this process's rank among `size` processes, over an MPI
communicator (mpi4py, https://mpi4py.readthedocs.io), with every wait bounded by the group's timeout.

graph_ir.distributed.world() (graph_ir/distributed/runs.py) is the group of every process `mpiexec -n N` started.
mpi4py is imported only when a group is made or used: graph_ir imports without it.

A group that fails (a wait past its timeout, a peer that gave up, a collective MPI refused) is broken for good: its
later collectives fail at once, its peers are told (so that those waiting fail too, and those computing fail at
their next collective), and when the process exits it calls MPI_Abort rather than MPI_Finalize, so that mpiexec
ends every rank and the job cannot hang on a dead or stuck one (mpi4py's docs: Abort is the last resort against
parallel deadlocks).
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Callable
from typing import Any

from graph_ir.ir.errors import GraphError
from graph_ir.opset.hcom import WORLD_GROUP

TIMEOUT_ENV = "GRAPH_IR_HCOM_TIMEOUT"  # seconds; HCCL_CONNECT_TIMEOUT's default is 120 s as well
DEFAULT_TIMEOUT = 120.0
STATUS_TAG, ABORT_TAG = 7301, 7302  # the group's own point-to-point messages (graph_ir/distributed/waiting.py)


_MPI: list[Any] = []


def mpi() -> Any:
    """mpi4py's MPI module, imported once (collectives call this per call: an import statement costs a microsecond,
    a tenth of a small collective)."""
    if not _MPI:
        from mpi4py import MPI

        _MPI.append(MPI)
    return _MPI[0]


class HcomError(GraphError):
    """A collective that could not complete: the message names this rank, the Hcom node and what the other ranks
    were doing, when known."""


def default_timeout() -> float:
    """GRAPH_IR_HCOM_TIMEOUT when set (seconds > 0), else DEFAULT_TIMEOUT."""
    text = os.environ.get(TIMEOUT_ENV)
    if text is None:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"{TIMEOUT_ENV} must be a number of seconds > 0, got {text!r}")
    return value


def check_timeout(timeout: float | None) -> float:
    """`timeout` as seconds > 0 (None: default_timeout()); anything else is a TypeError."""
    if timeout is None:
        return default_timeout()
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not timeout > 0:
        raise TypeError(f"timeout must be a number of seconds > 0, got {timeout!r}")
    return float(timeout)


class Group:
    """This process's place among the ranks: `rank` of `size`, named `name` (what an Hcom node's `group` attribute
    must say), with `timeout` seconds for any one wait. Collectives go through graph_ir/distributed/waiting.py."""

    def __init__(self, comm: Any, name: str = WORLD_GROUP, timeout: float | None = None):
        self.comm, self.name, self.timeout = comm, name, check_timeout(timeout)
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.sequence = 0  # collectives this rank has begun in the group (the same count on every healthy rank)
        self.broken: str | None = None  # why the group failed, once it has
        self.pending: list[Any] = []  # this rank's status and abort messages still being sent
        self.heard: dict[int, tuple[int, str]] = {}  # rank -> (its sequence, its node) from its latest status
        # A check posted just before the next collective (graph_ir/distributed/runs.py), which waits for it first;
        # requests left unfinished by a failed check, kept so that MPI never writes into a freed buffer.
        self.before_wait: Callable[[], None] | None = None
        self.orphans: list[Any] = []

    def __repr__(self) -> str:
        return f"Group({self.name!r}, rank {self.rank} of {self.size}, timeout {self.timeout:g} s)"

    def fail(self, message: str, tell: bool = True) -> HcomError:
        """Marks the group broken with `message`, tells every peer (they fail with it; `tell=False` when each finds
        the failure by itself), arranges MPI_Abort at exit, and returns the error to raise."""
        MPI = mpi()
        if self.broken is None:
            self.broken = message
            data = message.encode()[:4000]
            for peer in range(self.size if tell else 0):
                if peer != self.rank:
                    try:
                        self.pending.append(self.comm.Isend([data, MPI.BYTE], dest=peer, tag=ABORT_TAG))
                    except MPI.Exception:  # the peer's connection is gone: it cannot be told
                        pass
            atexit.register(_abort_job, self.comm)
        return HcomError(message)


def _abort_job(comm: Any) -> None:
    """At exit of a process whose group broke: MPI_Abort, after flushing what Python printed."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    comm.Abort(1)
