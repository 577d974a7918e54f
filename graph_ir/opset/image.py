"""The image family's GE prototypes, as CANN's REG_OPs declare them (third_party/cann/ge_reg_ops.txt; metadef's
image_ops.h): ImageProjectiveTransformV2, the projective warp Keras's RandomRotation, RandomTranslation, RandomZoom
and RandomShear apply (keras.ops.image.affine_transform; TF's ImageProjectiveTransformV3, whose fill_value is GE's
optional input). Executors: graph_ir/executors/image.py; TF mappings: graph_ir/lowering/ops/image.py."""

from __future__ import annotations

from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.ir.registry import IrAttr, IrInput, IrOp, IrOutput, register
from graph_ir.ir.verify import const_value

IMAGES = ("uint8", "int32", "int64", "float16", "float32", "float64")
INTERPOLATIONS = ("NEAREST", "BILINEAR")
FILL_MODES = ("REFLECT", "WRAP", "CONSTANT", "NEAREST")


def _projective(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    images, transforms, output_shape = inputs[:3]
    if len(images.shape) != 4:
        raise GraphError(f"{op.type} {node!r}: input 'images' has shape {list(images.shape)}; it takes NHWC images "
                         "(rank 4)")
    if len(transforms.shape) != 2 or transforms.shape[1] != 8 or transforms.shape[0] not in (1, images.shape[0]):
        raise GraphError(f"{op.type} {node!r}: input 'transforms' has shape {list(transforms.shape)}; expected [1, 8] "
                         f"or [{images.shape[0]}, 8] (one projective transform, or one per image)")
    size = const_value(op, node, output_shape, "output_shape")
    if size.shape != (2,) or (size <= 0).any():
        raise GraphError(f"{op.type} {node!r}: input 'output_shape' is {size.tolist()}; expected [height, width], "
                         "both > 0")
    if len(inputs) > 3 and inputs[3] is not None and (inputs[3].dtype != images.dtype or inputs[3].shape not in ((), (1,))):
        raise GraphError(f"{op.type} {node!r}: input 'fill_value' is {inputs[3].dtype}{list(inputs[3].shape)}; "
                         f"expected one {images.dtype} value")
    for name, allowed in (("interpolation", INTERPOLATIONS), ("fill_mode", FILL_MODES)):
        if attrs[name] not in allowed:
            raise GraphError(f"{op.type} {node!r}: attribute {name!r} is {attrs[name]!r}; expected one of "
                             f"{', '.join(allowed)}")
    height, width = (int(d) for d in size)
    return [TensorDesc("transformed_images", images.dtype, (images.shape[0], height, width, images.shape[3]))]


register(IrOp("ImageProjectiveTransformV2",
              (IrInput("images", IMAGES), IrInput("transforms", ("float32",)), IrInput("output_shape", ("int32",)),
               IrInput("fill_value", IMAGES, optional=True)),
              (IrOutput("transformed_images", IMAGES),),
              (IrAttr("interpolation", "string", required=True), IrAttr("fill_mode", "string", "CONSTANT")),
              outputs_from="infer", infer=_projective,
              doc="transformed_images[b, y, x] = images[b] read at ((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k), "
                  "k = c0 x + c1 y + 1, for transforms[b] = [a0, a1, a2, b0, b1, b2, c0, c1]; points outside the "
                  "image are mapped by fill_mode, or are fill_value (0 when absent)."))
