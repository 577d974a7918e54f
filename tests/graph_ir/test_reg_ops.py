"""Every GE op in graph_ir's registry agrees with CANN's declaration of it: the REG_OP in
third_party/cann/ge_reg_ops.txt (tests/helpers/reg_ops.py reads it), or, for the few ops that file does not hold,
the prototypes in CANN's headers tabled below with their sources.

Checked per op: input and output names, order and kinds (required, optional, dynamic); attribute names, types,
required-ness and defaults; and that each dtype graph_ir allows on a port is one CANN allows there (graph_ir may
allow fewer, never more). The ops are discovered from graph_ir.ir.registry.REGISTRY only.
"""

from __future__ import annotations

import functools
import math

import pytest

from graph_ir.ir.dtypes import as_dtype
from graph_ir.ir.registry import REGISTRY, IrOp
from tests.helpers import reg_ops
from tests.helpers.reg_ops import GROUPS, Attr, Port, RegOp

# graph_ir's attribute types as REG_OP spells them.
ATTR_TYPES = {"int": "Int", "float": "Float", "bool": "Bool", "string": "String", "type": "Type", "tensor": "Tensor",
              "list_int": "ListInt", "list_float": "ListFloat", "list_string": "ListString", "list_bool": "ListBool",
              "list_type": "ListType", "list_list_int": "ListListInt", "dtype_int": "Int"}

_F = frozenset
_ALL = GROUPS["ALL"]
_CONST_DTYPES = _F({"float32", "float16", "int8", "int16", "uint16", "uint8", "int32", "int64", "uint32", "uint64",
                    "bool", "float64"})
_CAST_DTYPES = _F({"bool", "float16", "float32", "int8", "int32", "uint32", "uint8", "int64", "uint64", "int16",
                   "uint16", "float64", "bfloat16", "complex64"})  # the graph_ir dtypes of Cast's x and y lists
_OPTIMIZER_DTYPES = _F({"float16", "float32", "bfloat16"})


def _req(name: str, dtypes: frozenset[str]) -> Port:
    return Port(name, "required", dtypes)


