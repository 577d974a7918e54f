"""The command line's refusals of bad input files (graph_ir/cli/arrays.py): every wrong dtype, a structured,
datetime or bytes array, a truncated .npz, an .npy where an .npz is expected and the other way round, an .npy header
claiming 2^40 elements, draw without onnx, a text graph named .air: each one line on stderr and exit status 2."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import ROOT
from tests.helpers.cli import TIMEOUT, one_error_line, run_cli, small_air


def test_compare_refuses_missing_files_in_one_line(tmp_path):
    one_error_line(run_cli("compare", str(tmp_path / "none.air"), str(tmp_path / "dumps"), "--inputs",
                         str(tmp_path / "none.npz"), ok=None), r"compare: error: .*none")


def _huge_npy(path) -> None:
    """An .npy whose header claims 2**40 float32 elements, followed by 16 bytes."""
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (2**40,)})
        f.write(bytes(16))


def _truncated_npz(path) -> None:
    np.savez(path, x=np.zeros((2, 3), np.float32))
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])


def _saved_as(path: str, save, array: np.ndarray) -> None:
    """`array` saved by `save` (np.save or np.savez) under `path`, whatever its extension."""
    with open(path, "wb") as f:
        save(f, array)


BAD_INPUTS = {  # file name -> (writer, the one error line)
    "x.npy": (lambda p: np.save(p, np.zeros((2, 3))), (r"input 0 \(x\) from '.*x\.npy': dtype float64, the graph "
                                                      r"wants float32")),
    "fields.npy": (lambda p: np.save(p, np.zeros((2, 3), [("a", "f4"), ("b", "i4")])),
                   (r"input 0 \(x\) from '.*fields\.npy': dtype \[\('a', '<f4'\), \('b', '<i4'\)\], the graph wants "
                   r"float32")),
    "dates.npy": (lambda p: np.save(p, np.zeros((2, 3), "datetime64[s]")), r".*dates\.npy': dtype datetime64\[s\], "),
    "bytes.npy": (lambda p: np.save(p, np.zeros((2, 3), "S4")), r".*bytes\.npy': dtype \|S4, the graph wants float32"),
    "ints.npz": (lambda p: np.savez(p, x=np.zeros((2, 3), np.int32)), (r".*ints\.npz' array 'x': dtype int32, the "
                                                                      r"graph wants float32")),
    "cut.npz": (_truncated_npz, r"inputs '.*cut\.npz': not a readable \.npz archive"),
    "array.npz": (lambda p: _saved_as(p, np.save, np.zeros((2, 3), np.float32)),
                  r"inputs '.*array\.npz': an \.npy array where an \.npz archive is expected"),
    "archive.npy": (lambda p: _saved_as(p, np.savez, np.zeros((2, 3), np.float32)),
                    r"input '.*archive\.npy': an \.npz archive where an \.npy array is expected"),
    "huge.npy": (_huge_npy, (r"input '.*huge\.npy': its header claims float32\[1099511627776\] \(4398046511104 "
                            r"bytes\) but only 16 bytes")),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_run_refuses_a_bad_input_file_in_one_line(tmp_path, name):
    write, pattern = BAD_INPUTS[name]
    write(str(tmp_path / name))
    one_error_line(run_cli("run", small_air(tmp_path), "--inputs", str(tmp_path / name), ok=None),
                    r"run: error: " + pattern)


def test_draw_without_onnx_says_what_to_install(tmp_path):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": ROOT}
    blocked = "import sys; sys.modules['onnx'] = None; from graph_ir.__main__ import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", blocked, "draw", small_air(tmp_path), str(tmp_path / "g.onnx")],
                          capture_output=True, text=True, env=env, timeout=TIMEOUT, cwd=ROOT, check=False)
    one_error_line(done, r"draw: error: .*needs the onnx package: pip install onnx")


def test_a_text_graph_named_air_is_named_with_a_hint(tmp_path):
    import graph_ir

    graph_ir.load(small_air(tmp_path)).save(str(tmp_path / "g.pbtxt"))
    os.replace(tmp_path / "g.pbtxt", tmp_path / "text.air")
    for verb in ("show", "run"):
        one_error_line(run_cli(verb, str(tmp_path / "text.air"), ok=None),
                        rf"{verb}: error: graph file '.*text\.air' is not a valid binary ge\.proto\.ModelDef .*; a "
                        r"text-format graph should be named \.pbtxt")
