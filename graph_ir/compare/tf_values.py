"""One run of a TF step in TensorFlow that keeps the value of every tensor a GE node stands for.

The step's GraphDef, as the lowering sees it (function calls inlined, so GE node names are its node names), is
imported into a wrapped function whose variable placeholders are the step's own variables: the run updates them as
the step does, and fetches the named tensors beside the ops the step must run."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from graph_ir.ir.errors import GraphError
from graph_ir.lowering.trace import Step

_PREFIX = "step"
_NOT_VALUES = (tf.resource, tf.variant, tf.string)


@dataclass
class TFRun:
    """What the run left: values {(TF node, output index): array}, and the TF op type of every fetched node."""

    values: dict[tuple[str, int], np.ndarray]
    op_types: dict[str, str]


@contextlib.contextmanager
def _graph_as_written() -> Iterator[None]:
    """Grappler's rewrites that change roundings off while the step's function is instantiated: constant folding
    turns x / c into x * (1 / c), the arithmetic optimizer regroups sums (tensorflow/core/grappler/optimizers/
    constant_folding.cc, arithmetic_optimizer.cc). The nodes then hold what their own kernels compute, which the
    lowering table's tolerances are about."""
    saved = tf.config.optimizer.get_experimental_options()
    tf.config.optimizer.set_experimental_options({"constant_folding": False, "arithmetic_optimization": False})
    try:
        yield
    finally:
        tf.config.optimizer.set_experimental_options({k: saved.get(k, True) for k in
                                                      ("constant_folding", "arithmetic_optimization")})


def run_step(step: Step, inputs: Sequence[np.ndarray], nodes: set[str]) -> TFRun:
    """Runs `step` once on `inputs` (by argument position), keeping every output of the TF nodes named in `nodes`
    that holds values (not resources or variants); updates the step's variables as the step does."""
    if len(inputs) != len(step.args):
        raise ValueError(f"the step takes {len(step.args)} inputs ({', '.join(step.args)}), got {len(inputs)}")
    placeholders = {n.name: n for n in step.graph_def.node}
    specs = []
    for name, value in zip(step.args, inputs, strict=True):
        dtype = tf.dtypes.as_dtype(placeholders[name].attr["dtype"].type)
        specs.append(tf.TensorSpec(np.shape(value), dtype, name=name))

    fetched: list[tuple[str, int]] = []
    op_types: dict[str, str] = {}

    def body(*args):
        graph = tf.compat.v1.get_default_graph()
        input_map = {name: graph.capture(var.handle) for name, (_, _, var) in step.variables.items()
                     if var is not None}
        input_map.update(zip(step.args, args))
        tf.graph_util.import_graph_def(step.graph_def, input_map=input_map, name=_PREFIX)
        tensors = []
        for name in sorted(nodes & set(placeholders)):
            op = graph.get_operation_by_name(f"{_PREFIX}/{name}")
            if op.type == "Placeholder":  # the step's inputs and variables: replaced by the input map
                continue
            op_types[name] = op.type
            for j, tensor in enumerate(op.outputs):
                if tensor.dtype not in _NOT_VALUES:
                    fetched.append((name, j))
                    tensors.append(tensor)
        # What the step must run (its assigns, the optimizer), returned as a constant that waits for them.
        with tf.control_dependencies([graph.get_operation_by_name(f"{_PREFIX}/{name}")
                                      for name in dict.fromkeys(step.must_run)]):
            done = tf.constant(True)
        return tensors, done

    try:
        wrapped = tf.compat.v1.wrap_function(body, specs)
        with _graph_as_written():
            results, _ = wrapped(*(tf.constant(v, dtype=s.dtype) for v, s in zip(inputs, specs, strict=True)))
    except (tf.errors.OpError, ValueError, TypeError) as e:
        raise GraphError(f"running {step.name} in TensorFlow to compare it: {type(e).__name__}: {e}") from e
    values = {key: np.asarray(tensor.numpy()) for key, tensor in zip(fetched, results, strict=True)}
    return TFRun(values, op_types)
