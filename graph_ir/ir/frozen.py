"""Learning-rate variables that graph_ir.from_tensorflow froze into ApplyFusedEmaAdam's lr attribute: left out of the
graph (Graph.frozen_variables), so a name a user may still hold is refused with the reason, never accepted and
ignored (graph_ir/lowering/lowerer.py decides what is frozen)."""

from __future__ import annotations

from typing import Any


def frozen_message(name: str, nodes: list[str]) -> str:
    """Why a frozen learning-rate variable is not in the graph, and what to do."""
    return (f"the learning-rate variable {name!r} is not a Variable of the graph: its value when lowering is the lr "
            f"attribute of ApplyFusedEmaAdam {', '.join(repr(n) for n in nodes[:3])}"
            f"{' ...' if len(nodes) > 3 else ''}. Lower the step again after changing it, or lower with "
            "graph_ir.from_tensorflow(..., freeze_learning_rate=False) to keep it a Variable that drives each step")


def unheld_message(name: Any, held: dict, frozen: dict[str, list[str]]) -> str:
    """Why a session holds no Variable `name` (a frozen learning rate says so)."""
    if isinstance(name, str) and name in frozen:
        return frozen_message(name, frozen[name])
    return f"the session holds no Variable {name!r:.200}; it has {sorted(held)}"
