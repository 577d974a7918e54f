import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def pytest_report_header(config):
    """Which CPU ran the suite and which of TF's kernels it takes (graph_ir/executors/onednn.py)."""
    from graph_ir.executors import onednn

    return f"cpu: {onednn.describe()}"
