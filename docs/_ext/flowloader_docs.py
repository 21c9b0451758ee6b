"""The site's generated parts, made by the build itself so that no page needs editing when a
public name is added:

- one reference page per public package or module (``PACKAGES``, plus every module under
  ``flowloader.integrations`` that exists), listing every name of its ``__all__`` with autodoc;
  a name already described on an earlier page gets a short entry pointing there;
- the command line's reference, from ``flowloader.cli.main.build_parser()``;
- cross-references: a type named by the module that defines it (``flowloader.dataset.Dataset``)
  resolves to the page that documents the object; types of other projects (NumPy, torch,
  typing, ...) render as plain text, since their inventories cannot be fetched offline.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import pkgutil
import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # importable without Sphinx (the coverage gate's test imports it)
    from sphinx.application import Sphinx

# The packages and modules the reference covers, in the order their pages appear; a name in
# several ``__all__`` lists is described on the first page that has it.
PACKAGES = [
    "flowloader",
    "flowloader.utils.data",
    "flowloader.vision",
    "flowloader.vision.datasets",
    "flowloader.vision.transforms",
    "flowloader.text",
    "flowloader.tables",
    "flowloader.video",
    "flowloader.mixture",
    "flowloader.shards",
    "flowloader.order",
    "flowloader.batching",
    "flowloader.randomness",
    "flowloader.collate",
    "flowloader.stats",
    "flowloader.errors",
]
OPTIONAL_PACKAGES = ["flowloader.integrations"]  # documented with every module under it


def packages() -> list[str]:
    """``PACKAGES`` and the integration modules that exist in this checkout."""
    found = list(PACKAGES)
    for name in OPTIONAL_PACKAGES:
        try:
            package = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(package, "__all__"):
            found.append(name)
        for module in pkgutil.iter_modules(getattr(package, "__path__", [])):
            if not module.name.startswith("_"):
                found.append(f"{name}.{module.name}")
    return found


def public_names(module_name: str) -> list[tuple[str, Any]]:
    """``(name, object)`` for every name in the module's ``__all__``."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:
        raise RuntimeError(f"{module_name} has no __all__: the reference is made from it")
    return [(name, getattr(module, name)) for name in names]


def data_doc(module_name: str, name: str, obj: Any) -> list[str]:
    """A constant's documentation: the ``#:`` comment (or string after it) where it is assigned,
    in ``module_name`` or in the module of the package that defines it under that name."""
    from sphinx.pycode import ModuleAnalyzer

    package = module_name.rsplit(".", 1)[0] + "."
    defining = sorted(
        loaded
        for loaded, module in list(sys.modules.items())
        if loaded.startswith(package) and getattr(module, name, None) is obj
    )
    candidates = [module_name, *defining]
    for candidate in candidates:
        try:
            docs = ModuleAnalyzer.for_module(candidate).find_attr_docs()
        except Exception:  # no source (a compiled module): nothing to read
            continue
        found = docs.get(("", name))
        if found and "".join(found).strip():
            return [line for line in found if line is not None]
    return []


def _kind(obj: Any) -> str:
    if isinstance(obj, types.ModuleType):
        return "module"
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    if callable(obj) and (inspect.isroutine(obj) or hasattr(obj, "__wrapped__")):
        return "function"
    return "data"


def _identity(obj: Any) -> Any:
    """A key for 'the same object' (small ints and strings would collide by value: data is
    never shared between pages, only classes, functions and modules)."""
    return id(obj) if _kind(obj) in ("class", "exception", "function", "module") else None


def reference_pages() -> tuple[dict[str, str], dict[str, str]]:
    """The reST of every reference page, by module name; and, for every documented class or
    function, its defining path (``module.qualname``) -> the documented name."""
    described: dict[Any, str] = {}
    aliases: dict[str, str] = {}
    pages: dict[str, str] = {}
    all_pages = packages()
    for module_name in all_pages:
        title = f"``{module_name}``"
        lines = [
            title,
            "=" * len(title),
            "",
            f".. automodule:: {module_name}",
            "   :no-members:",
            "",
        ]
        lines += [f".. currentmodule:: {module_name}", ""]
        for name, obj in public_names(module_name):
            kind = _kind(obj)
            key = _identity(obj)
            full = f"{module_name}.{name}"
            if kind == "module":  # a submodule: its own page, or described here in full
                if obj.__name__ in all_pages:
                    lines += [f"``{name}``: the module :py:mod:`{obj.__name__}`.", ""]
                else:
                    lines += [f".. automodule:: {obj.__name__}", "   :members:", ""]
                continue
            if key is not None and key in described:
                where = described[key]
                role = {"class": "class", "exception": "exc", "function": "func"}[kind]
                directive = {"class": "class", "exception": "exception", "function": "function"}
                lines += [f".. py:{directive[kind]}:: {name}", ""]
                lines += [f"   The same object as :py:{role}:`{where}`.", ""]
                continue
            if key is not None:
                described[key] = full
                own = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', name)}"
                aliases.setdefault(own, full)
            if kind in ("class", "exception"):
                lines += [f".. auto{kind}:: {name}", "   :members:", "   :show-inheritance:", ""]
            elif kind == "function":
                lines += [f".. autofunction:: {name}", ""]
            else:  # a constant: its ``#:`` comment, wherever in the package it is assigned
                lines += [f".. py:data:: {name}"]
                shown = repr(obj)
                if len(shown) <= 70 and "\n" not in shown:
                    lines += [f"   :value: {shown}"]
                lines += [""] + ["   " + line for line in data_doc(module_name, name, obj)] + [""]
        pages[module_name] = "\n".join(lines)
    return pages, aliases


