"""graph_ir.compare on keras.applications ResNet50 and MobileNetV2 in training mode at batch 2 (32x32, FusedEmaAdam,
weights=None): every node is within its tolerance isolated, so nothing in the lowering is wrong on its own; the
first departure amplifies earlier rounding in a BatchNormalization's statistics (docs/compare.md explains it). The
chaotic applications (frozen BatchNormalization, tests/helpers/applications.py) have no defect either."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from graph_ir.compare import compare_step
from tests.helpers import applications, train_steps
from tf_plugin.optimizers import FusedEmaAdam


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ResNet50", "MobileNetV2"])
def test_where_an_application_departs(name):
    keras.utils.set_random_seed(0)
    model = getattr(keras.applications, name)(weights=None, input_shape=(32, 32, 3), classes=10)
    optimizer = FusedEmaAdam(1e-3)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()

    step = train_steps.train_step(model, loss_fn, optimizer)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 32, 32, 3)).astype(np.float32), rng.integers(0, 10, 2).astype(np.int32)
    step(x, y)
    comparison = compare_step(step, x, y)
    print(comparison.summary())
    assert comparison.first_defect is None, comparison.summary()
    assert sum(r.isolated is not None for r in comparison.rows) > 2000
    first = comparison.first_departure
    assert first is not None and first.verdict == "amplifies" and first.within_isolated
    assert "bn" in first.ge_node.lower() and "/batchnorm/" in first.ge_node  # BatchNormalization's statistics
    # Every node that departs amplifies (forward, gradients) or is a variable after the step.
    assert {r.verdict for r in comparison.rows if not r.within} <= {"amplifies", "departs"}
    assert all(r.ge_type == "Variable" for r in comparison.rows if r.verdict == "departs")


@pytest.mark.slow
@pytest.mark.parametrize("label", ["MobileNetV3Small", "Xception", "EfficientNetB0"])
def test_chaotic_applications_have_no_defect(label):
    """The chaotic steps that test_applications.py holds to TF's own spread (tests/helpers/tf_spread.py), checked
    where chaos cannot blur it: every node run on TF's own values of its inputs is within its tolerance."""
    app = applications.APPLICATIONS[label]
    _, _, step, _ = applications.training_step(app)
    x, y = applications.batches(3, app.size)(0)
    comparison = compare_step(step, x, y)
    assert comparison.first_defect is None, comparison.summary()
    assert sum(r.isolated is not None for r in comparison.rows) > 500
