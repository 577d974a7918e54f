"""A .keras model with our optimizers saves in one process and loads in a fresh one after a plain
`import tf_plugin` (nothing else of ours imported), with every sign decay, and training continues identically."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import ROOT

SAVE = """
import sys
import keras, numpy as np
from tf_plugin import sign_decay
from tf_plugin.optimizers import FusedEmaAdam, PowerSign
from tests.helpers.models import classification_data, small_model
OPTIMIZERS = {
    "powersign-linear": lambda: PowerSign(0.02, sign_decay=sign_decay.get_linear_decay_fn(30)),
    "powersign-cosine": lambda: PowerSign(0.02, sign_decay=sign_decay.get_cosine_decay_fn(30, 0.5, 0.9)),
    "powersign-restart": lambda: PowerSign(0.02, sign_decay=sign_decay.get_restart_decay_fn(30, 2, 0.8)),
    "powersign-named": lambda: PowerSign(0.02, sign_decay="cosine", decay_steps=30),
    "fused_ema_adam": lambda: FusedEmaAdam(0.01, weight_decay=0.01, ema_decay=0.9, use_ema=True),
}
name, folder = sys.argv[1], sys.argv[2]
x, y = classification_data(5, n=64)
model = small_model()
model.compile(optimizer=OPTIMIZERS[name](), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False)
model.save(f"{folder}/model.keras")
model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False)
np.savez(f"{folder}/continued.npz", *model.get_weights())
"""

LOAD = """
import sys
import keras, numpy as np
import tf_plugin  # the only import of ours: it registers the optimizers and sign decays
from tests.helpers.models import classification_data
folder = sys.argv[1]
model = keras.models.load_model(f"{folder}/model.keras")
x, y = classification_data(5, n=64)
model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False)
want = np.load(f"{folder}/continued.npz")
for k, w in enumerate(model.get_weights()):
    np.testing.assert_array_equal(w, want[f"arr_{k}"])
print(type(model.optimizer).__name__, getattr(model.optimizer, "sign_decay", None))
"""


def _run(code: str, *args: str) -> str:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": ROOT}
    result = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.parametrize("name", ["powersign-linear", "powersign-cosine", "powersign-restart", "powersign-named",
                                  "fused_ema_adam"])
def test_keras_file_loads_in_a_fresh_process_after_import_tf_plugin(name, tmp_path):
    _run(SAVE, name, str(tmp_path))
    out = _run(LOAD, str(tmp_path))
    assert out.split()[0] in ("PowerSign", "FusedEmaAdam")
    if "powersign" in name and name != "powersign-named":
        assert "SignDecay(decay_steps=30" in out


def test_sign_decays_are_keras_serializable():
    import keras

    from tf_plugin import sign_decay

    for decay in (sign_decay.get_linear_decay_fn(10), sign_decay.get_cosine_decay_fn(10, 1.5, 0.7),
                  sign_decay.get_restart_decay_fn(10, 3)):
        revived = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(decay))
        assert revived == decay and revived is not decay
        np.testing.assert_array_equal([float(revived(t)) for t in range(12)], [float(decay(t)) for t in range(12)])


@pytest.mark.parametrize("flat_state", [True, False])
def test_ema_slots_before_the_first_step(flat_state):
    import keras
    import tensorflow as tf

    from tests.helpers.models import small_model
    from tf_plugin.optimizers import FusedEmaAdam

    model = small_model()
    opt = FusedEmaAdam(flat_state=flat_state)
    with pytest.raises(ValueError, match=r"no EMA slots yet.*opt.build\(model.trainable_variables\)"):
        opt.ema_variable(model.trainable_variables[0])
    before = [w.copy() for w in model.get_weights()]
    opt.swap_ema_weights(model.trainable_variables)  # builds the slots: the averages start as the weights
    for w, b in zip(model.get_weights(), before):
        np.testing.assert_array_equal(w, b)
    np.testing.assert_array_equal(opt.ema_variable(model.trainable_variables[0]).numpy(), before[0])
    # Per-variable state: the slot Variable; flat state: the variable's part of the flat s, as a tensor.
    assert isinstance(opt.ema_variable(model.trainable_variables[1]), tf.Tensor if flat_state else keras.Variable)
