"""TF's functional control flow (If, StatelessIf, Case, StatelessCase, While, StatelessWhile: what tf.cond,
tf.switch_case and tf.while_loop trace to in TF2) lowered onto the GE ops of the same names, as Ascend's TF adapter
and GE's TF parser map them (GE's AutoMappingFunction turns each func attribute into a subgraph; CANN's
op_proto/inc/functional_ops.h declares the ops). Each FunctionDef the node names (then_branch / else_branch,
branches, cond / body) is lowered by the ordinary Lowerer into a GE subgraph (graph_ir/lowering/functions.py):

- its value arguments become Data nodes, indexed among the arguments the GE node passes (If/Case: Data i is the
  node's input i + 1; While: input i), with the dtype and shape of the parent's tensor;
- its resource (variable) arguments are not passed: inside the subgraph they are the GE Variable of the same name
  (a GE Session shares Variables by name across graphs and subgraphs), so reads inside the function read the
  variable's value when they run, and AssignVariableOp / the optimizer ops inside it write the variable itself, as
  TF's tf.cond and tf.while_loop do (Keras's LossScaleOptimizer updates its scale and applies the optimizer inside
  an If). A While's resource loop variables are passed through unchanged by its body (checked), so the While's
  resource outputs are the variables themselves;
- its results go into the subgraph's NetOutput; its stateful nodes and control outputs run (they are control
  inputs of the NetOutput), as TF runs a function's stateful ops.

TensorList handles (loop state of Keras's RNN loop, tf.while_loop's gradient accumulators) cross subgraphs as
variant values; what the lowering knows of each list (graph_ir/lowering/ops/tensorlist.py) is carried into the
subgraphs and back out, and a While's body is lowered again when its results tell more about a loop list than its
inputs did (the accumulators' element shapes are known only from what the body pushes).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from tensorflow.core.framework import types_pb2

from graph_ir.dynamic.probe import valued_size
from graph_ir.executors.folding import known_value
from graph_ir.ir.errors import LoweringError
from graph_ir.ir.graph import Graph
from graph_ir.ir.nodes import Handle, TensorDesc
from graph_ir.lowering.capture import parse_tensor
from graph_ir.lowering.functions import Param, function_of, loop_invariants, lower_function
from graph_ir.lowering.ops.tensorlist import ListInfo, info, merge
from graph_ir.lowering.table import IDENTITIES
from graph_ir.opset.control import passed_through

IF_OPS = ("If", "StatelessIf")
CASE_OPS = ("Case", "StatelessCase")
WHILE_OPS = ("While", "StatelessWhile")
FUNCTIONAL = IF_OPS + CASE_OPS + WHILE_OPS
MAX_BODY_PASSES = 3  # a While body is lowered again while its results refine what is known of its loop lists

def _variable_of(ctx, tensor: str, node) -> tuple[str, np.ndarray, Any]:
    """The variable a resource tensor of the parent stands for (through Identities and While pass-throughs)."""
    seen = 0
    while True:
        name, index = parse_tensor(tensor)
        source = ctx.nodes[name]
        if name in ctx.variables:
            return ctx.variables[name]
        if source.op in IDENTITIES and source.op != "ReadVariableOp":
            tensor = source.input[0]
        elif source.op in WHILE_OPS:  # a resource loop variable passes through unchanged (checked when lowered)
            tensor = [t for t in source.input if not t.startswith("^")][index]
        else:
            raise LoweringError(f"TF {node.op} {node.name!r}: resource input {tensor!r} comes from {source.op} "
                                f"{name!r}, which is not a variable; only variables can enter a GE subgraph")
        seen += 1
        if seen > len(ctx.nodes):
            raise LoweringError(f"TF {node.op} {node.name!r}: resource input {tensor!r} refers to itself")


def _params(ctx, node, tf_inputs: list[str], handles: list[Handle], types: list[int]) -> list[Param]:
    if len(types) != len(tf_inputs):
        raise LoweringError(f"TF {node.op} {node.name!r}: {len(tf_inputs)} inputs, but its type list has "
                            f"{len(types)}")
    out = []
    for tensor, handle, dtype in zip(tf_inputs, handles, types):
        if dtype == types_pb2.DT_RESOURCE:
            out.append(Param(variable=_variable_of(ctx, tensor, node)))
        else:
            out.append(Param(handle=handle, list_info=info(ctx, handle)))
    return out


def _stateful(graphs: list[Graph]) -> bool:
    return any(n.op.refs or n.type in FUNCTIONAL for g in graphs for n in g.nodes.values())


def _func_list(node, attr: str) -> list[str]:
    value = node.attr[attr]
    return [f.name for f in value.list.func] if value.WhichOneof("value") == "list" else [value.func.name]


def _types(node, attr: str) -> list[int]:
    return list(node.attr[attr].list.type)


def lower_if_or_case(ctx, node, handles: list[Handle]):
    """If/StatelessIf (then_branch, else_branch) and Case/StatelessCase (branches) onto the GE op of the same name."""
    tf_inputs = [t for t in node.input if not t.startswith("^")]
    params = _params(ctx, node, tf_inputs[1:], handles[1:], _types(node, "Tin"))
    if node.op in IF_OPS:
        functions = [("then_branch", node.attr["then_branch"].func.name),
                     ("else_branch", node.attr["else_branch"].func.name)]
    else:
        functions = [(f"branches[{k}]", f) for k, f in enumerate(_func_list(node, "branches"))]
    roles = [attr.replace("[", "").replace("]", "") for attr, _ in functions]
    pred = ctx.value(handles[0])
    if node.op in IF_OPS and pred is not None and np.asarray(pred).size == 1:
        # A predicate known when lowering (folded: tf.Assert's AssertGuard on a static shape) runs one branch at every
        # step, as in TF, which never runs the other: both GE branches are that one (the other may hold what
        # cannot be lowered, such as the Assert of a check that always passes).
        functions = [functions[0 if bool(np.asarray(pred).reshape(-1)[0]) else 1]] * 2
    # First what each branch's results are, to give the zeros of the other branches' OptionalNone results.
    optionals: dict[int, TensorDesc] = {}
    has_nones = any(n.op == "OptionalNone" for _, name in functions for n in function_of(ctx, node, "", name).node_def)
    for (attr, name), role in zip(functions if has_nones else [], roles):
        for j, r in enumerate(lower_function(ctx, node, attr, name, params, role)[1]):
            if r is not None:
                optionals.setdefault(j, r.desc)
    lowered = [lower_function(ctx, node, attr, name, params, role, optionals)
               for (attr, name), role in zip(functions, roles)]
    graphs = [g for g, _, _ in lowered]
    if any(r is None for _, results, _ in lowered for r in results):
        raise LoweringError(f"TF {node.op} {node.name!r}: returns a resource; GE's {node.op} returns values only")
    ge_inputs = [handles[0]] + [p.handle for p in params if p.handle is not None]
    ge = ctx.graph.add_node(node.op, ge_inputs, {}, name=node.name, control_inputs=ctx.current_controls,
                            subgraphs=graphs, output_descs=_valued_results(ctx, [r for _, r, _ in lowered]))
    for k in range(len(ge.output_descs)):
        if ge.output_descs[k].dtype.name == "variant":
            infos = [info(sub, results[k]) for _, results, sub in lowered]
            ctx.tensor_lists[ge.output(k)] = _join(infos, f"TF {node.op} {node.name!r}")
    if node.op in ("If", "Case") and _stateful(graphs):
        ctx.stateful.append(ge)
    passed = _passed_through(ge, graphs)
    if not passed:
        return ge
    # An output every branch passes through unchanged is that input (an IndexedSlices' dense_shape through Keras's
    # conds): a value known when lowering stays known after the If.
    return [ge.inputs[1 + passed[k]] if k in passed else ge.output(k) for k in range(len(ge.output_descs))]


def _passed_through(ge, graphs: list[Graph]) -> dict[int, int]:
    """{output k: Data index i} where every branch returns its input i unchanged at output k (not a list)."""
    each = [passed_through(g) for g in graphs]
    return {k: each[0][k] for k in each[0] if all(p.get(k) == each[0][k] for p in each)
            and ge.output_descs[k].dtype.name != "variant"}


def _valued_results(ctx, results: list[list[Handle]]) -> list[TensorDesc] | None:
    """Where branches return other sizes (a Where's count in one), the If's or Case's results at the size a lowering
    gives a size known only from values (graph_ir/dynamic/probe.py valued_size); None where they agree."""
    shapes = [[h.desc.shape for h in r] for r in results]
    if ctx.probe is None or all(s == shapes[0] for s in shapes[1:]):
        return None
    size = valued_size(ctx.probe)
    return [TensorDesc(h.desc.name, h.desc.dtype, tuple(d if all(len(s[j]) == len(h.desc.shape) and s[j][k] == d
                                                              for s in shapes) else size
                                                         for k, d in enumerate(h.desc.shape)))
            for j, h in enumerate(results[0])]


def _join(infos: list[ListInfo], where: str) -> ListInfo:
    """What is known of a list that is any of `infos` (a branch's result)."""
    first = infos[0]
    same = all(i == first for i in infos)
    if same:
        return first
    try:
        shape = first.shape
        for i in infos[1:]:
            shape = merge(shape, i.shape, where)
    except LoweringError:
        shape = None
    return ListInfo(first.dtype, first.declared, all(i.known_declared and i.declared == first.declared
                                                     for i in infos), shape,
                    first.length if all(i.length == first.length for i in infos) else None)


def _loop_info(before: ListInfo, after: ListInfo, where: str) -> ListInfo:
    """What holds of a loop list at every iteration: its elements' shape as far as the body tells it."""
    constant = after.constant if before.length == 0 or before.constant == after.constant else None
    return ListInfo(before.dtype or after.dtype, before.declared, before.known_declared,
                    merge(before.shape, after.shape, where), before.length if before.length == after.length else None,
                    constant)


def lower_functional(ctx, node, handles: list[Handle]):
    """TF If, StatelessIf, Case, StatelessCase, While or StatelessWhile onto the GE op of the same name (what the
    lowerings of graph_ir/lowering/ops/control.py call through the lowering context)."""
    if node.op in WHILE_OPS:
        return lower_while(ctx, node, handles)
    return lower_if_or_case(ctx, node, handles)


def lower_while(ctx, node, handles: list[Handle]):
    """While/StatelessWhile (cond, body) onto the GE op of the same name; resource loop variables stay out of the GE
    loop state (the subgraphs use the variables themselves)."""
    tf_inputs = [t for t in node.input if not t.startswith("^")]
    params = _params(ctx, node, tf_inputs, handles, _types(node, "T"))
    where = f"TF {node.op} {node.name!r}"
    cond_name, body_name = node.attr["cond"].func.name, node.attr["body"].func.name
    # What no iteration changes and is known when lowering stays known in the loop (a Fill sized by it: tf.scan's).
    unchanged = loop_invariants(function_of(ctx, node, "body", body_name))
    params = [dataclasses.replace(p, invariant=True) if k in unchanged and p.handle is not None and
              known_value(p.handle) is not None else p for k, p in enumerate(params)]
    for _ in range(MAX_BODY_PASSES):
        cond, cond_results, _ = lower_function(ctx, node, "cond", cond_name, params, "cond")
        body, body_results, body_sub = lower_function(ctx, node, "body", body_name, params, "body")
        if len(cond_results) != 1 or cond_results[0] is None:
            raise LoweringError(f"{where}: its cond {cond_name!r} must return one value")
        if len(body_results) != len(params):
            raise LoweringError(f"{where}: its body {body_name!r} returns {len(body_results)} values for "
                                f"{len(params)} loop variables")
        refined = [p if p.handle is None or p.handle.dtype.name != "variant" else
                   Param(handle=p.handle, list_info=_loop_info(p.list_info, info(body_sub, r), where))
                   for p, r in zip(params, body_results)]
        if [p.list_info for p in refined] == [p.list_info for p in params]:
            break
        params = refined
    else:
        raise LoweringError(f"{where}: what its loop lists hold did not settle after {MAX_BODY_PASSES} lowerings of "
                            "its body")
    for p, r in zip(params, body_results):
        if (p.handle is None) != (r is None):
            raise LoweringError(f"{where}: its body {body_name!r} turns a loop variable into a resource or back")
    parallel = int(node.attr["parallel_iterations"].i) if "parallel_iterations" in node.attr else 10
    ge = ctx.graph.add_node(node.op, [p.handle for p in params if p.handle is not None],
                            {"parallel_iterations": max(parallel, 1)}, name=node.name,
                            control_inputs=ctx.current_controls, subgraphs=[cond, body])
    outputs, k = [], 0
    for p, tensor in zip(params, tf_inputs):
        if p.handle is None:
            outputs.append(ctx.handle(tensor))  # the variable itself
            continue
        outputs.append(ge.output(k))
        if p.handle.dtype.name == "variant":
            ctx.tensor_lists[ge.output(k)] = p.list_info
        k += 1
    if node.op == "While" and _stateful([cond, body]):
        ctx.stateful.append(ge)
    return outputs if len(outputs) != k else ge
