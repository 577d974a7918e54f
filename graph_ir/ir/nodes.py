"""What a graph is made of: tensor descs, nodes, and handles (node, output index) on their outputs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from graph_ir.ir.dtypes import DType
from graph_ir.ir.registry import IrOp


@dataclass(frozen=True)
class ListMeta:
    """What a list handle (dtype variant) is known to hold while a graph is built, as TF's shape inference keeps a
    variant's handle data: its elements' shape (None: unknown rank, -1: an unknown dim) and its length (None:
    unknown). The TensorList family's infer functions keep it (graph_ir/opset/tensorlist.py); GE's desc of a handle
    is a scalar, so it is not serialized but inferred again from the list's producers."""

    shape: tuple[int, ...] | None = None
    length: int | None = None
    # The one value every element holds, when each was pushed from the same known value: (dtype str, shape, bytes).
    # What tf.while_loop's gradient pops back (the shapes its forward loop accumulated), so that it stays known.
    constant: tuple | None = None


def joined(a: tuple[int, ...] | None, b: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """The shape both `a` and `b` are instances of: a dim that differs is -1, a rank that differs (or None) None."""
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else -1 for x, y in zip(a, b))


def merged(a: tuple[int, ...] | None, b: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """The most defined shape compatible with both (TF's PartialTensorShape::MergeWith); None if they conflict."""
    if a is None or b is None:
        return b if a is None else a
    if len(a) != len(b) or any(x >= 0 and y >= 0 and x != y for x, y in zip(a, b)):
        return None
    return tuple(x if x >= 0 else y for x, y in zip(a, b))


def join_lists(a: ListMeta | None, b: ListMeta | None) -> ListMeta | None:
    """What one list handle holds at either of two sizes (a template's two probe lowerings, graph_ir/dynamic)."""
    if a is None or b is None:
        return None
    return ListMeta(joined(a.shape, b.shape), a.length if a.length == b.length else None,
                    a.constant if a.constant == b.constant else None)


def merge_lists(a: ListMeta | None, b: ListMeta | None) -> ListMeta | None:
    """What a list holds that is `a` before a loop's body and `b` after it: the element shape both complete (the
    body sets elements of the shape the list was declared with), the length where it does not change."""
    if a is None or b is None:
        return a or b
    constant = b.constant if a.length == 0 or a.constant == b.constant else None  # (pushed onto an empty list)
    return ListMeta(merged(a.shape, b.shape), a.length if a.length == b.length else None, constant)


@dataclass(frozen=True)
class TensorDesc:
    """What flows on an edge: the IR port name, dtype and shape (() is a scalar); for a list handle, what it holds."""

    name: str
    dtype: DType
    shape: tuple[int, ...]
    list_meta: ListMeta | None = None

    @property
    def is_static(self) -> bool:
        """Whether every dim is known (a template graph's descs hold -1 for a dim known only at run time:
        graph_ir/dynamic)."""
        return all(d >= 0 for d in self.shape)

    @property
    def num_elements(self) -> int:
        return math.prod(self.shape)  # a Python int: no overflow, whatever the dims

    @property
    def nbytes(self) -> int:
        return self.num_elements * self.dtype.itemsize

    def renamed(self, name: str) -> TensorDesc:
        return TensorDesc(name, self.dtype, self.shape, self.list_meta)


@dataclass(frozen=True)
class Handle:
    """Output `index` of `node`: what builders take and return."""

    node: Node
    index: int = 0

    @property
    def desc(self) -> TensorDesc:
        return self.node.output_descs[self.index]

    @property
    def dtype(self) -> DType:
        return self.desc.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.desc.shape

    @property
    def edge(self) -> str:
        return f"{self.node.name}:{self.index}"

    def __repr__(self) -> str:
        return f"<{self.edge} {self.dtype} {list(self.shape)}>"


@dataclass(eq=False)
class Node:
    name: str
    op: IrOp
    inputs: list[Handle | None]  # data inputs in IR order (None for an unfed optional input)
    attrs: dict[str, Any]
    output_descs: list[TensorDesc]
    control_inputs: list[Node] = field(default_factory=list)
    # A functional op's (If, Case, While) subgraphs, graph_ir.Graph objects in IR order (graph_ir/opset/control.py).
    subgraph_graphs: list[Any] = field(default_factory=list)
    # The output values known while the graph is built though the node stays one (a shape computed from a tensor
    # whose dims are known only at run time, graph_ir/dynamic): what inputs read as a Const's value (verify.const_value).
    known_values: list[Any] | None = None
    # The TF nodes it was lowered from (GE's _datadump_original_op_names, which its dumps and msaccucmp map back by).
    origins: list[str] = field(default_factory=list)

    @property
    def type(self) -> str:
        return self.op.type

    @property
    def subgraphs(self) -> list[str]:
        """The instance names of the node's subgraphs in IR order (OpDef.subgraph_name): If [then, else], Case
        [branch 0, 1, ...], While [cond, body]; the root graph's `subgraphs` maps each name to its Graph."""
        return [g.name for g in self.subgraph_graphs]

    def output(self, index: int = 0) -> Handle:
        return Handle(self, index)

    def input_names(self) -> list[str]:
        """The IR name of each given input; a dynamic list is numbered: NetOutput's input0, input1, ... (torchair's
        names) and x0, x1, ... for other ops (IdentityN)."""
        if self.op.dynamic_input is not None:
            stem = "input" if self.op.type == "NetOutput" else None
            return [i.name if k is None else f"{stem or i.name}{k}" for i, k in self.op.expand_inputs(len(self.inputs))]
        return [i.name for i, h in zip(self.op.inputs, self.inputs) if h is not None]

    def input_descs(self) -> list[TensorDesc]:
        """The consumer's copy of each producer's output desc, renamed to this op's IR input name (as in GE)."""
        given = [h for h in self.inputs if h is not None]
        return [h.desc.renamed(n) for n, h in zip(self.input_names(), given)]

    def __repr__(self) -> str:
        return f"<Node {self.name} ({self.type})>"
