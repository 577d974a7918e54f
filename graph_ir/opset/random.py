"""The random family's GE prototypes, as CANN's REG_OPs declare them (metadef's stateless_random_ops.h, in
third_party/cann/ge_reg_ops.txt): TensorFlow's V2 stateless random ops, which draw from a Philox key and counter
(StatelessRandomGetKeyCounter makes them from a seed), so that a graph draws exactly TF's numbers: uniform floats
(what Keras's Dropout compares with its rate), normals (GaussianNoise), truncated normals, and integers.

graph_ir allows the dtypes TF's CPU kernels register (tensorflow/core/kernels/stateless_random_ops_v2.cc), which
are within the REG_OPs' (StatelessRandomUniformIntV2: int32 and int64 only). Only Philox is drawn: an `alg` Const
other than Philox (1) or auto-select (3, which TF's kernels resolve to Philox: stateless_random_ops_v2_util.h) is
refused here, any other value when the session runs.
Executors: graph_ir/executors/random.py; TF mappings: graph_ir/lowering/ops/random.py."""

from __future__ import annotations

from graph_ir.ir.dtypes import as_dtype
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.ir.registry import INDICES, IrAttr, IrInput, IrOp, IrOutput, register
from graph_ir.ir.verify import check_shape, const_dims

PHILOX, AUTO_SELECT = 1, 3  # TF's rng_alg.h ids (THREEFRY = 2 has no CPU kernel in the V2 ops)
FLOATS = ("float16", "bfloat16", "float32", "float64")
FULL_INTS = ("int32", "int64", "uint32", "uint64")
INTS = ("int32", "int64")  # TF's CPU kernels of StatelessRandomUniformIntV2
_U64 = ("uint64",)


def check_alg(op_type: str, node: str, alg) -> None:
    """Philox (1) or auto-select (3, Philox on TF's CPU kernels); anything else is not TF's stream here."""
    if int(alg) not in (PHILOX, AUTO_SELECT):
        raise GraphError(f"{op_type} {node!r}: input 'alg' is {int(alg)}, expected {PHILOX} (Philox) or "
                         f"{AUTO_SELECT} (auto-select, which is Philox); graph_ir draws only TensorFlow's Philox "
                         "stream (ThreeFry, 2, has no TensorFlow CPU kernel either)")


