#!/usr/bin/env bash
# Installs tf_plugin into .venv and runs the test suite.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup_env.sh
export TF_CPP_MIN_LOG_LEVEL=2
.venv/bin/python -m ruff check .
.venv/bin/python -m pytest -q tests "$@"
