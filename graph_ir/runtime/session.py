"""A session that executes GE graphs on graph_ir.kernels, as ge::Session does on the device.

- Nodes run in topological order (data and control edges). Runs of one Session are serialized by a lock, as
  ge::Session serializes a graph's runs: concurrent run_graph calls give the result of some serial order.
- Variables are session-held and shared by name across the session's graphs, initialized from their `value` attr
  when the session first sees them. The optimizer ops write the Variable's (or RefData's) own buffer in place.
- A Data input is copied when fed (an in-place op on it writes the graph's copy, as GE would); a RefData input is
  the caller's array itself, written in place.
- Identity is a snapshot: it copies only when its source (a Variable, RefData or Data buffer) is written in place
  later in the run while the snapshot (or a view of it) is still to be read; otherwise it passes the array on.
  Values are dropped after their last use.
- run_graph returns copies of the NetOutput values, so later runs cannot change what it returned. Outputs that are
  the same tensor (or views of one buffer) are returned as one array (or views of one copy).
- A graph with dims known only at run time (-1 in its Data descs, graph_ir/dynamic) is planned at each call's input
  shapes, and the plans are kept by shapes (graph_ir/runtime/shape_plans.py); what follows holds for each such plan.
  A graph with sizes known only from values (a Where's count) runs part by part around such nodes, each part planned
  at the sizes the run has reached (graph_ir/runtime/segments.py).
- Memory stays in proportion to the graph: add_graph plans the largest memory a run holds (fed copies, snapshots,
  new arrays, returned copies, and at each node its executor's working memory: graph_ir.executors.WORKSPACE) and
  refuses a graph above the session's bound (max_run_bytes, by default 256 MiB plus 4 times the graph's own data:
  its Consts, Variables and Data inputs), naming the node where the run would hold the most. A fed input is copied:
  a broadcast or zero-stride view whose copy would be above max_run_bytes (by default 256 MiB) is refused by name
  before anything is copied or planned, since its few bytes must not stand for a run of any size.
- Control flow (If, Case, While; graph_ir/executors/control.py): add_graph plans every subgraph too; a functional
  node runs its subgraphs through _run, its working memory is its subgraphs' largest peak (plus the loop state for
  a While), and a run's loops spend at most max_loop_iterations bodies and max_loop_work elements of work.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from graph_ir.distributed import runs as hcom_runs
from graph_ir.distributed.group import Group
from graph_ir.dynamic import is_template
from graph_ir.executors import control as control_flow
from graph_ir.executors import random as random_ops
from graph_ir.executors import run_settings
from graph_ir.executors.plan_steps import CONST, EXECUTOR, FED, OUTPUT, VARIABLE, Step
from graph_ir.ir.dtypes import as_dtype
from graph_ir.ir.errors import GraphError
from graph_ir.ir.frozen import unheld_message
from graph_ir.ir.graph import Graph
from graph_ir.ir.verify import is_int
from graph_ir.runtime.planner import BASE_RUN_BYTES, Plan, plan
from graph_ir.runtime.segments import PartedGraph, fed_view, has_deciders
from graph_ir.runtime.shape_plans import DEFAULT_MAX_PLANS, ShapePlans


class Session:
    """Runs GE graphs: add_graph, run_graph, get_variables, set_variables (the ge::Session calls).

    max_run_bytes: the most memory one run may hold (see the module docstring); by default 256 MiB plus four times
    the graph's own data. max_loop_iterations, max_loop_work: the most loop bodies, and elements of loop work, one run
    may spend (graph_ir/executors/control.py). blas_threads: the threads NumPy's BLAS uses during a run (graph_ir/executors/blas.py: one by
    default, as spinning BLAS workers on a busy machine make products many times slower; None leaves the process's
    setting). threads: the threads a run's large executors split their work over (graph_ir/executors/threads.py; the
    results do not depend on it); None, the default, is every CPU the process may run on. keep_memory: freed large
    buffers stay with the process for the next run (graph_ir/executors/run_settings.py; True by default).
    max_shape_plans: for a graph with dims known only at run time (-1, graph_ir/dynamic), the most plans kept, one per
    combination of input shapes (graph_ir/runtime/shape_plans.py). group: the ranks the graphs' Hcom ops run among
    (graph_ir.distributed.world() under mpiexec; docs/distributed.md); add_graph of a graph with Hcom nodes is then
    collective (every rank adds its graph, checked against the others'); None (the default) refuses Hcom nodes.
    """

    def __init__(self, *, max_run_bytes: int | None = None, max_loop_iterations: int = 10**6,
                 max_loop_work: int = control_flow.DEFAULT_MAX_LOOP_WORK, blas_threads: int | None = 1,
                 threads: int | None = None, keep_memory: bool = True, max_shape_plans: int = DEFAULT_MAX_PLANS,
                 group: Group | None = None):
        control_flow.check_budgets(max_loop_iterations, max_loop_work)
        run_settings.check(max_run_bytes, blas_threads, threads, keep_memory)
        if not is_int(max_shape_plans) or max_shape_plans < 1:
            raise TypeError(f"max_shape_plans must be an int >= 1, got {max_shape_plans!r}")
        if group is not None and not isinstance(group, Group):
            raise TypeError(f"group must be a graph_ir.distributed.Group or None, got {type(group).__name__}")
        self.max_shape_plans, self.group = int(max_shape_plans), group
        self._hcom: dict[int, Any] = {}  # per graph: what its runs check the ranks by (runs.join), or None
        self.max_loop_iterations = int(max_loop_iterations)  # the most loop bodies a run executes, all Whiles
        self.max_loop_work = int(max_loop_work)  # the most elements a run's loops touch (control_flow.NODE_WORK)
        control_flow.reset_budgets(self)
        self.blas_threads, self.threads, self.keep_memory = blas_threads, threads, keep_memory
        self._max_run_bytes = max_run_bytes
        self._plans: dict[int, Plan | ShapePlans | PartedGraph] = {}
        self._random_streams: dict[int, dict] = {}  # per graph: its stateful random ops' Philox counters
        self._variables: dict[str, np.ndarray] = {}
        self._frozen: dict[str, list[str]] = {}  # learning-rate variables the added graphs froze (Graph.frozen_variables)
        self._lock = threading.Lock()

    def add_graph(self, graph_id: int, graph: Graph) -> None:
        """Verifies the graph, plans its runs, and creates the Variables this session does not hold yet."""
        _check_graph_id(graph_id)
        if not isinstance(graph, Graph):
            raise TypeError(f"add_graph: graph must be a graph_ir.Graph, got {type(graph).__name__}")
        if graph.parent_node is not None:
            raise GraphError(f"add_graph: graph {graph.name!r} is a subgraph of node {graph.parent_node.name!r}; add "
                             f"its root graph {graph.root.name!r}")
        graph.verify()
        joined = hcom_runs.join(self.group, graph)  # collective when the graph has Hcom nodes: on every rank
        if has_deciders(graph):  # sizes known only from values (Where): run part by part
            planned: Plan | ShapePlans | PartedGraph = PartedGraph(graph, self._max_run_bytes, self.max_shape_plans)
        elif is_template(graph):
            planned = ShapePlans(graph, self._max_run_bytes, self.max_shape_plans)
        else:
            planned = plan(graph, self._max_run_bytes)
        with self._lock:
            if graph_id in self._plans:
                raise ValueError(f"graph id {graph_id} is already added; remove_graph({graph_id}) first")
            new = {}
            for node in (n for g in (graph, *graph.subgraphs.values()) for n in g.nodes_of_type("Variable")):
                value = node.attrs["value"]
                held = self._variables.get(node.name, new.get(node.name))
                if held is None:
                    new[node.name] = np.array(value, copy=True, order="C")
                elif held.dtype != value.dtype or held.shape != value.shape:
                    raise GraphError(f"Variable {node.name!r} is held as {held.dtype}{list(held.shape)}, but graph "
                                     f"{graph.name!r} declares {value.dtype}{list(value.shape)}")
            self._variables.update(new)
            self._frozen.update(graph.frozen_variables)
            self._plans[graph_id] = planned
            self._random_streams[graph_id] = {}  # its stateful random ops start at their seeds
            self._hcom[graph_id] = joined

    def remove_graph(self, graph_id: int) -> None:
        with self._lock:
            if graph_id not in self._plans:
                raise KeyError(f"no graph with id {graph_id!r}")
            del self._plans[graph_id]
            del self._random_streams[graph_id]
            del self._hcom[graph_id]

    def _feeds(self, plan: Plan, inputs: Sequence[Any]) -> dict[str, np.ndarray]:
        feeds, graph, data = {}, plan.graph, plan.fed
        wanted = max((n.attrs["index"] for n in data), default=-1) + 1
        if len(inputs) != wanted:
            raise ValueError(f"graph {graph.name!r} takes {wanted} inputs (by Data index), got {len(inputs)}")
        for node in data:
            index, desc = node.attrs["index"], node.output_descs[0]
            value = inputs[index]
            name = f"input {index} ({node.name}{', RefData' if node.type == 'RefData' else ''})"
            try:
                array = value if isinstance(value, np.ndarray) else np.asarray(value)
            except (ValueError, TypeError) as e:  # a ragged nested list, or objects NumPy cannot hold
                kind = TypeError if isinstance(e, TypeError) else ValueError
                raise kind(f"{name} is not an array of one shape and dtype: {e}") from None
            try:
                dtype_name = as_dtype(array.dtype).name
            except TypeError:
                dtype_name = str(array.dtype)
            if dtype_name != desc.dtype.name:
                raise TypeError(f"{name} has dtype {dtype_name}, expected {desc.dtype}")
            if node.type == "RefData" and (not isinstance(value, np.ndarray) or not value.flags.writeable
                                           or not value.flags.c_contiguous or not value.dtype.isnative):
                raise ValueError(f"{name} must be a writable C-contiguous array in native byte order: it is "
                                 "updated in place")
            if array.shape != desc.shape and not (array.size == 1 and desc.num_elements == 1 and node.type == "Data"):
                raise ValueError(f"{name} has shape {list(array.shape)}, expected {list(desc.shape)}")
            if node.type != "RefData":
                try:
                    array = np.array(array, dtype=desc.dtype.numpy, copy=True, order="C")  # the graph's own copy
                except MemoryError:
                    raise MemoryError(f"{name}: no memory for the session's copy of it ({array.nbytes} bytes)") \
                        from None
            feeds[node.name] = array.reshape(desc.shape) if array.shape != desc.shape else array
        return feeds

    def run_graph(self, graph_id: int, inputs: Sequence[Any] = ()) -> list[np.ndarray]:
        """Runs graph `graph_id` with `inputs` (a list, fed to the Data nodes by index); returns copies of its
        outputs."""
        return self.run_graph_wrapped(graph_id, inputs, None)

    def run_graph_wrapped(self, graph_id: int, inputs: Sequence[Any], wrap: Callable[[Step], Step] | None) \
            -> list[np.ndarray]:
        """run_graph, each step of the run's plan (its root graph's) replaced by wrap(step): the hook
        graph_ir/compare observes a run through, the plan a template graph's at the call's input shapes."""
        _check_graph_id(graph_id)
        if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
            raise TypeError(f"run_graph: inputs must be a list of arrays, got {type(inputs).__name__}")
        with self._lock:
            if graph_id not in self._plans:
                raise KeyError(f"no graph with id {graph_id}; add_graph it first")
            _check_backed(inputs, self._max_run_bytes)
            entry = self._plans[graph_id]
            if isinstance(entry, PartedGraph):
                feeds = self._feeds(fed_view(entry.graph, inputs), inputs)
            else:
                planned = entry.plan_for(inputs) if isinstance(entry, ShapePlans) else entry
                feeds = self._feeds(planned, inputs)
                if wrap is not None:
                    planned = dataclasses.replace(planned, steps=[wrap(step) for step in planned.steps])
            control_flow.reset_budgets(self)  # loop bodies and work this run may still spend
            with run_settings.applied(self.blas_threads, self.threads, self.keep_memory), \
                    random_ops.streams(self._random_streams[graph_id]), \
                    hcom_runs.running(self.group, self._hcom[graph_id]):
                if isinstance(entry, PartedGraph):
                    return _copy_outputs(entry.run(self, feeds, wrap))
                outputs = self._run(planned, feeds)
            if isinstance(entry, ShapePlans):  # a smaller call after a larger one gives the difference back
                entry.largest_peak = run_settings.release_below(planned.peak_bytes, entry.largest_peak)
            return outputs

    def _run(self, plan: Plan, feeds: dict[str, np.ndarray], copy_outputs: bool = True) -> list[np.ndarray]:
        values: list[Any] = [None] * plan.slots
        outputs: list[np.ndarray] = []
        for step in plan.steps:
            kind, node = step.kind, step.node
            if kind == EXECUTOR:
                results = step.run(node, [values[k] for k in step.inputs])
            elif kind == FED:
                results = [feeds[node.name]]
            elif kind == VARIABLE:
                results = [self._variables[node.name]]
            elif kind == CONST:
                results = [node.attrs["value"]]
            elif kind == OUTPUT:
                outputs = [values[k] for k in step.inputs]
                outputs = _copy_outputs(outputs) if copy_outputs else outputs
            else:
                results = control_flow.execute(self, plan.subplans, node, [values[k] for k in step.inputs])
            if kind != OUTPUT:
                step.store(values, results)
            for k in step.drop:
                values[k] = None
        return outputs

    def _check_held(self, name: Any) -> None:
        if not isinstance(name, str) or name not in self._variables:
            raise KeyError(unheld_message(name, self._variables, self._frozen))

    def get_variables(self, names: Iterable[str]) -> list[np.ndarray]:
        """Copies of the named Variables' values (`names`: a list of Variable names)."""
        if isinstance(names, (str, bytes)) or not isinstance(names, Iterable):
            raise TypeError(f"get_variables: names must be a list of Variable names, got {type(names).__name__} "
                            f"{names!r:.80}")
        names = list(names)
        with self._lock:
            for name in names:
                self._check_held(name)
            return [self._variables[name].copy() for name in names]

    def set_variables(self, values: Mapping[str, Any]) -> None:
        """Writes new values into held Variables, in their own buffers (dtype and shape must match)."""
        if not isinstance(values, Mapping):
            raise TypeError(f"set_variables: values must be a dict {{name: array}}, got {type(values).__name__}")
        with self._lock:
            checked = {}
            for name, value in values.items():
                self._check_held(name)
                held, array = self._variables[name], np.asarray(value)
                if array.dtype.newbyteorder("=") != held.dtype or array.shape != held.shape:
                    raise ValueError(f"Variable {name!r} is {held.dtype}{list(held.shape)}, got "
                                     f"{array.dtype}{list(array.shape)}")
                checked[name] = array
            for name, array in checked.items():
                np.copyto(self._variables[name], array)


