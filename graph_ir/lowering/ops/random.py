"""The random family's TF -> GE mappings (prototypes: graph_ir/opset/random.py), as Ascend's TF adapter maps them
(CANN's framework/tf_plugin, e.g. ops-math random/stateless_random_normal_v2: OriginOpType = the TF op): TF's V2
stateless random ops onto the GE ops of the same names, inputs by position, `dtype` kept. They are what Keras 3's
Dropout, SpatialDropout and GaussianNoise trace to (keras/src/backend/tensorflow/random.py: the seed of a
SeedGenerator variable, then tf.random.stateless_* with alg auto-select); the seed arithmetic around them (variable
read, Mul, AddV2, FloorMod, Cast, the AssignVariableOp that advances the seed) lowers through the other families.

TF's stateful random ops (tf.random.uniform, tf.random.normal, tf.random.truncated_normal and integer
tf.random.uniform inside a step: RandomUniform, RandomStandardNormal, TruncatedNormal, RandomUniformInt) map onto
GE's ops of the same names with `dtype`, `seed` and `seed2`; the Session draws TF's numbers from each node's own
stream (graph_ir/executors/random.py). Refused by name: seed = seed2 = 0, where TF draws from a nondeterministic seed
(no global or op seed was set), and bfloat16, which GE's REG_OPs do not take. The node is added unfolded: its value
changes at every run, so even a small draw with a Const shape is no constant."""

from __future__ import annotations

from graph_ir.ir.errors import LoweringError
from graph_ir.lowering.ops.common import maps_to, same, tf_attr
from graph_ir.opset.random import STATEFUL_FLOATS


def _stateful(ge_type: str, floats: bool = True):
    """TF's stateful random op `ge_type` onto GE's, its seeds checked; never folded into a Const."""

    @maps_to(ge_type)
    def lower(ctx, node, inputs):
        where = f"TF op {node.op} (node {node.name!r})"
        seed, seed2 = int(tf_attr(node, "seed", 0)), int(tf_attr(node, "seed2", 0))
        if seed == 0 and seed2 == 0:
            raise LoweringError(
                f"cannot lower {where}: it has no seed (seed = seed2 = 0), so TensorFlow draws from a "
                "nondeterministic seed that no GE graph can reproduce; set one before tracing the step "
                "(keras.utils.set_random_seed(...) or tf.random.set_seed(...)), or give the op a seed")
        attrs = {"seed": seed, "seed2": seed2}
        if floats:
            dtype = tf_attr(node, "dtype")
            if dtype.name not in STATEFUL_FLOATS:
                raise LoweringError(f"cannot lower {where}: its dtype is {dtype}, and GE's {ge_type} draws only "
                                    f"{', '.join(STATEFUL_FLOATS)}")
            attrs["dtype"] = dtype
        return ctx.graph.add_node(ge_type, inputs, attrs, name=ctx._name(""), control_inputs=ctx.current_controls)

    return lower


LOWERINGS = {
    "StatelessRandomGetKeyCounter": same("StatelessRandomGetKeyCounter"),
    "StatelessRandomGetKeyCounterAlg": same("StatelessRandomGetKeyCounterAlg"),
    "StatelessRandomGetAlg": same("StatelessRandomGetAlg"),
    "StatelessRandomUniformV2": same("StatelessRandomUniformV2", dtype="dtype"),
    "StatelessRandomNormalV2": same("StatelessRandomNormalV2", dtype="dtype"),
    "StatelessTruncatedNormalV2": same("StatelessTruncatedNormalV2", dtype="dtype"),
    "StatelessRandomUniformIntV2": same("StatelessRandomUniformIntV2"),
    "StatelessRandomUniformFullIntV2": same("StatelessRandomUniformFullIntV2", dtype="dtype"),
    "RandomUniform": _stateful("RandomUniform"),
    "RandomStandardNormal": _stateful("RandomStandardNormal"),
    "TruncatedNormal": _stateful("TruncatedNormal"),
    "RandomUniformInt": _stateful("RandomUniformInt", floats=False),
}
