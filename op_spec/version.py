"""The version of tf_plugin, graph_ir and op_spec (one project), and the TensorFlow minor version its op library is
built for: read by setup.py (the wheel's extras) and by tf_plugin's import check."""

__version__ = "0.2.0"
TF_MINOR = "2.21"
