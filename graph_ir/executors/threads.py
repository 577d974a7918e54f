"""Both cores for the large executors: a run splits a large product, copy or window pass into contiguous parts (two
per thread), each part on its own slice of the output (no part reads what another writes, so the result does not
depend on the thread count, and the parts' working memory adds up to what one thread would use).

NumPy releases the GIL inside matrix products, copies and ufunc loops, so plain Python threads run the parts at
once. The workers are persistent and block on a queue between jobs (OpenBLAS's own threads busy-wait instead, which
on a shared 2-vCPU machine made products 5-380x slower: graph_ir/executors/blas.py). A thread uses `count()`
threads: 1 unless inside `using(n)` (graph_ir.Session's runs); the workers themselves count 1, so parts never nest.
Parts are claimed one at a time: when the workers are busy (another Session's run in another thread) or slow to
wake, the caller runs the parts itself.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from graph_ir.executors import denormals, gemm

# Below these a part's work costs less than handing it to a worker (about 20-50 us): products of fewer
# multiply-adds, and passes over fewer bytes, stay on the calling thread.
MIN_PRODUCT_FLOPS = 2 * 10**7
MIN_PASS_BYTES = 2**20
MIN_PART_ROWS = 256  # a part's product needs this many rows of a to run near BLAS's speed
# oneMKL computes a product of fewer rows or columns than these with other kernels, which sum in another order
# (measured: 1-3 rows and 1-11 columns on AMD EPYC, one on Intel Xeon), so no part of a split product is smaller.
MIN_SPLIT_ROWS, MIN_SPLIT_COLUMNS = 4, 16

_LOCAL = threading.local()
_WORKERS: list[_Worker] = []
_WORKERS_LOCK = threading.Lock()


class _Job:
    """The parts of one run_parts call. The caller and the workers claim them one at a time until none is left, so
    a worker that wakes late (waking a thread costs 50-100 us on this VM) finds nothing to do instead of being
    waited for; the caller waits only for parts a worker has started."""

    def __init__(self, fn: Callable[[object], None], parts: Sequence) -> None:
        self.fn: Callable[[object], None] | None = fn
        self.parts: Sequence | None = parts
        self.next = 0
        self.running = 0  # parts the workers are running
        self.error: BaseException | None = None
        self.changed = threading.Condition()

    def work(self, on_worker: bool = True) -> None:
        """Runs unclaimed parts until none is left (or one has failed)."""
        while True:
            with self.changed:
                if self.fn is None or self.parts is None or self.next >= len(self.parts):
                    return
                fn, part = self.fn, self.parts[self.next]
                self.next += 1
                self.running += on_worker
            try:
                fn(part)
            except BaseException as e:  # noqa: BLE001 - the caller raises it, after every started part has ended
                with self.changed:
                    self.error = self.error or e
                    self.fn = None  # no part starts after a failure
            finally:
                fn = part = None  # the part's arrays are not held past it (the planner counts on it)
                if on_worker:
                    with self.changed:
                        self.running -= 1
                        self.changed.notify_all()

    def finish(self) -> None:
        """After the caller's work: no part starts any more, the workers' running parts end, then the first
        failure is raised."""
        with self.changed:
            self.fn = self.parts = None
            self.changed.wait_for(lambda: self.running == 0)
            error, self.error = self.error, None
        if error is not None:
            raise error


class _Worker:
    """A daemon thread working on the jobs put on its queue."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="graph_ir-executor", daemon=True).start()

    def _loop(self) -> None:
        denormals.set_flush()  # TF's kernels' FTZ and DAZ: these threads run only graph_ir's parts
        while True:
            job = self.jobs.get()
            job.work()
            job = None  # nothing of it is held while waiting for the next


def available() -> int:
    """The CPUs this process may run on."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def count() -> int:
    """The threads the calling thread may use for one executor."""
    return getattr(_LOCAL, "count", 1)


@contextlib.contextmanager
def using(threads: int | None) -> Iterator[None]:
    """The calling thread's executors use `threads` threads inside the block (None: every CPU this process may run
    on)."""
    before = count()
    _LOCAL.count = available() if threads is None else int(threads)
    try:
        yield
    finally:
        _LOCAL.count = before


def slices(n: int, pieces: int) -> list[slice]:
    """[0, n) as at most `pieces` contiguous non-empty slices of near-equal length."""
    pieces = max(min(pieces, n), 1)
    bounds = [n * k // pieces for k in range(pieces + 1)]
    return [slice(bounds[k], bounds[k + 1]) for k in range(pieces)]


def pieces_for(work: float, minimum: float, n: int) -> int:
    """How many parts to split n units of `work` (flops or bytes in all) into: two per thread (so a worker that
    starts late leaves the caller less to wait for), none smaller than `minimum`; one when the thread may use one."""
    if count() == 1:
        return 1
    return max(min(2 * count(), n, int(work // max(minimum, 1))), 1)


def run_parts(fn: Callable[[object], None], parts: Sequence) -> None:
    """fn(part) for every part, claimed one at a time by the calling thread and up to count() - 1 workers. Returns
    when all have finished; raises the first part's exception, after every started part has finished. At most
    count() parts run at once, so the parts' temporaries add up to count() parts' at most."""
    helpers = min(count(), len(parts)) - 1
    if helpers <= 0:
        for part in parts:
            fn(part)
        return
    with _WORKERS_LOCK:
        while len(_WORKERS) < helpers:
            _WORKERS.append(_Worker())
        workers = _WORKERS[:helpers]
    job = _Job(fn, parts)
    for worker in workers:
        worker.jobs.put(job)
    job.work(on_worker=False)
    job.finish()


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """a [M, K] @ b [K, N] (2-D, any strides), into `out` [M, N] when given: split over the rows of a, or the columns
    of b when a has few rows. Each output element is one BLAS dot product over K, whoever computes it (parts keep
    MIN_SPLIT_ROWS rows or MIN_SPLIT_COLUMNS columns at least: BLAS computes fewer another way)."""
    m, k = a.shape
    n = b.shape[1]
    if out is None:
        out = np.empty((m, n), np.result_type(a, b))
    # Rows give each part a contiguous run of out; columns when a has too few rows for each part to have enough.
    by_rows = m >= n or m >= 2 * count() * MIN_PART_ROWS
    pieces = pieces_for(2.0 * m * k * n, MIN_PRODUCT_FLOPS, m // MIN_SPLIT_ROWS if by_rows else n // MIN_SPLIT_COLUMNS)
    if pieces == 1:
        return gemm.matmul(a, b, out=out)

    def part(s: slice) -> None:
        if by_rows:
            gemm.matmul(a[s], b, out=out[s])
        else:
            gemm.matmul(a, b[:, s], out=out[:, s])

    run_parts(part, slices(m if by_rows else n, pieces))
    return out
