"""Bounded waits on a group's non-blocking MPI collectives (graph_ir/distributed/group.py).

A blocking MPI collective waits forever for a rank that died or runs another graph. Here every collective is a
non-blocking one (MPI_Iallreduce, MPI_Iallgather, ...), tested in a loop with short sleeps until it completes or
the group's timeout passes. While it waits, a rank:
- fails at once when a peer's abort message arrives (that peer's error, with its rank, ends this wait too);
- after STATUS_AFTER seconds, tells every peer which collective it waits at (its sequence number and Hcom node),
  and keeps the latest such status from each peer, so that a timeout can say which ranks joined this collective,
  which wait at another, and which were not heard from (exited, stuck, or still computing).
On timeout the group fails (group.fail: peers told, MPI_Abort at exit) and HcomError names this rank, the node, the
collective's number and those ranks. MPI's own errors (a rank's connection lost) fail the group the same way.
"""

from __future__ import annotations

import os
import time
from typing import Any

from graph_ir.distributed.group import ABORT_TAG, STATUS_TAG, Group, HcomError, mpi

STATUS_AFTER = 1.0  # seconds of waiting before a rank tells its peers where it waits
# How a rank waits: first, for _SPIN seconds, it tests back to back, as MPICH's blocking collectives poll (a collective
# whose ranks arrive close together completes without a sleep's latency); then, until _YIELD_FOR seconds, it tests
# and yields the CPU (sched_yield) between tests, which keeps the latency of a test while letting a peer that shares
# the core run (a sleep, on a loaded machine, costs a time slice); then it sleeps, doubling from _FIRST_SLEEP to
# _LONGEST_SLEEP, so that a long wait leaves the CPU to the other ranks.
_SPIN, _YIELD_FOR, _FIRST_SLEEP, _LONGEST_SLEEP = 1e-3, 0.05, 5e-5, 1e-3


def bounded(group: Group, request: Any, what: str) -> None:
    """Waits for `request` (a collective this rank has just begun, described by `what`: the Hcom node) at most the
    group's timeout; see the module docstring. Counts the collective in group.sequence."""
    MPI = mpi()
    check, group.before_wait = group.before_wait, None
    if check is not None:  # posted before `request`: completed first, as every rank posted the two in that order
        try:
            check()
        except HcomError:
            group.orphans.append(request)
            raise
    group.sequence += 1
    if group.broken is not None:
        raise HcomError(f"rank {group.rank}: {what}: group {group.name!r} failed earlier: {group.broken}")
    try:
        if not request.Test():  # most small collectives of ranks that arrive together are done by the first test
            _wait(group, request, what)
    except MPI.Exception as e:
        raise group.fail(f"rank {group.rank}: {what}: MPI failed the collective (#{group.sequence} of group "
                         f"{group.name!r}): {e}") from None
    if group.pending:
        _tidy(group)


def _wait(group: Group, request: Any, what: str) -> None:
    """bounded's loop: spin, then yield, then sleep, until `request` completes or the group's timeout passes."""
    start = time.monotonic()
    deadline, announce = start + group.timeout, start + min(STATUS_AFTER, group.timeout / 4)
    sleep, spin_until, yield_until, announced = _FIRST_SLEEP, start + _SPIN, start + _YIELD_FOR, False
    while not request.Test():
        now = time.monotonic()
        if now < spin_until:
            continue
        _read_messages(group, what)
        if not announced and now >= announce:
            _announce(group, what)
            announced = True
        if now >= deadline:
            raise group.fail(_timeout_message(group, what, now - start))
        if now < yield_until:
            os.sched_yield()
            continue
        time.sleep(sleep)
        sleep = min(sleep * 2, _LONGEST_SLEEP)


def check_aborts(group: Group, what: str) -> None:
    """Fails at once when the group broke or a peer's abort message waits (a cheap probe, before a collective)."""
    if group.broken is not None:
        raise HcomError(f"rank {group.rank}: {what}: group {group.name!r} failed earlier: {group.broken}")
    if group.size > 1 and group.comm.Iprobe(tag=ABORT_TAG):
        _read_messages(group, what)


def _receive(group: Group, tag: int) -> tuple[int, str] | None:
    MPI = mpi()
    status = MPI.Status()
    if not group.comm.Iprobe(source=MPI.ANY_SOURCE, tag=tag, status=status):
        return None
    data = bytearray(status.Get_count(MPI.BYTE))
    group.comm.Recv([data, MPI.BYTE], source=status.Get_source(), tag=tag)
    return status.Get_source(), data.decode(errors="replace")


def _read_messages(group: Group, what: str) -> None:
    """Takes the peers' status messages in; a peer's abort message fails the group with that peer's reason."""
    while (got := _receive(group, STATUS_TAG)) is not None:
        source, text = got
        sequence, _, node = text.partition("\n")
        group.heard[source] = (int(sequence), node)
    got = _receive(group, ABORT_TAG)
    if got is not None:
        source, text = got
        raise group.fail(f"rank {group.rank}: {what} (collective #{group.sequence} of group {group.name!r}): rank "
                         f"{source} gave up: {text}")


def _announce(group: Group, what: str) -> None:
    MPI = mpi()
    data = f"{group.sequence}\n{what}".encode()[:1000]
    for peer in range(group.size):
        if peer != group.rank:
            group.pending.append(group.comm.Isend([data, MPI.BYTE], dest=peer, tag=STATUS_TAG))


def _tidy(group: Group) -> None:
    """Drops the status messages whose sending completed."""
    if group.pending:
        group.pending = [r for r in group.pending if not r.Test()]


def _timeout_message(group: Group, what: str, waited: float) -> str:
    joined, elsewhere, unheard = [], [], []
    for peer in range(group.size):
        if peer == group.rank:
            continue
        sequence, node = group.heard.get(peer, (-1, ""))
        if sequence == group.sequence:
            joined.append(peer)
        elif sequence > group.sequence:
            elsewhere.append(f"rank {peer} at #{sequence} ({node})")
        else:
            unheard.append(peer)
    text = (f"rank {group.rank}: {what} did not complete within {group.timeout:g} s (waited {waited:.1f} s; "
            f"collective #{group.sequence} of group {group.name!r}, {group.size} ranks)")
    if unheard:
        text += f"; ranks not heard from (exited, stuck, or still computing): {unheard}"
    if elsewhere:
        text += f"; ranks waiting at other collectives: {', '.join(elsewhere)}"
    if joined:
        text += f"; ranks waiting at this collective too: {joined}"
    return text + "; raise the timeout with graph_ir.distributed.world(timeout=...) or GRAPH_IR_HCOM_TIMEOUT"
