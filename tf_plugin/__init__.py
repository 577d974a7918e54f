"""tf_plugin: CANN's Ascend optimizer operators PowerSign and FusedEmaAdam as TensorFlow custom ops.

``import tf_plugin`` loads the op library once; ``tf_plugin.raw_ops`` holds the raw-op mirrors. The Keras
optimizers (``tf_plugin.optimizers``), the TF1 optimizers (``tf_plugin.compat.v1``) and the sign decays
(``tf_plugin.sign_decay``) are imported on first use, so that importing the ops does not import Keras.
"""

import importlib

from tf_plugin import _loader

__version__ = "0.1.0"

op_library = _loader.load()
library_path = _loader.library_path
isa = _loader.isa

from tf_plugin import raw_ops

_LAZY = ("optimizers", "compat", "sign_decay")


def __getattr__(name: str):
    if name in _LAZY:
        return importlib.import_module(f"tf_plugin.{name}")
    raise AttributeError(f"module 'tf_plugin' has no attribute {name!r}")


__all__ = ["__version__", "compat", "isa", "library_path", "op_library", "optimizers", "raw_ops", "sign_decay"]
