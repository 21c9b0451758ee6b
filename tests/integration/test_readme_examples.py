"""Every Python block of the README runs as pasted (tests/readme_blocks.py): alone, in a new
interpreter, in an empty folder, and prints what the README shows. The site's pages are run
the same way by the documentation's CI step (tests/docs/check_blocks.py)."""

from __future__ import annotations

import re

import pytest

from ..readme_blocks import NOT_HERE, README, Block, python_blocks, run_block

pytestmark = pytest.mark.timeout(300)


def test_the_readme_has_its_example() -> None:
    assert len(python_blocks(README)) >= 1


def test_the_readmes_links_into_the_site_resolve() -> None:
    """Every relative link of the README names a file of the repository."""
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README.read_text(encoding="utf-8"))
    assert len(links) >= 10
    missing = [link for link in links if not (README.parent / link).is_file()]
    assert not missing, f"README links to missing files: {missing}"


@pytest.mark.parametrize("block", python_blocks(README), ids=lambda block: block.name)
def test_the_readme_block_runs_as_pasted(block: Block, tmp_path) -> None:
    for need in block.needs:
        if need in NOT_HERE:
            pytest.skip(f"{block.name}: {NOT_HERE[need]}")
        pytest.importorskip(need, reason=f"{block.name} needs {need}")
    run_block(block, tmp_path)
