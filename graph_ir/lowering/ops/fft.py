"""The FFT family's TF -> GE mappings (prototypes: graph_ir/opset/fft.py), as Ascend's TF adapter maps them: each TF
op onto the GE op of the same name, inputs by position, TF's Tout attribute as GE's.

What complex values need beyond the family: a TF Const of complex64 becomes a GE Complex of two float32 Consts
(CANN's Const declares no complex type), and DivNoNan of complex64 (GE's declares none) becomes RealDiv where the
divisor is nonzero and 0 where it is 0 (TF's div_no_nan: x / y, or 0 where y == 0), a SelectV2 on ComplexAbs(y) == 0."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from graph_ir.ir.graph import Graph
from graph_ir.ir.nodes import Node
from graph_ir.lowering.ops.common import first, maps_to, same

LOWERINGS = {
    "Complex": same("Complex", Tout="Tout"),
    **{t: same(t, Tout="Tout") for t in ("Real", "Imag", "ComplexAbs")},
    **{t: same(t) for t in ("FFT", "IFFT", "FFT2D", "IFFT2D", "RFFT", "IRFFT")},
}


def complex_constant(graph: Graph, name: str, value: np.ndarray, controls) -> Node:
    """The GE nodes of a TF Const of complex64: Complex(Const real, Const imag), exact (the parts are float32)."""
    parts = [graph.add_node("Const", (), {"value": np.ascontiguousarray(getattr(value, part))},
                            name=f"{name}/{part}", control_inputs=controls).output(0) for part in ("real", "imag")]
    return graph.add_node("Complex", parts, {"Tout": "complex64"}, name=name, exact_name=True)


def complex_div_no_nan(lower: Callable) -> Callable:
    """DivNoNan's lowering, with complex64 divisions as RealDiv selected against 0 where the divisor is 0."""

    @maps_to(lower.ge_type)
    def lower_complex(ctx, node, inputs):
        if inputs[0].dtype.name != "complex64":
            return lower(ctx, node, inputs)
        x, y = inputs
        quotient = first(ctx.add("RealDiv", [x, y], suffix="quotient"))
        size = first(ctx.add("ComplexAbs", [y], {"Tout": "float32"}, suffix="divisor_abs"))
        zero32 = ctx.const(np.float32(0), "zero")
        zero_divisor = first(ctx.add("Equal", [size, zero32], suffix="divisor_is_zero"))
        zero = first(ctx.add("Complex", [zero32, zero32], {"Tout": "complex64"}, suffix="complex_zero"))
        return ctx.add("SelectV2", [zero_divisor, zero, quotient])

    return lower_complex
