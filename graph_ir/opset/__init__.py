"""The GE op families beyond the plumbing and the optimizer ops of graph_ir/ir/registry.py: one module per family, each
declaring its ops' prototypes as CANN's REG_OPs do, with their output rules. Importing this package registers them
(graph_ir.ir.graph imports it, so every graph sees them)."""

from graph_ir.opset import (
           activation,
           array,
           bucketize,
           checks,
           control,
           conv,
           ctc,
           depthwise,
           empty,
           fft,
           hcom,
           image,
           linalg,
           logic,
           math,
           matrix,
           nn,
           norm,
           random,
           resize,
           scatter,
           segment,
           slicing,
           splitting,
           tensorlist,
           trig,
           valued,
)

__all__ = ["activation", "array", "bucketize", "checks", "control", "conv", "ctc", "depthwise", "empty", "fft", "hcom", "image", "linalg", "logic",
           "math", "matrix", "nn", "norm", "random", "resize", "scatter", "segment", "slicing", "splitting", "tensorlist",
           "trig", "valued"]
