"""Loads the op library once, from beside this file, and checks it was built for the running TensorFlow."""

from __future__ import annotations

import functools
import os
import types

from op_spec.version import TF_MINOR


def _import_tensorflow():
    try:
        import tensorflow
    except ImportError as e:
        raise ImportError(
            f"tf_plugin needs TensorFlow {TF_MINOR}, which is not installed ({e}); install it with "
            f"`pip install 'tf_plugin[cpu]'` (or [gpu], or [tensorflow] for the standard package)."
        ) from None
    return tensorflow


tf = _import_tensorflow()

_LIBRARY_NAME = "_tf_plugin_ops"


def library_path() -> str:
    """The file of the compiled op library inside the installed package."""
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sorted(os.listdir(here)):
        if entry.startswith(_LIBRARY_NAME) and entry.endswith(".so"):
            return os.path.join(here, entry)
    raise ImportError(
        f"tf_plugin's op library ({_LIBRARY_NAME}*.so) is missing from {here}: the package was not built. "
        "Install it with `pip install .` (or `pip install -e .`) from the source tree."
    )


def _check_tf_version() -> None:
    from tf_plugin import _build_info

    built, running = _build_info.TF_VERSION, tf.__version__
    if built.split(".")[:2] != running.split(".")[:2]:
        raise ImportError(
            f"tf_plugin was built for TensorFlow {built} but TensorFlow {running} is running; a custom-op library "
            "only loads into the TensorFlow it was compiled against. Rebuild it: `pip install --force-reinstall .`."
        )


def load() -> types.ModuleType:
    """The op library, after checking it was built for the running TensorFlow; loaded once per process."""
    _check_tf_version()
    return _load_library()


@functools.cache
def _load_library() -> types.ModuleType:
    return tf.load_op_library(library_path())


def _isa_query(symbol: str) -> str:
    import ctypes

    lib = ctypes.CDLL(library_path())  # the library TF already loaded: same handle, same choice
    fn = getattr(lib, symbol)
    fn.restype = ctypes.c_char_p
    return fn().decode()


def isa() -> str:
    """The SIMD path the kernels run on in this process: "avx512bf16", "avx512", "avx2" or "portable"
    (TF_PLUGIN_ISA can force a lower one)."""
    return _isa_query("tf_plugin_active_isa")


def best_isa() -> str:
    """The best SIMD path this CPU supports."""
    return _isa_query("tf_plugin_best_isa")
