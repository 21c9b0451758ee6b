"""Warnings that point at the user's line, however deep in the loader they are raised."""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def warn_at_user(message: str, category: type[Warning] = UserWarning) -> None:
    """Warn at the first frame outside the flowloader package (the user's ``for`` loop or
    ``iter()``), not at a hard-coded depth that every refactor of the call chain breaks."""
    frame: Any = sys._getframe(1)
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
