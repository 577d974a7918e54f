"""Comparing dump files needs no TensorFlow: `import graph_ir.compare` and everything but compare_step leave it
unimported (1.1 GB mapped); compare_step imports it when first used."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import sys, tempfile
    import numpy as np
    import graph_ir
    import graph_ir.compare
    from graph_ir.compare import compare_dumps, read_dump, read_dump_folder, write_dumps

    with graph_ir.Graph("g") as graph:
        x = graph_ir.Data(0, "float32", (2, 3), name="x")
        graph.set_outputs([graph_ir.ops.Relu(graph_ir.ops.Add(x, x, name="twice"), name="relu")])
    inputs = [np.arange(-3, 3, dtype=np.float32).reshape(2, 3)]
    folder = tempfile.mkdtemp()
    written = write_dumps(graph, inputs, folder)
    assert sorted(read_dump_folder(folder)) == ["relu", "twice"] and read_dump(written[0]).outputs
    comparison = compare_dumps(graph, inputs, folder)
    assert comparison.first_departure is None and len(comparison.rows) == 2, comparison.summary()
    comparison.format_table(), comparison.to_csv()
    assert "tensorflow" not in sys.modules, "graph_ir.compare imported TensorFlow"
    graph_ir.compare.compare_step
    assert "tensorflow" in sys.modules
    print("ok")
""")


def test_reading_and_comparing_dumps_does_not_import_tensorflow():
    done = subprocess.run([sys.executable, "-c", SCRIPT], check=False, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
