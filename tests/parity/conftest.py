"""Parity tests compare flowloader with torch.utils.data; they need torch."""

import pytest

torch = pytest.importorskip("torch")
