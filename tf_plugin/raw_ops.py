"""Raw-op mirrors of tf.raw_ops.ApplyPowerSign / ResourceApplyPowerSign, plus FusedEmaAdam: keyword-only, like
tf.raw_ops. The four wrappers are generated from op_spec (inputs, attributes and their defaults), so their
signatures cannot drift from the op registrations, which are generated from the same declarations.

- ApplyPowerSign(*, var, m, lr, logbase, sign_decay, beta, grad, use_locking=False, name=None): ref variables
  (tf.compat.v1 graphs); returns the updated var.
- ResourceApplyPowerSign(...): resource handles (``v.handle``; a tf.Variable is accepted); eager, tf.function and
  graph mode.
- ApplyFusedEmaAdam / ResourceApplyFusedEmaAdam(*, var, m, v, s, grad, step, lr=1e-3, ema_decay=0.9999, beta1=0.9,
  beta2=0.999, eps=1e-8, mode=1, bias_correction=True, weight_decay=0.0, use_locking=False, name=None).

T is var's dtype (ref ops) or grad's (resource ops). Python numbers are converted to the input's dtype; a tensor of
another dtype is an InvalidArgumentError naming the input.

Each call picks its path (``path_for``): the fused CPU kernel, or, inside XLA (jit_compile) and for variables on a
device without our kernels (GPU, TPU), the portable implementation of stock TF ops with the same numerics
(tf_plugin/portable.py).
"""

from __future__ import annotations

import functools
import inspect
import re
from typing import Any

import tensorflow as tf

import op_spec
import op_spec.checks
from tf_plugin import _loader, portable
from tf_plugin.arg_checks import check_multi_layout, int64_list, variable_dtype
from tf_plugin.arg_checks import handle as _handle
from tf_plugin.arg_checks import invalid as _invalid

FUSED, PORTABLE = "fused", "portable"


def _device_of(var: Any) -> str:
    for candidate in (var, getattr(var, "value", None)):
        device = getattr(candidate, "device", None)
        if isinstance(device, str) and device:
            return device
    return ""


@functools.lru_cache(maxsize=256)
def _on_cpu(device: str) -> bool:
    return tf.DeviceSpec.from_string(device).device_type in (None, "CPU")


def path_for(var: Any) -> str:
    """"fused" where our CPU kernel can run; "portable" inside XLA or for a variable on another device."""
    if not tf.executing_eagerly() and portable.in_xla_context():
        return PORTABLE
    device = _device_of(var)
    return FUSED if not device or _on_cpu(device) else PORTABLE


def _as_tensor(value: Any, dtype: tf.DType, name: str, because: str) -> tf.Tensor:
    """Python numbers and arrays are converted to dtype; a tensor of another dtype is an error naming `name` and
    saying `because` (formatted with T = dtype's name)."""
    if isinstance(value, (tf.Tensor, tf.Variable)) and value.dtype.base_dtype != dtype:
        reason = because.format(T=dtype.name)
        raise _invalid(f"{name} has dtype {value.dtype.base_dtype.name}, expected {dtype.name} ({reason})")
    return tf.convert_to_tensor(value, dtype=dtype, name=re.sub(r"\W", "_", name))


def _dtype_of(value: Any) -> tf.DType:
    if isinstance(value, (tf.Tensor, tf.Variable)):
        return value.dtype.base_dtype
    return tf.convert_to_tensor(value).dtype


def _snake(op_type: str) -> str:
    """The Python name TensorFlow gives a registered op (TfPluginApplyPowerSign -> tf_plugin_apply_power_sign)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", op_type).lower()


def _portable_power_sign(state, dtype, resource, kwargs):
    return portable.power_sign(state, dtype, resource, kwargs["lr"], kwargs["logbase"], kwargs["sign_decay"],
                               kwargs["beta"], kwargs["grad"], kwargs["use_locking"])


def _checked_fused_ema_adam_attrs(kwargs) -> dict:
    """FusedEmaAdam's attributes from a call, checked by the rules the fused op checks when it is built."""
    attrs = {a.name: kwargs[a.name] for a in op_spec.FUSED_EMA_ADAM.attrs}
    try:
        op_spec.checks.check_attrs(op_spec.FUSED_EMA_ADAM, attrs)
    except (TypeError, ValueError) as e:
        raise _invalid(str(e)) from None
    return attrs


def _portable_fused_ema_adam(state, dtype, resource, kwargs):
    attrs = _checked_fused_ema_adam_attrs(kwargs)
    return portable.fused_ema_adam(state, dtype, resource, kwargs["grad"], kwargs["step"], kwargs["lr"], attrs,
                                   kwargs["use_locking"])


_PORTABLE = {"PowerSign": _portable_power_sign, "FusedEmaAdam": _portable_fused_ema_adam}


