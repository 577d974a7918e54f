"""The depthwise family's TF ops as functions of tensors, and the inputs its tests draw (tests/graph_ir/
test_depthwise_ops.py, test_depthwise_limits.py)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

OPS = ("DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropFilter", "DepthwiseConv2dNativeBackpropInput")


def floats(rng, *shape):
    """Normals (negatives) with every fifth element an exact zero and ties (every seventh repeats its neighbour)."""
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[::5] = 0
    ties = flat[2::7]
    flat[1::7][:ties.size] = ties
    return x


def depthwise_forward(strides, padding, dilations=(1, 1), explicit=()):
    return lambda x, f: tf.raw_ops.DepthwiseConv2dNative(
        input=x, filter=f, strides=[1, *strides, 1], padding=padding, explicit_paddings=list(explicit),
        dilations=[1, *dilations, 1])


def depthwise_filter_grad(shape, strides, padding, dilations=(1, 1), explicit=()):
    return lambda x, dy: tf.raw_ops.DepthwiseConv2dNativeBackpropFilter(
        input=x, filter_sizes=shape, out_backprop=dy, strides=[1, *strides, 1], padding=padding,
        explicit_paddings=list(explicit), dilations=[1, *dilations, 1])


def depthwise_input_grad(shape, strides, padding, dilations=(1, 1), explicit=()):
    return lambda f, dy: tf.raw_ops.DepthwiseConv2dNativeBackpropInput(
        input_sizes=shape, filter=f, out_backprop=dy, strides=[1, *strides, 1], padding=padding,
        explicit_paddings=list(explicit), dilations=[1, *dilations, 1])


def node_args(node, inputs):
    """The executor's arguments: the graph's inputs in order for Data-fed ports, Const values for the others."""
    fed = iter(inputs)
    return [None if h.node.type == "Const" else next(fed) for h in node.inputs]
