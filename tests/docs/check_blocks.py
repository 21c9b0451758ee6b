"""Every Python block of every page of the site runs as pasted (tests/readme_blocks.py): alone,
in a new interpreter, in an empty folder, printing what the page shows. A block marked
``<!-- needs: ... -->`` runs where what it names is here, and is listed as skipped (pytest's
``-ra`` summary) where it is not; blocks about the user's own files get them made first
(tests/docs/block_setups.py).

Run by the documentation's CI step: ``python -m pytest tests/docs/check_blocks.py`` (a
``check_`` file, so the main suite does not collect it)."""

from __future__ import annotations

import contextlib
import importlib.util

import pytest

from ..readme_blocks import NOT_HERE, README, Block, pages, python_blocks, run_block
from .block_setups import SETUPS, setup_of

pytestmark = pytest.mark.timeout(300)

# Packages a marker may name (each is in an extra CI installs).
PACKAGES = {
    "torch",
    "torchvision",
    "jax",
    "pyarrow",
    "lance",
    "av",
    "tokenizers",
    "s3fs",
    "ray",
    "orbax",
    "grain",
    "torchtitan",
}


def site_blocks() -> list[Block]:
    return [block for page in pages() if page != README for block in python_blocks(page)]


def test_every_marker_and_setup_is_known() -> None:
    blocks = site_blocks()
    assert len(blocks) >= 20
    for block in blocks:
        unknown = set(block.needs) - PACKAGES - set(NOT_HERE)
        assert not unknown, f"{block.name}: unknown needs {sorted(unknown)}"
    for phrase in SETUPS:
        assert sum(phrase in block.code for block in blocks) == 1, phrase
    # tests/ray_cluster/test_ray_placement.py runs the one Ray recipe against its cluster.
    ray = [block for block in python_blocks() if 'worker_method="ray"' in block.code]
    assert len(ray) == 1
    assert "ray-cluster" in ray[0].needs


@pytest.mark.parametrize("block", site_blocks(), ids=lambda block: block.name)
def test_the_page_block_runs_as_pasted(block: Block, tmp_path) -> None:
    for need in block.needs:
        if need in NOT_HERE:
            pytest.skip(f"{block.name}: {NOT_HERE[need]}")
        if importlib.util.find_spec(need) is None:
            pytest.skip(f"{block.name}: needs {need}, which is not installed here")
    setup = setup_of(block)
    with setup(tmp_path) if setup else contextlib.nullcontext({}) as env:
        run_block(block, tmp_path, env)
