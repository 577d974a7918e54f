"""The functional (control-flow) ops' GE prototypes, as CANN declares them in op_proto/inc/functional_ops.h
(metadef; also shipped in torchair's third_party/ascend/include/ops/op_proto/inc/functional_ops.h):

  If, StatelessIf      .INPUT(cond, ALL) .DYNAMIC_INPUT(input, ALL) .DYNAMIC_OUTPUT(output, ALL)
                       .GRAPH(then_branch) .GRAPH(else_branch)
  Case, StatelessCase  .INPUT(branch_index, DT_INT32) .DYNAMIC_INPUT(input, ALL) .DYNAMIC_OUTPUT(output, ALL)
                       .DYNAMIC_GRAPH(branches)
  While, StatelessWhile  .DYNAMIC_INPUT(input, ALL) .DYNAMIC_OUTPUT(output, ALL) .GRAPH(cond) .GRAPH(body)
                       .ATTR(parallel_iterations, Int, 10)

A node of these ops holds its subgraphs (Node.subgraphs, in IR order: If [then, else], Case [branch 0, 1, ...],
While [cond, body]). Inside a subgraph the parameters are Data nodes whose `index` counts the parent's inputs
after cond / branch_index (If, Case) or from the first (While); GE binds them to the parent's inputs by the attr
`_parent_node_index` (metadef's ATTR_NAME_PARENT_NODE_INDEX; GE's DataPass sets it), which graph_ir writes when it
serializes. The results are the subgraph's NetOutput inputs: the node's outputs for If and Case (every branch
returns the same dtypes and shapes), the next loop state for a While body (the loop inputs' dtypes and shapes), one
scalar predicate for a While cond.

Truth of cond (If's cond input, a While cond's result), as TF's If/While (tensorflow/core/kernels/functional_ops.cc,
ToBool) and CANN's doc comments state it: a scalar (rank 0) is true when non-zero (NaN is non-zero); a tensor of
another rank (even [1]) is true when it is non-empty. Case runs branches[branch_index], and the last branch when
branch_index is out of range (TF's CaseOp does the same).
Executors: graph_ir/executors/control.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import Handle, TensorDesc, merge_lists
from graph_ir.ir.registry import ALL_DTYPES, WITH_VARIANT, IrAttr, IrInput, IrOp, IrOutput, register

IF_OPS = ("If", "StatelessIf")
CASE_OPS = ("Case", "StatelessCase")
WHILE_OPS = ("While", "StatelessWhile")
FUNCTIONAL = frozenset(IF_OPS + CASE_OPS + WHILE_OPS)
MAX_SUBGRAPH_DEPTH = 32  # subgraphs nest at most this deep below the root graph (a bound on files and recursion)
PARENT_INDEX_ATTR = "_parent_node_index"
COND_DTYPES = ALL_DTYPES  # a predicate is a number or a bool, never a TensorList handle
# The values a functional op passes on include TensorList handles (dtype variant), as TF's functional ops carry them.
_OUTPUT = (IrOutput("output", WITH_VARIANT, dynamic=True),)
for _type in IF_OPS:
    register(IrOp(_type, (IrInput("cond", ALL_DTYPES), IrInput("input", WITH_VARIANT, dynamic=True)), _OUTPUT,
                  outputs_from="subgraphs", graphs=("then_branch", "else_branch"),
                  doc="output = then_branch(input) if cond is true else else_branch(input)."))
for _type in CASE_OPS:
    register(IrOp(_type, (IrInput("branch_index", ("int32",), scalar=True),
                          IrInput("input", WITH_VARIANT, dynamic=True)), _OUTPUT, outputs_from="subgraphs",
                  graphs=("branches",), dynamic_graph=True,
                  doc="output = branches[branch_index](input); the last branch when branch_index is out of range."))
for _type in WHILE_OPS:
    register(IrOp(_type, (IrInput("input", WITH_VARIANT, dynamic=True),), _OUTPUT,
                  (IrAttr("parallel_iterations", "int", 10),), outputs_from="subgraphs",
                  graphs=("cond", "body"),
                  doc="state = input; while cond(state): state = body(state); output = state."))


def data_offset(op_type: str) -> int:
    """The parent input that a subgraph's Data index 0 stands for: 1 for If and Case (input 0 is cond or
    branch_index), 0 for While."""
    return 0 if op_type in WHILE_OPS else 1


def maps_outputs(op_type: str, position: int) -> bool:
    """Whether subgraph `position`'s NetOutput inputs are the node's outputs (all but a While's cond)."""
    return not (op_type in WHILE_OPS and position == 0)


def subgraph_role(op: IrOp, position: int) -> str:
    """The IR name of subgraph `position`: then_branch, else_branch, cond, body, branches[k]."""
    return f"{op.graphs[0]}[{position}]" if op.dynamic_graph else op.graphs[position]


def check_subgraph_count(op: IrOp, node: str, count: int) -> None:
    if op.dynamic_graph and count < 1:
        raise GraphError(f"{op.type} {node!r}: needs at least one subgraph in {op.graphs[0]!r}, got none")
    if not op.dynamic_graph and count != len(op.graphs):
        raise GraphError(f"{op.type} {node!r}: needs {len(op.graphs)} subgraphs ({', '.join(op.graphs)}), "
                         f"got {count}")


def _check_params(where: str, op: IrOp, graph: Any, params: list[TensorDesc]) -> None:
    """The subgraph's Data nodes stand for distinct parent inputs with the same dtype and shape."""
    seen: dict[int, str] = {}
    for sub in graph.nodes.values():
        if sub.type == "RefData":
            raise GraphError(f"{where}: node {sub.name!r} is a RefData; a subgraph's parameters are Data nodes")
        if sub.type != "Data":
            continue
        index = sub.attrs["index"]
        if index >= len(params):
            raise GraphError(f"{where}: Data {sub.name!r} has index {index}, but {op.type} passes {len(params)} "
                             f"inputs to it (Data indices 0..{len(params) - 1})")
        if index in seen:
            raise GraphError(f"{where}: Data {sub.name!r} and {seen[index]!r} both have index {index}")
        seen[index] = sub.name
        have, want = sub.output_descs[0], params[index]
        if (have.dtype, have.shape) != (want.dtype, want.shape):
            raise GraphError(f"{where}: Data {sub.name!r} (index {index}) is {have.dtype}{list(have.shape)}, but "
                             f"{op.type}'s input {index + data_offset(op.type)} is {want.dtype}{list(want.shape)}")


def _results(where: str, graph: Any) -> list[TensorDesc]:
    net = graph.nodes.get("NetOutput")
    if net is None:
        raise GraphError(f"{where}: the subgraph has no NetOutput node (its results)")
    return [h.desc for h in net.inputs]


def _describe(descs: Sequence[TensorDesc]) -> str:
    return "[" + ", ".join(f"{d.dtype}{list(d.shape)}" for d in descs) + "]"


def infer_functional(op: IrOp, node: str, inputs: Sequence[Handle | None], graphs: Sequence[Any],
                     given: Sequence[TensorDesc] | None = None) -> list[TensorDesc]:
    """The output descs of a functional node from its subgraphs, checking each against the parent's inputs (see the
    module docstring); every fault is a GraphError naming the node, the subgraph and the field. Branches of an If or
    Case that return the same dtypes and ranks but other sizes (a size that depends on values, such as tf.where's
    count) take the `given` descs: the sizes they agree on, any size (-1 in a template) where they differ."""
    check_subgraph_count(op, node, len(graphs))
    params = [h.desc for h in inputs[data_offset(op.type):] if h is not None]
    results = []
    for position, graph in enumerate(graphs):
        where = f"{op.type} {node!r}: subgraph {graph.name!r} ({subgraph_role(op, position)})"
        _check_params(where, op, graph, params)
        results.append((where, _results(where, graph)))
    if op.type in WHILE_OPS:
        (cond_where, cond), (body_where, body) = results
        if len(cond) != 1 or cond[0].shape != () or cond[0].dtype.name not in COND_DTYPES:
            raise GraphError(f"{cond_where}: must return one scalar (shape []) of bool or a number, its NetOutput "
                             f"has {_describe(cond)}")
        if [(d.dtype, d.shape) for d in body] != [(d.dtype, d.shape) for d in params]:
            raise GraphError(f"{body_where}: must return the loop state {_describe(params)} (the While's inputs' "
                             f"dtypes and shapes), its NetOutput has {_describe(body)}")
        # A list's desc after the loop: what it holds at every iteration (graph_ir/ir/nodes.py ListMeta)
        return [TensorDesc(f"output{j}", d.dtype, d.shape, merge_lists(d.list_meta, after.list_meta))
                for j, (d, after) in enumerate(zip(params, body))]
    first_where, first = results[0]
    if given is not None and _valued_branches(op, node, [descs for _, descs in results], given):
        return [d.renamed(f"output{j}") for j, d in enumerate(given)]
    for where, descs in results[1:]:
        if [(d.dtype, d.shape) for d in descs] != [(d.dtype, d.shape) for d in first]:
            raise GraphError(f"{where}: returns {_describe(descs)}, but {first_where.split(': ', 1)[1]} returns "
                             f"{_describe(first)}; every branch returns the same dtypes and shapes")
    joined = list(first)
    for _, descs in results[1:]:
        joined = [TensorDesc(d.name, d.dtype, d.shape, merge_lists(d.list_meta, e.list_meta))
                  for d, e in zip(joined, descs)]
    return [d.renamed(f"output{j}") for j, d in enumerate(joined)]


def _valued_branches(op: IrOp, node: str, results: list[list[TensorDesc]], given: Sequence[TensorDesc]) -> bool:
    """Whether branches that differ only in sizes fit the `given` descs (see infer_functional); False when they
    agree (the usual rule applies) or differ otherwise."""
    first = results[0]
    if all([(d.dtype, d.shape) for d in r] == [(d.dtype, d.shape) for d in first] for r in results[1:]):
        return False
    if any([(d.dtype, len(d.shape)) for d in r] != [(d.dtype, len(d.shape)) for d in first] for r in results[1:]):
        return False
    if [(d.dtype, len(d.shape)) for d in given] != [(d.dtype, len(d.shape)) for d in first]:
        raise GraphError(f"{op.type} {node!r}: output_desc says {_describe(given)}, but its branches return "
                         f"{' or '.join(_describe(r) for r in results)}")
    for j, desc in enumerate(given):
        for k, size in enumerate(desc.shape):
            sizes = {r[j].shape[k] for r in results}
            if len(sizes) == 1 and size not in sizes:
                raise GraphError(f"{op.type} {node!r}: output_desc[{j}] says {desc.dtype}{list(desc.shape)}, but "
                                 f"every branch returns {sizes.pop()} in dim {k}")
    return True


def branch_sizes_differ(graphs: Sequence[Any]) -> bool:
    """Whether subgraphs (an If's or Case's branches) return results of other shapes (a Where's count in one)."""
    results = [[h.desc.shape for h in g.nodes["NetOutput"].inputs] for g in graphs if "NetOutput" in g.nodes]
    return any(r != results[0] for r in results[1:])


def passed_through(graph: Any) -> dict[int, int]:
    """{result k: Data index i} where subgraph `graph` returns its input i unchanged (through Identity) as result k: a
    branch passing a value on, or a loop variable that no iteration changes (whose known value stays known)."""
    net = graph.nodes.get("NetOutput")
    out: dict[int, int] = {}
    for k, h in enumerate(net.inputs if net is not None else ()):
        while h is not None and h.node.type == "Identity":
            h = h.node.inputs[0]
        if h is not None and h.node.type == "Data":
            out[k] = h.node.attrs["index"]
    return out
