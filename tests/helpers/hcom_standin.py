"""TEST-ONLY stand-in for HCCL: runs the N rank graphs of graph_ir.from_distributed in N graph_ir.Sessions of one
process, one thread per rank, with Hcom executors that exchange the ranks' buffers through shared memory. It is no
product code (graph_ir's own engine runs ranks as processes): it only checks the lowering's numbers before that
engine exists. HCCL pairs the ranks' collectives by their order in the graph; so does this (the k-th Hcom call of
every rank meets the others' k-th at a barrier). Every wait is bounded."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence

import numpy as np

from graph_ir import executors

_REDUCE = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}
TIMEOUT = 120.0


class StandInGroup:
    """N ranks in threads of this process; exchange(x) is an all-to-all of one value per rank."""

    def __init__(self, size: int):
        self.size = size
        self.barrier = threading.Barrier(size, timeout=TIMEOUT)
        self.slots: list = [None] * size
        self.local = threading.local()

    def exchange(self, value):
        rank = self.local.rank
        self.slots[rank] = value
        self.barrier.wait()
        values = list(self.slots)
        self.barrier.wait()
        return values

    def _all_reduce(self, node, args):
        values = self.exchange(np.array(args[0], copy=True))
        out = values[0].copy()
        for v in values[1:]:
            out = _REDUCE[node.attrs["reduction"]](out, v)
        return [out.astype(args[0].dtype, copy=False)]

    def _all_gather(self, node, args):
        return [np.concatenate(self.exchange(np.array(args[0], copy=True)), axis=0)]

    def _broadcast(self, node, args):
        values = self.exchange([np.array(a, copy=True) for a in args])
        return [v.copy() for v in values[node.attrs["root_rank"]]]

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """The stand-in executors in graph_ir.executors.EXECUTORS while inside (what was there before is restored)."""
        mine = {"HcomAllReduce": self._all_reduce, "HcomAllGather": self._all_gather,
                "HcomBroadcast": self._broadcast}
        saved = {k: executors.EXECUTORS.get(k) for k in mine}
        executors.EXECUTORS.update(mine)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    executors.EXECUTORS.pop(k, None)
                else:
                    executors.EXECUTORS[k] = v

    def run(self, sessions: Sequence, feeds: Sequence[Sequence[np.ndarray]]) -> list[list[np.ndarray]]:
        """One run of graph 0 of each rank's session, rank r fed feeds[r], all ranks at once."""
        results: list = [None] * self.size
        errors: list = []

        def work(rank: int) -> None:
            self.local.rank = rank
            try:
                results[rank] = sessions[rank].run_graph(0, list(feeds[rank]))
            except BaseException as e:  # noqa: BLE001 - reported below, with the others released
                errors.append((rank, e))
                self.barrier.abort()

        threads = [threading.Thread(target=work, args=(r,), daemon=True) for r in range(self.size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
        if errors:
            raise RuntimeError(f"rank {errors[0][0]} failed: {errors[0][1]!r}") from errors[0][1]
        if any(t.is_alive() for t in threads):
            raise TimeoutError("a rank did not finish within the stand-in's timeout")
        return results
