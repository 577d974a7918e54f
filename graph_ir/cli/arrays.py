"""The command line's .npy / .npz inputs, read as files from anyone: without pickles, each array's header checked
against the bytes the file holds before anything is allocated (a header may claim 2**40 elements), the file's kind
by its content (an .npy named .npz, or the other way round, is named so), and each array's dtype against the graph
input it feeds. Every fault is an InputFileError (a ValueError) naming the file (and the member and input)."""

from __future__ import annotations

import math
import os
import zipfile
import zlib
from collections.abc import Sequence
from typing import IO

import numpy as np
from numpy.lib import format as npy_format

from graph_ir.ir.dtypes import as_dtype
from graph_ir.ir.nodes import Node

NPY_MAGIC, ZIP_MAGIC = b"\x93NUMPY", b"PK\x03\x04"
_READ_ERRORS = (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError)


class InputFileError(ValueError):
    """An input file that cannot be read, or does not fit the graph (the message names the file)."""


def _kind(path: str) -> str:
    """'npy', 'npz' or '' by the file's first bytes."""
    with open(path, "rb") as f:
        start = f.read(len(NPY_MAGIC))
    return "npy" if start == NPY_MAGIC else "npz" if start.startswith(ZIP_MAGIC) else ""


def _check_header(f: IO[bytes], size: int, where: str) -> None:
    """Refuses an array whose header claims more data bytes than the `size` bytes of its file (or zip member)."""
    try:
        version = npy_format.read_magic(f)
        if version not in ((1, 0), (2, 0)):
            raise InputFileError(f"format version {version[0]}.{version[1]} is not read here (1.0 and 2.0 are)")
        read = npy_format.read_array_header_1_0 if version == (1, 0) else npy_format.read_array_header_2_0
        shape, _, dtype = read(f)
    except _READ_ERRORS as e:
        raise InputFileError(f"{where}: not a readable .npy array: {e}") from None
    if dtype.hasobject:
        raise InputFileError(f"{where}: holds Python objects ({dtype}); pickles are not read")
    claimed = math.prod(shape) * dtype.itemsize
    if claimed > size - f.tell():
        raise InputFileError(f"{where}: its header claims {dtype}{list(shape)} ({claimed} bytes) but only "
                         f"{max(size - f.tell(), 0)} bytes of data follow")


def load_npy(path: str) -> np.ndarray:
    """The array of an .npy file."""
    kind = _kind(path)
    if kind != "npy":
        raise InputFileError(f"input {path!r}: " + ("an .npz archive where an .npy array is expected (give its arrays "
                                                 "as one .npz alone)" if kind == "npz" else "not an .npy file"))
    with open(path, "rb") as f:
        _check_header(f, os.fstat(f.fileno()).st_size, f"input {path!r}")
        f.seek(0)
        try:
            return npy_format.read_array(f, allow_pickle=False)
        except _READ_ERRORS as e:
            raise InputFileError(f"input {path!r}: not a readable .npy array: {e}") from None


def load_npz(path: str) -> dict[str, np.ndarray]:
    """The arrays of an .npz file by name, in the archive's order."""
    kind = _kind(path)
    if kind != "npz":
        raise InputFileError(f"inputs {path!r}: " + ("an .npy array where an .npz archive is expected (np.savez)"
                                                  if kind == "npy" else "not an .npz archive (np.savez)"))
    arrays = {}
    try:
        archive = zipfile.ZipFile(path)
    except _READ_ERRORS as e:
        raise InputFileError(f"inputs {path!r}: not a readable .npz archive: {e}") from None
    with archive:
        for info in archive.infolist():
            name = info.filename.removesuffix(".npy")
            where = f"inputs {path!r}, array {name!r}"
            try:
                with archive.open(info) as f:
                    _check_header(f, info.file_size, where)
                with archive.open(info) as f:
                    arrays[name] = npy_format.read_array(f, allow_pickle=False)
            except InputFileError:
                raise
            except _READ_ERRORS as e:
                raise InputFileError(f"{where}: not readable: {e}") from None
    return arrays


def check_dtypes(data: Sequence[Node], arrays: Sequence[np.ndarray], sources: Sequence[str]) -> None:
    """Refuses an array whose dtype is not its graph input's, naming the input, its source and both dtypes."""
    for node, array, source in zip(data, arrays, sources, strict=True):
        want = node.output_descs[0].dtype.name
        try:
            got = as_dtype(array.dtype).name
        except TypeError:  # a structured, datetime or bytes array
            got = str(array.dtype)
        if got != want:
            raise InputFileError(f"input {node.attrs.get('index', 0)} ({node.name}) from {source}: dtype {got}, the graph "
                             f"wants {want}")
