"""Writes docs/coverage.md: what the GE lowering covers, generated from the lowering tables themselves
(graph_ir.lowering.report.op_table: the family lowerings of graph_ir.lowering.ops.LOWERINGS, the optimizer,
variable and plumbing tables; each TF op with the GE op it becomes and the tolerance docs/lowering.md's lowering table
states for it) and from the test tables (tests/helpers/applications.py: every keras.applications model;
tests/graph_ir/test_keras_layers.py: every Keras layer). tests/graph_ir/test_applications.py checks that the
committed file equals what this script writes.

Usage: python scripts/coverage_report.py [--check]   (--check: exit 1 if docs/coverage.md is not current)"""

from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "coverage.md")
TABLE_PAGE = os.path.join("docs", "lowering.md")
TABLE_SECTION = "## Tolerances and the lowering table"


def readme_tolerances() -> dict[str, str]:
    """TF op -> the tolerance docs/lowering.md's lowering table states for it (bitwise, 2e-6, 1e-5, ...)."""
    with open(os.path.join(ROOT, TABLE_PAGE)) as f:
        section = f.read().split(TABLE_SECTION, 1)[-1].split("\n## ", 1)[0]
    out = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("family", "---"):
            continue
        for item in cells[1].split(","):
            out[item.partition("→")[0].strip()] = cells[2]
    return out


def _ops_section() -> list[str]:
    from graph_ir.lowering.report import op_table

    tolerances = readme_tolerances()
    rows = op_table()
    lines = ["## TF ops and the GE ops they become", "",
             (f"{len(rows)} TF op types (`python -m graph_ir ops` prints the same table). Tolerance: what docs/lowering.md's "
             "lowering table states for the op against TensorFlow (relative to the output's scale); \"—\" for "
             "plumbing, variable and optimizer ops (folded, moved or our own kernels, bitwise TF's)."), "",
             "| TF op | GE op | family | tolerance |", "| --- | --- | --- | --- |"]
    lines += [f"| {tf_op} | {ge_op} | {family} | {tolerances.get(tf_op, '—')} |" for tf_op, ge_op, family in rows]
    return lines


def _models_section() -> list[str]:
    from tests.helpers.applications import APPLICATIONS, GRADIENT_TOLERANCE, VARIABLE_TOLERANCE

    lines = ["## keras.applications models", "",
             ("tests/graph_ir/test_applications.py: weights=None, 10 classes, batch 2, the smallest input each accepts; "
             f"one training step (sparse cross-entropy, FusedEmaAdam) lowered and run K = 2 steps beside TensorFlow: "
             f"one call's gradients within {GRADIENT_TOLERANCE:g} of the largest gradient, every variable within "
             f"{VARIABLE_TOLERANCE:g} of its scale after K steps (the test module's docstring says why)."), "",
             "| model | input | lowers | test | tolerances (gradients, variables) |", "| --- | --- | --- | --- | --- |"]
    for app in APPLICATIONS.values():
        status = "yes" if app.refusal is None and app.mismatch is None else (
            f"no: {app.refusal}" if app.refusal else f"lowers, does not match yet: {app.mismatch}")
        if app.incomparable:
            status = f"yes; values not compared: {app.incomparable}"
        if app.variant_of:  # not run by default: its family's status
            status = f"as {app.variant_of} (same code and ops; not measured)"
        run = "GRAPH_IR_ALL_APPLICATIONS=1" if app.variant_of else ("slow" if app.slow else "default")
        variables = "—" if app.variable_tolerance == float("inf") else f"{app.variable_tolerance:g}"
        tolerances = "—" if app.incomparable else (f"{app.gradient_tolerance:g}, {variables}" +
                                                   (f": {app.looser}" if app.looser else ""))
        lines.append(f"| {app.label} | {app.size}×{app.size}×3 | {status} | {run} | {tolerances} |")
    return lines


def _layers_section() -> list[str]:
    from tests.helpers.keras_layers import AUGMENTATIONS, CASES, LEFT_OUT, augmentation_refusal

    lines = ["## Keras layers", "",
             ("tests/graph_ir/test_keras_layers.py: a tiny model per layer, its training step lowered and run K = 2 "
             "steps beside TensorFlow (1e-5 of each variable's scale unless stated), or the refusal it gets."), "",
             "| layer | lowers |", "| --- | --- |"]
    statuses = {name: ("no: " + case.reason if case.refusal else
                       "yes" + (f" ({case.tolerance:g})" if case.tolerance != 1e-5 else ""))
                for name, case in CASES.items()}
    for name in AUGMENTATIONS:
        reason = augmentation_refusal(name)
        statuses[name] = "yes" if reason is None else f"no: {reason}"
    lines += [f"| {name} | {status} |" for name, status in sorted(statuses.items())]
    lines += ["", "Left out (not a layer a training step holds):", ""]
    lines += [f"- {name}: {reason}" for name, reason in sorted(LEFT_OUT.items())]
    return lines


def render() -> str:
    lines = ["# What lowers to GE", "",
             "Generated by scripts/coverage_report.py from the lowering tables and the test tables; do not edit.", ""]
    for section in (_ops_section(), _models_section(), _layers_section()):
        lines += [*section, ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/coverage.md is not current")
    options = parser.parse_args(argv)
    sys.path.insert(0, ROOT)
    text = render()
    if options.check:
        with open(OUT) as f:
            return 0 if f.read() == text else 1
    with open(OUT, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
