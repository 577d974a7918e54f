"""The checks family's TF -> GE mappings (prototypes: graph_ir/opset/checks.py): tf.debugging.check_numerics's
CheckNumerics onto GE CheckNumerics with its message."""

from __future__ import annotations

from graph_ir.lowering.ops.common import same

LOWERINGS = {"CheckNumerics": same("CheckNumerics", message="message")}
