"""The resize family's GE prototypes (CANN's REG_OPs, as torch-npu's generated auto_generated_ge_raw_ops.py keeps them;
third_party/cann/ge_reg_ops.txt copies them verbatim): nearest-neighbor and bilinear resizing of NHWC images with
their gradients (ResizeNearestNeighborV2, ResizeBilinearV2 and their Grad ops, TF's align_corners /
half_pixel_centers rules), and the block rearrangements SpaceToBatchND, BatchToSpaceND, DepthToSpace, SpaceToDepth.
Sizes, block shapes, paddings and crops must be Consts. Executors: graph_ir/executors/resize.py; TF mappings:
graph_ir/lowering/ops/resize.py."""

from __future__ import annotations

import math

from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.ir.registry import IrAttr, IrInput, IrOp, IrOutput, register
from graph_ir.ir.verify import check_shape, const_dims
from graph_ir.opset.array import BASIC
from graph_ir.opset.slicing import const_pairs

# CANN's list for the resize inputs, as far as graph_ir holds its dtypes.
IMAGES = ("int8", "uint8", "int16", "uint16", "int32", "int64", "float16", "float32", "float64")


def _image(op: IrOp, node: str, shape, what: str) -> None:
    """An NHWC image batch with non-empty images, as TF's image_resizer_state.h requires."""
    if len(shape) != 4 or min(shape[1:]) < 1:
        raise GraphError(f"{op.type} {node!r}: {what} must be [batch, height, width, channels] with height, width and "
                         f"channels >= 1, got {list(shape)}")


def _corners(op: IrOp, node: str, attrs) -> None:
    if attrs["align_corners"] and attrs["half_pixel_centers"]:
        raise GraphError(f"{op.type} {node!r}: half_pixel_centers requires align_corners false (as TF requires)")


def _size(op: IrOp, node: str, handle, attrs) -> tuple[int, int]:
    _corners(op, node, attrs)
    size = const_dims(op, node, handle, "size")
    if len(size) != 2 or min(size) < 1:
        raise GraphError(f"{op.type} {node!r}: size must be [height, width] >= 1, got {size}")
    return size[0], size[1]


