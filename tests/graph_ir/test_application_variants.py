"""Every deeper or wider keras.applications variant (ResNet152, DenseNet201, EfficientNetB1-B7, EfficientNetV2B1-L,
ConvNeXtSmall-XLarge, NASNetLarge, ...: the table's `variant_of` rows, whose K-step comparison in
test_applications.py runs only with GRAPH_IR_ALL_APPLICATIONS=1) lowers: its training step (the same step as
test_applications.py: weights=None, 10 classes, the smallest input it accepts, batch 1, FusedEmaAdam) holds no TF
op without a lowering (graph_ir.missing_ops is empty), and graph_ir.from_tensorflow lowers it to a graph that
verifies and captures every trainable variable.

Measured here (2 shared cores; one process per variant, nice; build = the model, its BatchNormalization calibration
and one TF step, which dominates; lower = missing_ops + from_tensorflow + verify; peak = the process's peak RSS):
MEASURED. All 23 lower, none misses an op. Peak memory is the TF side's (about 50 bytes per parameter: the weights,
FusedEmaAdam's state, the gradients); the lowering adds about 15 %. The variants over the slow tier's budget (about
60 s and 4 GiB each) run only with GRAPH_IR_ALL_APPLICATIONS=1, their measurement as the skip reason (TOO_HEAVY):
ConvNeXtBase/Large/XLarge, EfficientNetV2L and NASNetLarge. The 18 others took 6.5 minutes here (shared, nice), a
fresh process each, 3.9 GiB at most.
"""

from __future__ import annotations

import pytest

from tests.helpers import application_processes, applications
from tests.helpers.applications import APPLICATIONS

BATCH = 1

# label: (seconds to build and run one TF step, seconds to find missing ops + lower + verify, peak RSS in GiB,
# lowered nodes), measured one process per variant, batch 1, on the shared machine. No variant misses an op.
MEASURED: dict[str, tuple[float, float, float, int]] = {
    "ResNet152": (14, 3, 3.6, 9310),
    "ResNet101V2": (22, 6, 2.7, 5154),
    "ResNet152V2": (13, 3, 3.6, 7670),
    "DenseNet169": (12, 1, 1.4, 7723),
    "DenseNet201": (14, 1, 1.7, 9179),
    "EfficientNetB1": (9, 1, 1.1, 6286),
    "EfficientNetB2": (9, 1, 1.2, 6286),
    "EfficientNetB3": (12, 1, 1.3, 7120),
    "EfficientNetB4": (12, 1, 1.7, 8788),
    "EfficientNetB5": (15, 2, 2.3, 10680),
    "EfficientNetB6": (18, 3, 2.9, 12348),
    "EfficientNetB7": (24, 5, 3.9, 15074),
    "EfficientNetV2B1": (8, 1, 1.1, 6200),
    "EfficientNetV2B2": (9, 1, 1.2, 6478),
    "EfficientNetV2B3": (11, 1, 1.4, 7590),
    "EfficientNetV2S": (14, 2, 1.8, 9502),
    "EfficientNetV2M": (20, 4, 3.4, 13690),
    "EfficientNetV2L": (32, 9, 6.5, 18992),
    "ConvNeXtSmall": (16, 3, 3.4, 8427),
    "ConvNeXtBase": (19, 8, 5.4, 8427),
    "ConvNeXtLarge": (22, 16, 11.0, 8427),
    "ConvNeXtXLarge": (58, 34, 19.0, 8427),
    "NASNetLarge": (22, 6, 4.9, 13058),
}
MEMORY_BUDGET_GIB = 4.2  # per variant in the slow tier: about 4 GiB of peak RSS
TIME_BUDGET_S = 60  # per variant in the slow tier: build + lower

# Variants over the slow tier's budget: the measurement that puts them there.
TOO_HEAVY: dict[str, str] = {
    label: f"measured: {build + lower:.0f} s, peak {peak:.1f} GiB (over {MEMORY_BUDGET_GIB} GiB), {nodes} nodes; "
    "no op missing"
    for label, (build, lower, peak, nodes) in MEASURED.items()
    if peak > MEMORY_BUDGET_GIB or build + lower > TIME_BUDGET_S
}

VARIANTS = [label for label, app in APPLICATIONS.items() if app.variant_of]


def _marks(label: str) -> list:
    marks = [pytest.mark.slow]
    if label in TOO_HEAVY:
        reason = f"too heavy for the slow tier ({TOO_HEAVY[label]}); set GRAPH_IR_ALL_APPLICATIONS=1 to run it"
        marks.append(pytest.mark.skipif(not applications.ALL, reason=reason))
    return marks


@pytest.mark.parametrize("label", [pytest.param(label, marks=_marks(label)) for label in VARIANTS])
def test_variant_lowers(label):
    """In a fresh process each (in one process the 18 reached 9 GiB of peak RSS, clear_session and gc between
    them notwithstanding, against 3.9 GiB for the largest alone): no op
    missing, a verified graph of the whole network holding every trainable variable, and a peak RSS in proportion
    to the measured one."""
    summary = application_processes.lowering_summary_in_subprocess(label, BATCH)
    assert summary["missing"] == {}
    assert summary["uncaptured"] == []
    assert summary["nodes"] > 1000, summary["nodes"]  # the whole network, not a stub
    assert summary["peak"] <= 1.5 * MEASURED[label][2] + 0.5, summary


def test_every_variant_is_measured():
    """The tables above cover every variant of the model table, and only those."""
    assert set(MEASURED) == set(VARIANTS)
    assert set(TOO_HEAVY) <= set(VARIANTS)
