"""Rules the code base keeps: public surface, module sizes, import layering, optional torch."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "flowloader"
MAX_MODULE_LINES = 600

# Lowest first: a module may import only from its own layer or lower ones.
LAYERS = [
    {"errors", "_compat", "stats", "_warn", "resources", "timeline", "_pages"},
    {"_seed", "_ipc", "randomness", "_skip", "order", "permutation"},
    {"batching", "dataset", "sampler", "distributed", "collate", "_fetch", "_output", "mixture"},
    {"block_shuffle"},
    {"_worker"},
    {"_state", "_plan", "_iter"},
    {"dataloader", "sharding"},
    {"shards", "text", "tables"},
    {"__init__", "__main__", "utils", "vision", "video", "cli", "integrations"},
]


def layer_of(top: str) -> int:
    for level, names in enumerate(LAYERS):
        if top in names:
            return level
    raise AssertionError(f"module {top!r} is not assigned to a layer in test_repo_rules.py")


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def top_name(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def imported_tops(path: Path) -> set[str]:
    """The top-level flowloader modules that ``path`` imports."""
    tree = ast.parse(path.read_text())
    package_parts = path.relative_to(PACKAGE).parts[:-1]
    tops = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package_parts[: len(package_parts) - node.level + 1])
                target = base + (node.module.split(".") if node.module else [])
                if target:
                    tops.add(target[0])
                else:  # `from . import x`: x is a module of the package, or a name in __init__
                    for alias in node.names:
                        is_module = (PACKAGE / alias.name).is_dir() or (
                            PACKAGE / f"{alias.name}.py"
                        ).is_file()
                        tops.add(alias.name if is_module else "__init__")
            elif node.module and node.module.split(".")[0] == "flowloader":
                parts = node.module.split(".")
                tops.add(parts[1] if len(parts) > 1 else "__init__")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "flowloader":
                    tops.add(parts[1] if len(parts) > 1 else "__init__")
    return tops


def imported_modules(path: Path) -> set[str]:
    """The dotted names of the flowloader modules (or names) that ``path`` imports."""
    tree = ast.parse(path.read_text())
    package = ["flowloader", *path.relative_to(PACKAGE).parts[:-1]]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = [*base, *(node.module.split(".") if node.module else [])]
            found.update(".".join([*module, alias.name]) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.split(".")[0] == "flowloader"}


# Packages built on the public API only, as a user's code would be. (utils.data, the PyTorch
# drop-in, is flowloader's engine with torch's types: it sets the engine's defaults.)
PUBLIC_API_ONLY = ("vision", "video", "cli", "shards")


@pytest.mark.parametrize(
    "path",
    [p for p in modules() if top_name(p) in PUBLIC_API_ONLY],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_built_on_the_public_api_only(path: Path) -> None:
    own = f"flowloader.{top_name(path)}"
    for name in imported_modules(path):
        if name == own or name.startswith(own + "."):
            continue  # its own private helpers are its business
        private = [p for p in name.split(".") if p.startswith("_") and not p.startswith("__")]
        assert not private, f"{path.relative_to(PACKAGE)} imports the private {name}"


def test_public_names_are_sorted_and_importable() -> None:
    for name in ("flowloader", "flowloader.utils.data"):
        module = importlib.import_module(name)
        assert list(module.__all__) == sorted(module.__all__), name
        for attribute in module.__all__:
            assert hasattr(module, attribute), f"{name}.{attribute}"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_size(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{path.name} has {lines} lines; split it by responsibility"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_flow_one_way(path: Path) -> None:
    own = top_name(path)
    own_level = layer_of(own)
    for target in imported_tops(path) - {own}:
        assert layer_of(target) <= own_level, f"{own} (layer {own_level}) imports {target}"
    if own == "_worker":
        assert "_iter" not in imported_tops(path)


def test_import_does_not_load_torch() -> None:
    """``import flowloader`` never loads torch; the PyTorch drop-in (flowloader.utils.data)
    does where torch is installed, since its classes subclass torch's."""
    code = "import sys, flowloader, flowloader.vision; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