def cli_page() -> str:
    """The ``flowloader`` command's help and every subcommand's, as they print it."""
    from flowloader.cli.main import build_parser

    os.environ["COLUMNS"] = "96"
    parser = build_parser()
    title = "The ``flowloader`` command"
    lines = [title, "=" * len(title), "", ".. program:: flowloader", ""]
    lines += [
        "Generated from the command's own parser; ``flowloader COMMAND --help`` prints the same.",
        "",
    ]
    lines += _help_block(parser)
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in commands.choices.items():
        heading = f"``flowloader {name}``"
        lines += [f".. _cli-{name}:", "", heading, "-" * len(heading), ""]
        lines += _help_block(sub)
    return "\n".join(lines)


def _help_block(parser: argparse.ArgumentParser) -> list[str]:
    # The help names the cache under the builder's home: shown as a user's ``~``.
    text = parser.format_help().rstrip().replace(str(Path.home()), "~")
    return (
        [".. code-block:: text", ""]
        + ["   " + line if line else "" for line in text.splitlines()]
        + [""]
    )


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def generate(app: Sphinx) -> None:
    """Write the generated pages under ``reference/api/`` before the build reads sources."""
    folder = Path(app.srcdir) / "reference" / "api"
    folder.mkdir(parents=True, exist_ok=True)
    pages, aliases = reference_pages()
    app.env.flowloader_aliases = aliases  # type: ignore[attr-defined]
    keep = {f"{name}.rst" for name in pages} | {"cli.rst", "index.rst"}
    for name, text in pages.items():
        _write_if_changed(folder / f"{name}.rst", text + "\n")
    index = ["API reference", "=============", ""]
    index += [
        "Every name in the ``__all__`` of each package and module below, from its docstring.",
        "",
    ]
    index += [".. toctree::", "   :maxdepth: 1", ""] + [f"   {name}" for name in pages] + [""]
    _write_if_changed(folder / "index.rst", "\n".join(index) + "\n")
    _write_if_changed(folder / "cli.rst", cli_page() + "\n")
    for stale in folder.glob("*.rst"):
        if stale.name not in keep:
            stale.unlink()


def _outside(target: str) -> bool:
    """A name from another project, or a flowloader object that exists but is not public (a
    type variable, a base class or helper type no ``__all__`` lists): plain text, no link. A
    flowloader name that does not exist stays a broken reference (a warning)."""
    if target.lstrip("~.").split(".")[0] != "flowloader":
        return True
    module_name, _, attribute = target.rpartition(".")
    while module_name:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            module_name, _, parent = module_name.rpartition(".")
            attribute = f"{parent}.{attribute}"
            continue
        obj: Any = module
        for part in attribute.split("."):
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True
    return False


def resolve(app: Sphinx, env: Any, node: Any, contnode: Any) -> Any:
    """``missing-reference``: a flowloader object named by its defining module resolves to the
    page that documents it; other projects' names become text."""
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    aliases = getattr(env, "flowloader_aliases", None) or reference_pages()[1]
    if target in aliases:
        domain = env.get_domain("py")
        node["reftarget"] = aliases[target]
        return domain.resolve_xref(
            env, node["refdoc"], app.builder, node["reftype"], aliases[target], node, contnode
        )
    parent, _, member = target.rpartition(".")
    if parent in aliases:  # a method or attribute of an aliased class
        domain = env.get_domain("py")
        found = domain.resolve_xref(
            env,
            node["refdoc"],
            app.builder,
            node["reftype"],
            f"{aliases[parent]}.{member}",
            node,
            contnode,
        )
        if found is not None:
            return found
    if _outside(target):
        return contnode
    return None


def data_docstring(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list) -> None:
    """A module constant's documentation is its ``#:`` comment: never the docstring of its
    type (a ``dict``'s), which autodoc would otherwise show."""
    own_type = (inspect.getdoc(type(obj)) or "").strip()
    if what == "data" and not inspect.isclass(obj) and "\n".join(lines).strip() == own_type:
        lines.clear()


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("autodoc-process-docstring", data_docstring)
    app.connect("builder-inited", generate)
    app.connect("missing-reference", resolve)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