# The ops ge_reg_ops.txt does not hold (its header: declared outside the op libraries, or newer than the list).
NOT_IN_REG_OPS: dict[str, RegOp | str] = {
    # CANN 8.x op_proto/inc/array_ops.h, REG_OP(Data): x, y ALL; index Int 0.
    "Data": RegOp("Data", [_req("x", _ALL)], [_req("y", _ALL)], [Attr("index", "Int", 0, False)]),
    # CANN 8.x op_proto/inc/array_ops.h, REG_OP(Const): y {f32 f16 i8 i16 u16 u8 i32 i64 u32 u64 bool f64}; value Tensor.
    "Const": RegOp("Const", [], [_req("y", _CONST_DTYPES)], [Attr("value", "Tensor", None, False)]),
    # CANN 8.x op_proto/inc/state_ops.h, REG_OP(Variable): x, y the 12 dtypes of Const; index Int 0, value Tensor,
    # container String "", shared_name String "".
    "Variable": RegOp("Variable", [_req("x", _CONST_DTYPES)], [_req("y", _CONST_DTYPES)],
                      [Attr("index", "Int", 0, False), Attr("value", "Tensor", None, False),
                       Attr("container", "String", "", False), Attr("shared_name", "String", "", False)]),
    # ops-math math/cast/op_graph/cast_proto.h: REQUIRED_ATTR(dst_type, Int), a ge::DataType.
    "Cast": RegOp("Cast", [_req("x", _CAST_DTYPES)], [_req("y", _CAST_DTYPES)], [Attr("dst_type", "Int", None, True)]),
    # ops-nn optim/inplace_apply_power_sign/op_graph/inplace_apply_power_sign_proto.h; its OpDef: {bf16, f16, f32}.
    "InplaceApplyPowerSign": RegOp(
        "InplaceApplyPowerSign",
        [_req(n, _OPTIMIZER_DTYPES) for n in ("var", "m", "lr", "logbase", "sign_decay", "beta", "grad")],
        [_req("var", _OPTIMIZER_DTYPES), _req("m", _OPTIMIZER_DTYPES)], [Attr("use_locking", "Bool", False, False)]),
    # ops-nn optim/apply_fused_ema_adam/op_graph/apply_fused_ema_adam_proto.h.
    "ApplyFusedEmaAdam": RegOp(
        "ApplyFusedEmaAdam",
        [*(_req(n, _OPTIMIZER_DTYPES) for n in ("grad", "var", "m", "v", "s")), _req("step", _F({"int64"}))],
        [_req(n, _OPTIMIZER_DTYPES) for n in ("var", "m", "v", "s")],
        [Attr("lr", "Float", 1e-3, False), Attr("ema_decay", "Float", 0.9999, False), Attr("beta1", "Float", 0.9, False),
         Attr("beta2", "Float", 0.999, False), Attr("eps", "Float", 1e-8, False), Attr("mode", "Int", 1, False),
         Attr("bias_correction", "Bool", True, False), Attr("weight_decay", "Float", 0.0, False)]),
    "NetOutput": "GE-internal node type with no REG_OP (GE's graph/utils/op_type_utils.cc): nothing to check",
    # The functional ops of CANN's op_proto/inc/functional_ops.h (metadef; torchair ships it in
    # third_party/ascend/include/ops/op_proto/inc/functional_ops.h). ge_reg_ops.txt leaves them out (its generator
    # skips REG_OPs with .GRAPH members); their ports and attrs are checked here, their .GRAPH / .DYNAMIC_GRAPH
    # members (which RegOp cannot hold) by test_graph_members_agree against GRAPH_MEMBERS below.
    # REG_OP(If) / REG_OP(StatelessIf): .INPUT(cond, TensorType::ALL()) .DYNAMIC_INPUT(input, TensorType::ALL())
    #   .DYNAMIC_OUTPUT(output, TensorType::ALL()) .GRAPH(then_branch) .GRAPH(else_branch)
    **{op: RegOp(op, [_req("cond", _ALL), Port("input", "dynamic", _ALL)], [Port("output", "dynamic", _ALL)], [])
       for op in ("If", "StatelessIf")},
    # REG_OP(Case) / REG_OP(StatelessCase): .INPUT(branch_index, DT_INT32) .DYNAMIC_INPUT(input, TensorType::ALL())
    #   .DYNAMIC_OUTPUT(output, TensorType::ALL()) .DYNAMIC_GRAPH(branches)
    **{op: RegOp(op, [_req("branch_index", _F({"int32"})), Port("input", "dynamic", _ALL)],
                 [Port("output", "dynamic", _ALL)], []) for op in ("Case", "StatelessCase")},
    # REG_OP(While) / REG_OP(StatelessWhile): .DYNAMIC_INPUT(input, TensorType::ALL())
    #   .DYNAMIC_OUTPUT(output, TensorType::ALL()) .GRAPH(cond) .GRAPH(body) .ATTR(parallel_iterations, Int, 10)
    **{op: RegOp(op, [Port("input", "dynamic", _ALL)], [Port("output", "dynamic", _ALL)],
                 [Attr("parallel_iterations", "Int", 10, False)]) for op in ("While", "StatelessWhile")},
}

# The .GRAPH members (in IR order) and whether the one member is a .DYNAMIC_GRAPH, as functional_ops.h declares them.
GRAPH_MEMBERS: dict[str, tuple[tuple[str, ...], bool]] = {
    "If": (("then_branch", "else_branch"), False), "StatelessIf": (("then_branch", "else_branch"), False),
    "Case": (("branches",), True), "StatelessCase": (("branches",), True),
    "While": (("cond", "body"), False), "StatelessWhile": (("cond", "body"), False),
}

# REG_OPs whose dtypes are a type symbol with no DATATYPE line in ge_reg_ops.txt: the set CANN gives the symbol.
SYMBOL_DTYPES: dict[str, frozenset[str]] = {
    # CANN 8.x op_proto/inc/elewise_calculation_ops.h: T1 = T2 (Promote(T1, T2) for y) (no bool, c32; ops-math adds them).
    "Mul": _F({"float16", "float32", "float64", "uint8", "int8", "uint16", "int16", "int32", "int64", "bfloat16",
               "complex64", "DT_COMPLEX128"}),
    # CANN 8.x op_proto/inc/elewise_calculation_ops.h (no int16; ops-math adds it).
    "Pow": _F({"bfloat16", "float16", "float32", "int32", "int64", "int8", "uint8", "float64", "complex64",
               "DT_COMPLEX128"}),
    # CANN 8.x op_proto/inc/array_ops.h, REG_OP(RefData): DATATYPE(T, ALL).
    "RefData": _ALL,
}

