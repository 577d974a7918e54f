"""The thread harness: start workers, join each within a bound, fail on a hang."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

TIMEOUT = 120.0


def run_threads(targets: Iterable[Callable[[], None]], timeout: float = TIMEOUT) -> None:
    """Runs each target in its own daemon thread; every thread must finish within `timeout` seconds."""
    threads = [threading.Thread(target=t, daemon=True) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "a thread did not finish: deadlock?"


def run_concurrently_or_serially(work: Callable[[], None], threads: int, concurrent: bool) -> None:
    """`work` `threads` times: at once in threads, or one after another (the serial order to compare with)."""
    if concurrent:
        run_threads([work] * threads)
    else:
        for _ in range(threads):
            work()
