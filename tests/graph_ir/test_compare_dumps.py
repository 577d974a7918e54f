"""CANN's dump files: written and read back bitwise; a Session's dumps of a real step compared with the Session (all
bitwise), and with one node's output perturbed (that node named); hostile files refused with one GraphError naming
the file and the field, before any tensor data is read, in memory bounded by the file."""

from __future__ import annotations

import os
import struct
import tracemalloc

import keras
import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf

from graph_ir.compare import compare_dumps, read_dump, read_dump_folder, write_dump, write_dumps
from graph_ir.compare.dump import MAX_HEADER_BYTES, MAX_TENSORS
from graph_ir.executors import EXECUTORS
from graph_ir.ir.errors import GraphError
from graph_ir.lowering.entry import from_tensorflow
from graph_ir.proto import DumpData
from tests.graph_ir.test_compare_steps import _biased, _cnn_case

DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int32,
          np.int64, np.uint32, np.uint64, np.bool_]


@pytest.mark.parametrize("seed", [0, 1])
def test_files_read_back_bitwise(tmp_path, seed):
    rng = np.random.default_rng(seed)
    arrays = []
    for k, dtype in enumerate(DTYPES):
        shape = [(), (0,), (7,), (3, 1, 5), (2, 3, 4, 3)][k % 5]
        bits = rng.integers(0, 256, int(np.prod(shape)) * np.dtype(dtype).itemsize, dtype=np.uint8)
        array = bits.view(dtype).reshape(shape) if dtype is not np.bool_ else (bits % 2).astype(bool).reshape(shape)
        arrays.append(array)  # every bit pattern: NaNs, infinities, negative zeros
    path = str(tmp_path / "Add.a_b.1.0.0000000000000001")
    write_dump(path, "a/b", arrays[:6], arrays[6:], dump_time=123)
    with pytest.raises(TypeError, match="tensor 0 has dtype complex64"):
        write_dump(path + "c", "c", [np.zeros(2, np.complex64)], [])
    dump = read_dump(path)
    assert (dump.op_name, dump.dump_time) == ("a/b", 123)
    for got, want in zip(dump.inputs + dump.outputs, arrays, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


def _lowered_cnn():
    step, batch = _cnn_case(11)
    graph = from_tensorflow(step, *(tf.TensorSpec(a.shape, tf.dtypes.as_dtype(a.dtype)) for a in batch))
    return graph, list(batch)


def test_a_steps_dumps_compare_bitwise_with_the_session_and_a_perturbed_node_is_named(tmp_path):
    keras.backend.clear_session()
    graph, batch = _lowered_cnn()
    folder = str(tmp_path / "dump")
    written = write_dumps(graph, batch, folder)
    assert len(written) == len(os.listdir(folder)) > 50
    dumps = read_dump_folder(folder)
    assert set(dumps) <= set(graph.nodes)
    conv = next(n for n in graph.topological_order() if n.type == "Conv2D" and n.name in dumps)
    assert len(dumps[conv.name].inputs) == 2 and dumps[conv.name].outputs[0].shape == conv.output_descs[0].shape
    clean = compare_dumps(graph, batch, folder, tolerance=0.0)
    assert len(clean.rows) >= len(dumps) and all(r.metrics.max_abs == 0 for r in clean.rows)
    assert clean.first_departure is None and clean.first_defect is None

    dump = dumps[conv.name]  # the device's Conv2D is off by 1e-2 of its output
    write_dump(dump.path, conv.name, dump.inputs, [dump.outputs[0] * np.float32(1.01)], dump.dump_time)
    perturbed = compare_dumps(graph, batch, folder, tolerance=1e-5)
    assert perturbed.first_departure.ge_node == conv.name, perturbed.summary()
    assert perturbed.first_defect.ge_node == conv.name and perturbed.first_departure.verdict == "defect"


def test_a_device_with_one_wrong_kernel_is_named_and_its_consumers_are_not(tmp_path, monkeypatch):
    graph, batch = _lowered_cnn()
    target = next(n.name for n in graph.topological_order() if n.type == "Conv2D")
    with monkeypatch.context() as patched:  # the "device" run: one Conv2D kernel off by 1e-3
        patched.setitem(EXECUTORS, "Conv2D", _biased(EXECUTORS["Conv2D"], target, 1 + 1e-3))
        write_dumps(graph, batch, str(tmp_path))
    comparison = compare_dumps(graph, batch, str(tmp_path), tolerance=1e-5)
    assert comparison.first_departure.ge_node == target and comparison.first_defect.ge_node == target
    assert not all(r.within for r in comparison.rows)  # what follows it departs accumulated...
    assert all(r.within_isolated is not False for r in comparison.rows if r.ge_node != target)  # ...not isolated


def test_compare_dumps_refuses_misuse(tmp_path):
    graph, batch = _lowered_cnn()
    for tolerance in (-1.0, float("nan"), float("inf"), "1e-3", True):
        with pytest.raises(ValueError, match="tolerance must be a finite number"):
            compare_dumps(graph, batch, str(tmp_path), tolerance=tolerance)
    with pytest.raises(TypeError, match="isolated must be a bool"):
        compare_dumps(graph, batch, str(tmp_path), isolated="yes")


def _header(*tensors: tuple[int, int, list[int], int], op_name: str = "n") -> bytes:
    """A serialized DumpData of outputs (data_type, format, dims, size)."""
    header = DumpData(op_name=op_name)
    for data_type, fmt, dims, size in tensors:
        out = header.output.add()
        out.data_type, out.format, out.size = data_type, fmt, size
        out.shape.dim.extend(dims)
    return header.SerializeToString()


def _file(tmp_path, header: bytes, data: bytes = b"", length: int | None = None) -> str:
    path = str(tmp_path / "Op.n.1.0.0000000000000001")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header) if length is None else length) + header + data)
    return path


