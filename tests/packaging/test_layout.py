"""The house: imports run one way (op_spec, then the TF face and the GE face, with the TF lowering last), with no
cycles; graph_ir imports no TensorFlow; no module is over 300 lines."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT

PACKAGES = ("op_spec", "tf_plugin", "graph_ir")
# graph_ir's layers, bottom first: a module may import only modules of its own or an earlier layer.
GRAPH_IR_LAYERS = [
    ["graph_ir.ir.errors", "graph_ir.ir.frozen", "graph_ir.ir", "graph_ir.files", "graph_ir.runtime"],
    ["graph_ir.ir.dtypes"], ["graph_ir.ir.registry"], ["graph_ir.ir.nodes"], ["graph_ir.ir.verify"],
    ["graph_ir.ir.output_rules", "graph_ir.ir.pruning"], ["graph_ir.opset"],
    ["graph_ir.proto", "graph_ir.files.serialize", "graph_ir.files.onnx_dump"],
    ["graph_ir.ir.graph", "graph_ir.ir.nesting"], ["graph_ir.ir.builders"], ["graph_ir.ops"],
    ["graph_ir.runtime.aliasing", "graph_ir._binding"], ["graph_ir.kernels"], ["graph_ir.distributed"],
    ["graph_ir.executors"],
    ["graph_ir.dynamic"], ["graph_ir.files.load", "graph_ir.files.load_subgraphs"], ["graph_ir.files.read"],
    ["graph_ir.runtime.snapshots", "graph_ir.runtime.planner"], ["graph_ir.runtime.shape_plans", "graph_ir.runtime.segments"],
    ["graph_ir.runtime.session"], ["graph_ir.lowering", "graph_ir.compare"], ["graph_ir"],
]
MAX_LINES = 300
TF_LOWERING = ("graph_ir.lowering", "graph_ir.compare", "graph_ir.cli")  # after both faces
# tf_plugin's HCCL ops run graph_ir's MPI engine (one engine for the TF kernels and graph_ir.Session): tf_plugin.hccl
# may import graph_ir.distributed and the Hcom prototypes' constants, which import no TensorFlow.
TF_HCCL, HCCL_ENGINE = "tf_plugin.hccl", ("graph_ir.distributed", "graph_ir.opset.hcom")


def _modules() -> dict[str, str]:
    out = {}
    for package in PACKAGES:
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for f in files:
                if f.endswith(".py"):
                    rel = os.path.relpath(os.path.join(folder, f), ROOT)[:-3].replace(os.sep, ".")
                    out[rel.removesuffix(".__init__")] = os.path.join(folder, f)
                elif f.endswith(".so"):  # a compiled module: a leaf of the graph
                    rel = os.path.relpath(os.path.join(folder, f.split(".")[0]), ROOT).replace(os.sep, ".")
                    out[rel] = ""
    return out


def _imports(path: str, module: str, modules: dict[str, str]) -> set[str]:
    """Project modules that `module` imports, anywhere in the file (imports inside functions count too, and
    importlib.import_module of a literal name). `from graph_ir import ops` depends on the module graph_ir.ops;
    `from graph_ir.ir.graph import Graph` on graph_ir.ir.graph."""
    if not path:
        return set()
    with open(path) as f:
        tree = ast.parse(f.read())
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module" \
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            names = [node.args[0].value]
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module if node.level == 0 else ".".join(module.split(".")[:-node.level] + [node.module])
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        for name in names:
            while name not in modules and "." in name:
                name = name.rsplit(".", 1)[0]
            if name in modules and name != module:
                found.add(name)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, name, modules) for name, path in modules.items()}


def _layer(module: str) -> int:
    """The layer of the longest entry naming the module or a package holding it (a package's own __init__ may sit
    in another layer than its modules)."""
    found = [(len(m), k) for k, layer in enumerate(GRAPH_IR_LAYERS) for m in layer
             if module == m or module.startswith(m + ".")]
    if not found:
        raise AssertionError(f"{module} is in no layer of GRAPH_IR_LAYERS")
    return max(found)[1]


def test_no_import_cycles():
    graph = _graph()
    state: dict[str, int] = {}

    def visit(start: str) -> None:
        stack = [(start, iter(sorted(graph[start])))]
        state[start] = 1
        path = [start]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(child) == 1:
                pytest.fail(f"import cycle: {' -> '.join(path[path.index(child):] + [child])}")
            elif state.get(child) is None:
                state[child] = 1
                path.append(child)
                stack.append((child, iter(sorted(graph[child]))))

    for module in graph:
        if module not in state:
            visit(module)


def test_imports_run_one_way():
    for module, deps in _graph().items():
        package = module.split(".")[0]
        for dep in deps:
            other = dep.split(".")[0]
            if package == "op_spec":
                assert other == "op_spec", f"{module} imports {dep}: op_spec is framework-free and first"
            elif package != other:
                # The faces stand side by side; the TF lowering (and what runs it) comes after both: it may load the
                # TF face's op library, which SavedModels trained with our optimizers hold ops of.
                after_both = module.startswith(TF_LOWERING) and other == "tf_plugin"
                engine = module.startswith(TF_HCCL) and dep.startswith(HCCL_ENGINE)
                assert other == "op_spec" or after_both or engine, \
                    f"{module} imports {dep}: tf_plugin and graph_ir stand side by side"
            elif package == "graph_ir" and module != "graph_ir":
                is_lowering = module.startswith("graph_ir.lowering")
                same_package = is_lowering and dep.startswith("graph_ir.lowering")
                assert same_package or _layer(dep) < _layer(module) or (_layer(dep) == _layer(module) and
                                                                         not is_lowering), \
                    f"{module} imports {dep}, a later layer"


def test_graph_ir_and_op_spec_import_no_tensorflow():
    code = ("import sys, graph_ir, op_spec, op_spec.checks, op_spec.codegen; "
            "assert 'tensorflow' not in sys.modules, 'tensorflow imported'; "
            "assert 'keras' not in sys.modules, 'keras imported'")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120)


def test_no_module_over_300_lines():
    long = []
    for folder in (*PACKAGES, "tests", "bench", "examples", "kernels", "scripts"):
        for path, _, files in os.walk(os.path.join(ROOT, folder)):
            for f in files:
                if f.endswith((".py", ".cc", ".h", ".sh")):
                    with open(os.path.join(path, f)) as handle:
                        count = sum(1 for _ in handle)
                    if count > MAX_LINES:
                        long.append(f"{os.path.relpath(os.path.join(path, f), ROOT)}: {count}")
    assert not long, long
