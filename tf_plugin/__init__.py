"""tf_plugin: CANN's Ascend optimizer operators PowerSign and FusedEmaAdam as TensorFlow custom ops.

``import tf_plugin`` loads the op library once (so SavedModels, ParameterServerStrategy ps and workers, and graphs
that use the ops can run in this process) and registers the Keras optimizers and sign decays for ``.keras``
loading. ``tf_plugin.raw_ops`` holds the raw-op mirrors, ``tf_plugin.optimizers`` the Keras optimizers,
``tf_plugin.compat.v1`` the TF1 optimizers (imported on first use), ``tf_plugin.sign_decay`` the sign decays.
"""

import importlib

from op_spec.version import __version__
from tf_plugin import _loader, raw_ops

op_library = _loader.load()
library_path = _loader.library_path
isa = _loader.isa

# Keras finds registered classes only once their module is imported: import them here, so that
# keras.models.load_model works after a plain `import tf_plugin`. A Keras that cannot import (not installed, or a
# backend whose own packages are missing) leaves the ops usable; tf_plugin.optimizers then raises Keras's error.
_keras_error = _loader.import_keras_faces()


def __getattr__(name: str):
    if name in ("compat", "optimizers", "sign_decay"):
        return importlib.import_module(f"tf_plugin.{name}")
    raise AttributeError(f"module 'tf_plugin' has no attribute {name!r}")


__all__ = ["__version__", "compat", "isa", "library_path", "op_library", "optimizers", "raw_ops", "sign_decay"]
