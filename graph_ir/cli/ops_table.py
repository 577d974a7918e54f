"""`python -m graph_ir ops`: the table of every TF op type graph_ir.from_tensorflow lowers, with its GE op(s)."""

from __future__ import annotations

import argparse

HELP = "print every TF op type the lowering knows, with its GE op(s) and family"


def add(parser: argparse.ArgumentParser) -> None:
    del parser  # no options


def run(args: argparse.Namespace) -> int:
    from graph_ir.lowering.report import format_op_table  # imports TensorFlow

    print(format_op_table())
    return 0
