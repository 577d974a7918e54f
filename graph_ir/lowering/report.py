"""What the lowering knows and what a step lacks: op_table() is every TF op type with the GE op(s) it becomes
(`python -m graph_ir ops` prints it); missing_ops(fn, *args) is every TF op type of a step that has no lowering,
with the nodes that hold it, found before lowering (inside inlined function calls too), not only the first."""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

from graph_ir.lowering import ops
from graph_ir.lowering.inline import CALL_OPS
from graph_ir.lowering.table import ASSIGNS, IDENTITIES, MULTI_LOWERINGS
from graph_ir.lowering.table import LOWERINGS as OPTIMIZERS
from graph_ir.lowering.trace import closure, lowering_errors, prepare

_PLUMBING = {
    "Const": "Const", "IdentityN": "IdentityN", "NoOp": "(none: its control edges pass on)",
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
    """{TF op type: [names of the nodes holding it]}; printed as one line per op type."""

    def __str__(self) -> str:
        if not self:
            return "every op of the step has a lowering"
        return "\n".join(f"{op} ({len(nodes)}): {', '.join(nodes)}" for op, nodes in self.items())


def missing_ops(fn: Any, *args: Any, fetches: Sequence | Any = None, session: Any = None) -> MissingOps:
    """Every TF op type that what `fn` runs holds and the lowering has no mapping for, each with the names of its
    nodes (a node inside an inlined call is named "<call>/<node>"), sorted by op type. Takes what
    graph_ir.from_tensorflow takes; an empty result means no op is missing (the lowering may still refuse a
    node for another reason: a dtype, a data-dependent shape). Raises LoweringError for what cannot be traced."""
    with lowering_errors("finding the missing ops"):
        step = prepare(fn, args, fetches, session, values=False)
        nodes = {n.name: n for n in step.graph_def.node}
        roots = [t.lstrip("^").split(":")[0] for t in step.outputs] + step.must_run + step.args
        needed = closure(step.graph_def, roots)
    known = set(ops.lowered_types())
    found: dict[str, list[str]] = {}
    for name in sorted(needed):
        if nodes[name].op not in known:
            found.setdefault(nodes[name].op, []).append(name)
    return MissingOps(sorted(found.items()))
