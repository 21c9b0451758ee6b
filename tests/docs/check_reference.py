"""The reference's coverage gate: every name in the ``__all__`` of every package the reference
covers (docs/_ext/flowloader_docs.py ``packages()``) has a docstring of its own (a constant:
a ``#:`` comment where it is assigned) and an entry in the built site's inventory; and every
public package with an ``__all__`` is covered. Run after the build:
``python -m pytest tests/docs/check_reference.py``."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import posixpath
import sys

import pytest

from ..readme_blocks import ROOT

sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import flowloader_docs

SITE = ROOT / "docs" / "_build" / "html"


def entries() -> set[str]:
    """Every Python object the built site documents (its objects.inv)."""
    from sphinx.util.inventory import InventoryFile

    inventory = SITE / "objects.inv"
    if not inventory.exists():
        pytest.fail(f"no built site at {SITE}: run sphinx-build -W -n --keep-going docs {SITE}")
    with inventory.open("rb") as stream:
        loaded = InventoryFile.load(stream, "", posixpath.join)
    data = getattr(loaded, "data", loaded)
    return {name for role, names in data.items() if role.startswith("py:") for name in names}


def own_doc(module_name: str, name: str, obj: object) -> str:
    """The object's own documentation (never one inherited from a base or a type)."""
    if flowloader_docs._kind(obj) == "data":
        return "\n".join(flowloader_docs.data_doc(module_name, name, obj))
    return inspect.cleandoc(obj.__doc__ or "")


def test_every_public_package_is_in_the_reference() -> None:
    covered = set(flowloader_docs.packages())
    found = []

    def walk(package: str) -> None:
        module = importlib.import_module(package)
        if hasattr(module, "__all__"):
            found.append(package)
        for child in pkgutil.iter_modules(module.__path__):
            if child.ispkg and not child.name.startswith("_") and child.name != "cli":
                walk(f"{package}.{child.name}")

    walk("flowloader")
    assert set(found) <= covered, (
        f"public packages missing from the reference: {set(found) - covered}"
    )


def test_every_public_name_has_a_docstring_and_a_reference_entry() -> None:
    documented = entries()
    problems = []
    count = 0
    for module_name in flowloader_docs.packages():
        assert f"{module_name}" in documented, f"{module_name}: no reference page"
        for name, obj in flowloader_docs.public_names(module_name):
            count += 1
            full = f"{module_name}.{name}"
            if flowloader_docs._kind(obj) == "module":
                if obj.__name__ not in documented:
                    problems.append(f"{full}: the module {obj.__name__} has no reference entry")
                if not (obj.__doc__ or "").strip():
                    problems.append(f"{full}: the module has no docstring")
                continue
            if full not in documented:
                problems.append(f"{full}: no reference entry")
            if not own_doc(module_name, name, obj).strip():
                problems.append(f"{full}: no docstring")
    assert count >= 150
    assert not problems, f"{len(problems)} of {count} public names:\n" + "\n".join(problems)
