"""The builders of the graph inputs, constants and state: Data (RefData), Const and Variable. They add a node to
the graph of the enclosing ``with graph:``."""

from __future__ import annotations

from typing import Any

import numpy as np

from graph_ir.ir.dtypes import DType, as_dtype
from graph_ir.ir.errors import GraphError
from graph_ir.ir.graph import default_graph
from graph_ir.ir.nodes import Handle, TensorDesc
from graph_ir.ir.verify import check_shape, is_int


def _shape(shape: Any) -> tuple[int, ...]:
    if shape is None:
        return ()
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        dims = [d for d in shape]
    except TypeError:
        raise GraphError(f"Data: shape must be a sequence of ints, got {shape!r}") from None
    if not all(is_int(d) for d in dims):
        raise GraphError(f"Data: shape must be a sequence of ints, got {shape!r}")
    return check_shape("Data", "shape", dims)


def Data(index: int = 0, dtype: Any = "float32", shape: Any = (8,), *, name: str | None = None,
         ref: bool = False) -> Handle:
    """A graph input fed by position `index` of run_graph's inputs (RefData when `ref`: written in place)."""
    graph = default_graph()
    if not is_int(index) or index < 0:
        raise GraphError(f"Data: index must be an int >= 0, got {index!r}")
    for other in graph.nodes_of_type("Data") + graph.nodes_of_type("RefData"):
        if other.attrs["index"] == index:
            raise GraphError(f"Data: index {index} is already fed to node {other.name!r}")
    desc = TensorDesc("y", as_dtype(dtype), _shape(shape))
    op_type = "RefData" if ref else "Data"
    return graph.add_node(op_type, (), {"index": int(index)}, name=name or f"{op_type.lower()}{index}",
                          output_descs=[desc]).output(0)


def Const(value: Any, dtype: Any = None, *, name: str | None = None) -> Handle:
    """A constant. Python numbers become arrays of shape [] (a Python float is float32, as in TF)."""
    array = np.array(value, dtype=as_dtype(dtype).numpy if dtype is not None else None)
    if dtype is None and array.dtype == np.float64 and not isinstance(value, np.ndarray):
        array = array.astype(np.float32)
    return default_graph().add_node("Const", (), {"value": array}, name=name).output(0)


def Variable(name: str, value: Any, *, index: int = 0) -> Handle:
    """Session-held state named `name` (shared by name across the graphs of a session), initialized from `value`
    when a session first sees it. The node is named exactly `name`."""
    if not isinstance(name, str) or not name or ":" in name:
        raise GraphError(f"Variable: name must be a non-empty str without ':', got {name!r}")
    attrs = {"value": np.array(value), "index": index, "shared_name": name}
    return default_graph().add_node("Variable", (), attrs, name=name, exact_name=True).output(0)


def to_handle(value: Any, dtype: DType, scalar: bool) -> Handle:
    """A handle for a builder argument: handles pass through; numbers and arrays become a Const of `dtype` (shape [1]
    for scalar inputs, the scalar policy of this package)."""
    if isinstance(value, Handle):
        return value
    array = np.asarray(value, dtype=dtype.numpy)
    if scalar and array.shape == ():
        array = array.reshape(1)
    return Const(array)