def _conversions(sig) -> list[tuple[str, tf.DType | None, str]]:
    """Per single non-state input: its name, its fixed dtype (None: T) and why, decided once, not per call."""
    return [(i.name, None if i.dtype == "T" else tf.as_dtype(i.dtype),
             f"all {sig.name} tensors share T = {{T}}" if i.dtype == "T" else f"{i.name} is a {i.dtype} tensor")
            for i in sig.inputs if not i.state and not i.many]


def _keyword_signature(sig, single: op_spec.OpSignature) -> inspect.Signature:
    """Keyword-only: the inputs (lr defaults to its GE default), the attributes with their defaults, then name."""
    defaults = {a.name: a.default for a in single.ge.attr_inputs}  # TF inputs that GE makes attributes (lr)
    params = [inspect.Parameter(i.name, inspect.Parameter.KEYWORD_ONLY,
                                default=defaults.get(i.name, inspect.Parameter.empty)) for i in sig.inputs]
    params += [inspect.Parameter(a.name, inspect.Parameter.KEYWORD_ONLY, default=a.default) for a in sig.attrs]
    params.append(inspect.Parameter("name", inspect.Parameter.KEYWORD_ONLY, default=None))
    return inspect.Signature(params)


def _make_wrapper(sig: op_spec.OpSignature, resource: bool):
    op_type = sig.resource_op if resource else sig.ref_op
    public = op_type[len(op_spec.OP_PREFIX):]
    t_source = "grad" if resource else "var"  # the input that decides T
    op = getattr(_loader.load(), _snake(op_type))
    converted = _conversions(sig)

    def wrapper(**kwargs):
        state = {n: kwargs.pop(n) for n in sig.state_inputs}
        name = kwargs.pop("name")
        dtype = _dtype_of(kwargs[t_source]) if resource else state["var"].dtype.base_dtype
        if dtype.name not in sig.dtypes:
            raise _invalid(f"{t_source} has dtype {dtype.name}; expected one of {', '.join(sig.dtypes)}")
        held = variable_dtype(state["var"])
        if resource and held is not None and held != dtype:  # T comes from grad: name it, not the variable
            raise _invalid(f"grad has dtype {dtype.name}, but var is a variable of dtype {held.name}; all "
                           f"{sig.name} tensors share T")
        for input_name, fixed, because in converted:
            kwargs[input_name] = _as_tensor(kwargs[input_name], fixed or dtype, input_name, because)
        path = path_for(state["var"])
        if resource:
            state = {n: _handle(v) for n, v in state.items()}
        if path == FUSED:
            return op(**state, **kwargs, name=name)
        with tf.name_scope(name or public):
            return _PORTABLE[sig.name](state, dtype, resource, kwargs)

    signature = _keyword_signature(sig, sig)
    params = list(signature.parameters.values())
    keyword_defaults = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
    required = {p.name for p in params if p.default is inspect.Parameter.empty}
    known = {p.name for p in params}

    def bound(*args, **kwargs):
        # The signature's checks, by set operations: inspect.Signature.bind costs more than the op itself.
        if args:
            raise TypeError(f"tf_plugin.raw_ops.{public} takes keyword arguments only (as tf.raw_ops does)")
        if not required <= kwargs.keys() or not kwargs.keys() <= known:
            missing, unknown = sorted(required - kwargs.keys()), sorted(kwargs.keys() - known)
            raise TypeError(f"tf_plugin.raw_ops.{public}{signature}: missing {missing}, unexpected {unknown}")
        return wrapper(**{**keyword_defaults, **kwargs})

    bound.__name__ = bound.__qualname__ = public
    bound.__signature__ = signature
    kind = "resource handles (v.handle or a tf.Variable)" if resource else "ref variables (tf.compat.v1 graphs)"
    inputs = "\n".join(f"  {i.name}: {i.doc}" + (" (scalar: shape [] or [1])" if i.scalar else "")
                       for i in sig.inputs)
    attrs = "\n".join(f"  {a.name} = {a.default!r}: {a.doc}" for a in sig.attrs)
    bound.__doc__ = (f"{sig.name} on {kind}, in place (op {op_type}).\n\n{sig.formula}\n\nT in "
                     f"{{{', '.join(sig.dtypes)}}}.\nInputs:\n{inputs}\nAttributes:\n{attrs}\n"
                     + ("Returns the updated var." if not resource else "Returns the op (None in eager mode)."))
    return bound


