"""A repository rule that finds the pip TensorFlow of `python3` on PATH (or $PYTHON_BIN_PATH) and exposes its
headers and libtensorflow_framework as @local_tf, with the compile flags TF reports (C++17, its ABI flag)."""

_SCRIPT = """
import tensorflow as tf
print(tf.sysconfig.get_include())
print(tf.sysconfig.get_lib())
print(tf.__version__)
print(" ".join(f for f in tf.sysconfig.get_compile_flags() if not f.startswith("-I")))
"""

def _tf_configure_impl(ctx):
    python = ctx.os.environ.get("PYTHON_BIN_PATH") or ctx.which("python3")
    if not python:
        fail("tf_configure: no python3 on PATH; set PYTHON_BIN_PATH to a Python with tensorflow installed")
    result = ctx.execute([python, "-c", _SCRIPT], environment = {"TF_CPP_MIN_LOG_LEVEL": "3"})
    if result.return_code != 0:
        fail("tf_configure: `%s` cannot import tensorflow (set PYTHON_BIN_PATH):\n%s" % (python, result.stderr))
    include, lib, version, flags = result.stdout.strip().split("\n")[-4:]
    ctx.symlink(include, "include")
    ctx.symlink(lib + "/libtensorflow_framework.so.2", "libtensorflow_framework.so")
    copts = [f for f in flags.split(" ") if f]
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "tf_headers",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.inc", "include/Eigen/**",
                 "include/unsupported/**", "include/third_party/**"], allow_empty = True),
    includes = ["include"],
)

cc_import(
    name = "tf_framework",
    shared_library = "libtensorflow_framework.so",
)
""")
    ctx.file("tf_flags.bzl", "TF_COPTS = %s\nTF_VERSION = %r\n" % (repr(copts), version))

tf_configure = repository_rule(
    implementation = _tf_configure_impl,
    environ = ["PYTHON_BIN_PATH", "PATH"],
    local = True,
)

def _kernel_sources_impl(ctx):
    config = json.decode(ctx.read(ctx.attr.config))
    ctx.file("BUILD", "")
    ctx.file("sources.bzl", "PORTABLE = %r\nX86_64 = %r\nFLAGS = %r\n" % (
        config["portable"],
        config["x86_64"],
        config["flags"],
    ))

# kernels/sources.json (the kernels' translation units and ISA flags, also read by setup.py) as @kernel_sources.
kernel_sources = repository_rule(
    implementation = _kernel_sources_impl,
    attrs = {"config": attr.label(allow_single_file = True)},
)
