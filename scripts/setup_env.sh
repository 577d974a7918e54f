#!/usr/bin/env bash
# Creates .venv (if missing) and installs tf_plugin into it, built against the pip TensorFlow; run by demo.sh and
# test.sh. The build (two C++ libraries, minutes) is skipped while .venv/tf_plugin-build.stamp holds the hash of every
# build input (scripts/build_stamp.py: setup.py, pyproject.toml, this script, kernels/, op_spec/, tf_plugin/cc/,
# graph_ir/cc/, the protos, third_party/, TensorFlow's and Python's versions) and the package imports. Delete the
# stamp (or .venv) to force a full install. Each stage prints one "setup: ..." line; a failing step stops the script.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
STAMP=$ROOT/.venv/tf_plugin-build.stamp

say() { echo "setup: $*"; }

# pip's output without the noise of a good run: pip's "... is ignored" notes and setuptools' warning boxes (the
# editable-install "InformationOnly" notice: a "...Warning: " or "InformationOnly: " summary line, then "!!", a box
# of '*', "!!", then one indented source line). Every other line, errors included, passes; pip's own exit status is the pipeline's (pipefail).
quiet() {
  "$@" 2>&1 | awk '
    /is ignored/ { next }
    in_box { if ($0 ~ /^[[:space:]]*!![[:space:]]*$/) { in_box = 0; after_box = 1 } next }
    /^[[:space:]]*!![[:space:]]*$/ { in_box = 1; if (has && held !~ /(Warning|InformationOnly): /) print held; has = 0; next }
    after_box && /^[[:space:]]/ { after_box = 0; next }
    { after_box = 0; if (has) print held; held = $0; has = 1 }
    END { if (has) print held }'
}

built_and_current() {
  [ -f "$STAMP" ] && [ -x "$PY" ] || return 1
  [ "$("$PY" "$ROOT/scripts/build_stamp.py")" = "$(cat "$STAMP")" ] || return 1
  # From another folder, so that the import goes through the editable install, not the current directory.
  (cd / && TF_CPP_MIN_LOG_LEVEL=3 "$PY" -c "import os, sys, tf_plugin, graph_ir._binding, graph_ir.proto
sys.exit(not tf_plugin.__file__.startswith(os.path.join(sys.argv[1], '')))" "$ROOT") >/dev/null 2>&1
}

if [ ! -x "$PY" ]; then
  say "creating .venv"
  python3 -m venv .venv
elif built_and_current; then
  say "up to date, nothing to build"
  exit 0
fi
rm -f "$STAMP"
say "installing TensorFlow and build tools"
quiet "$PY" -m pip install -q --upgrade pip || say "could not upgrade pip; going on with $("$PY" -m pip --version)"
quiet "$PY" -m pip install -q "tensorflow-cpu>=2.21,<2.22" setuptools wheel "pybind11>=2.10" grpcio-tools
# No build isolation: the op library is compiled against the TensorFlow just installed in .venv.
NEW_STAMP=$("$PY" scripts/build_stamp.py)  # before the build: an edit made while it runs is built next time
say "building tf_plugin (C++, 3-6 min)"
# A line every 30 s while the compiler runs, so that no stage is silent for minutes.
( elapsed=0; while sleep 30; do elapsed=$((elapsed + 30)); say "still building tf_plugin (${elapsed} s)"; done ) &
TICKER=$!
trap 'kill "$TICKER" 2>/dev/null || true' EXIT
quiet "$PY" -m pip install -q --no-build-isolation -e ".[test,demo]"
kill "$TICKER" 2>/dev/null || true
# keras-hub, for tests/graph_ir/test_keras_hub.py, without its declared dependencies: it declares tensorflow-text,
# which would install the full tensorflow package over tensorflow-cpu. These are what its import needs.
say "installing keras-hub and its test dependencies"
quiet "$PY" -m pip install -q --no-deps "keras-hub==0.32.0" "regex==2026.12.2" "kagglehub==1.0.3" "kagglesdk==0.1.38" \
  "tokenizers==0.23.3" "sentencepiece==0.2.3"
quiet "$PY" -m pip install -q "tqdm>=4" "pyyaml>=6" "requests>=2"
say "checking that tf_plugin imports"
# TF's start-up lines shown only if the import fails.
imported=$(TF_CPP_MIN_LOG_LEVEL=2 "$PY" -c "import tf_plugin, graph_ir._binding" 2>&1) ||
  { echo "$imported" >&2; echo "setup: tf_plugin failed to install" >&2; exit 1; }
echo "$NEW_STAMP" > "$STAMP"
say "done"
