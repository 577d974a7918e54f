"""The Keras layer cases of tests/graph_ir/test_keras_layers.py (and scripts/coverage_report.py): for each built-in
layer, the tiny model that uses it and whether its step lowers and matches TF or is refused (with the reason); the
augmentation layers and their refusals; the layers left out, each with its reason."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import keras
import tensorflow as tf
from keras import layers

K = 2
TOLERANCE = 1e-5
SPARSE_XENT = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
CLASSES = 3

# input kind -> (shape without the batch, dtype, integers below this bound if an integer input)
INPUTS = {"vector": ((6,), tf.float32, 0), "sequence": ((5, 4), tf.float32, 0), "image": ((6, 6, 3), tf.float32, 0),
          "volume": ((4, 4, 4, 2), tf.float32, 0), "volumes": ((2, 3, 3, 3, 2), tf.float32, 0),
          "tokens": ((5,), tf.int32, 8), "audio": ((64,), tf.float32, 0), "mono": ((64, 1), tf.float32, 0)}
BATCH = 2


@dataclass(frozen=True)
class Case:
    """`layer()` builds the layer (or, for shape "merge"/"attention"/"model", the whole model from the input);
    `refusal` is a regex of the LoweringError the step gives (None: it lowers and matches TF)."""

    layer: Callable
    input: str = "image"
    shape: str = "flatten"  # flatten: Input -> layer -> Flatten -> Dense; merge / attention / model: see build
    refusal: str | None = None
    reason: str = ""  # why it is refused, in words
    tolerance: float = TOLERANCE


def _merge(merge: Callable) -> Callable:
    def build(x):
        return merge()([layers.Dense(4)(x), layers.Dense(4)(x)])
    return build


def _attention(attention: Callable) -> Callable:
    return lambda x: attention()([x, x])


def _no_mapping(op: str, what: str) -> dict:
    """The refusal of a TF op the lowering has no mapping for."""
    return {"refusal": rf"cannot lower TF op {op} \(node .*no mapping for it", "reason": f"no lowering for TF op {op} "
            f"({what})"}


CASES: dict[str, Case] = {
    # core
    "Dense": Case(lambda: layers.Dense(4, activation="relu"), "vector"),
    "EinsumDense": Case(lambda: layers.EinsumDense("ab,bc->ac", output_shape=4, bias_axes="c"), "vector"),
    "Embedding": Case(lambda: layers.Embedding(8, 4), "tokens"),
    "ReversibleEmbedding": Case(lambda: layers.ReversibleEmbedding(8, 4), "tokens"),
    "Identity": Case(lambda: layers.Identity(), "vector"),
    "Lambda": Case(lambda: layers.Lambda(lambda t: t * 2.0 + 1.0), "vector"),
    "Masking": Case(lambda: layers.Masking(0.0), "sequence"),
    # activations
    "Activation": Case(lambda: layers.Activation("swish"), "vector"),
    "ELU": Case(lambda: layers.ELU(), "vector"),
    "LeakyReLU": Case(lambda: layers.LeakyReLU(0.2), "vector"),
    "PReLU": Case(lambda: layers.PReLU(), "vector"),
    "ReLU": Case(lambda: layers.ReLU(max_value=6.0), "vector"),
    "Softmax": Case(lambda: layers.Softmax(), "vector"),
    # convolutions
    "Conv1D": Case(lambda: layers.Conv1D(3, 2), "sequence"),
    "Conv2D": Case(lambda: layers.Conv2D(3, 3, padding="same"), "image"),
    "Conv3D": Case(lambda: layers.Conv3D(2, 2), "volume", **_no_mapping("Conv3D", "3-D convolution")),
    "Conv1DTranspose": Case(lambda: layers.Conv1DTranspose(3, 2, strides=2), "sequence"),
    "Conv2DTranspose": Case(lambda: layers.Conv2DTranspose(3, 3, strides=2), "image"),
    "Conv3DTranspose": Case(lambda: layers.Conv3DTranspose(2, 2), "volume",
                            **_no_mapping("Conv3DBackpropInputV2", "3-D transposed convolution")),
    "DepthwiseConv1D": Case(lambda: layers.DepthwiseConv1D(2, depth_multiplier=2), "sequence"),
    "DepthwiseConv2D": Case(lambda: layers.DepthwiseConv2D(3, depth_multiplier=2), "image"),
    "SeparableConv1D": Case(lambda: layers.SeparableConv1D(3, 2), "sequence"),
    "SeparableConv2D": Case(lambda: layers.SeparableConv2D(3, 3), "image"),
    # pooling
    "AveragePooling1D": Case(lambda: layers.AveragePooling1D(2), "sequence"),
    "AveragePooling2D": Case(lambda: layers.AveragePooling2D(2), "image"),
    "AveragePooling3D": Case(lambda: layers.AveragePooling3D(2), "volume", **_no_mapping("AvgPool3D", "3-D pooling")),
    "MaxPooling1D": Case(lambda: layers.MaxPooling1D(2), "sequence"),
    "MaxPooling2D": Case(lambda: layers.MaxPooling2D(2), "image"),
    "MaxPooling3D": Case(lambda: layers.MaxPooling3D(2), "volume", **_no_mapping("MaxPool3D", "3-D pooling")),
    "GlobalAveragePooling1D": Case(lambda: layers.GlobalAveragePooling1D(), "sequence"),
    "GlobalAveragePooling2D": Case(lambda: layers.GlobalAveragePooling2D(), "image"),
    "GlobalAveragePooling3D": Case(lambda: layers.GlobalAveragePooling3D(), "volume"),
    "GlobalMaxPooling1D": Case(lambda: layers.GlobalMaxPooling1D(), "sequence"),
    "GlobalMaxPooling2D": Case(lambda: layers.GlobalMaxPooling2D(), "image"),
    "GlobalMaxPooling3D": Case(lambda: layers.GlobalMaxPooling3D(), "volume"),
    "AdaptiveAveragePooling1D": Case(lambda: layers.AdaptiveAveragePooling1D(2), "sequence"),
    "AdaptiveAveragePooling2D": Case(lambda: layers.AdaptiveAveragePooling2D(2), "image"),
    "AdaptiveAveragePooling3D": Case(lambda: layers.AdaptiveAveragePooling3D(2), "volume",
                                     **_no_mapping("AvgPool3D", "3-D pooling")),
    "AdaptiveMaxPooling1D": Case(lambda: layers.AdaptiveMaxPooling1D(2), "sequence"),
    "AdaptiveMaxPooling2D": Case(lambda: layers.AdaptiveMaxPooling2D(2), "image"),
    "AdaptiveMaxPooling3D": Case(lambda: layers.AdaptiveMaxPooling3D(2), "volume",
                                 **_no_mapping("MaxPool3D", "3-D pooling")),
    # normalization
    "BatchNormalization": Case(lambda: layers.BatchNormalization(), "image"),
    "LayerNormalization": Case(lambda: layers.LayerNormalization(), "sequence"),
    "GroupNormalization": Case(lambda: layers.GroupNormalization(groups=3), "image"),
    "RMSNormalization": Case(lambda: layers.RMSNormalization(), "sequence"),
    "UnitNormalization": Case(lambda: layers.UnitNormalization(), "vector"),
    "SpectralNormalization": Case(lambda: layers.SpectralNormalization(layers.Dense(4)), "vector"),
    # merging
    "Add": Case(_merge(layers.Add), "vector", "merge"),
    "Average": Case(_merge(layers.Average), "vector", "merge"),
    "Concatenate": Case(_merge(layers.Concatenate), "vector", "merge"),
    "Dot": Case(_merge(lambda: layers.Dot(axes=1)), "vector", "merge"),
    "Maximum": Case(_merge(layers.Maximum), "vector", "merge"),
    "Minimum": Case(_merge(layers.Minimum), "vector", "merge"),
    "Multiply": Case(_merge(layers.Multiply), "vector", "merge"),
    "Subtract": Case(_merge(layers.Subtract), "vector", "merge"),
    # attention
    "Attention": Case(_attention(layers.Attention), "sequence", "model"),
    "AdditiveAttention": Case(_attention(layers.AdditiveAttention), "sequence", "model"),
    # no biases: the key bias's gradient is zero in exact arithmetic (softmax ignores a constant added to every
    # score), so its value is rounding noise that Adam's normalization would blow up to a step of lr either way
    "MultiHeadAttention": Case(lambda x: layers.MultiHeadAttention(2, 2, use_bias=False)(x, x), "sequence", "model"),
    "GroupedQueryAttention": Case(lambda x: layers.GroupQueryAttention(2, 2, 1, use_bias=False)(x, x), "sequence",
                                  "model"),
    # reshaping
    "Cropping1D": Case(lambda: layers.Cropping1D(1), "sequence"),
    "Cropping2D": Case(lambda: layers.Cropping2D(1), "image"),
    "Cropping3D": Case(lambda: layers.Cropping3D(1), "volume"),
    "ZeroPadding1D": Case(lambda: layers.ZeroPadding1D(1), "sequence"),
    "ZeroPadding2D": Case(lambda: layers.ZeroPadding2D(1), "image"),
    "ZeroPadding3D": Case(lambda: layers.ZeroPadding3D(1), "volume"),
    "UpSampling1D": Case(lambda: layers.UpSampling1D(2), "sequence"),
    "UpSampling2D": Case(lambda: layers.UpSampling2D(2), "image"),
    "UpSampling3D": Case(lambda: layers.UpSampling3D(2), "volume"),
    "Flatten": Case(lambda: layers.Flatten(), "image"),
    "Permute": Case(lambda: layers.Permute((2, 1)), "sequence"),
    "RepeatVector": Case(lambda: layers.RepeatVector(3), "vector"),
    "Reshape": Case(lambda: layers.Reshape((10, 2)), "sequence"),
    # recurrent (TF's backend runs a tf.while_loop unless unrolled: GE While)
    "SimpleRNN": Case(lambda: layers.SimpleRNN(3), "sequence"),
    "GRU": Case(lambda: layers.GRU(3), "sequence"),
    "LSTM": Case(lambda: layers.LSTM(3), "sequence"),
    "RNN": Case(lambda: layers.RNN(layers.SimpleRNNCell(3), unroll=True), "sequence"),
    "SimpleRNNCell": Case(lambda: layers.RNN(layers.SimpleRNNCell(3), unroll=True), "sequence"),
    "GRUCell": Case(lambda: layers.RNN(layers.GRUCell(3), unroll=True), "sequence"),
    "LSTMCell": Case(lambda: layers.RNN(layers.LSTMCell(3), unroll=True), "sequence"),
    "StackedRNNCells": Case(lambda: layers.RNN(layers.StackedRNNCells([layers.SimpleRNNCell(3)] * 1 +
                                                                      [layers.GRUCell(2)]), unroll=True), "sequence"),
    "Bidirectional": Case(lambda: layers.Bidirectional(layers.SimpleRNN(3, unroll=True)), "sequence"),
    "TimeDistributed": Case(lambda: layers.TimeDistributed(layers.Dense(3)), "sequence"),
    "ConvLSTM1D": Case(lambda: layers.ConvLSTM1D(2, 2), "image"),
    "ConvLSTM2D": Case(lambda: layers.ConvLSTM2D(2, 2), "volume"),
    "ConvLSTM3D": Case(lambda: layers.ConvLSTM3D(2, 2), "volumes", **_no_mapping("Conv3D", "3-D convolution, inside "
                                                                                           "the loop's body")),
    # regularization
    "ActivityRegularization": Case(lambda: layers.ActivityRegularization(l1=0.01), "vector"),
    "Dropout": Case(lambda: layers.Dropout(0.5), "vector"),
    "AlphaDropout": Case(lambda: layers.AlphaDropout(0.5), "vector"),
    "GaussianDropout": Case(lambda: layers.GaussianDropout(0.5), "vector"),
    "GaussianNoise": Case(lambda: layers.GaussianNoise(0.5), "vector"),
    "SpatialDropout1D": Case(lambda: layers.SpatialDropout1D(0.5), "sequence"),
    "SpatialDropout2D": Case(lambda: layers.SpatialDropout2D(0.5), "image"),
    "SpatialDropout3D": Case(lambda: layers.SpatialDropout3D(0.5), "volume"),
    # preprocessing that sits in a model
    "Rescaling": Case(lambda: layers.Rescaling(0.5, offset=-1.0), "image"),
    "Normalization": Case(lambda: layers.Normalization(mean=0.5, variance=2.0), "image"),
    "Resizing": Case(lambda: layers.Resizing(4, 4), "image"),
    "CenterCrop": Case(lambda: layers.CenterCrop(4, 4), "image"),
    "Discretization": Case(lambda x: layers.Embedding(4, 2)(layers.Discretization([-0.5, 0.0, 0.5])(x)),
                           "vector", "model"),
    "CategoryEncoding": Case(lambda: layers.CategoryEncoding(8, output_mode="multi_hot"), "tokens",
                             **_no_mapping("DenseBincount", "counting the tokens")),
    "Hashing": Case(lambda x: layers.Embedding(4, 2)(layers.Hashing(4)(x)), "tokens", "model",
                    **_no_mapping("AsString", "integers hashed as strings")),
    "IntegerLookup": Case(lambda x: layers.Embedding(10, 2)(layers.IntegerLookup(vocabulary=[1, 3, 5])(x)),
                          "tokens", "model", refusal=r"cannot lower stateful TF op LookupTableFindV2 \(node .*into tf.data",
                          reason="its vocabulary is a TF hash table: host work, which the refusal says to move into "
                                 "tf.data"),
    "MelSpectrogram": Case(lambda: layers.MelSpectrogram(fft_length=16, sequence_stride=8, num_mel_bins=4,
                                                         sampling_rate=1000), "audio"),
    "STFTSpectrogram": Case(lambda: layers.STFTSpectrogram(frame_length=16, frame_step=8), "mono"),
    "Solarization": Case(lambda: layers.Solarization(threshold_factor=0.5, value_range=(0, 1)), "image"),
    "AutoContrast": Case(lambda: layers.AutoContrast(value_range=(0, 1)), "image"),
    "Equalization": Case(lambda: layers.Equalization(value_range=(0, 1)), "image"),
}

# Image augmentations: random in training (each draws from a SeedGenerator); one case each.
AUGMENTATIONS = {
    "RandomBrightness": lambda: layers.RandomBrightness(0.2, value_range=(0, 1)),
    "RandomColorDegeneration": lambda: layers.RandomColorDegeneration(0.2, value_range=(0, 1)),
    "RandomColorJitter": lambda: layers.RandomColorJitter(value_range=(0, 1), brightness_factor=0.2),
    "RandomContrast": lambda: layers.RandomContrast(0.2, value_range=(0, 1)),
    "RandomCrop": lambda: layers.RandomCrop(4, 4),
    "RandomElasticTransform": lambda: layers.RandomElasticTransform(value_range=(0, 1)),
    "RandomErasing": lambda: layers.RandomErasing(value_range=(0, 1)),
    "RandomFlip": lambda: layers.RandomFlip(),
    "RandomGaussianBlur": lambda: layers.RandomGaussianBlur(value_range=(0, 1)),
    "RandomGrayscale": lambda: layers.RandomGrayscale(),
    "RandomHue": lambda: layers.RandomHue(0.2, value_range=(0, 1)),
    "RandomInvert": lambda: layers.RandomInvert(value_range=(0, 1)),
    "RandomPerspective": lambda: layers.RandomPerspective(),
    "RandomPosterization": lambda: layers.RandomPosterization(4, value_range=(0, 1)),
    "RandomRotation": lambda: layers.RandomRotation(0.2),
    "RandomSaturation": lambda: layers.RandomSaturation(0.2, value_range=(0, 1)),
    "RandomSharpness": lambda: layers.RandomSharpness(0.2, value_range=(0, 1)),
    "RandomShear": lambda: layers.RandomShear(0.2),
    "RandomTranslation": lambda: layers.RandomTranslation(0.2, 0.2),
    "RandomZoom": lambda: layers.RandomZoom(0.2),
    "AugMix": lambda: layers.AugMix(value_range=(0, 1)),
    "CutMix": lambda: layers.CutMix(),
    "MixUp": lambda: layers.MixUp(),
    "RandAugment": lambda: layers.RandAugment(value_range=(0, 1)),
    "ContrastLimitedAdaptiveHistogramEqualization":
        lambda: layers.ContrastLimitedAdaptiveHistogramEqualization(value_range=(0, 1)),
}
_GAMMA = (r"TF op StatelessRandomGammaV3 \(node", ("no lowering for TF op StatelessRandomGammaV3 (the Beta draw: "
          "TF's rejection sampler over Philox, which no GE op reproduces)"))
_RGB_TO_HSV = (r"TF op RGBToHSV \(node", "no lowering for TF op RGBToHSV")
AUGMENTATION_REFUSALS: dict[str, tuple[str, str]] = {  # name -> (regex of the LoweringError, why)
    "RandomElasticTransform": (r"TF op BitwiseOr \(node", "no lowering for TF op BitwiseOr"),
    "RandomPerspective": (r"TF op MatrixSolve \(node", "no lowering for TF op MatrixSolve"),
    "RandomHue": _RGB_TO_HSV, "RandomSaturation": _RGB_TO_HSV,
    "RandomPosterization": (r"TF op RightShift \(node", "no lowering for TF op RightShift"),
    "RandAugment": (r"TF op RightShift \(node", "no lowering for TF op RightShift (of its posterization)"),
    "AugMix": _GAMMA, "CutMix": _GAMMA, "MixUp": _GAMMA,
}


def augmentation_refusal(name: str) -> str | None:
    """Why augmentation `name` is refused, or None if it lowers."""
    return AUGMENTATION_REFUSALS[name][1] if name in AUGMENTATION_REFUSALS else None

LEFT_OUT = {
    "Layer": "the base class: a custom layer is whatever ops its call holds",
    "Wrapper": "an abstract base (Bidirectional, TimeDistributed and SpectralNormalization are its cases)",
    "InputLayer": "input-only: it adds no op to the step (every case's keras.Input is one)",
    "FlaxLayer": "wraps a JAX/Flax module: JAX backend only",
    "JaxLayer": "wraps a JAX function: JAX backend only",
    "TorchModuleWrapper": "wraps a torch.nn.Module: torch backend only",
    "TFSMLayer": "an endpoint of a SavedModel on disk: its ops are whatever that SavedModel holds",
    "Pipeline": "a sequence of preprocessing layers: each is a case of its own",
    "MaxNumBoundingBoxes": "pads bounding-box dictionaries for tf.data pipelines; it has no image op and no "
                           "trainable use",
    "StringLookup": "string inputs: a lookup table on strings for the tf.data input pipeline (GE Data nodes here "
                    "take numbers), no trainable use",
    "TextVectorization": "string inputs: tokenizes text for the tf.data input pipeline, no trainable use",
    "HashedCrossing": "crosses features in the tf.data input pipeline (string fingerprints of the feature pair), "
                      "no trainable use",
}
