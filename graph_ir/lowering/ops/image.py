"""The image family's TF -> GE mappings (prototypes: graph_ir/opset/image.py): TF's ImageProjectiveTransformV3
(keras.ops.image.affine_transform: RandomRotation, RandomTranslation, RandomZoom, RandomShear) and
ImageProjectiveTransformV2 onto GE's ImageProjectiveTransformV2, whose optional fill_value input is V3's. TF's
fill_value is float32 whatever the images' dtype (its kernel casts it to the images' dtype): a Cast does that here."""

from __future__ import annotations

from graph_ir.lowering.ops.common import first, maps_to, tf_attr


@maps_to("ImageProjectiveTransformV2")
def _projective(ctx, node, inputs):
    images, transforms, output_shape, *fill = inputs
    if fill and fill[0].dtype != images.dtype:
        fill = [first(ctx.add("Cast", [fill[0]], {"dst_type": images.dtype.name}, suffix="fill_value"))]
    attrs = {"interpolation": tf_attr(node, "interpolation"), "fill_mode": tf_attr(node, "fill_mode", "CONSTANT")}
    return ctx.add("ImageProjectiveTransformV2", [images, transforms, output_shape, *fill], attrs)


LOWERINGS = {"ImageProjectiveTransformV3": _projective, "ImageProjectiveTransformV2": _projective}
