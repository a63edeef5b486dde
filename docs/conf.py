"""Sphinx configuration for the dowhy_cfr documentation (build: sphinx-build -W -b html docs docs/_build)."""

project = "dowhy_cfr"
author = "dowhy_cfr developers"
release = "0.1.0"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "**/.ipynb_checkpoints"]
myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3
napoleon_numpy_docstring = True
napoleon_google_docstring = False
autodoc_member_order = "bysource"
autodoc_typehints = "none"
autodoc_mock_imports = []
html_theme = "sphinx_rtd_theme"
suppress_warnings = ["myst.xref_missing"]
