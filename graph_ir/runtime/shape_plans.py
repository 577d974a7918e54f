"""The plans of a template graph (dims known only at run time: graph_ir/dynamic) by the input shapes of a call.

The first call at a new combination of input shapes instantiates the template at those shapes and plans the
instance as any static graph; later calls at the same shapes reuse that plan. At most `max_plans` are kept, the
least recently used dropped first. A call whose shapes contradict the template (a known dim, the rank, or unknown
dims that must agree) is refused before anything runs, naming the input and the dim."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from graph_ir.dynamic import check_call_shapes, instantiate
from graph_ir.dynamic.instance import FED, call_shapes, describe_call
from graph_ir.ir.errors import GraphError
from graph_ir.ir.graph import Graph
from graph_ir.runtime.planner import Plan, plan

DEFAULT_MAX_PLANS = 8


class ShapePlans:
    """A template graph and its plans by input shapes (see the module docstring)."""

    def __init__(self, template: Graph, max_run_bytes: int | None, max_plans: int):
        self.template, self.max_run_bytes, self.max_plans = template, max_run_bytes, max_plans
        self.inputs = max((n.attrs["index"] for n in template.nodes.values() if n.type in FED), default=-1) + 1
        self.plans: OrderedDict[tuple, Plan] = OrderedDict()
        self.largest_peak = 0  # the largest peak of a plan run so far (Session releases memory below it)

    def plan_for(self, inputs: Sequence[Any]) -> Plan:
        """The plan for a call with `inputs` (its shapes only are read here)."""
        if len(inputs) != self.inputs:
            raise ValueError(f"graph {self.template.name!r} takes {self.inputs} inputs (by Data index), got "
                             f"{len(inputs)}")
        shapes = call_shapes(inputs)
        key = tuple(shapes)
        found = self.plans.get(key)
        if found is not None:
            self.plans.move_to_end(key)
            return found
        check_call_shapes(self.template, shapes)
        try:
            made = plan(instantiate(self.template, shapes), self.max_run_bytes)
        except GraphError as e:
            raise GraphError(f"graph {self.template.name!r} at the call's input shapes ({_unknown(self.template, shapes)}"
                             f"): {e}") from None
        self.plans[key] = made
        while len(self.plans) > self.max_plans:
            self.plans.popitem(last=False)
        return made


def _unknown(template: Graph, shapes: list[tuple[int, ...]]) -> str:
    """The call's shapes, and its unknown dims' sizes where they differ (the usual cause: 5 rows of x, 4 labels)."""
    sizes = {}
    for node in template.nodes.values():
        if node.type in FED:
            for k, d in enumerate(node.output_descs[0].shape):
                if d < 0:
                    sizes[f"{node.name} dim {k}"] = shapes[node.attrs["index"]][k]
    text = describe_call(template, shapes)
    if len(set(sizes.values())) > 1:
        text += "; the dims unknown in the graph are " + ", ".join(f"{n} = {v}" for n, v in sizes.items())
    return text
