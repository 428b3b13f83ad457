"""What a built site's compile pages link as tlparse's copy of text they show in full.

The renderer lists these copies for the zip bundle as it renders the pages
(``ReportRenderer.artifact_copies``); tests read them back from the pages a user opens, by
their "raw file" links marked ``tlsite-copy``, to hand to ``write_bundle`` and to check the
renderer's list; and a zip written as the build's worker writes it.
"""

from __future__ import annotations

import contextlib
import html
import posixpath
import re
import threading
from collections.abc import Iterator
from multiprocessing import Pipe
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from tlsite import __version__
from tlsite.core import bundle

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


def zip_as_the_worker(site: Path, dest: Path, input_size: int) -> None:
    """Write ``site``'s zip to ``dest`` as the build's zip worker does (its service run in a
    thread here, so that a limit a test lowered holds) for an input of ``input_size`` bytes,
    the files handed over as a build does: tlparse's files (``raw.log`` among them) before
    the pages, then the copies the pages link."""
    inbox, to_worker = Pipe(duplex=False)
    from_worker, outbox = Pipe(duplex=False)
    tmp = dest.with_name(dest.name + ".part")
    service = threading.Thread(
        target=bundle._zip_service,
        args=(inbox, outbox, str(site), str(tmp), str(input_size)),
        daemon=True,
    )
    service.start()
    names = sorted(bundle.site_listing(site), key=lambda name: name.endswith(".html"))
    for at in range(0, len(names), bundle.ZIP_BATCH):
        to_worker.send(names[at : at + bundle.ZIP_BATCH])
    fields = {"trace": "t.log", "version": __version__, "extra": {}}
    to_worker.send({**fields, "copies": copies_linked(site)})
    assert from_worker.poll(120), "the worker did not finish"
    assert from_worker.recv() == ("done", None)
    service.join()
    tmp.replace(dest)


@contextlib.contextmanager
def deflated_now() -> Iterator[list[str]]:
    """Within: the site files the zip deflates (``bundle._deflate_entry`` with a level: not
    those only hashed), by path in the site, as it deflates them (not those copied in as
    deflated ahead). They may be deflated on the zip's threads."""
    names: list[str] = []
    original = bundle._deflate_entry

    def spied(path: str, name: str, level: int | None, *hashed: bool) -> Any:
        if level is not None:
            names.append(name.split("/", 1)[1])
        return original(path, name, level, *hashed)

    bundle._deflate_entry = spied  # type: ignore[assignment]
    try:
        yield names
    finally:
        bundle._deflate_entry = original  # type: ignore[assignment]


def zip_as_the_worker_late(site: Path, dest: Path, input_size: int) -> list[str]:
    """:func:`zip_as_the_worker`; the site files it deflated after the last page was handed
    over (:func:`deflated_now` around the zip's end)."""
    late: list[str] = []
    complete_zip = bundle._complete_zip

    def watched_complete(*args: Any, **kwargs: Any) -> None:
        with deflated_now() as names:
            complete_zip(*args, **kwargs)
        late.extend(names)

    bundle._complete_zip = watched_complete  # type: ignore[assignment]
    try:
        zip_as_the_worker(site, dest, input_size)
    finally:
        bundle._complete_zip = complete_zip  # type: ignore[assignment]
    return late
