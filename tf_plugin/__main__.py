"""`python -m tf_plugin` (or `tf_plugin-info`): what to paste into a bug report."""

from __future__ import annotations

import platform


def main() -> None:
    import tensorflow as tf

    import tf_plugin
    from op_spec import ALL, ALL_MULTI, OP_PREFIX
    from tf_plugin import _build_info, _loader

    registered = sorted(n for n in dir(tf_plugin.op_library) if n.startswith(OP_PREFIX))
    declared = sorted([n for sig in ALL for n in (sig.ref_op, sig.resource_op)] + [m.resource_op for m in ALL_MULTI])
    print(f"tf_plugin {tf_plugin.__version__}")
    print(f"TensorFlow: built for {_build_info.TF_VERSION}, running {tf.__version__}")
    print(f"Python {platform.python_version()} on {platform.machine()} {platform.system()}")
    print(f"op library: {tf_plugin.library_path()}")
    print(f"kernels' SIMD path: {tf_plugin.isa()} (best this CPU supports: {_loader.best_isa()}; "
          "TF_PLUGIN_ISA can force portable, avx2, avx512, avx512bf16)")
    gpus = tf.config.list_logical_devices("GPU") + tf.config.list_logical_devices("TPU")
    print("optimizer path: the fused CPU kernels for variables on the CPU; the portable implementation of stock TF "
          f"ops inside XLA (jit_compile) and for variables on a GPU or TPU ({len(gpus)} visible here)")
    print(f"registered ops: {', '.join(registered)}")
    if registered != declared:  # a stale or foreign op library
        missing, extra = sorted(set(declared) - set(registered)), sorted(set(registered) - set(declared))
        print(f"WARNING: the op library does not match op_spec: missing {', '.join(missing) or 'none'}; "
              f"not declared {', '.join(extra) or 'none'}")


if __name__ == "__main__":
    main()
