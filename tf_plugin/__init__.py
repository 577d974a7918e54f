"""tf_plugin: CANN's Ascend optimizer operators PowerSign and FusedEmaAdam as TensorFlow custom ops.

``import tf_plugin`` loads the op library once; ``tf_plugin.raw_ops`` holds the raw-op mirrors.
"""

from tf_plugin import _loader

__version__ = "0.1.0"

op_library = _loader.load()
library_path = _loader.library_path

from tf_plugin import raw_ops

__all__ = ["__version__", "library_path", "op_library", "raw_ops"]
