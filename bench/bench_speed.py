"""Speed of tf_plugin's fused kernels against stock TensorFlow, side by side in one process (issue 6's table).

For each row, the candidates are called in random order each round (bench/timing.py). The machine's practical
limit is a vectorized read-modify-write copy with the kernel's memory streams (bench/rmw_reference.py). It is timed
in the same rounds as ours alone, each call after a short busy wait (TensorFlow's pool threads spin for a while after
each op, which would slow threads started next to them): 8 passes against a tf.function of 8 ops (as a training
step runs them; the copy is a bare C call and pays no tf.function call), and one pass against one call. The copy
runs on NumPy's buffers (2 MB pages) and, in the same rounds, on buffers held to 4 KB pages: the page size alone
moves the copy by 7-20% here. TF's tensors are on 4 KB pages unless glibc's malloc is told to ask for huge pages
(GLIBC_TUNABLES=glibc.malloc.hugetlb=1, which --huge-pages sets), so the pass target is checked against the copy on
the pages TF's tensors are on, measured in this process. Prints the table with speedups, targets, GB/s and the
fractions of the RMW copy reached, and the ISA path in use; then sweeps sizes from 1K to 64M elements and writes a
PNG of time per element (bench/results/speed.png) and JSON.

    python -m bench.bench_speed                    # table at 16M elements, then the sweep
    python -m bench.bench_speed --no-sweep --huge-pages    # the table with TF's tensors on 2 MB pages
    python -m bench.bench_speed --no-sweep --size 1048576 --repeats 5      # quick (CI)
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
import tensorflow as tf

import tf_plugin
from bench import bench_fused_ema_adam, bench_power_sign
from bench.rmw_reference import RmwCopy, huge_page_kb, rmw_ms
from bench.timing import median_ms_interleaved, settled_ms

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
SMALL = 1024

# (label, op, dtype, comparator, target speedup, target fraction of the RMW copy on TF's pages; issues 6 and 29).
# PowerSign moves 5 streams (3 read, 2 written), FusedEmaAdam 9.
ROWS = [
    ("ResourceApplyPowerSign float32", "power_sign", tf.float32, "stock", 2.8, 0.90),
    ("ResourceApplyPowerSign float16", "power_sign", tf.float16, "stock", 6.0, 0.85),
    ("ResourceApplyPowerSign bfloat16", "power_sign", tf.bfloat16, "stock", 12.0, 0.85),
    ("FusedEmaAdam float32 vs stock AdamW+Adam+EMA", "fused_ema_adam", tf.float32, "stock", 3.0, None),
    ("FusedEmaAdam float32 vs Keras AdamW(use_ema)", "fused_ema_adam", tf.float32, "keras", 5.0, None),
]
HUGE_PAGES_TUNABLE = "glibc.malloc.hugetlb=1"  # glibc >= 2.35: malloc madvises its mmap'd chunks MADV_HUGEPAGE
STREAMS = {"power_sign": (2, 5), "fused_ema_adam": (4, 9)}  # (written arrays, total streams)


GRAPH_CALLS = 8  # ops per tf.function for the "in a graph" time


def tf_huge_pages() -> bool:
    """Whether TensorFlow's CPU tensors land on transparent huge pages in this process: the growth of the process's
    AnonHugePages when a 64 MB tensor is made."""
    before = huge_page_kb()
    tensor = tf.fill([16 * 1024 * 1024], 1.0)
    grown_kb = huge_page_kb() - before
    del tensor
    return grown_kb >= 32 * 1024


def candidates(op: str, size: int, dtype: tf.DType, calls: int = 1) -> dict:
    return (bench_power_sign.candidates if op == "power_sign" else bench_fused_ema_adam.candidates)(size, dtype, calls)


def measure(op: str, size: int, dtype: tf.DType, repeats: int, cache: dict | None = None,
            in_graph: bool = False) -> dict:
    """Median ms of the RMW-copy limit and of every candidate for one (op, size, dtype), cached for the rows that
    compare different candidates of the same measurement; with in_graph, also ours alone against the copy."""
    key = (op, size, dtype.name)
    if cache is not None and key in cache:
        return cache[key]
    fns = candidates(op, size, dtype)
    result = median_ms_interleaved(fns, repeats)
    if in_graph:  # the copy's time comes with ours alone, from the same rounds
        result.update(against_copy(op, size, dtype, repeats, fns["ours"]))
    else:
        result["limit"] = rmw_ms(size, STREAMS[op][0], dtype.size, repeats)
    if cache is not None:
        cache[key] = result
    return result


def against_copy(op: str, size: int, dtype: tf.DType, repeats: int, ours_one_call) -> dict:
    """Ours alone against the RMW copy, in the same rounds (bench/timing.py settled_ms): one tf.function call against
    one pass of the copy, and a tf.function of GRAPH_CALLS ops, as a training step runs them, against as many passes.
    Calling a tf.function from Python costs 0.3-0.7 ms on this VM (a fifth of a 16-bit op at 16M elements), which
    the copy, a bare C call, never pays. The fractions are medians of each round's copy time over ours."""
    copy = RmwCopy(size, STREAMS[op][0], dtype.size)
    copy_small_pages = RmwCopy(size, STREAMS[op][0], dtype.size, huge_pages=False)

    def copies(copy=copy) -> None:
        for _ in range(GRAPH_CALLS):
            copy()

    ms = settled_ms({"copy": copy, "copies": copies, "copies_4k": lambda: copies(copy_small_pages),
                     "one_call": ours_one_call, "in_graph": candidates(op, size, dtype, GRAPH_CALLS)["ours"]},
                    repeats)
    return {"limit": float(np.median(ms["copies"])) / GRAPH_CALLS, "ours_alone": float(np.median(ms["one_call"])),
            "ours_in_graph": float(np.median(ms["in_graph"])) / GRAPH_CALLS,
            "of_limit": float(np.median(ms["copies"] / ms["in_graph"])),
            "of_limit_4k": float(np.median(ms["copies_4k"] / ms["in_graph"])),
            "of_limit_one_call": float(np.median(ms["copy"] / ms["one_call"])),
            "copy_huge_mb": huge_page_kb(copy.arrays) / 1024,
            "copy_4k_huge_mb": huge_page_kb(copy_small_pages.arrays) / 1024}


