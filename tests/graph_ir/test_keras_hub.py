"""keras-hub's backbones (small random-init configs, tests/helpers/keras_hub_models.py) with a classification head,
trained with FusedEmaAdam: each step lowered whole, saved as .air and loaded back, run K = 2 steps in graph_ir.Session
beside TensorFlow.

The rule (test_applications.py's): the first call's gradients, both sides on the same weights, within 1e-4 of the
largest gradient, the loss within 1e-4; after K steps every variable and slot within 1e-4 of its own scale. A variable
whose exact gradient is 0 (an attention key bias: softmax is invariant to it) holds only rounding noise, which Adam's
normalization blows up to a step of lr on either side; it is judged by the gradient rule, not dropped."""

from __future__ import annotations

import os

import keras
import numpy as np
import pytest

import graph_ir
from tests.helpers import keras_hub_models  # keras-hub: a pinned test dependency (scripts/setup_env.sh)
from tests.helpers.lowering import captured, session_values, state_name
from tests.helpers.train_steps import scaled_difference

K = 2
TOLERANCE = 1e-4
MIXED_TOLERANCE = 2e-2
NOISE = 1e-5  # a gradient this small against the largest one is rounding noise of an exact zero
TEXT = ["Bert", "DistilBert", "Roberta", "Albert", "Electra", "DebertaV3", "GPT2", "GPTNeoX", "OPT", "Llama",
        "Llama3", "Mistral", "Phi3", "Qwen", "Qwen2", "Falcon", "Bloom", "Bart", "Whisper", "Mixtral", "QwenMoe",
        "Gemma", "Gemma2", "Gemma3", "Qwen3", "Qwen3Moe", "T5", "RoformerV2", "CLIP", "FNet"]
VISION = ["ViT", "DeiT", "DINOV2", "MiT", "ResNet", "CSPNet", "SwinTransformer"]


def _compare(name: str, folder: str, tolerance: float = TOLERANCE) -> None:
    step, specs, batch, model, optimizer, trained = keras_hub_models.gradient_step(name)
    step(*batch(-1))  # builds everything, as the first step of fit does
    graph = graph_ir.from_tensorflow(step, *specs)
    path = os.path.join(folder, f"{name}.air")
    graph.save(path)
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.load(path))
    for k in range(K):
        feeds = batch(k)
        ge_loss, *ge_grads = session.run_graph(0, feeds)
        tf_loss, tf_grads = step(*feeds)
        tf_grads = [g.numpy() for g in tf_grads]
        if k == 0:
            largest = max(float(np.max(np.abs(g), initial=0)) for g in tf_grads)
            worst = max(float(np.max(np.abs(a - b), initial=0)) for a, b in zip(ge_grads, tf_grads))
            assert worst <= tolerance * largest, (name, worst / largest)
            noise = [np.abs(g) <= NOISE * largest for g in tf_grads]  # per element: a fused q/k/v bias has both
        assert abs(ge_loss - tf_loss.numpy()) <= tolerance * max(abs(tf_loss.numpy()), 1.0), name
    noise_of = {graph.variable_name(v): mask for v, mask in zip(trained, noise) if mask.any()}
    differences = {}
    for v in captured(graph, [*model.variables, *optimizer.variables]):
        want = np.asarray(v.numpy())
        (got,) = session_values(graph, session, [v])
        parts = graph.flat_state_parts(v) if state_name(graph, v) not in graph.nodes else []
        # A flat slot is judged per model variable, as the variable itself: noise elements left out.
        pieces = [(name.rsplit("/", 1)[0], name.split("/", 2)[-1], offset, shape) for name, offset, shape in parts] \
            or [(state_name(graph, v), state_name(graph, v), 0, want.shape)]
        for label, owner, offset, shape in pieces:
            size = int(np.prod(shape))
            g, w = got.reshape(-1)[offset:offset + size], want.reshape(-1)[offset:offset + size]
            keep = ~noise_of[owner].reshape(-1) if owner in noise_of and noise_of[owner].size == size else slice(None)
            differences[f"{label}:{owner}"] = scaled_difference(g[keep], w[keep])
    assert max(differences.values()) <= tolerance, sorted(differences.items(), key=lambda kv: -kv[1])[:3]


@pytest.mark.parametrize("name", TEXT)
def test_text_backbone_trains_as_tf(name, tmp_path):
    _compare(name, str(tmp_path))


@pytest.mark.parametrize("name", VISION)
def test_vision_backbone_trains_as_tf(name, tmp_path):
    _compare(name, str(tmp_path))


@pytest.mark.parametrize("name", ["Bert", "Llama"])
def test_mixed_bfloat16_transformer_trains_as_tf(name, tmp_path):
    """How transformers are trained on Ascend: bfloat16 compute, float32 variables (2e-2, docs/lowering.md's bound)."""
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        _compare(name, str(tmp_path), MIXED_TOLERANCE)
    finally:
        keras.mixed_precision.set_global_policy("float32")
