"""The Python blocks of the README and of every page of the documentation site, as a user
pastes them: each one alone, in a new interpreter, in a folder of its own. A
``print(...)  # TEXT`` line must print TEXT (``...`` in TEXT stands for anything), so the
outputs the pages show are the real ones.

A block that needs something a plain run lacks says so on the line just before it, in an HTML
comment (invisible on the rendered page): ``<!-- needs: torch -->`` (a package: the block runs
where it imports), ``<!-- needs: ray-cluster -->`` (runs in CI's Ray step, against the loopback
cluster of tests/ray_cluster), ``<!-- needs: ranks -->`` (several processes under torchrun: a
sketch, never run alone)."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
_SHOWN = re.compile(r"^print\(.*\)\s+# (.*)$")
_NEEDS = re.compile(r"^<!--\s*needs:\s*(.*?)\s*-->$")
# What a ``needs:`` marker may name besides a package: these never run in a plain test run.
NOT_HERE = {
    "ray-cluster": "runs against the loopback Ray cluster, in CI's Ray step (tests/ray_cluster)",
    "ranks": "needs several ranks under torchrun: a sketch of the training script",
}


@dataclass(frozen=True)
class Block:
    line: int  # where the block's code starts in its page
    code: str
    page: pathlib.Path = README
    needs: tuple[str, ...] = ()  # from the page's ``<!-- needs: ... -->`` marker

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    def shown_outputs(self) -> list[str]:
        """What the block's commented ``print`` lines show, in order."""
        return [m.group(1) for line in self.code.splitlines() if (m := _SHOWN.match(line))]


def pages() -> list[pathlib.Path]:
    """The README and every Markdown page of the site (not the build's output)."""
    site = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.relative_to(DOCS).parts)
    return [README, *site]


def python_blocks(page: pathlib.Path | None = None) -> list[Block]:
    """Every ```python block of ``page`` (of every page when None), in order."""
    if page is None:
        return [block for each in pages() for block in python_blocks(each)]
    blocks, code, start, needs, previous = [], None, 0, (), ""
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if code is None and line.strip() == "```python":
            code, start = [], number + 1
            marker = _NEEDS.match(previous.strip())
            needs = tuple(n.strip() for n in marker.group(1).split(",")) if marker else ()
        elif code is not None and line.strip() == "```":
            blocks.append(Block(start, "\n".join(code) + "\n", page, needs))
            code = None
        elif code is not None:
            code.append(line)
        previous = line
    return blocks


def run_block(
    block: Block, folder: pathlib.Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """Run the block as a script in ``folder``; fails the test on an error or an output
    that differs from what the page shows."""
    script = folder / "readme_block.py"
    script.write_text(block.code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONWARNINGS": "error::DeprecationWarning", **(env or {})},
        check=False,
    )
    assert done.returncode == 0, f"{block.name} failed:\n{done.stderr[-3000:]}"
    printed = done.stdout.splitlines()
    shown = block.shown_outputs()
    assert len(printed) >= len(shown), f"{block.name} printed {printed}, the page shows {shown}"
    for text, expected in zip(printed, shown, strict=False):
        pattern = ".*".join(re.escape(part) for part in expected.split("..."))
        assert re.fullmatch(pattern + ".*" if expected.endswith("...") else pattern, text), (
            f"{block.name}: printed {text!r}, the page shows {expected!r}"
        )
    return done