FLOAT, ND, NZ = 1, 2, 29  # DT_FLOAT, FORMAT_ND, FORMAT_FRACTAL_NZ (graph_ir/proto/dump_data.proto)
HOSTILE = {
    "truncated header length": (lambda p: _write(p, b"\x05\x00\x00"), "header length"),
    "header past the end": (lambda p: _file(p, _header((FLOAT, ND, [2], 8)), length=10**12), "header length"),
    "not a DumpData": (lambda p: _file(p, b"\xff\xff\xff\xff"), "header"),
    "size past the end": (lambda p: _file(p, _header((FLOAT, ND, [4], 16)), b"\0" * 8), "output 0 size"),
    "size against the shape": (lambda p: _file(p, _header((FLOAT, ND, [3], 8)), b"\0" * 8), "output 0 size"),
    "dims wrapping around 2**64": (lambda p: _file(p, _header((FLOAT, ND, [2**32, 2**32], 0))), "output 0 size"),
    "string dtype": (lambda p: _file(p, _header((13, ND, [1], 1)), b"\0"), "output 0 data_type"),
    "unknown dtype": (lambda p: _file(p, _header((99, ND, [1], 1)), b"\0"), "output 0 data_type"),
    "fractal format": (lambda p: _file(p, _header((FLOAT, NZ, [1], 4)), b"\0" * 4), "output 0 format"),
    "bytes left over": (lambda p: _file(p, _header((FLOAT, ND, [1], 4)), b"\0" * 5), "size"),
    "many tiny tensors": (lambda p: _file(p, _header(*[(FLOAT, ND, [0], 0)] * (MAX_TENSORS + 1))), "input/output"),
    "header above the bound": (lambda p: _file(p, b"\0" * (MAX_HEADER_BYTES + 1)), "header length"),
    "a header full of tiny tensors": (lambda p: _file(p, _many_tiny(MAX_HEADER_BYTES)), "input/output"),
    "a varint past the end": (lambda p: _file(p, b"\x1a\xff\xff"), "header"),
}


def _many_tiny(nbytes: int) -> bytes:
    """A DumpData of as many empty outputs as `nbytes` holds (two bytes each: field 3, length 0)."""
    return bytes([(3 << 3) | 2, 0]) * (nbytes // 2)


def _write(tmp_path, content: bytes) -> str:
    path = str(tmp_path / "Op.n.1.0.0000000000000001")
    with open(path, "wb") as f:
        f.write(content)
    return path


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_files_are_refused_naming_file_and_field(tmp_path, case):
    make, field = HOSTILE[case]
    path = make(tmp_path)
    tracemalloc.start()
    try:
        with pytest.raises(GraphError) as caught:
            read_dump(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(caught.value)
    assert message.startswith(f"dump file {path!r}: {field}:"), message
    assert peak < 64 * os.path.getsize(path) + 2**20, (peak, os.path.getsize(path))
    with pytest.raises(GraphError, match="dump file"):  # a folder holding it is refused alike
        read_dump_folder(os.path.dirname(path))


def unknown_rows_case():
    """A dense step lowered with unknown rows (-1) and with 5 rows, and its batch: compare takes both alike."""
    kernel = tf.Variable(np.random.default_rng(3).normal(size=(3, 4)).astype(np.float32))

    @tf.function
    def step(x):
        return tf.reduce_sum(tf.nn.softmax(tf.nn.relu(tf.matmul(x, kernel) + 0.5)), axis=1)

    x = np.random.default_rng(4).normal(size=(5, 3)).astype(np.float32)
    template = from_tensorflow(step, tf.TensorSpec((None, 3), tf.float32))
    static = from_tensorflow(step, tf.TensorSpec((5, 3), tf.float32))
    return step, template, static, [x]


def test_a_graph_with_unknown_dims_writes_and_compares_dumps_as_its_static_graph(tmp_path):
    _, template, static, batch = unknown_rows_case()
    assert any(d < 0 for n in template.nodes_of_type("Data") for d in n.output_descs[0].shape)
    written = {g: write_dumps(graph, batch, str(tmp_path / g)) for g, graph in (("t", template), ("s", static))}
    assert written["t"] and len(written["t"]) == len(written["s"])
    ours, theirs = read_dump_folder(str(tmp_path / "t")), read_dump_folder(str(tmp_path / "s"))
    assert ours.keys() == theirs.keys()
    for name, dump in ours.items():
        for got, want in zip(dump.outputs, theirs[name].outputs, strict=True):
            assert got.shape == want.shape and got.tobytes() == want.tobytes(), name
    rows = {g: compare_dumps(graph, batch, str(tmp_path / "s"), tolerance=0.0).rows
            for g, graph in (("t", template), ("s", static))}
    assert [(r.ge_node, r.output, r.shape, r.within) for r in rows["t"]] == \
        [(r.ge_node, r.output, r.shape, r.within) for r in rows["s"]]
    assert rows["t"] and all(r.within and r.metrics.scale_error == 0 for r in rows["t"])
