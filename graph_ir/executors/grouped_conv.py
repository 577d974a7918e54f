"""GE's Conv2D family with `groups` > 1 (CANN's Conv2D REG_OP attr; TF's grouped Conv2D, Keras Conv2D(groups=g)):
graph_ir/executors/conv.py's executors hand such a node to graph_ir.executors.depthwise.GROUPED, and its planner
entries to the working memory stated here.

The grouped executors work tap by tap in blocks of images and output rows (depthwise.blocks) of about
depthwise.BUDGET bytes of temporaries at the row_bytes each states, and keep one full-size accumulator: the output in
float32 (float64 for float64) for the forward pass and the input gradient, the filter gradient in float64."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from graph_ir.executors.depthwise import BUDGET, GROUPED
from graph_ir.executors.windows import UFUNC_BUFFERS
from graph_ir.ir.nodes import Node, TensorDesc

Executor = Callable[[Node, list[np.ndarray]], list[np.ndarray]]


def grouped(node: Node) -> bool:
    return node.attrs.get("groups", 1) > 1


def or_grouped(plain: Executor) -> Executor:
    """plain for groups 1; the grouped executor of the node's type otherwise."""

    def run(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
        return (GROUPED[node.type] if grouped(node) else plain)(node, args)

    return run


def _item(desc: TensorDesc) -> int:
    """Bytes per element the grouped executors compute in: float64 stays float64, the other floats float32."""
    return 8 if desc.dtype.itemsize == 8 else 4


def _blocks_bytes(n: int, rows: int, row_bytes: int, scale: float = 1.0) -> int:
    """The temporaries of the largest block (depthwise.blocks, at row_bytes per output row: at most BUDGET, at least
    one row), times `scale`: what a block really holds (its slices, their copies NumPy's matmul makes of the strided
    group views, the products) relative to the row_bytes it was cut by."""
    return int(scale * min(n * rows * row_bytes, max(BUDGET, row_bytes)))


def _conv2d(node: Node) -> int:
    """The accumulator y, a float copy of the filter, the blocks."""
    x, f, y = node.inputs[0].desc, node.inputs[1].desc, node.output_descs[0]
    n, ho, wo, out_channels = y.shape
    # a block: x's slice and its grouped copy, the products and their copy, (2C + 2O) items per position, within
    # the (C + 2O) * 8 bytes it was cut by for float32 and twice that for float64
    return (y.num_elements + f.num_elements) * _item(x) + \
        _blocks_bytes(n, ho, wo * (x.shape[3] + 2 * out_channels) * 8, _item(x) / 4) + UFUNC_BUFFERS


def _backprop_input(node: Node) -> int:
    """The accumulator dx, a float copy of the filter, the blocks."""
    f, dy, dx = node.inputs[1].desc, node.inputs[2].desc, node.output_descs[0]
    return (dx.num_elements + f.num_elements) * _item(dy) + \
        _blocks_bytes(dy.shape[0], dy.shape[1], dy.shape[2] * (dx.shape[3] + 2 * dy.shape[3]) * 8, _item(dy) / 4) + \
        UFUNC_BUFFERS


def _backprop_filter(node: Node) -> int:
    """The float64 accumulator df, the blocks (float64 copies of x's and dy's slices and their grouped copies: the
    (C + O) * 16 bytes per position they were cut by)."""
    x, dy, df = node.inputs[0].desc, node.inputs[2].desc, node.output_descs[0]
    return math.prod(df.shape) * 8 + \
        _blocks_bytes(dy.shape[0], dy.shape[1], dy.shape[2] * (x.shape[3] + dy.shape[3]) * 16) + UFUNC_BUFFERS


GROUPED_WORKSPACE: dict[str, Callable[[Node], int]] = {
    "Conv2D": _conv2d,
    "Conv2DBackpropFilter": _backprop_filter,
    "Conv2DBackpropInput": _backprop_input,
}


def or_grouped_workspace(plain: Callable[[Node], int]) -> Callable[[Node], int]:
    """plain's working memory for groups 1; the grouped executor's otherwise."""
    return lambda node: GROUPED_WORKSPACE[node.type](node) if grouped(node) else plain(node)
