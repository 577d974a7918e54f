#!/usr/bin/env bash
# Runs the REG_OP conformance tests and the stand-alone checks in a fresh clone of this checkout's HEAD with nothing
# beside it, as a new user has it. The built extensions are copied from this checkout (they are not tracked), and
# the clone's own sources come first on the path. Needs .venv (scripts/test.sh makes it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
here=$PWD
alone=$(mktemp -d)
trap 'rm -rf "$alone"' EXIT
git clone -q "$here" "$alone/tf_plugin"
cd "$alone/tf_plugin"
for built in graph_ir/_binding*.so tf_plugin/_tf_plugin_ops*.so tf_plugin/_build_info.py graph_ir/proto/ge_ir.desc; do
  cp "$here"/$built "$(dirname "$built")/"
done
[ -z "$(ls -A "$alone" | grep -v '^tf_plugin$')" ] || { echo "the clone has company in $alone" >&2; exit 1; }
PYTHONPATH="$PWD" TF_CPP_MIN_LOG_LEVEL=2 "$here/.venv/bin/python" -m pytest -q -p no:cacheprovider \
  tests/graph_ir/test_reg_ops.py tests/graph_ir/test_reg_ops_parser.py tests/packaging/test_standalone.py \
  tests/graph_ir/test_builder.py
