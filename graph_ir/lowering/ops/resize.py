"""The resize family's TF -> GE mappings (prototypes: graph_ir/opset/resize.py), as Ascend's TF adapter maps them:
TF's ResizeNearestNeighbor, ResizeBilinear and their gradients onto GE's V2 ops (align_corners and
half_pixel_centers kept; ResizeBilinearGrad's original_image gives the output's size and dtype), SpaceToBatchND,
BatchToSpaceND, DepthToSpace and SpaceToDepth onto the GE ops of the same names (TF's DCR order is GE's default
mode)."""

from __future__ import annotations

from graph_ir.lowering.ops.common import same

_CORNERS = {"align_corners": "align_corners", "half_pixel_centers": "half_pixel_centers"}
_BLOCK = {"block_size": "block_size", "data_format": "data_format"}

LOWERINGS = {
    "ResizeNearestNeighbor": same("ResizeNearestNeighborV2", **_CORNERS),
    "ResizeNearestNeighborGrad": same("ResizeNearestNeighborV2Grad", **_CORNERS),
    "ResizeBilinear": same("ResizeBilinearV2", **_CORNERS),
    "ResizeBilinearGrad": same("ResizeBilinearV2Grad", **_CORNERS),
    "SpaceToBatchND": same("SpaceToBatchND"),
    "BatchToSpaceND": same("BatchToSpaceND"),
    "DepthToSpace": same("DepthToSpace", **_BLOCK),
    "SpaceToDepth": same("SpaceToDepth", **_BLOCK),
}
