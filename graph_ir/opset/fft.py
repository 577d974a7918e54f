"""The FFT family's GE prototypes, as CANN's REG_OPs declare them (third_party/cann/ge_reg_ops.txt; metadef's
math_ops.h and spectral_ops.h): complex numbers from and to their parts (Complex, Real, Imag, ComplexAbs) and the
discrete Fourier transforms over the innermost axes (FFT, IFFT, FFT2D, IFFT2D; RFFT and IRFFT for real signals).
graph_ir holds complex64 only (graph_ir/ir/dtypes.py COMPLEX64): CANN's complex128 lists are left out, as its RFFT and
IRFFT declare complex64 alone. Executors: graph_ir/executors/fft.py; TF mappings: graph_ir/lowering/ops/fft.py."""

from __future__ import annotations

from graph_ir.ir.dtypes import as_dtype
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.ir.registry import IrAttr, IrInput, IrOp, IrOutput, register
from graph_ir.ir.verify import broadcast_shape, const_scalar

COMPLEX = ("complex64",)
PARTS = ("float32",)  # the real dtype of complex64: Complex's inputs, Real's, Imag's and ComplexAbs's output


def _typed(op: IrOp, node: str, attrs, wanted: str) -> None:
    """Tout must name the one dtype graph_ir computes (a complex64 input has float32 parts)."""
    if attrs["Tout"].name != wanted:
        raise GraphError(f"{op.type} {node!r}: attribute 'Tout' is {attrs['Tout'].name}; graph_ir computes {wanted}")


def _complex(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    _typed(op, node, attrs, "complex64")
    return [TensorDesc("out", as_dtype("complex64"), broadcast_shape(op, node, inputs))]


register(IrOp("Complex", (IrInput("real", PARTS), IrInput("imag", PARTS)), (IrOutput("out", COMPLEX),),
              (IrAttr("Tout", "type", "complex64"),), outputs_from="infer", infer=_complex,
              same_dtype=("real", "imag"), doc="out = real + i imag, broadcast."))


def _part(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    _typed(op, node, attrs, "float32")
    return [TensorDesc(op.outputs[0].name, as_dtype("float32"), inputs[0].shape)]


for _type, _port, _out, _doc in (("Real", "input", "output", "the real part of each element"),
                                 ("Imag", "input", "output", "the imaginary part of each element"),
                                 ("ComplexAbs", "x", "y", "|x| = hypot(real, imag), elementwise")):
    register(IrOp(_type, (IrInput(_port, COMPLEX),), (IrOutput(_out, PARTS),), (IrAttr("Tout", "type", "float32"),),
                  outputs_from="infer", infer=_part, doc=f"{_out} = {_doc}."))


def _transform(axes: int):
    def infer(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
        x = inputs[0]
        if len(x.shape) < axes:
            raise GraphError(f"{op.type} {node!r}: input 'x' has shape {list(x.shape)}; it transforms the innermost "
                             f"{axes} axes, so rank >= {axes} is needed")
        return [TensorDesc("y", x.dtype, x.shape)]

    return infer


for _type, _axes, _doc in (("FFT", 1, "the discrete Fourier transform over the innermost axis"),
                           ("IFFT", 1, "the inverse transform over the innermost axis, scaled by 1/n"),
                           ("FFT2D", 2, "the discrete Fourier transform over the innermost two axes"),
                           ("IFFT2D", 2, "the inverse transform over the innermost two axes, scaled by 1/(n0 n1)")):
    register(IrOp(_type, (IrInput("x", COMPLEX),), (IrOutput("y", COMPLEX),), outputs_from="infer",
                  infer=_transform(_axes), doc=f"y = {_doc}."))


def fft_length(op: IrOp, node: str, inputs) -> int:
    """The transform length: the one value of the Const fft_length (TF's kernels take a 1-element vector)."""
    if inputs[1].shape != (1,):
        raise GraphError(f"{op.type} {node!r}: input 'fft_length' has shape {list(inputs[1].shape)}; a 1-D "
                         "transform takes shape [1]")
    n = int(const_scalar(op, node, inputs[1], "fft_length"))
    if n < 0:
        raise GraphError(f"{op.type} {node!r}: input 'fft_length' is {n}; a length is >= 1")
    return n


def _real_transform(inverse: bool):
    def infer(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
        x = inputs[0]
        if not x.shape:
            raise GraphError(f"{op.type} {node!r}: input {op.inputs[0].name!r} is a scalar; it transforms the "
                             "innermost axis, so rank >= 1 is needed")
        n = fft_length(op, node, inputs)
        # TF's CPU kernel aborts the process on a zero length (DUCC's "no zero-sized FFTs") and reads uninitialized
        # memory for an empty innermost axis (measured, TF 2.21): there is no result of TF's to give.
        if n == 0:
            raise GraphError(f"{op.type} {node!r}: input 'fft_length' is 0; TF's kernel aborts on a zero-length "
                             "transform, so graph_ir refuses it")
        if x.shape[-1] == 0:
            raise GraphError(f"{op.type} {node!r}: input {op.inputs[0].name!r} has shape {list(x.shape)}, an empty "
                             "innermost axis; TF's kernel returns uninitialized memory for it, so graph_ir refuses it")
        inner = n if inverse else n // 2 + 1
        dtype = as_dtype("float32" if inverse else "complex64")
        return [TensorDesc("y", dtype, (*x.shape[:-1], inner))]

    return infer


register(IrOp("RFFT", (IrInput("input", PARTS), IrInput("fft_length", ("int32",))), (IrOutput("y", COMPLEX),),
              outputs_from="infer", infer=_real_transform(inverse=False),
              doc="y = the first fft_length/2 + 1 terms of the transform of the real input over its innermost axis, "
                  "cropped or zero-padded to fft_length."))
register(IrOp("IRFFT", (IrInput("x", COMPLEX), IrInput("fft_length", ("int32",))), (IrOutput("y", PARTS),),
              outputs_from="infer", infer=_real_transform(inverse=True),
              doc="y = the real inverse transform (scaled by 1/fft_length) of the Hermitian half-spectrum x, its "
                  "innermost axis cropped or zero-padded to fft_length/2 + 1; the imaginary parts of its first and "
                  "(fft_length even) last terms are ignored."))
