"""Side-by-side timing: candidates are called in alternation so machine noise hits them alike."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

import numpy as np


def median_ms_interleaved(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median milliseconds per call of each function, calling them round-robin `repeats` times after a warm-up.
    Each round calls them in a new (seeded) random order: a call right after a large one pays for the dirty cache
    lines and the still-spinning pool threads that one leaves, and a fixed order would charge that to the same
    candidate every time."""
    return {name: float(np.median(t)) for name, t in settled_ms(fns, repeats, settle_s=0.0).items()}


def settled_ms(fns: dict[str, Callable[[], object]], repeats: int, settle_s: float = 0.001) -> dict[str, np.ndarray]:
    """Milliseconds of every call, round by round (element r of each array is round r): each round calls every
    function once, in a new (seeded) random order, each after a short busy wait so that no pool thread of the call
    before still spins when it starts (a sleep instead would let the vCPU idle, and a 2 ms call then starts slow).
    For ratios of the same round, which a slow moment of the VM hits alike."""
    return {name: ms for name, (ms, _) in settled_calls(fns, repeats, settle_s, keep_results=False).items()}


def settled_calls(fns: dict[str, Callable[[], object]], repeats: int, settle_s: float = 0.001,
                  keep_results: bool = True) -> dict[str, tuple[np.ndarray, list]]:
    """As settled_ms, with what each call returned: {name: (milliseconds per round, results per round)}. Without
    keep_results the results are dropped at once (a kept tensor that aliases a variable would make the next update
    copy it)."""
    for fn in fns.values():
        fn()  # trace and warm up
    calls: dict[str, tuple[list[float], list]] = {name: ([], []) for name in fns}
    rng = np.random.default_rng(0)
    for _ in range(repeats):
        for name in rng.permutation(list(fns)):
            until = time.perf_counter() + settle_s
            while time.perf_counter() < until:
                pass
            t0 = time.perf_counter()
            result = fns[name]()
            calls[name][0].append(1e3 * (time.perf_counter() - t0))
            calls[name][1].append(result if keep_results else None)
            del result  # not held into the next call
    return {name: (np.asarray(ms), results) for name, (ms, results) in calls.items()}


def save_rows(name: str, rows: list[dict]) -> str:
    """Writes a table's rows to bench/results/NAME.json (for plots and later comparison); returns the path."""
    out_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{name}.json")
    with open(path, "w") as f:
        json.dump(rows, f, indent=1)
    return path
