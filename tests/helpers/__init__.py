"""Helpers shared by the test areas: the repository root, the thread harness, and the fuzz runner."""

from __future__ import annotations

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
