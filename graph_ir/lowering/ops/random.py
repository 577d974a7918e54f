"""The random family's TF -> GE mappings (prototypes: graph_ir/opset/random.py), as Ascend's TF adapter maps them
(CANN's framework/tf_plugin, e.g. ops-math random/stateless_random_normal_v2: OriginOpType = the TF op): TF's V2
stateless random ops onto the GE ops of the same names, inputs by position, `dtype` kept. They are what Keras 3's
Dropout, SpatialDropout and GaussianNoise trace to (keras/src/backend/tensorflow/random.py: the seed of a
SeedGenerator variable, then tf.random.stateless_* with alg auto-select); the seed arithmetic around them (variable
read, Mul, AddV2, FloorMod, Cast, the AssignVariableOp that advances the seed) lowers through the other families."""

from __future__ import annotations

from graph_ir.lowering.ops.common import same

LOWERINGS = {
    "StatelessRandomGetKeyCounter": same("StatelessRandomGetKeyCounter"),
    "StatelessRandomGetKeyCounterAlg": same("StatelessRandomGetKeyCounterAlg"),
    "StatelessRandomGetAlg": same("StatelessRandomGetAlg"),
    "StatelessRandomUniformV2": same("StatelessRandomUniformV2", dtype="dtype"),
    "StatelessRandomNormalV2": same("StatelessRandomNormalV2", dtype="dtype"),
    "StatelessTruncatedNormalV2": same("StatelessTruncatedNormalV2", dtype="dtype"),
    "StatelessRandomUniformIntV2": same("StatelessRandomUniformIntV2"),
    "StatelessRandomUniformFullIntV2": same("StatelessRandomUniformFullIntV2", dtype="dtype"),
}
