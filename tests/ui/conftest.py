"""The UI tests import their fakes and helpers from ui_fakes.py next to this file."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
