"""One builder per registered GE op, generated from the registry (graph_ir/ir/registry.py).

Each builder takes the op's inputs positionally in IR order and its attributes as keywords with the IR defaults,
plus ``name`` and ``control_inputs``; it returns one handle per IR output (a tuple when there are several).
Numbers and arrays given for inputs become Consts of the op's dtype (shape [1] for scalar inputs). The graph
inputs, constants and NetOutput have their own builders: graph_ir.Data / Const / Variable and Graph.set_outputs.
"""

from __future__ import annotations

import inspect
import keyword
from typing import Any

from graph_ir.ir import registry
from graph_ir.ir.builders import to_handle
from graph_ir.ir.dtypes import as_dtype
from graph_ir.ir.graph import default_graph
from graph_ir.ir.nodes import Handle

_OWN_BUILDERS = ("Data", "RefData", "Variable", "Const", "NetOutput")


def _input_dtype(op: registry.IrOp, spec: registry.IrInput, given: dict[str, Any]):
    """The dtype a non-handle argument is converted to: the op's shared dtype (from a handle in its group), or the
    input's only allowed dtype."""
    if spec.name in op.same_dtype:
        for name in op.same_dtype:
            if isinstance(given.get(name), Handle):
                return given[name].dtype
    if len(spec.dtypes) == 1:
        return as_dtype(spec.dtypes[0])
    return as_dtype("float32")


def _param(name: str) -> str:
    """The Python parameter for an IR input: SelectV2's `else` becomes `else_` (a keyword cannot be a name)."""
    return f"{name}_" if keyword.iskeyword(name) else name


def _make_builder(op: registry.IrOp):
    params = [inspect.Parameter(_param(i.name), inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                default=None if i.optional else inspect.Parameter.empty) for i in op.inputs]
    params += [inspect.Parameter(a.name, inspect.Parameter.KEYWORD_ONLY,
                                 default=inspect.Parameter.empty if a.required else a.default) for a in op.attrs]
    params += [inspect.Parameter("name", inspect.Parameter.KEYWORD_ONLY, default=None),
               inspect.Parameter("control_inputs", inspect.Parameter.KEYWORD_ONLY, default=())]
    signature = inspect.Signature(params)
    attr_names = [a.name for a in op.attrs]

    def builder(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"graph_ir.ops.{op.type}{signature}: {e}") from None
        bound.apply_defaults()
        values = bound.arguments
        given = {spec.name: values[_param(spec.name)] for spec in op.inputs}
        inputs = []
        for spec in op.inputs:
            value = given[spec.name]
            if spec.dynamic:  # a list of tensors (IdentityN's x)
                inputs.extend(to_handle(v, _input_dtype(op, spec, given), spec.scalar) for v in value)
            else:
                inputs.append(None if value is None else to_handle(value, _input_dtype(op, spec, given),
                                                                   spec.scalar))
        attrs = {n: values[n] for n in attr_names}
        node = default_graph().add_node(op.type, inputs, attrs, name=values["name"],
                                        control_inputs=values["control_inputs"])
        outputs = tuple(node.output(k) for k in range(len(node.output_descs)))
        return outputs[0] if len(outputs) == 1 else outputs

    builder.__name__ = builder.__qualname__ = op.type
    builder.__signature__ = signature
    refs = op.refs
    outs = ", ".join(f"{o.name} (in place on input {op.inputs[refs[k]].name})" if k in refs else o.name
                     for k, o in enumerate(op.outputs))
    builder.__doc__ = (f"{op.doc}\n\nGE op {op.type}. Inputs (IR order): "
                       + ", ".join(f"{i.name} [{', '.join(i.dtypes)}]" for i in op.inputs)
                       + f".\nOutputs: {outs or 'none'}.\nAttributes: "
                       + (", ".join(f"{a.name}: {a.type} = {a.default!r}" for a in op.attrs) or "none") + ".")
    return builder


for _op in registry.REGISTRY.values():
    if _op.type not in _OWN_BUILDERS:
        globals()[_op.type] = _make_builder(_op)

__all__ = [op.type for op in registry.REGISTRY.values() if op.type not in _OWN_BUILDERS]
