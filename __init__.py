"""tlsite: turn a PyTorch TORCH_TRACE log into a searchable, self-contained static website.

The pipeline, one package each: ``tlsite.core`` (read → model → analyse → render Markdown),
``tlsite.mkdocs_plugin`` (build the site with MkDocs + Material), ``tlsite.themes`` (the
offline theme overrides and assets) and ``tlsite.cli`` (the command line).
"""

__version__ = "0.1.0"
