"""Element types and their four numberings: NumPy, TensorFlow, GE's C++ ge::DataType (AttrDef.dt, Cast's Int dst_type)
and GE's proto ge.proto.DataType (TensorDescriptor.dtype only). Values from CANN's types.h / ge_ir.proto.

VARIANT (GE DT_VARIANT, TF DT_VARIANT) is the dtype of TensorList handles: a variant tensor is a scalar whose session
value is a Python object (an immutable graph_ir.executors.tensorlist.TensorList) in a 0-d NumPy object array. It is
not in BY_NAME (so not among the dtypes every op takes, registry.ALL_DTYPES): only the ops that pass or build
TensorLists declare it. Its itemsize is 0: the planner counts no bytes for it, and the lists' stores are counted at
their real size where they allocate (graph_ir/executors/list_store.py).

COMPLEX64 (GE DT_COMPLEX64, TF DT_COMPLEX64) is not in BY_NAME either: a lowered step holds complex tensors only in
graph inputs and outputs and between the ops that declare it (the FFT family, graph_ir/opset/fft.py, and the
arithmetic CANN declares for it); Variables and Consts stay real (CANN's Const and Variable declare no complex type:
a complex constant is a GE Complex of two float32 Consts)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class DType:
    name: str
    numpy: Any
    ge: int  # ge::DataType (C++)
    proto: int  # ge.proto.DataType
    tf: int  # tensorflow DataType enum

    @property
    def itemsize(self) -> int:
        return 0 if self.name == "variant" else np.dtype(self.numpy).itemsize

    def __str__(self) -> str:
        return self.name


_ALL = [
    DType("float32", np.float32, ge=0, proto=1, tf=1),
    DType("float16", np.float16, ge=1, proto=2, tf=19),
    DType("int8", np.int8, ge=2, proto=3, tf=6),
    DType("int32", np.int32, ge=3, proto=7, tf=3),
    DType("uint8", np.uint8, ge=4, proto=4, tf=4),
    DType("int16", np.int16, ge=6, proto=5, tf=5),
    DType("uint16", np.uint16, ge=7, proto=6, tf=17),
    DType("uint32", np.uint32, ge=8, proto=9, tf=22),
    DType("int64", np.int64, ge=9, proto=8, tf=9),
    DType("uint64", np.uint64, ge=10, proto=10, tf=23),
    DType("float64", np.float64, ge=11, proto=12, tf=2),
    DType("bool", np.bool_, ge=12, proto=11, tf=10),
    DType("bfloat16", ml_dtypes.bfloat16, ge=27, proto=27, tf=14),
]
BY_NAME = {d.name: d for d in _ALL}
VARIANT = DType("variant", np.object_, ge=26, proto=26, tf=21)
COMPLEX64 = DType("complex64", np.complex64, ge=16, proto=16, tf=8)
TENSOR_DTYPES = {**BY_NAME, COMPLEX64.name: COMPLEX64}  # what a tensor (not a list handle) may hold
_ALIASES = {"float": "float32", "half": "float16", "double": "float64", "bf16": "bfloat16"}
_BY_PROTO = {d.proto: d for d in (*_ALL, VARIANT, COMPLEX64)}
_BY_GE = {d.ge: d for d in (*_ALL, COMPLEX64)}  # attributes (element_dtype, dst_type) never name the variant type
_BY_TF = {d.tf: d for d in (*_ALL, VARIANT, COMPLEX64)}


def as_dtype(value: Any) -> DType:
    """A DType from a name ("float32", "bfloat16", ...), a NumPy dtype or type, a tf.DType, or a DType."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and value == "variant":
        return VARIANT
    name = getattr(value, "name", None)  # tf.DType and np.dtype both have .name
    if isinstance(value, str):
        name = value
    elif not isinstance(name, str):
        try:
            name = np.dtype(value).name
        except TypeError:
            name = None
    name = _ALIASES.get(name, name)
    if name not in TENSOR_DTYPES:
        raise TypeError(f"unsupported dtype {value!r}; expected one of {', '.join(TENSOR_DTYPES)}")
    return TENSOR_DTYPES[name]


def _lookup(table: dict[int, DType], number: int, numbering: str) -> DType:
    if number not in table:
        raise ValueError(f"unsupported {numbering} {number}")
    return table[number]


def from_proto(number: int) -> DType:
    return _lookup(_BY_PROTO, number, "ge.proto.DataType")


def from_ge(number: int) -> DType:
    return _lookup(_BY_GE, number, "ge::DataType")


def from_tf(number: int) -> DType:
    return _lookup(_BY_TF, number, "TensorFlow dtype enum")
