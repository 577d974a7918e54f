"""tf_plugin: CANN's Ascend optimizer operators PowerSign and FusedEmaAdam as TensorFlow custom ops.

``import tf_plugin`` loads the op library once (so SavedModels, ParameterServerStrategy ps and workers, and graphs
that use the ops can run in this process) and registers the Keras optimizers and sign decays for ``.keras``
loading. ``tf_plugin.raw_ops`` holds the raw-op mirrors, ``tf_plugin.optimizers`` the Keras optimizers,
``tf_plugin.compat.v1`` the TF1 optimizers (imported on first use), ``tf_plugin.sign_decay`` the sign decays.
"""

import importlib
import importlib.util

from op_spec.version import __version__
from tf_plugin import _loader, raw_ops

op_library = _loader.load()
library_path = _loader.library_path
isa = _loader.isa



def _import_keras_faces() -> ImportError | None:
    """Imports tf_plugin.optimizers and tf_plugin.sign_decay (registering their Keras classes), unless Keras itself
    cannot be imported; returns that error, or None. Here, in the package's top, so that imports run one way: the
    loader below the ops, the Keras faces above them."""
    if importlib.util.find_spec("keras") is None:
        return ImportError("Keras is not installed")
    try:
        import keras  # noqa: F401
    except ImportError as e:
        return e
    importlib.import_module("tf_plugin.optimizers")
    importlib.import_module("tf_plugin.sign_decay")
    return None


# Keras finds registered classes only once their module is imported: import them here, so that
# keras.models.load_model works after a plain `import tf_plugin`. A Keras that cannot import (not installed, or a
# backend whose own packages are missing) leaves the ops usable; tf_plugin.optimizers then raises Keras's error.
_keras_error = _import_keras_faces()


def __getattr__(name: str):
    if name in ("compat", "optimizers", "sign_decay"):
        return importlib.import_module(f"tf_plugin.{name}")
    raise AttributeError(f"module 'tf_plugin' has no attribute {name!r}")


__all__ = ["__version__", "compat", "isa", "library_path", "op_library", "optimizers", "raw_ops", "sign_decay"]
