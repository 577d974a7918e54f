"""Every GE op graph_ir declares agrees with CANN's REG_OP declaration (../shared/research/ge_reg_ops.md): the names,
order and kinds (required, optional, dynamic) of inputs and outputs, the attributes' names, types and defaults, and
dtypes (graph_ir may allow fewer than CANN, never more)."""

from __future__ import annotations

import pytest

from graph_ir import registry
from tests.helpers import reg_ops

# Ops no op library declares (GE-internal or declared outside the op libraries), and the two Ascend optimizer ops,
# newer than the list; their prototypes come from ../shared/research/ge_standard_ops.md §4, §6 and cann_ops_nn.md
# §1.1, §2.1, which tests/graph_ir/test_builder.py checks.
NOT_IN_THE_LIST = {"Data", "RefData", "Const", "Variable", "NetOutput", "Cast", "InplaceApplyPowerSign",
                   "ApplyFusedEmaAdam"}
# Where ops-math's newer REG_OP (ge_standard_ops.md, file cited) allows a dtype the older list does not.
NEWER_DTYPES = {
    ("Identity", "x"): {"bfloat16"}, ("Identity", "y"): {"bfloat16"},  # ops-math identity_proto.h: ALL
    ("IdentityN", "x"): {"bfloat16"}, ("IdentityN", "y"): {"bfloat16"},  # ops-math identity_n_proto.h
}
_ATTR_TYPES = {"int": "Int", "float": "Float", "bool": "Bool", "string": "String", "type": "Type",
               "list_int": "ListInt", "tensor": "Tensor"}
_DEFAULTS = {"false": False, "true": True}
DECLARED = reg_ops.load()


def _kind(spec) -> str:
    return "dynamic" if spec.dynamic else "optional" if getattr(spec, "optional", False) else "required"


def test_every_registered_op_is_in_the_list_or_explained():
    assert not [t for t in registry.REGISTRY if t not in DECLARED and t not in NOT_IN_THE_LIST]


@pytest.mark.parametrize("op_type", sorted(t for t in registry.REGISTRY if t not in NOT_IN_THE_LIST))
def test_op_agrees_with_its_reg_op(op_type):
    op, declared = registry.get(op_type), DECLARED[op_type]
    for what, ours, theirs in (("inputs", op.inputs, declared.inputs), ("outputs", op.outputs, declared.outputs)):
        assert [(s.name, _kind(s)) for s in ours] == [(n, k) for n, k, _ in theirs], (op_type, what)
        for spec, (name, _, dtypes) in zip(ours, theirs):
            if dtypes is None:  # a type symbol (Mul's, Pow's "T1"): ge_standard_ops.md §1 lists them
                continue
            extra = set(spec.dtypes) - dtypes - NEWER_DTYPES.get((op_type, name), set())
            assert not extra, f"{op_type}.{name} allows {sorted(extra)}, which CANN does not"
    assert [(a.name, _ATTR_TYPES[a.type]) for a in op.attrs] == [(n, t) for n, t, _, _ in declared.attrs], op_type
    for attr, (_, _, default, required) in zip(op.attrs, declared.attrs):
        assert attr.required == required, (op_type, attr.name)
        if default is not None and attr.type in ("int", "float", "bool"):
            want = _DEFAULTS.get(default, default)
            if attr.type == "int" and isinstance(want, str):
                want = {"DT_INT32": 3}.get(want, want)  # Shape's dtype: a ge::DataType
            assert attr.default == (want if isinstance(want, bool) else type(attr.default)(want)), \
                (op_type, attr.name, attr.default, default)
