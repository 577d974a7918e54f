#!/usr/bin/env bash
# Builds and tests with Bazel against the pip TensorFlow in .venv (run scripts/setup_env.sh first), offline:
#   bazel build //... && bazel test //...
# then loads the Bazel-built op library into TensorFlow and runs one update. Installs Debian's bazel-bootstrap
# (Bazel 4.2.3) when bazel is missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if ! command -v bazel >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get install -y -q bazel-bootstrap >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q bazel-bootstrap >/dev/null; }
  else
    sudo apt-get install -y -q bazel-bootstrap >/dev/null
  fi
fi
export PYTHON_BIN_PATH="$PWD/.venv/bin/python"
bazel build //... 2>&1 | grep -E "^(ERROR|FAILED|INFO: Build completed|Target)" || true
bazel test //... 2>&1 | grep -E "PASSED|FAILED|ERROR|Executed"
TF_CPP_MIN_LOG_LEVEL=2 .venv/bin/python - <<'PY'
import numpy as np
import tensorflow as tf

lib = tf.load_op_library("bazel-bin/_tf_plugin_ops.so")
var, m = tf.Variable(np.ones(5, np.float32)), tf.Variable(np.zeros(5, np.float32))
lib.tf_plugin_resource_apply_power_sign(var=var.handle, m=m.handle, lr=0.1, logbase=1.0, sign_decay=1.0, beta=0.9,
                                        grad=tf.ones(5))
want = 1 - 0.1 * np.e  # m and grad agree: the factor is e
assert np.allclose(var.numpy(), want), var.numpy()
print(f"bazel-bin/_tf_plugin_ops.so loads into TensorFlow {tf.__version__} and updates correctly")
PY
