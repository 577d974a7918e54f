"""Bucketize's TF -> GE mapping (prototype: graph_ir/opset/bucketize.py): tf.raw_ops.Bucketize (Keras's
Discretization layer) onto GE Bucketize with TF's boundaries; its output is int32, as TF's."""

from __future__ import annotations

from graph_ir.lowering.ops.common import same

LOWERINGS = {"Bucketize": same("Bucketize", boundaries="boundaries", dtype=lambda node: "int32")}
