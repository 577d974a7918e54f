"""Every face of the operators agrees with op_spec, their one declaration: the registered OpDefs, the wrappers'
defaults, and every range boundary in the Python checks and the generated C++ checks."""

from __future__ import annotations

import inspect
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import op_def_registry

import graph_ir
import op_spec as signatures
import tf_plugin
from op_spec import codegen
from op_spec.checks import check_attrs, check_input_value
from tests.helpers import ROOT

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


@pytest.mark.parametrize("sig", signatures.ALL_MULTI, ids=lambda s: s.name)
def test_multi_tensor_op_def_matches_signature(sig):
    op_def = op_def_registry.get(sig.resource_op)
    assert [a.name for a in op_def.input_arg] == [i.name for i in sig.inputs]
    for arg, declared in zip(op_def.input_arg, sig.inputs):
        assert arg.number_attr == ("N" if declared.many else "")
        if declared.state:
            assert arg.type == tf.resource.as_datatype_enum
        elif declared.dtype == "T":
            assert arg.type_attr == "T"
    attrs = {a.name: a for a in op_def.attr}
    assert set(attrs) == {"N", "T", *(a.name for a in sig.attrs)}
    assert {a.name for a in sig.single.attrs} <= set(attrs)  # the single op's attributes, same defaults
    for declared in sig.single.attrs:
        value = getattr(attrs[declared.name].default_value, ATTR_FIELD[declared.type])
        assert value == pytest.approx(declared.default, rel=1e-7)
    assert list(attrs["state_offsets"].default_value.list.i) == []


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


def _attr_probes():
    for sig in signatures.ALL:
        for attr in sig.attrs:
            if attr.rule is not None:
                for value, accepted in attr.rule.probes():
                    yield pytest.param(sig, attr.name, value, accepted, id=f"{sig.name}.{attr.name}={value!r}")


def _fresh_fused_variables():
    return [tf.Variable(np.array([1.0, -2.0, 0.5], np.float32)) for _ in range(4)]


@pytest.mark.parametrize(("sig", "name", "value", "accepted"), list(_attr_probes()))
def test_every_attribute_boundary_on_both_sides(sig, name, value, accepted):
    """Each rule's boundary values (float32 neighbours of each edge, NaN, Inf): the Python check (Keras, TF1,
    graph_ir.kernels) and the generated C++ check (the TF op) accept and reject exactly the same values."""
    value = int(value) if sig.attr(name).type == "int" else value
    if accepted:
        check_attrs(sig, {name: value})
    else:
        with pytest.raises(ValueError, match=f"{name} must be"):
            check_attrs(sig, {name: value})
    variables = _fresh_fused_variables()
    before = [v.numpy().copy() for v in variables]
    call = lambda: tf_plugin.raw_ops.ResourceApplyFusedEmaAdam(
        var=variables[0], m=variables[1], v=variables[2], s=variables[3], grad=np.ones(3, np.float32), step=1,
        lr=0.01, **{name: value})
    multi = lambda: tf_plugin.raw_ops.ResourceApplyMultiFusedEmaAdam(  # the multi-tensor op reads the same rules
        vars=[variables[0]], m=variables[1], v=variables[2], s=variables[3], grads=[np.ones(3, np.float32)], step=1,
        lr=0.01, **{name: value})
    for run in (call, multi):
        if accepted:
            run()
        else:
            with pytest.raises(tf.errors.InvalidArgumentError, match=f"{name} must be"):
                run()
            for v, b in zip(variables, before):
                np.testing.assert_array_equal(v.numpy(), b)


@pytest.mark.parametrize("bias_correction", [True, False])
@pytest.mark.parametrize(("name", "value"), [("step", 0), ("step", 1), ("step", -1), ("lr", float("nan")),
                                             ("lr", float("inf")), ("lr", 3.4e38), ("lr", -1.0)])
def test_every_input_rule_on_both_sides(name, value, bias_correction):
    """The run-time rules of scalar inputs (step >= 1 with bias correction, a finite lr): TF op, graph_ir.kernels
    and op_spec.checks agree."""
    sig = signatures.FUSED_EMA_ADAM
    spec = sig.input(name)
    accepted = (spec.rule_when == "bias_correction" and not bias_correction) or spec.rule.accepts(value)
    inputs = {"step": 1, "lr": 0.01, name: value}
    variables = _fresh_fused_variables()
    arrays = [v.numpy().copy() for v in variables]
    results = []
    for call in (
        lambda: tf_plugin.raw_ops.ResourceApplyFusedEmaAdam(
            var=variables[0], m=variables[1], v=variables[2], s=variables[3], grad=np.ones(3, np.float32),
            bias_correction=bias_correction, **inputs),
        lambda: graph_ir.kernels.apply_fused_ema_adam(np.ones(3, np.float32), *arrays, inputs["step"],
                                                      lr=inputs["lr"], bias_correction=bias_correction),
        lambda: check_input_value(sig, name, value, {"bias_correction": bias_correction}),
        lambda: tf_plugin.raw_ops.ResourceApplyMultiFusedEmaAdam(
            vars=[variables[0]], m=variables[1], v=variables[2], s=variables[3], grads=[np.ones(3, np.float32)],
            bias_correction=bias_correction, **inputs),
    ):
        try:
            call()
            results.append(True)
        except (ValueError, tf.errors.InvalidArgumentError) as e:
            assert f"{name} must be" in str(e)
            results.append(False)
    assert results == [accepted] * 4


def test_generated_header_is_what_the_build_compiled():
    """setup.py generated the C++ from this op_spec (a stale header would mean a stale build)."""
    with open(os.path.join(ROOT, "build", "include", "generated", "op_spec.h")) as f:
        assert f.read() == codegen.generate()
