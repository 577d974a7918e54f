"""Small random-init keras-hub backbones with a classification head, and their FusedEmaAdam training step written
as users write it, for tests/graph_ir/test_keras_hub.py. Every backbone is built from one table of tiny sizes (one
layer, 16 hidden units, a vocabulary of 64), fed token ids and masks of a fixed batch and length."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import keras
import keras_hub
import numpy as np
import tensorflow as tf

from tf_plugin.optimizers import FusedEmaAdam

BATCH, LENGTH, CLASSES = 2, 8, 3
# Constructor arguments by name; a backbone takes those of its signature.
SIZES = {"vocabulary_size": 64, "vocab_size": 64, "num_layers": 1, "num_heads": 2, "num_query_heads": 2,
         "num_key_value_heads": 1, "num_attention_heads": 2, "hidden_dim": 16, "intermediate_dim": 32,
         "embedding_dim": 16, "head_dim": 8, "head_size": 8, "num_experts": 4, "moe_intermediate_dim": 16,
         "shared_expert_intermediate_dim": 16, "max_sequence_length": 16, "top_k": 2, "num_experts_per_tok": 2}


def backbone(name: str) -> keras.Model:
    """keras_hub.models.<name>Backbone at the sizes of SIZES."""
    cls = getattr(keras_hub.models, f"{name}Backbone")
    params = inspect.signature(cls.__init__).parameters
    return cls(**{k: v for k, v in SIZES.items() if k in params})


def classifier(name: str) -> tuple[keras.Model, list[str]]:
    """The backbone under mean pooling and a Dense head (float32, as Keras's task heads are); its input names."""
    body = backbone(name)
    inputs = {i.name.split(":")[0]: keras.Input((LENGTH,), dtype=i.dtype, name=i.name.split(":")[0])
              for i in body.inputs}
    features = body(inputs)
    if isinstance(features, dict):  # T5: the decoder's output, which reads the encoder's
        features = features.get("sequence_output", features.get("decoder_sequence_output"))
    pooled = keras.layers.GlobalAveragePooling1D(dtype="float32")(features)
    return keras.Model(inputs, keras.layers.Dense(CLASSES, dtype="float32")(pooled)), list(inputs)


def gradient_step(name: str, seed: int = 3) -> tuple[Callable, list[tf.TensorSpec], Callable, keras.Model,
                                                     FusedEmaAdam, list]:
    """The model's training step by position (its inputs, then labels), returning the loss and the gradients; the
    specs; batch(k); the model; the optimizer (built); the variables the gradients are of (filled when the step is
    first traced)."""
    keras.utils.set_random_seed(seed)
    model, names = classifier(name)
    optimizer = FusedEmaAdam(1e-3, weight_decay=0.01)
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    trained: list = []

    @tf.function
    def step(*args):
        with tf.GradientTape() as tape:
            loss = loss_fn(args[-1], model(dict(zip(names, args[:-1])), training=True))
        # Dense, as the embeddings' IndexedSlices reach the optimizer; variables the head does not reach (BERT's
        # pooler, Llama's reverse embedding) have none.
        pairs = [(tf.convert_to_tensor(g), v) for g, v in zip(tape.gradient(loss, model.trainable_variables),
                                                             model.trainable_variables) if g is not None]
        optimizer.apply_gradients(pairs)
        trained[:] = [v for _, v in pairs]
        return loss, [g for g, _ in pairs]

    specs = [tf.TensorSpec((BATCH, LENGTH), model.input[n].dtype) for n in names]
    specs.append(tf.TensorSpec((BATCH,), tf.int32))
    rng = np.random.default_rng(seed)

    def batch(k: int) -> list[np.ndarray]:
        feeds = []
        for n, spec in zip(names, specs):
            if "mask" in n:  # the last position padded in one row
                mask = np.ones((BATCH, LENGTH), spec.dtype.as_numpy_dtype)
                mask[0, -1] = 0
                feeds.append(mask)
            else:
                feeds.append(rng.integers(1 if "token" in n else 0, 2 if "segment" in n else SIZES["vocabulary_size"],
                                          (BATCH, LENGTH)).astype(spec.dtype.as_numpy_dtype))
        return [*feeds, rng.integers(0, CLASSES, BATCH).astype(np.int32)]

    return step, specs, batch, model, optimizer, trained
