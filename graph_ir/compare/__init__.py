"""Where a lowered step departs from TensorFlow: node by node (docs/compare.md).

- compare_step(fn, *inputs): runs the step once in TF and once in graph_ir.Session on the same inputs and state.
  One row per GE node output that stands for a TF tensor (the GE node has the TF node's name), in execution order,
  then one per variable the step holds, after the step: msaccucmp's metrics (graph_ir/compare/metrics.py), the
  scale error max |GE - TF| / max |TF| and the TF op's tolerance from the lowering table
  (graph_ir/compare/tolerances.py).
- Accumulated, a node runs on the Session's own inputs; it is within when its scale error is at most its tolerance
  plus the largest scale error among its inputs (the error it carried in). Isolated, it runs again on TF's values
  of its inputs (a Const input keeps the graph's value) and is within when its scale error is at most its
  tolerance; a Const that stands for a TF tensor is compared as its own isolated run. Out of tolerance isolated, the
  node runs once more in float64 (its executor on the widened inputs): it is a defect only if GE is out of tolerance
  of that exact value too (or TF is farther from it than rounding explains); else TF is the farther ("tf-farther"). Out of tolerance isolated is a defect;
  within isolated but out accumulated, the node amplifies earlier rounding.
- The first departure is the first row out of tolerance whose inputs were all within; the first defect the first
  row out of tolerance isolated.
- CANN's dump files (graph_ir/compare/dump.py): write_dumps writes a Session's run as GE's dump does;
  compare_dumps compares a folder of them (an NPU's) with the Session by GE node name, accumulated and isolated
  (each node run on the dump's values of its inputs).
- Only compare_step imports TensorFlow, when first used: reading and comparing dumps does not.
- Functional nodes (If, Case, While) are compared on their outputs, accumulated only; the nodes of their bodies
  are not rows.
"""

from graph_ir.compare.dump import DumpFile, read_dump, read_dump_folder, write_dump
from graph_ir.compare.metrics import COLUMNS, Metrics, compute
from graph_ir.compare.npu import compare_dumps, write_dumps
from graph_ir.compare.report import Comparison, Row


def __getattr__(name: str):
    """compare_step, imported when first used: it (and graph_ir/compare/tf_values.py) needs TensorFlow; reading and
    comparing dumps does not."""
    if name == "compare_step":
        from graph_ir.compare.step import compare_step

        return compare_step
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["COLUMNS", "Comparison", "DumpFile", "Metrics", "Row", "compare_dumps", "compare_step", "compute",
           "read_dump", "read_dump_folder", "write_dump", "write_dumps"]
