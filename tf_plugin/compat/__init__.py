"""TF1-style (``tf.compat.v1.train.Optimizer``) optimizers: ``tf_plugin.compat.v1``."""

from tf_plugin.compat import v1

__all__ = ["v1"]
