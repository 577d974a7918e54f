"""Steps with dims known only at run time (graph_ir/dynamic): lower a step ONCE from specs with None dims, save the
template as .air and load it back (its Data descs must hold GE's -1 exactly where the specs have None), then run K
steps at each of several call shapes in one graph_ir.Session beside the same steps in TensorFlow, on the same
batches, and compare every state variable (model and optimizer) and every output after each shape."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

import graph_ir
from graph_ir.dynamic import is_template
from tests.helpers.depthwise import floats
from tests.helpers.lowering import captured, session_values, state_name
from tests.helpers.train_steps import scaled_difference

TOLERANCE = 1e-4  # relative to each tensor's own scale, after every shape's steps
STEPS = 2  # steps at each call shape

Shapes = Sequence[tuple[int, ...]]


def data_shapes(graph: graph_ir.Graph) -> list[tuple[int, ...]]:
    """The Data descs' shapes, by Data index."""
    fed = sorted((n.attrs["index"], n) for n in graph.nodes.values() if n.type in ("Data", "RefData"))
    return [tuple(n.output_descs[0].shape) for _, n in fed]


def expected_dims(specs: Sequence[tf.TensorSpec]) -> list[tuple[int, ...]]:
    """The Data descs a template lowered from `specs` must have: -1 exactly where a spec has None."""
    return [tuple(-1 if d is None else int(d) for d in spec.shape.as_list()) for spec in specs]


def saved_and_loaded(graph: graph_ir.Graph, folder: str, ext: str = "air") -> graph_ir.Graph:
    """The graph saved as .air (or .pbtxt) and read back with graph_ir.files.load."""
    path = os.path.join(folder, f"{graph.name}.{ext}")
    graph.save(path)
    return graph_ir.load(path)


def lower_template(fn, specs: Sequence[tf.TensorSpec], folder: str,
                   *lower_args) -> tuple[graph_ir.Graph, graph_ir.Graph]:
    """Lowers `fn` once (from `lower_args`, or the specs themselves), saves it as .air, loads it back, and asserts
    the loaded Data descs hold -1 exactly where the specs have None. Returns (the lowered template, which knows the
    TF variables' GE names, and the loaded one, which the Session runs)."""
    graph = graph_ir.from_tensorflow(fn, *(lower_args or specs))
    want = expected_dims(specs)
    assert data_shapes(graph) == want, (data_shapes(graph), want)
    loaded = saved_and_loaded(graph, folder)
    assert data_shapes(loaded) == want, (data_shapes(loaded), want)
    return graph, loaded


def draw(rng: np.random.Generator, shape: tuple[int, ...], dtype: tf.DType, high: int = 0,
         pad: bool = False) -> np.ndarray:
    """A random array: integers below `high` (with trailing padding zeros of random length in each row when
    `pad`), or normal floats with exact zeros, negatives and ties."""
    if dtype.is_integer:
        values = rng.integers(1 if pad else 0, high, shape).astype(dtype.as_numpy_dtype)
        if pad and values.ndim == 2 and values.shape[1] > 1:
            for row, keep in zip(values, rng.integers(1, values.shape[1] + 1, values.shape[0])):
                row[keep:] = 0  # each row keeps at least one token
            values[0, -1] = 0  # at least one padded position
        return values
    return floats(rng, *shape).astype(dtype.as_numpy_dtype)


def batches(seed: int, specs: Sequence[tf.TensorSpec], highs: Sequence[int] = (),
            pads: Sequence[bool] = ()) -> Callable[[Shapes], list[np.ndarray]]:
    """batch(shapes) -> one fresh array per spec, at the given concrete shapes."""
    rng = np.random.default_rng(seed)
    highs, pads = list(highs) + [0] * len(specs), list(pads) + [False] * len(specs)

    def batch(shapes: Shapes) -> list[np.ndarray]:
        return [draw(rng, tuple(s), spec.dtype, h, p) for s, spec, h, p in zip(shapes, specs, highs, pads)]

    return batch


def _flat(values) -> list[np.ndarray]:
    return [np.asarray(v) for v in tf.nest.flatten(values)]


def compare_at_shapes(graphs: tuple[graph_ir.Graph, graph_ir.Graph], tf_step: Callable,
                      batch: Callable[[Shapes], list[np.ndarray]], call_shapes: Sequence[Shapes], state: Sequence,
                      steps: int = STEPS, session: graph_ir.Session | None = None) -> dict[tuple, float]:
    """Runs `steps` steps at each of `call_shapes` in one Session (of the loaded template of lower_template's
    `graphs`) beside `tf_step` on the same batches; after each shape asserts every output and every captured state
    variable within TOLERANCE of TF's. Returns the largest scaled difference per call shape."""
    graph, loaded = graphs
    assert is_template(loaded), "the step lowered to a static graph"
    if session is None:
        session = graph_ir.Session()
    session.add_graph(0, loaded)
    held = captured(graph, state)
    assert held, "the graph holds none of the state variables"
    worst: dict[tuple, float] = {}
    for shapes in call_shapes:
        key = tuple(tuple(s) for s in shapes)
        for _ in range(steps):
            args = batch(shapes)
            got = session.run_graph(0, args)
            want = _flat(tf_step(*args))
            assert len(got) == len(want), (len(got), len(want))
            for k, (g, w) in enumerate(zip(got, want)):
                assert g.shape == w.shape, (key, k, g.shape, w.shape)
                difference = scaled_difference(g, w)
                assert difference <= TOLERANCE, f"output {k} at {key}: {difference:.2e}"
                worst[key] = max(worst.get(key, 0.0), difference)
        for v, got in zip(held, session_values(graph, session, held)):
            name, want = state_name(graph, v), np.asarray(v.numpy())
            assert got.dtype == want.dtype and got.shape == want.shape, name
            difference = scaled_difference(got, want)
            assert difference <= TOLERANCE, f"{name} after the steps at {key}: {difference:.2e}"
            worst[key] = max(worst[key], difference)
    return worst


def dynamic_step(step: Callable, specs: Sequence[tf.TensorSpec], batch: Callable[[Shapes], list[np.ndarray]],
                 call_shapes: Sequence[Shapes], state: Callable[[], Sequence], folder: str,
                 steps: int = STEPS) -> tuple[graph_ir.Graph, dict[tuple, float]]:
    """One TF step at the first call shape (it builds the model's and the optimizer's variables, as fit's first
    step does), then lower_template and compare_at_shapes. `state` gives the variables to compare once built."""
    step(*batch(call_shapes[0]))
    graphs = lower_template(step, specs, folder)
    return graphs[0], compare_at_shapes(graphs, step, batch, call_shapes, state(), steps)
