"""The README's lowering table states, for every TF op the op families lower, its GE op and its tolerance: checked
against the lowerings themselves (graph_ir/lowering/ops) and the tolerances the per-op tests assert."""

from __future__ import annotations

import os
import re

from graph_ir.lowering import ops
from tests.graph_ir.test_conv_ops import CASES as CONV_CASES
from tests.graph_ir.test_family_ops import CASES, PRODUCT, ROUNDING
from tests.helpers import ROOT

SECTION = "## Lowering whole training steps to GE"
_TOLERANCES = {"bitwise": 0, "2e-6": ROUNDING, "1e-5": PRODUCT}


def _table() -> dict[str, tuple[str, str]]:
    """TF op -> (GE op, tolerance), from the README's table."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    assert SECTION in text, f"the README has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[2] not in _TOLERANCES:
            continue
        for item in cells[1].split(","):
            tf_op, _, ge_op = (s.strip() for s in item.partition("→"))
            assert tf_op not in rows, f"{tf_op} is listed twice"
            rows[tf_op] = (ge_op or tf_op, cells[2])
    return rows


def test_the_table_lists_every_lowered_op_with_its_ge_op():
    table = _table()
    assert set(table) == set(ops.LOWERINGS), (sorted(set(ops.LOWERINGS) - set(table)),
                                              sorted(set(table) - set(ops.LOWERINGS)))
    for tf_op, (ge_op, _) in table.items():
        assert ops.LOWERINGS[tf_op].ge_type == ge_op, tf_op


def test_the_tolerances_are_those_the_tests_assert():
    table = _table()
    for tf_op, (_, _, tolerance) in CASES.items():
        assert _TOLERANCES[table[tf_op][1]] == tolerance, tf_op
    for case, (_, _, tolerance) in CONV_CASES.items():  # the table states the largest of an op's cases
        assert _TOLERANCES[table[case.split("-")[0]][1]] >= tolerance, case
    assert all(re.fullmatch(r"bitwise|2e-6|1e-5", t) for _, t in table.values())
