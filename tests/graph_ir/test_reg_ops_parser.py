"""The REG_OP reader (tests/helpers/reg_ops.py): known entries of third_party/cann/ge_reg_ops.txt, the TensorType
groups, type symbols, irregular spellings, bad declarations, and that the file is the repository's own."""

from __future__ import annotations

import pytest

from tests.helpers import reg_ops
from tests.helpers.reg_ops import GROUPS, Attr, Port


@pytest.fixture(scope="module")
def declared() -> dict[str, reg_ops.RegOp]:
    return reg_ops.load()


def test_the_file_is_inside_the_repository_and_states_its_source(declared) -> None:
    assert reg_ops.REG_OPS_FILE.is_relative_to(reg_ops.REPO_ROOT)
    header = reg_ops.REG_OPS_FILE.read_text(encoding="utf-8").split("REG_OP(", 1)[0]
    assert "torch-npu` 2.14.0" in header and "auto_generated_ge_raw_ops.py" in header
    assert len(declared) > 500 and all(op.type == name for name, op in declared.items())


def test_matmul_v2(declared) -> None:
    op = declared["MatMulV2"]
    # offset_w comes after the OUTPUT line in the declaration: the inputs keep their own order.
    assert [(p.name, p.kind) for p in op.inputs] == [("x1", "required"), ("x2", "required"), ("bias", "optional"),
                                                     ("offset_w", "optional")]
    assert op.inputs[0].dtypes == {"float32", "float16", "int32", "int8", "DT_INT4", "bfloat16"}
    assert op.inputs[3].dtypes == {"int8", "DT_INT4"}
    assert op.outputs == [Port("y", "required", frozenset({"float32", "float16", "int32", "bfloat16"}))]
    assert op.attrs == [Attr("transpose_x1", "Bool", False, False), Attr("transpose_x2", "Bool", False, False),
                        Attr("offset_x", "Int", 0, False)]


def test_known_entries(declared) -> None:
    assert declared["AccumulateNV2"].inputs[0].kind == "dynamic"
    assert declared["AccumulateNV2"].attrs == [Attr("N", "Int", None, True)]
    assert declared["AccumulateNV2"].inputs[0].dtypes == GROUPS["NumberType"]
    assert [p.kind for p in declared["IdentityN"].outputs] == ["dynamic"]
    assert declared["Exp"].attrs[0] == Attr("base", "Float", -1.0, False)
    assert declared["Floor"].inputs[0].dtypes == {"float64", "float32", "float16"}
    assert declared["Select"].inputs[1].dtypes == GROUPS["BasicType"] | {"bool", "DT_STRING"}
    assert declared["Assign"].attrs == [Attr("validate_shape", "Bool", True, False),
                                        Attr("use_locking", "Bool", False, False)]
    # Sqrt spells its list TensorType{(...)}; OnesLike misspells DT_UINT16 as DI_UINT16.
    assert declared["Sqrt"].inputs[0].dtypes == {"bfloat16", "float32", "float16", "float64", "complex64",
                                                 "DT_COMPLEX128"}
    assert "uint16" in declared["OnesLike"].inputs[0].dtypes
    # A type symbol with its DATATYPE line; one without is unread (None), never guessed.
    assert declared["BatchNormV3"].inputs[3].dtypes == {"float32"}
    assert declared["Mul"].inputs[0].dtypes is None
    # An Int attr whose default is a dtype holds its ge::DataType.
    assert declared["Shape"].attrs == [Attr("dtype", "Int", 3, False)]


def test_groups_as_metadef_defines_them() -> None:
    assert len(GROUPS["ALL"]) == 23
    assert GROUPS["BasicType"] == GROUPS["ALL"] - {"bool", "DT_RESOURCE", "DT_STRING"}
    assert GROUPS["NumberType"] == GROUPS["BasicType"] - {"DT_QINT16", "DT_QUINT16"}
    assert GROUPS["RealNumberType"] == {"float64", "float32", "float16", "int16", "int32", "int64", "int8", "uint16",
                                        "uint32", "uint64", "uint8", "bfloat16"}
    assert GROUPS["IntegerDataType"] == {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
    assert GROUPS["IndexNumberType"] == {"int32", "int64"}


SAMPLE = """prose before the first declaration

REG_OP(Sample)
    .OPTIONAL_INPUT(a, TensorType::REALNUMBERTYPE())
    .OUTPUT(y, "T")
    .INPUT(b, TensorType({IndexNumberType(), DT_BOOL}))
    .DYNAMIC_OUTPUT(z, TensorType(UnaryDataType))
    .DATATYPE(T, TensorType({DT_FLOAT, DT_BF16}))
    .REQUIRED_ATTR(k, ListInt)
    .ATTR(eps, Float, 1e-3f)
    .ATRR(sizes, ListInt, {1, -2})
    .ATTR(mode, String, "zeros")
    .ATTR(dst, int, 3)
    .ATTR(dtype, Type, DT_INT64)
    .OP_END_FACTORY_REG(Sample)

REG_OP(Unread)
    .INPUT(x, TensorType({DT_FLOAT, SomethingElse}))
"""


def test_a_sample_declaration() -> None:
    ops = reg_ops.parse(SAMPLE)
    assert sorted(ops) == ["Sample", "Unread"]
    op = ops["Sample"]
    assert op.inputs == [Port("a", "optional", GROUPS["RealNumberType"]),
                         Port("b", "required", frozenset({"int32", "int64", "bool"}))]
    assert op.outputs == [Port("y", "required", frozenset({"float32", "bfloat16"})),
                          Port("z", "dynamic", GROUPS["UnaryDataType"])]
    assert op.attrs == [Attr("k", "ListInt", None, True), Attr("eps", "Float", 1e-3, False),
                        Attr("sizes", "ListInt", (1, -2), False), Attr("mode", "String", "zeros", False),
                        Attr("dst", "Int", 3, False), Attr("dtype", "Type", "int64", False)]
    assert ops["Unread"].inputs[0].dtypes is None


@pytest.mark.parametrize("text, message", [
    ("REG_OP(A)\n    .INPUT(x, TensorType({DT_FLOAT}))\n    .GRAPH(body)\n", r"REG_OP\(A\): unknown declaration \.GRAPH"),
    ("REG_OP(A)\n    .INPUT(x, TensorType({DT_FLOAT}))\n    not a declaration\n", r"REG_OP\(A\): cannot read the line"),
    ("REG_OP(A)\n\nREG_OP(A)\n", r"REG_OP\(A\) is declared twice"),
])
def test_bad_declarations_are_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        reg_ops.parse(text)
