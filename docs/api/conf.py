"""Sphinx configuration of the API reference (built by scripts/apidocs.sh).

The reference is made from the docstrings of the installed (built in place) packages ``fastkafka``
and ``spark_sink``: autodoc imports them, so the compiled extensions must be built first
(``bash scripts/setup.sh``). Warnings are errors (``-W --keep-going`` in scripts/apidocs.sh).
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import fastkafka  # noqa: E402

project = "fastkafka"
release = version = fastkafka.__version__
author = "the fastkafka authors"
copyright = "the fastkafka authors"

extensions = ["sphinx.ext.autodoc", "sphinx.ext.viewcode"]
root_doc = "index"
exclude_patterns = ["_build"]

# Only what is documented here: members in source order, no private names, the signature of a
# compiled method taken from the first line of its docstring (Cython keeps no signatures).
autodoc_default_options = {"members": True, "member-order": "bysource", "show-inheritance": True}
autodoc_docstring_signature = True
autodoc_typehints = "signature"
autoclass_content = "class"
# Cross-references that do not resolve stay plain text instead of failing the build: docstrings
# name Python's own types and the modules' internals, which this reference does not document.
nitpicky = False

html_theme = "alabaster"
html_title = f"fastkafka {release} API reference"
html_show_sourcelink = False