def table(size: int, repeats: int, huge_pages: bool) -> list[dict]:
    """The rows at `size`; `huge_pages` says whether TF's tensors are on 2 MB pages, so which copy the pass target
    is checked against."""
    cache: dict = {}
    rows = []
    for label, op, dtype, other, target, pass_target in ROWS:
        ms = measure(op, size, dtype, repeats, cache, in_graph=True)
        streams = STREAMS[op][1]
        rows.append({
            "work": label, "size": size, "stock_label": other, "stock_ms": ms[other], "ours_ms": ms["ours"],
            "speedup": ms[other] / ms["ours"], "target": target,
            "gb_s": streams * size * dtype.size / ms["ours_in_graph"] / 1e6,
            "of_limit": ms["of_limit"], "of_limit_4k": ms["of_limit_4k"], "of_limit_one_call": ms["of_limit_one_call"],
            "of_limit_same_pages": ms["of_limit"] if huge_pages else ms["of_limit_4k"], "pass_target": pass_target,
            "copy_huge_mb": ms["copy_huge_mb"], "copy_4k_huge_mb": ms["copy_4k_huge_mb"],
        })
    small_repeats = max(repeats * 20, 200)
    for label, op, other in (("PowerSign float32, 1,024 elements", "power_sign", "stock"),
                             ("FusedEmaAdam float32, 1,024 elements", "fused_ema_adam", "stock")):
        ms = median_ms_interleaved(candidates(op, SMALL, tf.float32), small_repeats)
        rows.append({"work": label, "size": SMALL, "stock_label": other, "stock_ms": ms[other], "ours_ms": ms["ours"],
                     "speedup": ms[other] / ms["ours"], "target": 1.0, "gb_s": None, "of_limit": None,
                     "of_limit_4k": None, "of_limit_one_call": None, "of_limit_same_pages": None,
                     "pass_target": None})
    return rows


