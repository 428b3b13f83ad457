"""Pure-Python core of tlsite: read a TORCH_TRACE log, model it, analyse it, render Markdown.

Nothing in this package imports MkDocs.
"""
