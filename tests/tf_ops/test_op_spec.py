"""The registered OpDefs agree with op_spec, the one declared signature of each operator."""

from __future__ import annotations

import inspect

import pytest
import tensorflow as tf
from tensorflow.python.framework import op_def_registry

import op_spec as signatures
import tf_plugin

ATTR_FIELD = {"float": "f", "int": "i", "bool": "b"}


@pytest.mark.parametrize("sig", signatures.ALL, ids=lambda s: s.name)
@pytest.mark.parametrize("resource", [False, True])
def test_op_def_matches_signature(sig, resource):
    op_def = op_def_registry.get(sig.resource_op if resource else sig.ref_op)
    assert [a.name for a in op_def.input_arg] == [i.name for i in sig.inputs]
    for arg, declared in zip(op_def.input_arg, sig.inputs):
        if declared.state:
            assert arg.type == tf.resource.as_datatype_enum if resource else arg.is_ref
        elif declared.dtype == "T":
            assert arg.type_attr == "T"
        else:
            assert arg.type == tf.as_dtype(declared.dtype).as_datatype_enum
    attrs = {a.name: a for a in op_def.attr}
    allowed = [tf.as_dtype(d).name for d in (tf.DType(t) for t in attrs["T"].allowed_values.list.type)]
    assert sorted(allowed) == sorted(sig.dtypes)
    for declared in sig.attrs:
        value = getattr(attrs[declared.name].default_value, ATTR_FIELD[declared.type])
        assert value == pytest.approx(declared.default, rel=1e-7)
    assert set(attrs) == {"T", *(a.name for a in sig.attrs)}


def test_wrapper_defaults_match_signature():
    params = inspect.signature(tf_plugin.raw_ops.ResourceApplyFusedEmaAdam).parameters
    for declared in signatures.FUSED_EMA_ADAM.attrs:
        assert params[declared.name].default == declared.default
    assert params["lr"].default == signatures.FUSED_EMA_ADAM_LR_DEFAULT


def test_version_mismatch_is_one_clear_sentence(monkeypatch):
    from tf_plugin import _build_info, _loader

    monkeypatch.setattr(_build_info, "TF_VERSION", "1.15.0")
    with pytest.raises(ImportError, match=r"built for TensorFlow 1\.15\.0 but TensorFlow .* is running.*Rebuild"):
        _loader.load()
