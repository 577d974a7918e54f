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


# Backbones whose constructors take more than SIZES: their own tiny configurations.
IMAGE = (32, 32, 3)
OWN = {
    "ViT": {"image_shape": IMAGE, "patch_size": 8, "num_layers": 1, "num_heads": 2, "hidden_dim": 16,
            "mlp_dim": 32},
    "DeiT": {"image_shape": IMAGE, "patch_size": 8, "num_layers": 1, "num_heads": 2, "hidden_dim": 16,
             "intermediate_dim": 32},
    "DINOV2": {"image_shape": (28, 28, 3), "patch_size": 7, "num_layers": 1, "hidden_dim": 16, "num_heads": 2,
               "intermediate_dim": 32, "position_embedding_shape": (28, 28)},
    "ResNet": {"image_shape": IMAGE, "input_conv_filters": [64], "input_conv_kernel_sizes": [3],
               "stackwise_num_filters": [64, 64], "stackwise_num_blocks": [1, 1], "stackwise_num_strides": [1, 2],
               "block_type": "basic_block"},
    "CSPNet": {"image_shape": IMAGE, "stem_filters": 8, "stem_kernel_size": 3, "stem_strides": 2,
               "stackwise_depth": [1, 1], "stackwise_strides": [2, 2], "stackwise_num_filters": [8, 16],
               "block_type": "bottleneck_block", "stage_type": "dark"},
    "Gemma3": {"vocabulary_size": 64, "image_size": 16, "num_layers": 1, "num_query_heads": 2,
               "num_key_value_heads": 1, "hidden_dim": 16, "intermediate_dim": 32, "head_dim": 8},  # text only
    "SwinTransformer": {"image_shape": IMAGE, "embed_dim": 8, "depths": [2, 2], "num_heads": [1, 2],
                        "window_size": 4, "patch_size": 4},  # depth 2: shifted windows (Roll, slice updates)
    "MiT": {"image_shape": IMAGE, "layerwise_depths": [1, 1], "num_layers": 2, "layerwise_num_heads": [1, 2],
            "layerwise_sr_ratios": [2, 1], "max_drop_path_rate": 0.0, "layerwise_patch_sizes": [7, 3],
            "layerwise_strides": [4, 2], "hidden_dims": [8, 16]},
}


# Models that are another backbone's configuration, or are built from parts.
BUILT = {
    # Gemma2: Gemma with post-norms, logit soft caps and sliding-window attention on alternate layers
    "Gemma2": lambda: keras_hub.models.GemmaBackbone(
        vocabulary_size=64, num_layers=2, num_query_heads=2, num_key_value_heads=1, hidden_dim=16, intermediate_dim=32,
        head_dim=8, use_post_ffw_norm=True, use_post_attention_norm=True, attention_logit_soft_cap=50.0,
        final_logit_soft_cap=30.0, use_sliding_window_attention=True, sliding_window_size=4),
    "CLIP": lambda: keras_hub.models.CLIPBackbone(
        vision_encoder=keras_hub.models.CLIPVisionEncoder(patch_size=8, hidden_dim=16, num_layers=1, num_heads=2,
                                                          intermediate_dim=32, image_shape=IMAGE),
        text_encoder=keras_hub.models.CLIPTextEncoder(vocabulary_size=64, embedding_dim=16, hidden_dim=16,
                                                      num_layers=1, num_heads=2, intermediate_dim=32,
                                                      max_sequence_length=LENGTH),
        projection_dim=8),
}


def backbone(name: str) -> keras.Model:
    """keras_hub.models.<name>Backbone at the sizes of OWN, or of SIZES; BUILT's models."""
    if name in BUILT:
        return BUILT[name]()
    cls = getattr(keras_hub.models, f"{name}Backbone")
    if name in OWN:
        return cls(**OWN[name])
    params = inspect.signature(cls.__init__).parameters
    return cls(**{k: v for k, v in SIZES.items() if k in params})


def _name(tensor) -> str:
    return tensor.name.split(":")[0]


def classifier(name: str) -> tuple[keras.Model, list[str]]:
    """The backbone's features flattened into a Dense head (float32, as Keras's task heads are); its input names.
    Unknown input dims (sequence lengths) are LENGTH."""
    body = backbone(name)
    inputs = {_name(i): keras.Input(tuple(LENGTH if d is None else d for d in i.shape[1:]), dtype=i.dtype,
                                    name=_name(i)) for i in body.inputs}
    features = body(inputs if len(inputs) > 1 else next(iter(inputs.values())))
    if isinstance(features, dict) and ("sequence_output" in features or "decoder_sequence_output" in features):
        # T5 and BART: the decoder's output, which reads the encoder's
        features = features.get("sequence_output", features.get("decoder_sequence_output"))
    if isinstance(features, dict):  # CLIP: each output's row means (its image-text logits are [batch, batch])
        means = [keras.layers.Lambda(lambda t: keras.ops.mean(t, axis=-1, keepdims=True), dtype="float32")(features[k])
                 for k in sorted(features)]
        flat = keras.layers.Concatenate(dtype="float32")(means)
    else:
        flat = keras.layers.Flatten(dtype="float32")(features)
    return keras.Model(inputs, keras.layers.Dense(CLASSES, dtype="float32")(flat)), list(inputs)


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

    specs = [tf.TensorSpec((BATCH, *model.get_layer(n).output.shape[1:]), model.get_layer(n).output.dtype)
             for n in names]
    specs.append(tf.TensorSpec((BATCH,), tf.int32))
    rng = np.random.default_rng(seed)

    def batch(k: int) -> list[np.ndarray]:
        feeds = []
        for n, spec in zip(names, specs):
            dtype = spec.dtype.as_numpy_dtype
            if spec.dtype.is_floating:  # images, audio features
                feeds.append(rng.standard_normal(spec.shape).astype(dtype))
            elif "mask" in n:  # the last position padded in one row
                mask = np.ones(spec.shape, dtype)
                mask[0, -1] = 0
                feeds.append(mask)
            else:
                high = 2 if "segment" in n else SIZES["vocabulary_size"]
                feeds.append(rng.integers(1 if "token" in n else 0, high, spec.shape).astype(dtype))
        return [*feeds, rng.integers(0, CLASSES, BATCH).astype(np.int32)]

    return step, specs, batch, model, optimizer, trained
