"""`python -m graph_ir ops`: the table of every TF op type graph_ir.from_tensorflow lowers, with its GE op(s).

The table is printed from graph_ir/cli/_op_rows.py, a copy of graph_ir.lowering.report.op_table() kept so that `ops`
answers at once, without importing TensorFlow (tests/graph_ir/test_cli.py checks the copy against the lowering).
After adding a lowering, regenerate it:  python -m graph_ir ops --regenerate"""

from __future__ import annotations

import argparse
import os

HELP = "print every TF op type the lowering knows, with its GE op(s) and family"
ROWS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_op_rows.py")


def add(parser: argparse.ArgumentParser) -> None:
    # for the project's developers: rewrite _op_rows.py from the lowering (imports TensorFlow)
    parser.add_argument("--regenerate", action="store_true", help=argparse.SUPPRESS)


def format_rows(rows) -> str:
    """The table as graph_ir.lowering.report.format_op_table prints it."""
    rows = [("TF op", "GE op", "family"), *rows]
    widths = [max(len(r[k]) for r in rows) for k in range(2)]
    return "\n".join(f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c}".rstrip() for a, b, c in rows)


def run(args: argparse.Namespace) -> int:
    if args.regenerate:
        return _regenerate()
    from graph_ir.cli._op_rows import ROWS

    print(format_rows(ROWS))
    return 0


def rows_module_text(rows) -> str:
    lines = ['"""Written by `python -m graph_ir ops --regenerate` from graph_ir.lowering.report.op_table(): (TF op type,',
             'GE op(s), family) for `python -m graph_ir ops`, which prints it without importing TensorFlow."""',
             "", "ROWS = ("]
    lines += [f"    {tuple(r)!r}," for r in rows]
    return "\n".join(lines + [")", ""])


def _regenerate() -> int:
    from graph_ir.cli.tf_quiet import import_tensorflow

    import_tensorflow()
    from graph_ir.lowering.report import op_table

    rows = op_table()
    with open(ROWS_FILE, "w") as f:
        f.write(rows_module_text(rows))
    print(f"wrote {ROWS_FILE}: {len(rows)} rows")
    return 0