def _portable_multi(msig: op_spec.MultiOpSignature, variables, flat, grads, dtype, kwargs):
    if msig.single is op_spec.POWER_SIGN:
        scalars = [kwargs[i.name] for i in msig.inputs if not i.state and not i.many]  # lr, logbase, ...
        return portable.multi_tensor(lambda k, read, grad: portable.power_sign_values(read, dtype, *scalars, grad),
                                     variables, flat, grads, dtype, kwargs["state_offsets"])
    attrs = _checked_fused_ema_adam_attrs(kwargs)
    no_decay = set(kwargs["no_decay"])
    step, lr = kwargs["step"], kwargs["lr"]

    def values(k, read, grad):
        return portable.fused_ema_adam_values(read, grad, step, lr,
                                              {**attrs, "weight_decay": 0.0} if k in no_decay else attrs)

    with tf.control_dependencies(portable.fused_ema_adam_checks(step, lr, attrs)):
        return portable.multi_tensor(values, variables, flat, grads, dtype, kwargs["state_offsets"])


def _make_multi_wrapper(msig: op_spec.MultiOpSignature):
    """The wrapper of a multi-tensor op: vars and grads are lists of N, the flat state one variable per name."""
    public = msig.resource_op[len(op_spec.OP_PREFIX):]
    op = getattr(_loader.load(), _snake(msig.resource_op))
    converted = _conversions(msig)
    signature = _keyword_signature(msig, msig.single)

    def wrapper(*args, **kwargs):
        if args:
            raise TypeError(f"tf_plugin.raw_ops.{public} takes keyword arguments only (as tf.raw_ops does)")
        bound = signature.bind(**kwargs)  # once per step, not per variable: its cost does not matter here
        bound.apply_defaults()
        kwargs = dict(bound.arguments)
        name = kwargs.pop("name")
        variables, grads = list(kwargs.pop("vars")), list(kwargs.pop("grads"))
        flat = {n: kwargs.pop(n) for n in msig.flat_state}
        if not variables or len(variables) != len(grads):
            raise _invalid(f"{public}: vars and grads must be lists of the same length >= 1, got {len(variables)} "
                           f"and {len(grads)}")
        dtype = _dtype_of(grads[0])
        if dtype.name not in msig.dtypes:
            raise _invalid(f"grads[0] has dtype {dtype.name}; expected one of {', '.join(msig.dtypes)}")
        grads = [_as_tensor(g, dtype, f"grads[{k}]", f"all {msig.name} tensors share T = {{T}}")
                 for k, g in enumerate(grads)]
        for input_name, fixed, because in converted:
            kwargs[input_name] = _as_tensor(kwargs[input_name], fixed or dtype, input_name, because)
        for key in ("no_decay", "state_offsets"):
            if key in kwargs:
                kwargs[key] = int64_list(kwargs[key], key)
        path = path_for(variables[0])
        if path != FUSED:  # the fused kernel checks the layout itself, before it writes
            check_multi_layout(variables, flat, grads, kwargs, dtype)
        variables = [_handle(v) for v in variables]
        flat = {n: _handle(v) for n, v in flat.items()}
        if path == FUSED:
            return op(vars=variables, **flat, grads=grads, **kwargs, name=name)
        with tf.name_scope(name or public):
            return _portable_multi(msig, variables, flat, grads, dtype, kwargs)

    wrapper.__name__ = wrapper.__qualname__ = public
    wrapper.__signature__ = signature
    inputs = "\n".join(f"  {i.name}: {i.doc}" for i in msig.inputs)
    attrs = "\n".join(f"  {a.name} = {a.default!r}: {a.doc}" for a in msig.attrs)
    wrapper.__doc__ = (f"{msig.single.name} on N resource variables of one dtype in one call (op {msig.resource_op}),"
                       f" over flat optimizer state.\n\n{msig.formula}\n\nEach variable's result is bitwise the "
                       f"single-tensor op's. T in {{{', '.join(msig.dtypes)}}}.\nInputs:\n{inputs}\n"
                       f"Attributes:\n{attrs}\nReturns the op (None in eager mode).")
    return wrapper


ApplyPowerSign = _make_wrapper(op_spec.POWER_SIGN, resource=False)
ResourceApplyPowerSign = _make_wrapper(op_spec.POWER_SIGN, resource=True)
ApplyFusedEmaAdam = _make_wrapper(op_spec.FUSED_EMA_ADAM, resource=False)
ResourceApplyFusedEmaAdam = _make_wrapper(op_spec.FUSED_EMA_ADAM, resource=True)
ResourceApplyMultiPowerSign = _make_multi_wrapper(op_spec.MULTI_POWER_SIGN)
ResourceApplyMultiFusedEmaAdam = _make_multi_wrapper(op_spec.MULTI_FUSED_EMA_ADAM)

__all__ = ["ApplyFusedEmaAdam", "ApplyPowerSign", "ResourceApplyFusedEmaAdam", "ResourceApplyMultiFusedEmaAdam",
           "ResourceApplyMultiPowerSign", "ResourceApplyPowerSign"]
