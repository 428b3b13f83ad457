"""What a built site's compile pages link as tlparse's copy of text they show in full.

The renderer lists these copies for the zip bundle as it renders the pages
(``ReportRenderer.artifact_copies``); tests read them back from the pages a user opens, by
their "raw file" links marked ``tlsite-copy``, to hand to ``write_bundle`` and to check the
renderer's list.
"""

from __future__ import annotations

import html
import posixpath
import re
from pathlib import Path
from urllib.parse import unquote

_COPY_LINK = re.compile(r'<a href="([^"]+)" class="tlsite-copy"')
_COMPILE_FOLDER_FILE = re.compile(r"(?:rank_\d+/)?-_[^/]+/[^/]+")  # not a shared payload file


def copies_linked(site: Path) -> list[str]:
    """The files of compile folders (by ``/``-separated path) that a compile page links as a
    copy, sorted (a link to a payload file, which pages share, is no copy the zip may drop)."""
    copies: set[str] = set()
    for page in site.glob("**/-_*/index.html"):
        folder = page.parent.relative_to(site).as_posix()
        for href in _COPY_LINK.findall(page.read_text(encoding="utf-8")):
            target = posixpath.normpath(posixpath.join(folder, unquote(html.unescape(href))))
            if _COMPILE_FOLDER_FILE.fullmatch(target) and (site / target).is_file():
                copies.add(target)
    return sorted(copies)
