"""The repository stands alone: no tracked file reads or cites the team's reference shelf beside the clone, and the
facts the tests check against (CANN's REG_OP declarations) are inside it. `scripts/test_standalone.sh` (run by CI)
also runs the REG_OP tests in a clone with nothing beside it."""

from __future__ import annotations

import re
import subprocess

from tests.helpers import ROOT

# Spelled in two parts so that this file does not match itself.
_SHELF = re.compile("|".join([r"\.\./" + "shared", r"\bshared/" + "(research|docs|seeds)"]))
_TEXT_SUFFIXES = (".py", ".md", ".txt", ".cc", ".h", ".sh", ".toml", ".cfg", ".bzl", ".proto", ".json", ".yml")


def _tracked_text_files() -> list[str]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True).stdout.split()
    return [n for n in names if n.endswith(_TEXT_SUFFIXES) or n.startswith(".ci/") or n in ("BUILD", "WORKSPACE")]


def test_no_tracked_file_refers_to_the_shelf_beside_the_clone():
    found = []
    for name in _tracked_text_files():
        with open(f"{ROOT}/{name}", encoding="utf-8", errors="replace") as f:
            found += [f"{name}:{k}: {line.strip()[:100]}" for k, line in enumerate(f, 1) if _SHELF.search(line)]
    assert not found, "files that need the reference shelf beside the clone:\n" + "\n".join(found)


def test_the_shelf_pattern_catches_what_it_is_for():
    shelf = "shar" + "ed"
    assert _SHELF.search(f"see ../{shelf}/research/ge_ir.md") and _SHELF.search(f"{shelf}/docs/api.md")
    assert not _SHELF.search("std::shared_ptr") and not _SHELF.search("shared_name")
