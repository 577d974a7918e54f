"""docs/lowering.md's lowering table states, for every TF op the op families lower, its GE op and its tolerance:
checked against the lowerings themselves (graph_ir/lowering/ops) and the tolerances the per-op tests assert."""

from __future__ import annotations

import os
import re

from graph_ir.lowering import ops
from tests.graph_ir import (
    test_activation_ops,
    test_conv_ops,
    test_depthwise_ops,
    test_fft_ops,
    test_grouped_conv,
    test_math_ops,
    test_random_ops,
    test_slicing_ops,
    test_tile_gather,
)
from tests.graph_ir.test_family_ops import CASES, PRODUCT, ROUNDING
from tests.helpers import ROOT

PAGE = os.path.join("docs", "lowering.md")
SECTION = "## Tolerances and the lowering table"
_TOLERANCES = {"bitwise": 0, "2e-6": ROUNDING, "1e-5": PRODUCT}


def _table() -> dict[str, tuple[str, str]]:
    """TF op -> (GE op, tolerance), from docs/lowering.md's table."""
    with open(os.path.join(ROOT, PAGE)) as f:
        text = f.read()
    assert SECTION in text, f"{PAGE} has no section {SECTION!r}"
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


# The per-op test files whose CASES are named "<TF op>-<case>" -> (..., tolerance): one op may have several cases.
CASE_TABLES = (test_conv_ops, test_activation_ops, test_slicing_ops, test_depthwise_ops, test_grouped_conv,
               test_tile_gather, test_math_ops, test_fft_ops)
# tests/graph_ir/test_random_ops.py asserts the normals within ROUNDING and every other op it tests bitwise
_RANDOM_NORMALS = ("StatelessRandomNormalV2", "StatelessTruncatedNormalV2", "RandomStandardNormal", "TruncatedNormal")


def _asserted() -> dict[str, float]:
    """TF op -> the largest tolerance its per-op tests assert."""
    asserted = {tf_op: tolerance for tf_op, (_, _, tolerance) in CASES.items()}
    for module in CASE_TABLES:
        for case, (*_, tolerance) in module.CASES.items():
            tf_op = case.split("-")[0]
            asserted[tf_op] = max(asserted.get(tf_op, 0), tolerance)
    for tf_op in test_random_ops.TESTED:
        asserted[tf_op] = test_random_ops.ROUNDING if tf_op in _RANDOM_NORMALS else 0
    return asserted


def test_the_tolerances_are_those_the_tests_assert():
    """Each row of an op some per-op test covers states the largest tolerance those tests assert for it."""
    table = _table()
    asserted = _asserted()
    assert test_random_ops.ROUNDING == ROUNDING
    assert set(asserted) <= set(table), sorted(set(asserted) - set(table))
    wrong = {tf_op: (table[tf_op][1], tolerance) for tf_op, tolerance in asserted.items()
             if _TOLERANCES[table[tf_op][1]] != tolerance}
    assert not wrong, wrong  # TF op: (the table's tolerance, the largest its tests assert)
    assert all(re.fullmatch(r"bitwise|2e-6|1e-5", t) for _, t in table.values())
