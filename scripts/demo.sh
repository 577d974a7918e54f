#!/usr/bin/env bash
# Installs tf_plugin into .venv and runs the demo.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup_env.sh
TF_CPP_MIN_LOG_LEVEL=2 .venv/bin/python examples/demo.py "$@"