def print_table(rows: list[dict], huge_pages: bool) -> None:
    print(f"kernels' ISA path: {tf_plugin.isa()}; TF's tensors on {'2 MB' if huge_pages else '4 KB'} pages")
    print(f"GB/s and RMW copy: ours alone, per op in a graph of {GRAPH_CALLS} (and as one tf.function call); "
          "the copy on NumPy's buffers (2 MB pages) and on 4 KB pages; the pass target against the copy on TF's pages")
    print("| work | size | stock ms | ours ms | speedup | target | met | GB/s | of RMW copy, 2 MB pages | 4 KB pages | "
          "one call | pass target | met |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")

    def percent(x: float | None) -> str:
        return f"{100 * x:.0f}%" if x is not None else "-"

    for r in rows:
        gb = f"{r['gb_s']:.1f}" if r["gb_s"] is not None else "-"
        met = "yes" if r["speedup"] >= r["target"] else "NO"
        pass_target, pass_met = "-", "-"
        if r["pass_target"] is not None:
            pass_target = f">= {percent(r['pass_target'])}"
            pass_met = "yes" if r["of_limit_same_pages"] >= r["pass_target"] else "NO"
        print(f"| {r['work']} | {r['size']:,} | {r['stock_ms']:.3f} | {r['ours_ms']:.3f} | {r['speedup']:.2f}x | "
              f">= {r['target']:g}x | {met} | {gb} | {percent(r['of_limit'])} | {percent(r['of_limit_4k'])} | "
              f"{percent(r['of_limit_one_call'])} | {pass_target} | {pass_met} |")
    paged = [r for r in rows if r.get("copy_huge_mb") is not None]
    if paged:
        print("copy buffers on huge pages (MB, smaps AnonHugePages): "
              + ", ".join(f"{r['work'].split(' vs ')[0]} {r['copy_huge_mb']:.0f} / 4 KB copy {r['copy_4k_huge_mb']:.0f}"
                          for r in paged if "Keras" not in r["work"]))


SWEEP_SIZES = [1 << k for k in range(10, 27, 2)]  # 1K .. 64M


def sweep(repeats: int) -> list[dict]:
    points = []
    for size in SWEEP_SIZES:
        reps = max(3, min(200, int(repeats * (1 << 22) / size)))
        for op, dtypes in (("power_sign", (tf.float32, tf.float16, tf.bfloat16)), ("fused_ema_adam", (tf.float32,))):
            for dtype in dtypes:
                ms = measure(op, size, dtype, reps)
                for name, value in ms.items():
                    points.append({"op": op, "dtype": dtype.name, "size": size, "who": name,
                                   "ns_per_element": 1e6 * value / size})
        print(f"  swept {size:,} elements")
    return points


def plot(points: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("power_sign", "float32"), ("power_sign", "float16"), ("power_sign", "bfloat16"),
              ("fused_ema_adam", "float32")]
    fig, axes = plt.subplots(1, len(panels), figsize=(18, 4.2), sharey=False)
    for ax, (op, dtype) in zip(axes, panels):
        whos = sorted({p["who"] for p in points if p["op"] == op and p["dtype"] == dtype})
        for who in whos:
            sel = [p for p in points if p["op"] == op and p["dtype"] == dtype and p["who"] == who]
            style = {"limit": {"linestyle": "--", "color": "gray"}, "ours": {"linewidth": 2.2, "color": "tab:blue"},
                     "stock": {"color": "tab:orange"}, "keras": {"color": "tab:green"}}[who]
            stock = "stock AdamW+Adam+EMA" if op == "fused_ema_adam" else "stock TF"
            label = {"limit": "RMW copy (limit)", "stock": stock, "keras": "Keras AdamW(use_ema)"}.get(who, who)
            ax.plot([p["size"] for p in sel], [p["ns_per_element"] for p in sel], marker="o", label=label, **style)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("elements")
        ax.set_ylabel("ns per element")
        ax.set_title(f"{'PowerSign' if op == 'power_sign' else 'FusedEmaAdam'} {dtype}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--no-sweep", action="store_true", help="only the table")
    parser.add_argument("--huge-pages", action="store_true",
                        help=f"run with GLIBC_TUNABLES={HUGE_PAGES_TUNABLE}, so TF's tensors are on 2 MB pages")
    args = parser.parse_args()
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    if args.huge_pages and HUGE_PAGES_TUNABLE not in tunables:  # glibc reads its tunables at start: start again
        env = dict(os.environ, GLIBC_TUNABLES=":".join(filter(None, [tunables, HUGE_PAGES_TUNABLE])))
        os.execve(sys.executable, [sys.executable, "-m", "bench.bench_speed", *sys.argv[1:]], env)
    os.makedirs(RESULTS, exist_ok=True)
    huge_pages = tf_huge_pages()
    print(f"{os.cpu_count()} CPUs; medians of {args.repeats} calls in tf.functions, in random order each round")
    rows = table(args.size, args.repeats, huge_pages)
    print_table(rows, huge_pages)
    result = {"isa": tf_plugin.isa(), "tf_huge_pages": huge_pages, "rows": rows}
    if not args.no_sweep:
        result["sweep"] = sweep(max(3, args.repeats // 2))
        png = os.path.join(RESULTS, "speed.png")
        plot(result["sweep"], png)
        print(f"wrote {png}")
    pages = "_huge_pages" if huge_pages else ""
    with open(os.path.join(RESULTS, f"speed_{args.size}{pages}.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
