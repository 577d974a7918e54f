"""Adding a node to a template graph: its attributes, inputs' dtypes and list counts are checked as Graph.add_node
checks them, but its output descs are taken as given, with -1 for a dim known only at run time. Shapes are checked
when the template is instantiated at a call's shapes (graph_ir/dynamic/instance.py), where every node is inferred
again."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graph_ir.ir import nesting, registry
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import Handle, Node, TensorDesc
from graph_ir.ir.verify import check_list_count, verify_attrs, verify_inputs

UNKNOWN_DIM = -1  # GE's mark of a dim known only at run time (ge::UNKNOWN_DIM, CANN's graph/types.h)
UNKNOWN_RANK = -2  # GE's mark of an unknown rank (ge::UNKNOWN_DIM_NUM): refused, a rank must be known
VALUE_OUTPUTS = ("value",)  # Const and Variable: their desc is their value's, never unknown


def check_template_desc(node: str, op: registry.IrOp, field: str, shape: Sequence[int]) -> tuple[int, ...]:
    """A template desc's dims: each >= 0 or -1, rank <= 64; -2 and other negatives are refused naming the field."""
    dims = tuple(int(d) for d in shape)
    if len(dims) > 64:
        raise GraphError(f"node {node!r}: {field} has rank {len(dims)}; at most 64 is supported")
    if UNKNOWN_RANK in dims:
        raise GraphError(f"node {node!r}: {field} has shape {list(dims)}: -2 (an unknown rank) is not supported; "
                         "give the rank, with -1 for each dim known only at run time")
    if any(d < UNKNOWN_DIM for d in dims):
        raise GraphError(f"node {node!r}: {field} has shape {list(dims)}; a dim is >= 0, or -1 when known only at "
                         "run time")
    if UNKNOWN_DIM in dims and op.outputs_from in VALUE_OUTPUTS:
        raise GraphError(f"{op.type} {node!r}: {field} has shape {list(dims)}, but a {op.type}'s shape is its "
                         "value's: -1 is not allowed there")
    return dims


def add_template_node(graph: Any, op_type: str, inputs: Sequence[Handle | None], attrs: dict[str, Any], *,
                      name: str, control_inputs: Sequence[Node], output_descs: list[TensorDesc],
                      subgraphs: Sequence[Any] = ()) -> Node:
    """Adds node `name` to template `graph` with the given output descs (see the module docstring)."""
    op = registry.get(op_type, node=name)
    if name in graph.nodes:
        raise GraphError(f"a node named {name!r} already exists in graph {graph.name!r}")
    full_attrs = verify_attrs(op, name, attrs)
    verify_inputs(op, name, list(inputs))
    check_list_count(op, name, list(inputs), full_attrs)
    fixed_count = not op.graphs and not any(o.dynamic for o in op.outputs)
    if fixed_count and len(output_descs) != len(op.outputs):
        raise GraphError(f"{op.type} {name!r}: has {len(output_descs)} output descs, expected {len(op.outputs)}")
    descs = [TensorDesc(d.name, d.dtype, check_template_desc(name, op, f"output_desc[{k}]", d.shape), d.list_meta)
             for k, d in enumerate(output_descs)]
    graphs = list(subgraphs)
    if graphs or op.graphs:
        nesting.check_new_subgraphs(graph, op, name, graphs, type(graph))
    node = Node(name, op, list(inputs), full_attrs, descs, list(control_inputs), graphs)
    graph.nodes[name] = node
    if graphs:
        nesting.attach(graph, node, graphs)
    return node
