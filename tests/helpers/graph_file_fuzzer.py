"""The graph-file fuzzer: mutates real GE graphs (bytes and fields) and feeds them to graph_ir.loads, Session and
run_graph. The property: load raises only GraphError; add_graph and run_graph raise only GraphError, TypeError or
ValueError; nothing else, never a crash, memory within the parent's limit.

Run by tests/fuzz/test_fuzz_graph_files.py in a child process with an address-space limit:
    python -m tests.helpers.graph_file_fuzzer SEED CASES
It prints one JSON line of outcome counts; an unexpected exception prints the case and exits 1.
"""

from __future__ import annotations

import json
import sys
import traceback

import numpy as np

import graph_ir
from graph_ir import proto
from graph_ir.ir import registry
from tests.helpers.graphs import feeds_for, fused_ema_adam_graph, power_sign_graph

HOSTILE_EDGES = ["", ":", "a", "x:0", "grad:1", "grad:-1", "grad:-2", "grad:99999999999", "grad:\u0663", "grad:0:0",
                 "NetOutput:0", "update:7", "w:0", "fea:3", "c" * 300 + ":0"]
ODD_DIMS = [-1, -(2**62), 0, 1, 3, 2**31, 2**40, 2**62]
ATTR_FIELDS = ["i", "f", "b", "s", "dt"]


def _seeds() -> list[bytes]:
    graphs = [power_sign_graph(d) for d in ("float32", "float16", "bfloat16")]
    graphs += [fused_ema_adam_graph(d) for d in ("float32", "bfloat16")]
    return [g.serialize() for g in graphs]


def _mutate_bytes(data: bytes, rng: np.random.Generator) -> bytes:
    buf = bytearray(data)
    kind = rng.integers(4)
    if kind == 0:
        return bytes(buf[: rng.integers(len(buf))])
    if kind == 1:
        for _ in range(rng.integers(1, 8)):
            buf[rng.integers(len(buf))] ^= 1 << int(rng.integers(8))
        return bytes(buf)
    if kind == 2:
        at = rng.integers(len(buf))
        return bytes(buf[:at] + rng.integers(0, 256, rng.integers(1, 16), dtype=np.uint8).tobytes() + buf[at:])
    a, b = sorted(rng.integers(len(buf), size=2))
    return bytes(buf[:b] + buf[a:b] + buf[b:])


