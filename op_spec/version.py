"""The version of tf_plugin, graph_ir and op_spec (one project): read by setup.py, exported as tf_plugin.__version__."""

__version__ = "0.2.0"
