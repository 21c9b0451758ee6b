"""Shards for the tests: written by us, by the webdataset package and by GNU tar."""

from __future__ import annotations

import pytest

from flowloader.shards import write_shards


def numbered_samples(count: int, start: int = 0) -> list[dict]:
    return [
        {
            "__key__": f"sample{i:05d}",
            "txt": f"text {i}",
            "cls": i % 7,
            "bin": bytes([i % 256]) * (i % 13),
        }
        for i in range(start, start + count)
    ]


@pytest.fixture
def shards(tmp_path):
    """5 shards of 8, 8, 8, 8 and 3 samples, with index sidecars."""
    return write_shards(numbered_samples(35), str(tmp_path / "part-%03d.tar"), max_count=8)
