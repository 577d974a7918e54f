"""TensorFlow imported by the command line without its start-up log: TF_CPP_MIN_LOG_LEVEL=2 unless the user set it,
and the lines TF's C++ logging writes to stderr before anyone can configure it (absl's "All log messages before
absl::InitializeLog() ..." warning, oneDNN's and cpu_feature_guard's notes, which TF_CPP_MIN_LOG_LEVEL does not
reach) filtered out; any other line written while TensorFlow loads is passed on."""

from __future__ import annotations

import os
import re
import sys
import tempfile

NOISE = re.compile(r"All log messages before absl::InitializeLog\(\) is called|oneDNN custom operations are on|"
                   r"cpu_feature_guard\.cc|^To enable the following instructions: .*rebuild TensorFlow")


def quiet_environment() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def import_tensorflow() -> None:
    """Imports TensorFlow (once) with its start-up noise filtered from file descriptor 2."""
    quiet_environment()
    if "tensorflow" in sys.modules:
        return
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to redirect
        import tensorflow
        return
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow  # noqa: F401
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = [line for line in captured.read().decode(errors="replace").splitlines(keepends=True)
                    if not NOISE.search(line)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()
