"""Every fenced ```python block of the README and of the docs/ pages it links runs as written, in a fresh process
(imports included); every relative link of those pages points to a file."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.helpers import ROOT

PAGES = ["README.md", *sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs"))
                              if f.endswith(".md"))]


def _blocks(pages: list[str] = PAGES) -> list[str]:
    out = []
    for page in pages:
        with open(os.path.join(ROOT, page)) as f:
            out += re.findall(r"^```python\n(.*?)^```$", f.read(), flags=re.DOTALL | re.MULTILINE)
    return out


def test_the_readme_leads_with_python_examples_and_links_every_page():
    assert len(_blocks(["README.md"])) >= 2 and len(_blocks()) >= 5
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    assert all(f"]({page})" in readme for page in PAGES[1:])


def test_every_relative_link_points_to_a_file():
    """A link is relative to its page's folder: docs/x.md written inside docs/ is docs/docs/x.md, broken."""
    broken = []
    for page in PAGES:
        with open(os.path.join(ROOT, page)) as f:
            text = re.sub(r"^```.*?^```$", "", f.read(), flags=re.DOTALL | re.MULTILINE)  # code is not links
        for target in re.findall(r"\[[^\]]*\]\(<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)", text):
            path = target.split("#")[0]
            if path and not re.match(r"^[a-z][a-z0-9+.-]*:", path) and \
                    not os.path.exists(os.path.join(ROOT, os.path.dirname(page), path)):
                broken.append(f"{page}: {target}")
    assert not broken, broken


@pytest.mark.parametrize("index", range(len(_blocks())))
def test_readme_python_block_runs(index, tmp_path):
    script = tmp_path / f"block{index}.py"
    script.write_text(_blocks()[index])
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                            timeout=300, env=env, check=False)
    assert result.returncode == 0, f"README block {index} failed:\n{_blocks()[index]}\n{result.stderr[-3000:]}"
