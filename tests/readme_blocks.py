"""The README's Python blocks as a user pastes them: each one alone, in a new interpreter,
in a folder of its own. A ``print(...)  # TEXT`` line must print TEXT (``...`` in TEXT stands
for anything), so the outputs the README shows are the real ones."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
from dataclasses import dataclass

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
ROOT = README.parent
_SHOWN = re.compile(r"^print\(.*\)\s+# (.*)$")


@dataclass(frozen=True)
class Block:
    line: int  # where the block's code starts in README.md
    code: str

    @property
    def name(self) -> str:
        return f"README.md:{self.line}"

    def shown_outputs(self) -> list[str]:
        """What the block's commented ``print`` lines show, in order."""
        return [m.group(1) for line in self.code.splitlines() if (m := _SHOWN.match(line))]


def python_blocks() -> list[Block]:
    """Every ```python block of the README, in order."""
    blocks, code, start = [], None, 0
    for number, line in enumerate(README.read_text(encoding="utf-8").splitlines(), 1):
        if code is None and line.strip() == "```python":
            code, start = [], number + 1
        elif code is not None and line.strip() == "```":
            blocks.append(Block(start, "\n".join(code) + "\n"))
            code = None
        elif code is not None:
            code.append(line)
    return blocks


def run_block(
    block: Block, folder: pathlib.Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """Run the block as a script in ``folder``; fails the test on an error or an output
    that differs from what the README shows."""
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
    assert len(printed) >= len(shown), f"{block.name} printed {printed}, README shows {shown}"
    for text, expected in zip(printed, shown, strict=False):
        pattern = ".*".join(re.escape(part) for part in expected.split("..."))
        assert re.fullmatch(pattern + ".*" if expected.endswith("...") else pattern, text), (
            f"{block.name}: printed {text!r}, the README shows {expected!r}"
        )
    return done
