#!/usr/bin/env bash
# Creates .venv (if missing) and installs tf_plugin into it, built against the pip TensorFlow. Sourced by the others.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
PY=.venv/bin/python
$PY -m pip install -q --upgrade pip 2>&1 | grep -v "is ignored" || true
$PY -m pip install -q "tensorflow-cpu>=2.21,<2.22" setuptools wheel "pybind11>=2.10" grpcio-tools 2>&1 | grep -v "is ignored" || true
# No build isolation: the op library is compiled against the TensorFlow just installed in .venv.
$PY -m pip install -q --no-build-isolation -e ".[test,demo]" 2>&1 | grep -v "is ignored" || true
# keras-hub, for tests/graph_ir/test_keras_hub.py, without its declared dependencies: it declares tensorflow-text,
# which would install the full tensorflow package over tensorflow-cpu. These are what its import needs.
$PY -m pip install -q --no-deps "keras-hub==0.32.0" "regex==2026.12.2" "kagglehub==1.0.3" "kagglesdk==0.1.38" \
  "tokenizers==0.23.3" "sentencepiece==0.2.3" 2>&1 | grep -v "is ignored" || true
$PY -m pip install -q "tqdm>=4" "pyyaml>=6" "requests>=2" 2>&1 | grep -v "is ignored" || true
$PY -c "import tf_plugin" 2>/dev/null || { echo "tf_plugin failed to install" >&2; exit 1; }