def _check_graph_id(graph_id: Any) -> None:
    if not is_int(graph_id) or not 0 <= graph_id < 2**32:
        raise TypeError(f"graph_id must be an int in [0, 2**32), got {graph_id!r:.80}")


def _copy_outputs(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """One copy per distinct buffer; outputs of one buffer are views of that copy."""
    copies: dict[tuple[int, int, str], np.ndarray] = {}
    out = []
    for a in arrays:
        key = (a.__array_interface__["data"][0], a.nbytes, a.dtype.str)
        if key not in copies:
            copies[key] = np.array(a, copy=True, order="C")
        out.append(copies[key].reshape(a.shape))
    return out


def _check_backed(inputs: Sequence[Any], limit: int | None) -> None:
    """Refuses, before anything is copied or planned, a fed array that stands for more elements than memory backs
    (a broadcast or zero-stride view) when its copy would exceed the run bound (max_run_bytes, else BASE_RUN_BYTES):
    the Session copies its inputs, and a view of a few bytes must not raise the bound along with its own size."""
    bound = BASE_RUN_BYTES if limit is None else limit
    for k, value in enumerate(inputs):
        if not isinstance(value, np.ndarray) or value.size == 0:
            continue
        backed = value.itemsize + sum((d - 1) * abs(s) for d, s in zip(value.shape, value.strides))
        if value.nbytes > backed and value.nbytes > bound:
            raise ValueError(f"input {k} is a view of {backed} bytes standing for {value.size} elements "
                             f"({value.nbytes} bytes; shape {list(value.shape)}, strides {list(value.strides)}): the "
                             f"session copies its inputs, and this copy is above the bound of {bound} bytes; pass an "
                             "array that holds its elements, or raise graph_ir.Session(max_run_bytes=...)")
