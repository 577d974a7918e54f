"""What the lowering knows and what a step lacks: op_table() is every TF op type with the GE op(s) it becomes
(`python -m graph_ir ops` prints it); missing_ops(fn, *args) is every TF op type of a step that the lowering
refuses, with the nodes that hold it: found before lowering (inside inlined function calls and the functions of
If/While/Case too), not only the first, and then by lowering the step when nothing was found before."""

from __future__ import annotations

import re
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from tensorflow.core.framework import types_pb2

from graph_ir.ir.errors import LoweringError
from graph_ir.lowering import ops
from graph_ir.lowering.distributed import from_distributed
from graph_ir.lowering.entry import from_tensorflow
from graph_ir.lowering.inline import CALL_OPS
from graph_ir.lowering.ops.hcom import COLLECTIVES
from graph_ir.lowering.table import ASSIGNS, IDENTITIES, MULTI_LOWERINGS
from graph_ir.lowering.table import LOWERINGS as OPTIMIZERS
from graph_ir.lowering.trace import closure, lowering_errors, prepare

_PLUMBING = {
    "Const": "Const", "IdentityN": "IdentityN", "Assert": "(none: its condition is checked when lowering)", "NoOp": "(none: its control edges pass on)",
    "Placeholder": "Data (a tf.Variable argument: Variable)", "VarHandleOp": "Variable", "VariableV2": "Variable",
    **{op: "Identity" for op in IDENTITIES}, **{op: "(inlined: the called function's nodes)" for op in CALL_OPS},
}


def op_table() -> list[tuple[str, str, str]]:
    """(TF op type, GE op(s), family) for every TF op type the lowering knows, sorted by TF op type."""
    families = {op: name for name, module in vars(ops).items() if isinstance(module, ModuleType)
                for op in getattr(module, "LOWERINGS", {})}
    rows = [(op, getattr(lower, "ge_type", "?"), families.get(op, "ops")) for op, lower in ops.LOWERINGS.items()]
    rows += [(op, lowering.ge_type, "optimizer") for op, lowering in OPTIMIZERS.items()]
    rows += [(op, f"{single.ge_type} per variable", "optimizer") for op, (_, single) in MULTI_LOWERINGS.items()]
    rows += [(op, ge, "variable") for op, ge in ASSIGNS.items()]
    rows += [(op, ge, "plumbing") for op, ge in _PLUMBING.items()]
    assert {r[0] for r in rows} == set(ops.lowered_types()), "op_table and lowered_types disagree"
    return sorted(rows)


def format_op_table() -> str:
    rows = [("TF op", "GE op", "family"), *op_table()]
    widths = [max(len(r[k]) for r in rows) for k in range(2)]
    return "\n".join(f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c}".rstrip() for a, b, c in rows)


class MissingOps(dict):
    """{TF op type: [names of the nodes holding it]}; printed as one line per op type, with the reason when it is
    not a missing mapping (`reasons`: {op type: why})."""

    def __init__(self, items=(), reasons: dict[str, str] | None = None):
        super().__init__(items)
        self.reasons = dict(reasons or {})

    def __str__(self) -> str:
        if not self:
            return "every op of the step has a lowering, and the step lowers"
        return "\n".join(f"{op} ({len(nodes)}): {', '.join(nodes)}" +
                         (f" -- {self.reasons[op]}" if op in self.reasons else "") for op, nodes in self.items())


_FUNCTION_ATTRS = ("then_branch", "else_branch", "cond", "body", "branches")
_STRING_TYPES = (types_pb2.DT_STRING, types_pb2.DT_VARIANT)


def _functions(node) -> list[str]:
    """The FunctionDefs a functional node (If, While, Case) runs."""
    names = []
    for attr in _FUNCTION_ATTRS:
        if attr in node.attr:
            value = node.attr[attr]
            names += [f.name for f in value.list.func] if value.WhichOneof("value") == "list" else [value.func.name]
    return names