def _mutate_fields(data: bytes, rng: np.random.Generator) -> bytes:
    model = proto.ModelDef.FromString(data)
    ops = model.graph[0].op
    for _ in range(1 if rng.random() < 0.6 else rng.integers(2, 4)):
        op = ops[rng.integers(len(ops))]
        kind = rng.integers(16)
        if kind == 0 and op.input:
            op.input[rng.integers(len(op.input))] = HOSTILE_EDGES[rng.integers(len(HOSTILE_EDGES))]
        elif kind == 1 and op.input:
            del op.input[rng.integers(len(op.input))]
        elif kind == 2 and op.input:
            op.input.append(op.input[rng.integers(len(op.input))])
        elif kind == 3:
            op.type = rng.choice([*registry.REGISTRY, "ApplyAdam", ""])
        elif kind == 4 and op.output_desc:
            desc = op.output_desc[rng.integers(len(op.output_desc))]
            if desc.shape.dim:
                desc.shape.dim[rng.integers(len(desc.shape.dim))] = ODD_DIMS[rng.integers(len(ODD_DIMS))]
            else:
                desc.shape.dim.append(ODD_DIMS[rng.integers(len(ODD_DIMS))])
        elif kind == 5 and op.output_desc:
            op.output_desc[rng.integers(len(op.output_desc))].dtype = int(rng.choice([0, 1, 2, 9, 12, 27, 28, 999]))
        elif kind == 6:
            if op.output_desc and rng.integers(2):
                del op.output_desc[rng.integers(len(op.output_desc))]
            else:
                op.output_desc.add().CopyFrom(op.output_desc[0] if op.output_desc else proto.TensorDescriptor())
        elif kind == 7 and op.attr:
            key = rng.choice(sorted(op.attr))
            field = ATTR_FIELDS[rng.integers(len(ATTR_FIELDS))]
            setattr(op.attr[key], field, {"i": 7, "f": 0.5, "b": True, "s": b"\xff\x00", "dt": 4242}[field])
        elif kind == 8 and "value" in op.attr:
            tensor = op.attr["value"].t
            choice = rng.integers(3)
            if choice == 0:
                tensor.data = tensor.data[: rng.integers(len(tensor.data) + 1)]
            elif choice == 1:
                tensor.desc.shape.dim.append(ODD_DIMS[rng.integers(len(ODD_DIMS))])
            else:
                tensor.desc.dtype = int(rng.choice([3, 7, 11, 999]))
        elif kind == 9:
            op.name = rng.choice(["NetOutput", ops[0].name, "", "a:b", op.name + "_x"])
        elif kind == 10:
            a, b = rng.integers(len(ops), size=2)
            first, second = proto.OpDef(), proto.OpDef()
            first.CopyFrom(ops[a])
            second.CopyFrom(ops[b])
            ops[a].CopyFrom(second)
            ops[b].CopyFrom(first)
        elif kind == 11 and "value" in op.attr and op.attr["value"].t.data:
            raw = bytearray(op.attr["value"].t.data)  # values change, the length stays: NaN, Inf, huge, negative
            for _ in range(rng.integers(1, 4)):
                raw[rng.integers(len(raw))] ^= 1 << int(rng.integers(8))
            op.attr["value"].t.data = bytes(raw)
        elif kind == 12:
            floats = [k for k in op.attr if op.attr[k].WhichOneof("value") == "f"]
            if floats:
                op.attr[rng.choice(floats)].f = float(rng.choice([np.nan, np.inf, -1.0, 1.0, 1e-45, 0.0, 3e38]))
        elif kind == 13:
            ints = [k for k in op.attr if op.attr[k].WhichOneof("value") == "i"]
            if ints:
                op.attr[rng.choice(ints)].i = int(rng.choice([-1, 0, 1, 2, 5, 2**40]))
        elif kind == 14:
            order = [proto.OpDef.FromString(o.SerializeToString()) for o in ops]
            del ops[:]
            ops.extend(order[k] for k in rng.permutation(len(order)))
        else:
            ops.add().CopyFrom(op)
    return model.SerializeToString()


def run_case(seeds: list[bytes], seed: int) -> str:
    rng = np.random.default_rng(seed)
    data = seeds[rng.integers(len(seeds))]
    data = _mutate_bytes(data, rng) if rng.integers(3) == 0 else _mutate_fields(data, rng)
    try:
        graph = graph_ir.loads(data)
    except graph_ir.GraphError:
        return "load_error"
    session = graph_ir.Session(max_run_bytes=256 * 2**20)
    try:
        session.add_graph(0, graph)
        feeds = feeds_for(graph, rng)
        if feeds is None:
            return "too_large_to_feed"
        with np.errstate(all="ignore"):
            session.run_graph(0, feeds)
            session.run_graph(0, feeds)
    except (graph_ir.GraphError, TypeError, ValueError):
        return "run_error"
    graph_ir.loads(graph.serialize())  # whatever loads and runs also saves and reloads
    return "ran"


def main(first_seed: int, cases: int) -> int:
    seeds = _seeds()
    counts: dict[str, int] = {}
    for seed in range(first_seed, first_seed + cases):
        try:
            outcome = run_case(seeds, seed)
        except Exception:  # noqa: BLE001 - any other exception breaks the property: report the case
            print(f"case seed {seed} raised:\n{traceback.format_exc()}", flush=True)
            return 1
        counts[outcome] = counts.get(outcome, 0) + 1
    print(json.dumps({"cases": cases, **counts}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2])))
