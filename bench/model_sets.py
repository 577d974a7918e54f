"""The variable sets of the model-scale optimizer benchmark, built offline: the shapes of real models' trainable
variables (ResNet-50 from keras.applications with weights=None; a BERT-base-like 12-block, hidden-768 encoder; 500
tensors of 1,024; the demo's MLP; one tensor of 16M)."""

from __future__ import annotations

HIDDEN, FFN, BLOCKS, VOCAB, POSITIONS = 768, 3072, 12, 30522, 512


def resnet50() -> list[tuple[int, ...]]:
    import keras

    model = keras.applications.ResNet50(weights=None)
    return [tuple(v.shape) for v in model.trainable_variables]


def encoder() -> list[tuple[int, ...]]:
    """Embeddings (word, position, type, their LayerNorm), 12 blocks (q, k, v, output with biases, 2 LayerNorms, the
    two FFN matrices with biases) and the pooler: 199 tensors, 109M parameters."""
    shapes = [(VOCAB, HIDDEN), (POSITIONS, HIDDEN), (2, HIDDEN), (HIDDEN,), (HIDDEN,)]
    for _ in range(BLOCKS):
        for _ in range(4):
            shapes += [(HIDDEN, HIDDEN), (HIDDEN,)]
        shapes += [(HIDDEN,), (HIDDEN,), (HIDDEN, FFN), (FFN,), (FFN, HIDDEN), (HIDDEN,), (HIDDEN,), (HIDDEN,)]
    return shapes + [(HIDDEN, HIDDEN), (HIDDEN,)]


def many_small() -> list[tuple[int, ...]]:
    return [(1024,)] * 500


def demo_mlp() -> list[tuple[int, ...]]:
    return [(64, 256), (256,), (256, 128), (128,), (128, 10), (10,)]


def one_large() -> list[tuple[int, ...]]:
    return [(16 * 1024 * 1024,)]


SETS = {"16M": one_large, "resnet50": resnet50, "encoder": encoder, "500x1024": many_small, "mlp": demo_mlp}
