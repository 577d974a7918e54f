"""`python -m graph_ir ops`: the table of every TF op type graph_ir.from_tensorflow lowers, with its GE op(s).

To see what a step of yours lacks before lowering it, call graph_ir.missing_ops(step, *specs) (a tf.function needs
its arguments to be traced, which a command line cannot give)."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graph_ir", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("ops", help="print every TF op type the lowering knows, with its GE op(s) and family")
    parser.parse_args(argv)
    from graph_ir.lowering.report import format_op_table  # imports TensorFlow

    print(format_op_table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