def _resize(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x = inputs[0]
    _image(op, node, x.shape, "x")
    height, width = _size(op, node, inputs[1], attrs)
    if op.type == "ResizeBilinearV2" and attrs["dtype"].name != "float32":
        raise GraphError(f"ResizeBilinearV2 {node!r}: graph_ir resizes to float32 (TF's output), got dtype "
                         f"{attrs['dtype']}")
    dtype = attrs["dtype"] if op.type == "ResizeBilinearV2" else x.dtype
    return [TensorDesc("y", dtype, (x.shape[0], height, width, x.shape[3]))]


def _resize_grad(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    grads = inputs[0]
    _image(op, node, grads.shape, "grads")
    if op.type == "ResizeNearestNeighborV2Grad":
        height, width = _size(op, node, inputs[1], attrs)
    else:
        _corners(op, node, attrs)
        _image(op, node, inputs[1].shape, "original_image")
        height, width = inputs[1].shape[1:3]
    return [TensorDesc("y", grads.dtype, (grads.shape[0], height, width, grads.shape[3]))]


def _blocks(op: IrOp, node: str, handle, x_shape) -> list[int]:
    block = const_dims(op, node, handle, "block_shape")
    if min(block, default=1) < 1 or len(x_shape) < 1 + len(block):
        raise GraphError(f"{op.type} {node!r}: block_shape {block} must be >= 1, with x of rank > {len(block)}, "
                         f"got x {list(x_shape)}")
    return block


def _space_to_batch(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x = inputs[0]
    block = _blocks(op, node, inputs[1], x.shape)
    pads = const_pairs(op, node, inputs[2], len(block), "paddings")
    spatial = []
    for k, (b, d, (before, after)) in enumerate(zip(block, x.shape[1:], pads)):
        if min(before, after) < 0 or (d + before + after) % b:
            raise GraphError(f"SpaceToBatchND {node!r}: paddings[{k}] = {[before, after]} must be >= 0 and make dim "
                             f"{k + 1} of x ({d}) a multiple of block_shape[{k}] = {b}")
        spatial.append((d + before + after) // b)
    shape = (x.shape[0] * math.prod(block), *spatial, *x.shape[1 + len(block):])
    return [TensorDesc("y", x.dtype, check_shape(node, "y", shape))]


def _batch_to_space(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x = inputs[0]
    block = _blocks(op, node, inputs[1], x.shape)
    crops = const_pairs(op, node, inputs[2], len(block), "crops")
    if x.shape[0] % math.prod(block):
        raise GraphError(f"BatchToSpaceND {node!r}: dim 0 of x ({x.shape[0]}) is not a multiple of the block size "
                         f"{math.prod(block)} (block_shape {block})")
    spatial = []
    for k, (b, d, (start, end)) in enumerate(zip(block, x.shape[1:], crops)):
        if min(start, end) < 0 or start + end > d * b:
            raise GraphError(f"BatchToSpaceND {node!r}: crops[{k}] = {[start, end]} must be >= 0 and crop at most "
                             f"{d * b} (dim {k + 1} of x, {d}, times block_shape[{k}], {b})")
        spatial.append(d * b - start - end)
    shape = (x.shape[0] // math.prod(block), *spatial, *x.shape[1 + len(block):])
    return [TensorDesc("y", x.dtype, shape)]


def _block_size(op: IrOp, node: str, attrs, shape) -> int:
    if attrs["data_format"] != "NHWC" or len(shape) != 4 or attrs.get("mode", "DCR") != "DCR":
        raise GraphError(f"{op.type} {node!r}: graph_ir rearranges NHWC 4-D tensors in DCR order (TF's), got "
                         f"data_format {attrs['data_format']!r}, mode {attrs.get('mode', 'DCR')!r} and x of shape "
                         f"{list(shape)}")
    if attrs["block_size"] < 2:
        raise GraphError(f"{op.type} {node!r}: block_size must be >= 2 (as TF requires), got {attrs['block_size']}")
    return attrs["block_size"]


def _depth_to_space(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    n, h, w, c = inputs[0].shape
    b = _block_size(op, node, attrs, inputs[0].shape)
    if c % (b * b):
        raise GraphError(f"DepthToSpace {node!r}: the channels of x ({c}) are not a multiple of block_size^2 = {b * b}")
    return [TensorDesc("y", inputs[0].dtype, (n, h * b, w * b, c // (b * b)))]


def _space_to_depth(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    n, h, w, c = inputs[0].shape
    b = _block_size(op, node, attrs, inputs[0].shape)
    if h % b or w % b:
        raise GraphError(f"SpaceToDepth {node!r}: height {h} and width {w} of x must be multiples of block_size {b}")
    return [TensorDesc("y", inputs[0].dtype, (n, h // b, w // b, c * b * b))]


_RESIZE = (IrAttr("align_corners", "bool", False), IrAttr("half_pixel_centers", "bool", False))
_SIZE = IrInput("size", ("int32",))
_FORMAT = IrAttr("data_format", "string", "NHWC")
_BLOCK = IrAttr("block_size", "int", required=True)
for _op in (
    IrOp("ResizeNearestNeighborV2", (IrInput("x", IMAGES), _SIZE), (IrOutput("y", IMAGES),), _RESIZE,
         outputs_from="infer", infer=_resize,
         doc="y[n, i, j] = x[n, src(i), src(j)], src(i) = min(floor((i + 0.5 if half_pixel_centers) * scale) (round "
             "with align_corners), in - 1), scale = in / out ((in - 1) / (out - 1) with align_corners)."),
    IrOp("ResizeNearestNeighborV2Grad", (IrInput("grads", IMAGES), _SIZE), (IrOutput("y", IMAGES),), _RESIZE,
         outputs_from="infer", infer=_resize_grad,
         doc="y = each gradient added onto the pixel of `size` that ResizeNearestNeighborV2 read it from."),
    IrOp("ResizeBilinearV2", (IrInput("x", IMAGES), _SIZE), (IrOutput("y", ("float32",)),),
         (*_RESIZE, IrAttr("dtype", "type", "float32")), outputs_from="infer", infer=_resize,
         doc="y = top + (bottom - top) * dy, top/bottom = left + (right - left) * dx over the 4 nearest pixels, in "
             "float32 (TF's resize_bilinear_op.cc)."),
    IrOp("ResizeBilinearV2Grad", (IrInput("grads", ("float32",)), IrInput("original_image", ("float32",))),
         (IrOutput("y", ("float32",)),), _RESIZE, outputs_from="infer", infer=_resize_grad,
         doc="y = each gradient shared among its 4 source pixels by the bilinear weights."),
    IrOp("SpaceToBatchND", (IrInput("x", BASIC), IrInput("block_shape", ("int32", "int64")),
                            IrInput("paddings", ("int32", "int64"))), (IrOutput("y", BASIC),), outputs_from="infer",
         infer=_space_to_batch, doc="y = x zero-padded, its spatial blocks moved into the batch dim (block-major)."),
    IrOp("BatchToSpaceND", (IrInput("x", BASIC), IrInput("block_shape", ("int32", "int64")),
                            IrInput("crops", ("int32", "int64"))), (IrOutput("y", BASIC),), outputs_from="infer",
         infer=_batch_to_space, doc="y = SpaceToBatchND undone: batch blocks moved back into space, then cropped."),
    IrOp("DepthToSpace", (IrInput("x", BASIC),), (IrOutput("y", BASIC),),
         (_BLOCK, IrAttr("mode", "string", "DCR"), _FORMAT), outputs_from="infer", infer=_depth_to_space,
         doc="y[n, h*b + i, w*b + j, c] = x[n, h, w, (i*b + j)*C' + c] (DCR, TF's order)."),
    IrOp("SpaceToDepth", (IrInput("x", BASIC),), (IrOutput("y", BASIC),), (_BLOCK, _FORMAT), outputs_from="infer",
         infer=_space_to_depth, doc="y[n, h, w, (i*b + j)*C + c] = x[n, h*b + i, w*b + j, c]."),
):
    register(_op)
