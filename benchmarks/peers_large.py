"""The peers suite on camera-sized photos: 200 JPEGs of 2048x1536 (as phones and cameras
produce), the same loaders, pipelines (float32 output), 2 workers and batch 64; samples/s over
3 batches from building the loader.

    python -m benchmarks.peers --large [--batches 3] [--runs 3]
"""

from __future__ import annotations

from . import peers


def section(quick: bool = False) -> str:
    return peers.section_large(quick)
