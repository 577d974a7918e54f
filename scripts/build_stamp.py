"""The build stamp of scripts/setup_env.sh: one hash of every input of `pip install -e .` (what setup.py compiles and
generates, the script's own pins, the TensorFlow and Python the library is built against). setup_env.sh skips the
install (the two .so files take minutes to compile) while .venv's stamp matches and the package imports.

  python scripts/build_stamp.py          prints the stamp of this tree under the running Python
  python scripts/build_stamp.py --files  lists the files it hashes

Run by .venv's Python (the TensorFlow version is the one installed there); reads TF's version from its metadata,
without importing it, and needs nothing outside the standard library."""

from __future__ import annotations

import hashlib
import os
import sys
from importlib import metadata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Files and folders (walked) that the build reads: setup.py's sources (kernels/, tf_plugin/cc/, graph_ir/cc/), the
# op_spec codegen and its generated header, the protos compiled to ge_ir.desc, the build's own settings and the
# script that installs it all (its pins). third_party/ is Bazel's, hashed too to be safe.
INPUTS = ("setup.py", "pyproject.toml", "scripts/setup_env.sh", "kernels", "op_spec", "tf_plugin/cc", "graph_ir/cc",
          "graph_ir/proto/ge_ir.proto", "graph_ir/proto/dump_data.proto", "third_party")
_SKIPPED_DIRS = {"__pycache__", ".pytest_cache"}
_SKIPPED_SUFFIXES = (".pyc", ".so", ".o")
TF_DISTRIBUTIONS = ("tensorflow-cpu", "tensorflow", "tf-nightly")  # as setup.py looks them up


def input_files(root: str = ROOT) -> list[str]:
    """Every file the stamp hashes, relative to `root` with '/' separators, sorted; a missing input is left out
    (its absence changes the hash)."""
    found = []
    for entry in INPUTS:
        path = os.path.join(root, entry)
        if os.path.isfile(path):
            found.append(entry)
        for folder, dirs, names in os.walk(path):
            dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
            found += [os.path.relpath(os.path.join(folder, n), root).replace(os.sep, "/") for n in names
                      if not n.endswith(_SKIPPED_SUFFIXES)]
    return sorted(set(found))


def tensorflow_version() -> str:
    for dist in TF_DISTRIBUTIONS:
        try:
            return f"{dist}=={metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    return "no tensorflow"


def stamp(root: str = ROOT) -> str:
    """sha256 of each input file's path and bytes, TensorFlow's version and Python's."""
    h = hashlib.sha256()
    for rel in input_files(root):
        with open(os.path.join(root, rel), "rb") as f:
            data = f.read()
        h.update(f"{rel}\0{len(data)}\0".encode() + data)
    h.update(f"\0{tensorflow_version()}\0{sys.version}\0{sys.executable}".encode())
    return h.hexdigest()


if __name__ == "__main__":
    if sys.argv[1:] == ["--files"]:
        print("\n".join(input_files()))
    else:
        print(stamp())