# Port kinds graph_ir declares otherwise, on purpose. A graph input's `x` is fed by the session or GE's loader, never
# by an edge (torchair's GE builder writes its input_desc and no input): graph_ir marks it optional so the verifier
# does not ask for a producer.
KIND_EXCEPTIONS = {("Data", "x"): "optional", ("RefData", "x"): "optional", ("Variable", "x"): "optional"}

# Dtypes graph_ir allows beyond ge_reg_ops.txt, each with the newer CANN declaration that allows it.
DTYPE_EXCEPTIONS = {
    ("Identity", "bfloat16"): "ops-math conversion/identity/op_graph/identity_proto.h declares Identity's x and y "
                              "TensorType::ALL(); graph_ir reads bfloat16 resource variables "
                              "through Identity",
    ("Identity", "complex64"): "ops-math conversion/identity/op_graph/identity_proto.h declares Identity's x and y "
                               "TensorType::ALL(), complex64 among them; TF passes complex values through Identity",
    ("Data", "variant"): "TensorList handles (DT_VARIANT) enter If/While subgraphs as Data nodes, as GE's TF parser "
                         "builds them for TF's functional ops (graph_ir/lowering/control.py)",
    ("Identity", "variant"): "TF passes TensorList handles through Identity inside while bodies; GE's Identity "
                             "forwards any tensor",
    **{(op, "variant"): "TF's functional ops carry TensorList handles (DT_VARIANT) in and out of their functions; GE's "
                        "TF parser maps them onto these ops unchanged (graph_ir/opset/control.py)"
       for op in ("If", "StatelessIf", "Case", "StatelessCase", "While", "StatelessWhile")},
    ("IdentityN", "bfloat16"): "ops-math conversion/identity_n/op_graph/identity_n_proto.h: the "
                               "Keras optimizers' IdentityN passes bfloat16 gradients of mixed_bfloat16 models",
    ("Variable", "bfloat16"): "InplaceApplyPowerSign and ApplyFusedEmaAdam update bfloat16 var, m, v, s in place "
                              "(their ops-nn proto headers), which GE holds as Variables",
    ("Const", "bfloat16"): "mixed_bfloat16 steps hold bfloat16 constants; ops-math's Cast and the bfloat16 ops take them "
                           "(the torchair header list predates bfloat16 support)",
    **{(op, dtype): "newer CANN declares the depthwise ops' x/input, filter and out_backprop float16, float32 and "
                    "bfloat16: ops-nn conv/depthwise_conv2d_backprop_{input,filter}/op_graph/*_proto.h, and "
                    "DepthwiseConv2D in the Ascend 910_95 revision of nn_calculation_ops.h"
       for op in ("DepthwiseConv2D", "DepthwiseConv2DBackpropInput", "DepthwiseConv2DBackpropFilter")
       for dtype in ("float32", "bfloat16")},
}


@functools.cache
def _declarations() -> dict[str, RegOp]:
    return reg_ops.load()


def declaration(op_type: str) -> RegOp | None:
    """CANN's declaration of op_type (None: nothing to check, with the reason skipped); fails when there is none."""
    table = _declarations()
    if op_type in table:
        found = table[op_type]
        if op_type in NOT_IN_REG_OPS:
            pytest.fail(f"{op_type}: ge_reg_ops.txt now declares it; drop its NOT_IN_REG_OPS entry")
        fill = SYMBOL_DTYPES.get(op_type)
        ports = [[p if p.dtypes is not None or fill is None else p._replace(dtypes=fill) for p in side]
                 for side in (found.inputs, found.outputs)]
        return found._replace(inputs=ports[0], outputs=ports[1])
    entry = NOT_IN_REG_OPS.get(op_type)
    if entry is None:
        pytest.fail(f"{op_type}: graph_ir registers it, but it is neither in ge_reg_ops.txt nor in NOT_IN_REG_OPS")
    if isinstance(entry, str):
        pytest.skip(f"{op_type}: {entry}")
    return entry


def _kinds(op: IrOp) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    inputs = [(i.name, "dynamic" if i.dynamic else "optional" if i.optional else "required") for i in op.inputs]
    outputs = [(o.name, "dynamic" if o.dynamic else "required") for o in op.outputs]
    return inputs, outputs


OPS = sorted(REGISTRY)


def test_registry_is_not_empty() -> None:
    assert len(OPS) > 10, OPS


