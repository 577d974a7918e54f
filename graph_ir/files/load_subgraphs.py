"""The subgraph checks of graph_ir/files/load.py: a ModelDef's graph[1:] are the subgraphs, addressed by name from the
functional nodes' OpDef.subgraph_name (metadef's graph/serialization/model_serialize.cc). Nothing in them is
trusted: the references must form a tree below the root (every name held and used once, no graph reachable from
itself, nesting within control.MAX_SUBGRAPH_DEPTH), walked without recursion, and the `_parent_node_index` bindings a
file states must be the ones GE's DataPass sets."""

from __future__ import annotations

from graph_ir.ir.errors import GraphError
from graph_ir.opset import control

NET_OUTPUT = "NetOutput"


def graph_defs(model, root_name: str) -> dict:
    """The subgraphs' GraphDefs (graph[1:]) by name, in file order: named, and each name once."""
    defs = {}
    for k, graph_def in enumerate(model.graph[1:], start=1):
        if not graph_def.name:
            raise GraphError(f"ModelDef {model.name[:80]!r}: graph[{k}] has no name; a subgraph is addressed by its "
                             "name")
        if graph_def.name in defs or graph_def.name == root_name:
            raise GraphError(f"ModelDef {model.name[:80]!r}: two graphs are named {graph_def.name[:80]!r} "
                             f"(graph[{k}] and an earlier one); subgraph names are unique")
        defs[graph_def.name] = graph_def
    return defs


def subgraph_tree(root_name: str, root_def, defs: dict) -> tuple[dict[str, tuple[str, str, int]], dict[str, int]]:
    """{subgraph: (parent op type, parent node, position)} and {graph: depth}, after checking that the references
    form a tree below the root: each name held, no cycle, one parent each, every subgraph used, depth within the
    bound."""
    graphs = {root_name: root_def, **defs}
    children: dict[str, list[str]] = {name: [] for name in graphs}
    parents: dict[str, list[tuple[str, str, str, int]]] = {name: [] for name in defs}
    for graph_name, graph_def in graphs.items():
        for op in graph_def.op:
            if op.subgraph_name and op.type not in control.FUNCTIONAL:
                raise GraphError(f"node {op.name[:80]!r} ({op.type[:80]}): lists subgraph_name, but only "
                                 f"{', '.join(sorted(control.FUNCTIONAL))} hold subgraphs")
            for k, sub in enumerate(op.subgraph_name):
                if sub == root_name:
                    raise GraphError(f"node {op.name[:80]!r} ({op.type}): subgraph_name[{k}] names the root graph "
                                     f"{root_name[:80]!r} (recursion)")
                if sub not in defs:
                    raise GraphError(f"node {op.name[:80]!r} ({op.type}): subgraph_name[{k}] names graph {sub[:80]!r}, "
                                     "which the ModelDef does not hold")
                children[graph_name].append(sub)
                parents[sub].append((op.type, op.name, graph_name, k))
    _check_acyclic(children)
    for sub, users in parents.items():
        if len(users) > 1:
            (_, a, ga, ka), (_, b, gb, kb) = ((t, n[:80], g[:80], k) for t, n, g, k in users[:2])
            raise GraphError(f"subgraph {sub[:80]!r} is used by node {a!r} (graph {ga!r}, subgraph_name[{ka}]) and by "
                             f"node {b!r} (graph {gb!r}, subgraph_name[{kb}]); a subgraph belongs to one node")
        if not users:
            raise GraphError(f"subgraph {sub[:80]!r} is not the subgraph of any node (no subgraph_name names it)")
    depth, queue = {root_name: 0}, [root_name]
    for name in queue:  # breadth first: the queue grows while it is read
        for sub in children[name]:
            depth[sub] = depth[name] + 1
            if depth[sub] > control.MAX_SUBGRAPH_DEPTH:
                node = parents[sub][0][1]
                raise GraphError(f"node {node[:80]!r}: its subgraph {sub[:80]!r} is nested {depth[sub]} levels deep; "
                                 f"at most {control.MAX_SUBGRAPH_DEPTH} levels are allowed")
            queue.append(sub)
    return {sub: (users[0][0], users[0][1], users[0][3]) for sub, users in parents.items()}, depth


def _check_acyclic(children: dict[str, list[str]]) -> None:
    """No graph reachable from itself through subgraph_name (an iterative depth-first walk)."""
    state: dict[str, int] = {}
    for start, subs in children.items():
        if state.get(start):
            continue
        path, stack = [], [(start, iter(subs))]
        state[start] = 1
        path.append(start)
        while stack:
            name, pending = stack[-1]
            sub = next(pending, None)
            if sub is None:
                stack.pop()
                path.pop()
                state[name] = 2
            elif state.get(sub) == 1:
                cycle = path[path.index(sub):] + [sub]
                shown = " -> ".join(name[:80] for name in cycle[:12]) + (" -> ..." if len(cycle) > 12 else "")
                raise GraphError(f"subgraph {sub[:80]!r} is reachable from itself (recursion): {shown}")
            elif not state.get(sub):
                state[sub] = 1
                path.append(sub)
                stack.append((sub, iter(children[sub])))


def check_binding(graph_name: str, node, op_def, parent: tuple[str, str, int]) -> None:
    """A subgraph's `_parent_node_index` attrs, where the file has them, are the ones GE's DataPass sets."""
    parent_type, parent_node, position = parent
    checks = []
    if node.type == "Data":
        checks.append(("attr", op_def.attr, node.attrs["index"] + control.data_offset(parent_type)))
    elif node.type == NET_OUTPUT:
        mapped = control.maps_outputs(parent_type, position)
        checks += [(f"input_desc[{j}].attr", d.attr, j if mapped else -1) for j, d in enumerate(op_def.input_desc)]
    for field, attrs, expected in checks:
        if control.PARENT_INDEX_ATTR not in attrs:
            continue
        attr = attrs[control.PARENT_INDEX_ATTR]
        if attr.WhichOneof("value") != "i" or attr.i != expected:
            got = attr.i if attr.WhichOneof("value") == "i" else f"a {attr.WhichOneof('value')} value"
            raise GraphError(f"node {node.name!r} ({node.type}) in subgraph {graph_name[:80]!r} of {parent_type} "
                             f"{parent_node!r}: {field} {control.PARENT_INDEX_ATTR} is {got}, expected {expected}")
