"""The GE op families beyond the plumbing and the optimizer ops of graph_ir/registry.py: one module per family, each
declaring its ops' prototypes as CANN's REG_OPs do, with their output rules. Importing this package registers them
(graph_ir.graph imports it, so every graph sees them)."""

from graph_ir.opset import (
           activation,
           array,
           control,
           conv,
           depthwise,
           logic,
           math,
           nn,
           norm,
           random,
           resize,
           slicing,
           splitting,
           tensorlist,
           trig,
)

__all__ = ["activation", "array", "control", "conv", "depthwise", "logic", "math", "nn", "norm", "random", "resize",
           "slicing", "splitting", "tensorlist", "trig"]
