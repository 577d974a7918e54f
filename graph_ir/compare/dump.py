"""CANN's dump files, written from a Session's run and read back with every size checked before any data is read.

Layout (what GE's dump writes and msaccucmp reads): 8 bytes, the header's length as a little-endian uint64; the
header, a DumpData message (graph_ir/proto/dump_data.proto); then each input's bytes and each output's bytes, in
the header's order, each `size` long. File name: {op_type}.{op_name, '/' and '.' as '_'}.{task_id}.{stream_id}.
{16-digit timestamp}. The reader takes the node's name from the header's op_name, not from the file name.

A file is refused with one GraphError naming it and the field when: it is shorter than 8 bytes; its header length
is past its end or above MAX_HEADER_BYTES; it holds more than MAX_TENSORS tensors (counted on the wire, before the
header is parsed); the header does not parse; a
tensor's data_type is not a numeric type of graph_ir.ir.dtypes, its format not a plain layout (ND, NCHW, NHWC, NCDHW,
NDHWC: fractal layouts need msaccucmp's conversion), its shape's element count times its dtype's size differs from
its size, or it carries its data inline; the sizes' running sum passes the end of the file, or leaves bytes over.
All of that is checked on the header alone; only then are the tensors read (memory: the file's size)."""

from __future__ import annotations

import dataclasses
import os
import struct
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from graph_ir.executors.plan_steps import EXECUTOR, Step
from graph_ir.ir.dtypes import as_dtype
from graph_ir.ir.errors import GraphError
from graph_ir.proto import DumpData

MAX_HEADER_BYTES = 1 << 20  # a header names one op and its tensors' shapes: kilobytes
MAX_TENSORS = 4096
_DUMP_DTYPES = {"float32": "DT_FLOAT", "float16": "DT_FLOAT16", "int8": "DT_INT8", "uint8": "DT_UINT8",
                "int16": "DT_INT16", "uint16": "DT_UINT16", "int32": "DT_INT32", "int64": "DT_INT64",
                "uint32": "DT_UINT32", "uint64": "DT_UINT64", "bool": "DT_BOOL", "float64": "DT_DOUBLE",
                "bfloat16": "DT_BF16"}  # graph_ir's numeric dtypes (graph_ir/ir/dtypes.py)
_DTYPE_ENUM = DumpData.DESCRIPTOR.fields_by_name["output"].message_type.fields_by_name["data_type"].enum_type
_FORMAT_ENUM = DumpData.DESCRIPTOR.fields_by_name["output"].message_type.fields_by_name["format"].enum_type
_BY_NUMBER = {_DTYPE_ENUM.values_by_name[e].number: name for name, e in _DUMP_DTYPES.items()}
_PLAIN_FORMATS = {_FORMAT_ENUM.values_by_name[f].number for f in
                  ("FORMAT_ND", "FORMAT_NCHW", "FORMAT_NHWC", "FORMAT_NCDHW", "FORMAT_NDHWC")}
_ND = _FORMAT_ENUM.values_by_name["FORMAT_ND"].number


@dataclasses.dataclass
class DumpFile:
    """One dump file's node name (the header's op_name), dump time, inputs and outputs."""

    path: str
    op_name: str
    dump_time: int
    inputs: list[np.ndarray]
    outputs: list[np.ndarray]


def file_name(op_type: str, op_name: str, task_id: int, timestamp: int) -> str:
    """The name GE's dump gives the file of one op's run (stream 0)."""
    return f"{op_type}.{op_name.replace('/', '_').replace('.', '_')}.{task_id}.0.{timestamp:016d}"


def write_dump(path: str, op_name: str, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray],
               dump_time: int = 0) -> None:
    """Writes one dump file: `op_name`'s inputs and outputs (arrays of graph_ir's numeric dtypes) at `dump_time`."""
    header = DumpData(version="2.0", dump_time=dump_time, op_name=op_name)
    arrays = [np.asarray(a, order="C") for a in (*inputs, *outputs)]  # ascontiguousarray makes 0-d 1-d
    for k, array in enumerate(arrays):
        name = array.dtype.name
        if name not in _DUMP_DTYPES:
            raise TypeError(f"write_dump {op_name!r}: tensor {k} has dtype {name}, which dump files do not take")
        entry = header.input.add() if k < len(inputs) else header.output.add()
        entry.data_type = _DTYPE_ENUM.values_by_name[_DUMP_DTYPES[name]].number
        entry.format = _ND
        entry.shape.dim.extend(array.shape)
        entry.size = array.nbytes
    body = header.SerializeToString()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(body)))
        f.write(body)
        for array in arrays:
            f.write(array.tobytes())


