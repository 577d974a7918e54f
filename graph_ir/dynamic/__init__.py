"""Graphs with dims known only at run time (GE's -1 in a TensorDesc). A template graph's Data descs hold -1 where
the step was traced with None; its other descs hold -1 wherever the size follows from those. It is made by
lowering the step twice, with the unknown dims at two probe sizes, and merging the two graphs (merge.py): a node
whose attributes or Consts differ between them baked a size into the graph, and is refused by name. The Session
runs a template at each call's shapes through an instance (instance.py): the same nodes re-inferred at those
shapes, with the shape plumbing folded into Consts, planned as any static graph."""

from graph_ir.dynamic.instance import check_call_shapes, check_template, instantiate, is_template
from graph_ir.dynamic.merge import merge
from graph_ir.dynamic.probe import PROBES
from graph_ir.dynamic.template import add_template_node

__all__ = ["PROBES", "add_template_node", "check_call_shapes", "check_template", "instantiate", "is_template",
           "merge"]