def _key_counter(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    seed = inputs[0]
    if seed.shape != (2,):
        raise GraphError(f"{op.type} {node!r}: input 'seed' must have shape [2], got {list(seed.shape)}")
    return [TensorDesc("key", as_dtype("uint64"), (1,)), TensorDesc("counter", as_dtype("uint64"), (2,))]


def _drawn(op: IrOp, node: str, inputs, dtype, allowed: tuple[str, ...]) -> list[TensorDesc]:
    """The output of a V2 draw: shape from the Const `shape`, key u64[1], counter u64[2] (Philox's 128-bit counter),
    a Philox `alg`."""
    shape = check_shape(node, "shape", const_dims(op, node, inputs[0], "shape"))
    key, counter, alg = inputs[1:4]
    if key.shape != (1,):
        raise GraphError(f"{op.type} {node!r}: input 'key' must have shape [1], got {list(key.shape)}")
    if len(counter.shape) != 1 or counter.shape[0] < 2:
        raise GraphError(f"{op.type} {node!r}: input 'counter' must have shape [n] with n >= 2 (Philox's 128-bit "
                         f"counter), got {list(counter.shape)}")
    if alg.node.type == "Const":
        check_alg(op.type, node, alg.node.attrs["value"].reshape(-1)[0])
    if dtype.name not in allowed:
        raise GraphError(f"{op.type} {node!r}: attribute 'dtype' is {dtype}, expected one of {', '.join(allowed)}")
    return [TensorDesc("y", dtype, shape)]


_DRAW_INPUTS = (IrInput("shape", INDICES), IrInput("key", _U64), IrInput("counter", _U64),
                IrInput("alg", ("int32",), scalar=True))

register(IrOp("StatelessRandomGetKeyCounter", (IrInput("seed", INDICES),),
              (IrOutput("key", _U64), IrOutput("counter", _U64)), outputs_from="infer", infer=_key_counter,
              doc="key, counter = Philox-4x32-10 of the seed's words under a fixed key (TF's GenerateKey)."))
register(IrOp("StatelessRandomGetKeyCounterAlg", (IrInput("seed", INDICES),),
              (IrOutput("key", _U64), IrOutput("counter", _U64), IrOutput("alg", ("int32",))), outputs_from="infer",
              infer=lambda op, node, inputs, attrs: [*_key_counter(op, node, inputs, attrs),
                                                     TensorDesc("alg", as_dtype("int32"), ())],
              doc="StatelessRandomGetKeyCounter's key and counter, and alg = 1 (Philox, what TF's kernel returns)."))
register(IrOp("StatelessRandomGetAlg", (), (IrOutput("alg", ("int32",)),), outputs_from="infer",
              infer=lambda op, node, inputs, attrs: [TensorDesc("alg", as_dtype("int32"), ())],
              doc="alg = 1 (Philox, what TF's kernel returns)."))
for _type, _what in (("StatelessRandomUniformV2", "uniform in [0, 1): 1 + the mantissa bits, minus 1"),
                     ("StatelessRandomNormalV2", "standard normal: Box-Muller on pairs of uniforms"),
                     ("StatelessTruncatedNormalV2", "standard normal with |y| < 2: Box-Muller, rejection")):
    register(IrOp(_type, _DRAW_INPUTS, (IrOutput("y", FLOATS),), (IrAttr("dtype", "type", "float32"),),
                  outputs_from="infer",
                  infer=lambda op, node, inputs, attrs: _drawn(op, node, inputs, attrs["dtype"], FLOATS),
                  doc=f"y[shape] = {_what}, from Philox at (key, counter)."))
register(IrOp("StatelessRandomUniformFullIntV2", _DRAW_INPUTS, (IrOutput("y", FULL_INTS),),
              (IrAttr("dtype", "type", "int32"),), outputs_from="infer",
              infer=lambda op, node, inputs, attrs: _drawn(op, node, inputs, attrs["dtype"], FULL_INTS),
              doc="y[shape] = Philox's bits (one word per 32-bit value, two per 64-bit value)."))


def _check_scalar_bounds(op: IrOp, node: str, bounds, names: tuple[str, str]) -> None:
    """A uniform int's bounds are scalars (TF's check)."""
    for h, name in zip(bounds, names):
        if h.shape != ():
            raise GraphError(f"{op.type} {node!r}: input {name!r} must have shape [] (TF's check), got "
                             f"{list(h.shape)}")


def _uniform_int(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    _check_scalar_bounds(op, node, inputs[4:], ("minval", "maxval"))
    return _drawn(op, node, inputs, inputs[4].dtype, INTS)


register(IrOp("StatelessRandomUniformIntV2", (*_DRAW_INPUTS, IrInput("minval", INTS), IrInput("maxval", INTS)),
              (IrOutput("y", INTS),), outputs_from="infer", infer=_uniform_int, same_dtype=("minval", "maxval"),
              doc="y[shape] = minval + bits % (maxval - minval), wrapping (TF's UniformDistribution of ints)."))


# TF's stateful random ops (tensorflow/core/kernels/random_op.cc), as GE's REG_OPs declare them: the shape, `dtype`
# (float16, float32, float64: the REG_OPs take no bfloat16) and `seed`, `seed2`. Each node draws from its own Philox
# stream that advances at every run (graph_ir/executors/random.py).
STATEFUL_FLOATS = ("float16", "float32", "float64")
_SEEDS = (IrAttr("seed", "int", 0), IrAttr("seed2", "int", 0))


def _stateful(op: IrOp, node: str, inputs, dtype, allowed: tuple[str, ...]) -> list[TensorDesc]:
    shape = check_shape(node, "shape", const_dims(op, node, inputs[0], "shape"))
    if dtype.name not in allowed:
        raise GraphError(f"{op.type} {node!r}: attribute 'dtype' is {dtype}, expected one of {', '.join(allowed)}")
    return [TensorDesc("y", dtype, shape)]


for _type, _attrs, _what in (
        ("RandomUniform", (IrAttr("dtype", "type", required=True), *_SEEDS), "uniform in [0, 1)"),
        ("RandomStandardNormal", (IrAttr("dtype", "type", required=True), *_SEEDS), "standard normal"),
        ("TruncatedNormal", (*_SEEDS, IrAttr("dtype", "type", "float32")), "standard normal with |y| < 2")):
    register(IrOp(_type, (IrInput("shape", INDICES),), (IrOutput("y", STATEFUL_FLOATS),), _attrs,
                  outputs_from="infer",
                  infer=lambda op, node, inputs, attrs: _stateful(op, node, inputs, attrs["dtype"], STATEFUL_FLOATS),
                  doc=f"y[shape] = {_what}, from the node's Philox stream (key seed, counter (0, seed2) at the "
                      "first run), which each run advances by 256 calls per output (TF's ReserveRandomOutputs)."))


def _stateful_int(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    _check_scalar_bounds(op, node, inputs[1:], ("min", "max"))
    return _stateful(op, node, inputs, inputs[1].dtype, INTS)


register(IrOp("RandomUniformInt", (IrInput("shape", INDICES), IrInput("min", INTS), IrInput("max", INTS)),
              (IrOutput("y", INTS),), _SEEDS, outputs_from="infer", infer=_stateful_int, same_dtype=("min", "max"),
              doc="y[shape] = min + bits % (max - min), wrapping, from the node's Philox stream (RandomUniform's)."))
