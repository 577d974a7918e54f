"""graph_ir's errors, at the bottom of its imports so that every layer can raise them."""

from __future__ import annotations


class GraphError(ValueError):
    """A graph, file or call that does not satisfy an op's IR prototype or graph_ir's rules; the message names the
    node and the field (or the argument) with what it got and what was expected."""


class LoweringError(GraphError):
    """A TensorFlow graph that graph_ir.from_tensorflow cannot lower to GE IR; the message names the TF node."""