def read_dump(path: str) -> DumpFile:
    """Reads one dump file, checked as the module docstring says."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size

        def refuse(field: str, problem: str) -> GraphError:
            return GraphError(f"dump file {path!r}: {field}: {problem}")

        if size < 8:
            raise refuse("header length", f"the file has {size} bytes, fewer than the 8 of the header length")
        (header_length,) = struct.unpack("<Q", f.read(8))
        if header_length > size - 8:
            raise refuse("header length", f"{header_length} bytes, past the end of the file ({size - 8} after it)")
        if header_length > MAX_HEADER_BYTES:
            raise refuse("header length", f"{header_length} bytes, above the {MAX_HEADER_BYTES} a header holds")
        raw = f.read(header_length)
        try:
            if _count_tensors(raw) > MAX_TENSORS:  # counted on the wire, before protobuf builds them
                raise refuse("input/output", f"more than the {MAX_TENSORS} tensors a dump file holds")
            header = DumpData.FromString(raw)
        except DecodeError as e:
            raise refuse("header", f"not a DumpData message ({e})") from None
        entries = [("input", k, t) for k, t in enumerate(header.input)] + \
                  [("output", k, t) for k, t in enumerate(header.output)]
        offset = 8 + header_length
        layout = []
        for kind, k, tensor in entries:
            dtype, shape = _checked_tensor(tensor, f"{kind} {k}", refuse)
            if offset + tensor.size > size:
                raise refuse(f"{kind} {k} size", f"{tensor.size} bytes from byte {offset}, past the end of the "
                                                  f"file ({size} bytes)")
            layout.append((kind, dtype, shape, offset, tensor.size))
            offset += tensor.size
        if offset != size:
            raise refuse("size", f"the tensors' sizes add up to byte {offset}, but the file has {size} bytes")
        out: dict[str, list[np.ndarray]] = {"input": [], "output": []}
        for kind, dtype, shape, start, nbytes in layout:
            f.seek(start)
            out[kind].append(np.frombuffer(f.read(nbytes), dtype=dtype).reshape(shape).copy())
    return DumpFile(path, header.op_name, header.dump_time, out["input"], out["output"])


_TENSOR_FIELDS = (DumpData.DESCRIPTOR.fields_by_name["input"].number, DumpData.DESCRIPTOR.fields_by_name["output"].number)


def _count_tensors(raw: bytes) -> int:
    """How many input and output entries a serialized DumpData holds (up to MAX_TENSORS + 1), read from its
    top-level fields on the wire (protobuf's encoding: a varint key, field number and wire type; then the value)."""
    count, pos = 0, 0
    while pos < len(raw) and count <= MAX_TENSORS:
        key, pos = _varint(raw, pos)
        wire = key & 7
        if wire == 0:
            _, pos = _varint(raw, pos)
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        elif wire == 2:
            length, pos = _varint(raw, pos)
            pos += length
            count += (key >> 3) in _TENSOR_FIELDS
        else:
            raise DecodeError(f"wire type {wire} at byte {pos}")
    if pos > len(raw):
        raise DecodeError("a field runs past the header's end")
    return count


def _varint(raw: bytes, pos: int) -> tuple[int, int]:
    value = 0
    for shift in range(0, 70, 7):
        if pos >= len(raw):
            raise DecodeError("a varint runs past the header's end")
        byte = raw[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
    raise DecodeError("a varint longer than 10 bytes")


def _checked_tensor(tensor: Any, field: str, refuse: Callable[[str, str], GraphError]) -> tuple[np.dtype, tuple]:
    """The dtype and shape of one header entry, checked against its size."""
    name = _BY_NUMBER.get(tensor.data_type)
    if name is None:
        known = _DTYPE_ENUM.values_by_number.get(tensor.data_type)
        raise refuse(f"{field} data_type", f"{tensor.data_type} ({known.name if known else 'not in OutputDataType'})"
                                           f", not a numeric type this reader takes ({', '.join(_DUMP_DTYPES)})")
    if tensor.format not in _PLAIN_FORMATS:
        known = _FORMAT_ENUM.values_by_number.get(tensor.format)
        raise refuse(f"{field} format", f"{tensor.format} ({known.name if known else 'not in OutputFormat'}), not a "
                                        "plain layout (ND, NCHW, NHWC, NCDHW, NDHWC); convert it with msaccucmp")
    if tensor.data:
        raise refuse(f"{field} data", "the data is inline in the header; this reader takes it after the header")
    dtype = np.dtype(as_dtype(name).numpy)
    dims = list(tensor.shape.dim)
    count = 1
    for d in dims:  # Python integers: a product of uint64 dims cannot wrap around
        count *= d
    if count * dtype.itemsize != tensor.size:
        raise refuse(f"{field} size", f"{tensor.size} bytes, but shape {dims} of {name} holds "
                                      f"{count * dtype.itemsize}")
    return dtype, tuple(dims)


def read_dump_folder(folder: str) -> dict[str, DumpFile]:
    """Every dump file in `folder` (regular files; not its subfolders), by node name; of several dumps of one node,
    the latest."""
    out: dict[str, DumpFile] = {}
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.is_file(follow_symlinks=False) and not entry.name.startswith("."):
            dump = read_dump(entry.path)
            if dump.op_name not in out or dump.dump_time >= out[dump.op_name].dump_time:
                out[dump.op_name] = dump
    return out


class Dumper:
    """Writes, for each executor node of a Session's run, its inputs and outputs into `folder` as GE's dump does
    (pass it to graph_ir.compare.observe.run_observed). Functional nodes (If, Case, While) are not written: on the
    device their bodies' ops are."""

    def __init__(self, folder: str):
        self.folder, self.written, self._task = folder, [], 0

    def wrap(self, step: Step) -> Step:
        """`step`, its node's inputs and outputs written when it runs."""
        if step.kind != EXECUTOR:
            return step
        executor = step.run

        def run(node, inputs):
            given = [np.array(a, copy=True) for a in inputs if _dumpable(a)]  # before an in-place op writes them
            results = executor(node, inputs)
            if len(given) < len(inputs) or not all(_dumpable(r) for r in results):  # TensorLists: no dump type
                return results
            self._task += 1
            path = os.path.join(self.folder, file_name(node.type, node.name, self._task, time.time_ns() // 1000))
            write_dump(path, node.name, given, [np.asarray(r) for r in results], time.time_ns() // 1000)
            self.written.append(path)
            return results

        return dataclasses.replace(step, run=run)


def _dumpable(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.name in _DUMP_DTYPES