@pytest.mark.parametrize("op_type", OPS)
def test_ports_agree(op_type: str) -> None:
    """Input and output names in CANN's order, with CANN's kinds (required, optional, dynamic)."""
    decl = declaration(op_type)
    ours_in, ours_out = _kinds(REGISTRY[op_type])
    cann_in = [(p.name, KIND_EXCEPTIONS.get((op_type, p.name), p.kind)) for p in decl.inputs]
    cann_out = [(p.name, p.kind) for p in decl.outputs]
    assert [n for n, _ in ours_in] == [n for n, _ in cann_in], f"{op_type}: input names/order"
    assert ours_in == cann_in, f"{op_type}: input kinds"
    assert [n for n, _ in ours_out] == [n for n, _ in cann_out], f"{op_type}: output names/order"
    assert ours_out == cann_out, f"{op_type}: output kinds"


def _same_default(attr_type: str, ours: object, cann: object) -> bool:
    if attr_type == "Float":
        return isinstance(cann, float) and math.isclose(float(ours), cann, rel_tol=1e-6)
    if attr_type == "Type":
        return str(ours) == cann
    if attr_type.startswith("List"):
        return isinstance(cann, tuple) and tuple(ours) == cann
    return type(ours) is type(cann) and ours == cann


@pytest.mark.parametrize("op_type", OPS)
def test_attrs_agree(op_type: str) -> None:
    """Attribute names and types; a REQUIRED_ATTR is required in graph_ir too; defaults agree where both have one.
    The TF adapter's own attributes (IrAttr.adapter: the convolutions' `padding`, which CANN's infer functions read)
    are not REG_OP members."""
    decl = declaration(op_type)
    ours = {a.name: a for a in REGISTRY[op_type].attrs if not a.adapter}
    cann = {a.name: a for a in decl.attrs}
    assert sorted(ours) == sorted(cann), (f"{op_type}: attribute names: graph_ir only {sorted(set(ours) - set(cann))}, "
                                          f"CANN only {sorted(set(cann) - set(ours))}")
    problems = []
    for name, attr in ours.items():
        expected = cann[name]
        if ATTR_TYPES.get(attr.type) != expected.type:
            problems.append(f"{name}: type {attr.type!r} is REG_OP {ATTR_TYPES.get(attr.type)}, CANN says "
                            f"{expected.type}")
        if expected.required and not attr.required:
            problems.append(f"{name}: CANN declares it REQUIRED_ATTR, graph_ir gives it a default")
        default = as_dtype(attr.default).ge if attr.type == "dtype_int" and attr.default is not None else attr.default
        if default is not None and expected.default is not None and not _same_default(
                expected.type, default, expected.default):
            problems.append(f"{name}: default {attr.default!r}, CANN's is {expected.default!r}")
    assert not problems, f"{op_type}: " + "; ".join(problems)


@pytest.mark.parametrize("op_type", OPS)
def test_dtypes_within_cann(op_type: str) -> None:
    """Every dtype graph_ir allows on a port is one CANN allows on it."""
    decl = declaration(op_type)
    op = REGISTRY[op_type]
    problems = []
    for side, ours, cann in (("input", op.inputs, decl.inputs), ("output", op.outputs, decl.outputs)):
        for port, expected in zip(ours, cann):
            if expected.dtypes is None:
                problems.append(f"{side} {port.name}: its REG_OP names no dtype list this test can read; add the "
                                "op's set to SYMBOL_DTYPES with its source")
                continue
            extra = sorted(d for d in set(port.dtypes) - expected.dtypes if (op_type, d) not in DTYPE_EXCEPTIONS)
            if extra:
                problems.append(f"{side} {port.name}: graph_ir allows {extra}, which CANN does not")
    assert not problems, f"{op_type}: " + "; ".join(problems)


def test_graph_ir_dtype_names_are_the_readers() -> None:
    """The reader's names for GE's dtypes are graph_ir's: every graph_ir dtype is one a declaration can name."""
    from graph_ir.ir.dtypes import BY_NAME
    assert set(BY_NAME) <= _ALL, sorted(set(BY_NAME) - _ALL)


def test_graph_members_agree() -> None:
    """The ops holding subgraphs are exactly those whose REG_OP has .GRAPH members, with CANN's members in order."""
    ours = {name: (op.graphs, op.dynamic_graph) for name, op in REGISTRY.items() if op.graphs}
    assert ours == GRAPH_MEMBERS
