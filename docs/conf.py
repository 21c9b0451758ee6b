"""Sphinx configuration: the flowloader site (MyST Markdown pages, Furo theme, an API reference
generated from every public package's ``__all__`` by ``_ext/flowloader_docs.py``).

Build: ``sphinx-build -W -n --keep-going docs docs/_build/html`` (warnings are errors, every
cross-reference must resolve)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))  # document this checkout's flowloader
sys.path.insert(0, str(HERE / "_ext"))

project = "flowloader"
author = "the flowloader authors"
copyright = "2026, the flowloader authors"  # noqa: A001 (Sphinx's name)
release = version = "0.1.0"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "flowloader_docs",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "README.md"]
root_doc = "index"

# Markdown: headings get anchors (links like page.md#a-heading resolve and are checked).
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# Autodoc: signatures with their types; members in source order; no module imported by the
# build may reach the network.
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = False
autodoc_default_options = {"undoc-members": False}
add_module_names = False
python_use_unqualified_type_names = True

nitpicky = True

html_theme = "furo"
html_title = "flowloader"
html_show_sourcelink = False
html_copy_source = False
html_last_updated_fmt = None
