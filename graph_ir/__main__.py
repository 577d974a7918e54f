"""`python -m graph_ir VERB ...`: see graph_ir/cli (convert, missing, run, show, draw, compare, ops)."""

from __future__ import annotations

import sys

from graph_ir.cli import main

if __name__ == "__main__":
    sys.exit(main())