def _screen(nodes, library: dict, known: set[str], prefix: str, found: dict[str, list[str]],
            reasons: dict[str, str], depth: int = 0) -> None:
    """Adds to `found` every node of `nodes` (and of the functions they run) that the lowering refuses whatever its
    inputs: an op type without a mapping, a string Const read by anything but an Assert (whose message the lowering
    does not read)."""
    # (a FunctionDef's inputs are "node:output:k", a graph's "node:k")
    read = {t.lstrip("^").split(":")[0] for n in nodes if n.op not in ops.CHECKED_WHEN_LOWERING for t in n.input}
    for node in nodes:
        name = prefix + node.name
        if node.op in library:  # a function called by its name (tf.scan's defun wrappers): inlined when lowering
            if depth < 16:
                _screen(library[node.op].node_def, library, known, f"{name}/", found, reasons, depth + 1)
            continue
        if node.op not in known:
            found.setdefault(node.op, []).append(name)
            if node.op in ops.REWRITES:
                reasons[node.op] = f"no lowering; {ops.REWRITES[node.op]}"
        elif node.op == "Const" and node.attr["dtype"].type in _STRING_TYPES and node.name in read:
            found.setdefault("Const", []).append(name)
            reasons["Const"] = "a string tensor (an assertion's or tf.print's message): GE graphs here take none"
        for function in _functions(node) if depth < 16 else []:
            if function in library:
                _screen(library[function].node_def, library, known, f"{name}/", found, reasons, depth + 1)


def _unknown_rank_arguments(step) -> list[str]:
    """The arguments traced with an unknown rank (unknown dims lower: graph_ir/dynamic)."""
    nodes = {n.name: n for n in step.graph_def.node}
    return [name for name in step.args if nodes[name].attr["shape"].shape.unknown_rank]


def missing_ops(fn: Any, *args: Any, fetches: Sequence | Any = None, session: Any = None) -> MissingOps:
    """What the lowering of `fn` refuses, by TF op type with the names of its nodes (a node inside an inlined call
    is named "<call>/<node>", one inside an If/While/Case function "<node>/<function node>"), sorted by op type.
    Takes what graph_ir.from_tensorflow takes. It lists every op type without a mapping (not only the first), string
    Consts and arguments of unknown rank ("Placeholder"); when it finds none, it lowers the step, and lists what
    that refuses for another reason (an Assert on the step's data, a begin computed in a way the lowering cannot
    slice with, a dtype) as
    the op type and node the LoweringError names, with the error as its reason. So an empty answer means
    from_tensorflow lowers the step. Raises LoweringError for what cannot be traced."""

    with lowering_errors("finding the missing ops"):
        step = prepare(fn, args, fetches, session, values=False)
        nodes = {n.name: n for n in step.graph_def.node}
        roots = [t.lstrip("^").split(":")[0] for t in step.outputs] + step.must_run + step.args
        needed = closure(step.graph_def, roots)
    library = {f.signature.name: f for f in step.graph_def.library.function}
    found: dict[str, list[str]] = {}
    reasons: dict[str, str] = {}
    _screen([nodes[name] for name in sorted(needed)], library, set(ops.lowered_types()), "", found, reasons)
    unknown = _unknown_rank_arguments(step)
    if unknown:
        found["Placeholder"] = unknown
        reasons["Placeholder"] = "an argument of unknown rank: give its rank (None for each dim known only at run time)"
    if step.refused:  # arguments that cannot be GE inputs (a string batch), each said why
        found.setdefault("Placeholder", []).extend(step.refused)
        reasons["Placeholder"] = "; ".join([*([reasons["Placeholder"]] if "Placeholder" in reasons else []),
                                            *step.refused.values()])
    if not found:
        distributed = any(n.op in COLLECTIVES for n in step.graph_def.node) or any(
            n.op in COLLECTIVES for f in library.values() for n in f.node_def)
        try:
            if distributed:  # a tf.distribute step: it lowers one graph per rank (graph_ir/lowering/spmd.py)
                from_distributed(fn, *args)
            else:
                from_tensorflow(fn, *args, fetches=fetches, session=session)
        except LoweringError as e:
            named = re.findall(r"TF (?:op )?(\w+) \(?(?:node )?'([^']+)'", str(e))  # the innermost node last
            op, node = named[-1] if named else ("(step)", step.name)
            found[op] = [node]
            reasons[op] = str(e)
    return MissingOps(sorted((op, sorted(names)) for op, names in found.items()), reasons)
