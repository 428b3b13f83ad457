"""Which existing output tlsite may replace: nothing of the user's is ever deleted.

``--overwrite`` replaces a folder only when it is empty or tlsite wrote it, and never when it
is, or holds, the input trace. tlsite's own folders are known by a mark tlsite always writes:
a report site by its ``manifest.json`` naming tlsite as generator (written whatever the
bundle format, ``none`` too), a Markdown project by the header line of its ``mkdocs.yml``.
The archive written beside a site (``<site>.zip`` or ``<site>.7z``) is replaced only when it
is the bundle of a tlsite site of that name. A site that holds a file its manifest does not
list (one the user added) is not replaced either.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .bundle import MANIFEST_NAME, site_listing
from .cleanup import make_scratch, mark_for_removal, remove_scratch, remove_stale

#: The first line of the ``mkdocs.yml`` that ``tlsite markdown`` writes.
MARKDOWN_HEADER = (
    "# Written by `tlsite markdown`: build with `mkdocs build -f mkdocs.yml` "
    "(needs mkdocs-material).\n"
)
#: How a manifest tlsite wrote starts (``generator`` is its first key).
_MANIFEST_START = re.compile(rb'\A\{\s*"generator": "tlsite ')
_HEAD_BYTES = 512


@dataclass
class BuildOutcome:
    """What a build made, for the terminal summary and ``--strict``."""

    site: Path
    bundle: Path | None
    bundle_size: int
    seconds: float
    summary: str
    clean: bool
    bundle_format: str = "zip"
    why_not_clean: str = ""  # what --strict fails on, when not clean


class OutputRefused(Exception):
    """An existing path tlsite will not replace (a usage error: the user chooses another)."""


def _head(path: Path) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read(_HEAD_BYTES)
    except OSError:
        return b""


def is_tlsite_site(folder: Path) -> bool:
    """Whether ``folder`` is a report site tlsite built (its manifest names tlsite)."""
    return bool(_MANIFEST_START.match(_head(folder / MANIFEST_NAME)))


def written_by_tlsite(folder: Path) -> bool:
    """Whether ``folder`` is a report site or a Markdown project that tlsite wrote."""
    if is_tlsite_site(folder):
        return True
    return _head(folder / "mkdocs.yml").startswith(MARKDOWN_HEADER.encode())


def file_not_written(site: Path) -> str | None:
    """A file in the tlsite site ``site`` that its manifest does not list (one the user put
    there), by its relative path, or None when the site holds only what tlsite wrote."""
    try:
        with open(site / MANIFEST_NAME, encoding="utf-8") as file:
            listed = {entry["path"] for entry in json.load(file)["files"]}
    except (OSError, ValueError, KeyError, TypeError):
        return MANIFEST_NAME  # a manifest that cannot be read cannot vouch for the folder
    return next((name for name in site_listing(site) if name not in listed), None)


def is_tlsite_bundle(archive: Path, site_name: str) -> bool:
    """Whether ``archive`` is the bundle of a tlsite site named ``site_name`` (zip or 7z)."""
    member = f"{site_name}/{MANIFEST_NAME}"
    if not archive.is_file():
        return False
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as bundle:
                return member in bundle.NameToInfo
    except (OSError, zipfile.BadZipFile):
        return False
    import py7zr  # slow to import: only when an archive that is not a zip is there to check

    try:
        if py7zr.is_7zfile(archive):
            with py7zr.SevenZipFile(archive) as bundle:
                return member in bundle.getnames()
    except (OSError, ValueError, py7zr.Bad7zFile):
        return False
    return False


def _holds(folder: Path, path: Path) -> bool:
    return path == folder or folder in path.parents


def _exists(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def bundle_path(out: Path, fmt: str) -> Path | None:
    """The archive a build writes beside the site ``out`` (None for ``--bundle none``)."""
    return None if fmt == "none" or not out.name else out.with_name(f"{out.name}.{fmt}")


def refusal(out: Path, *, inputs: Iterable[str | Path] = (), bundle: str = "none") -> str | None:
    """Why tlsite must not replace ``out`` and its ``bundle`` archive, or None when it may.

    ``inputs`` are the paths the user gave to read (``-``, standard input, is ignored);
    ``bundle`` is the bundle format (``zip``, ``7z`` or ``none``).
    """
    out = out.resolve()
    archive = bundle_path(out, bundle)
    for given in inputs:
        if str(given) == "-":
            continue
        source = Path(given).resolve()
        if _holds(out, source):
            what = "is" if source == out else "holds"
            return f"{out} {what} the input trace {given}: refusing to replace it; use -o DIR"
        if archive is not None and source == archive:
            return f"{archive} is the input trace: refusing to write the bundle over it; use -o DIR"
    if not out.name:
        return f"{out} is the root of the file system: use -o DIR"
    if _exists(out):
        if not out.is_dir():
            return f"{out} is not a folder: refusing to replace it; use -o DIR"
        if any(out.iterdir()) and not written_by_tlsite(out):
            return (
                f"{out} is not a folder tlsite wrote (no tlsite {MANIFEST_NAME}) and is not "
                "empty: refusing to replace it; remove it yourself or use -o DIR"
            )
        added = file_not_written(out) if is_tlsite_site(out) else None
        if added is not None:
            return (
                f"{out} holds {added}, which tlsite did not write (its {MANIFEST_NAME} does "
                "not list it): refusing to replace it; move it out or use -o DIR"
            )
    if archive is not None and _exists(archive) and not is_tlsite_bundle(archive, out.name):
        return (
            f"{archive} is not a bundle tlsite wrote for {out.name}: refusing to replace "
            "it; use -o DIR or --bundle none"
        )
    return None


def check_replaceable(
    out: Path, *, inputs: Iterable[str | Path] = (), bundle: str = "none"
) -> None:
    """Raise :class:`OutputRefused` when :func:`refusal` gives a reason."""
    reason = refusal(out, inputs=inputs, bundle=bundle)
    if reason is not None:
        raise OutputRefused(reason)


@contextlib.contextmanager
def staging_for(
    out: Path, *, inputs: Iterable[str | Path] = (), bundle: str = "none"
) -> Iterator[Path]:
    """A new folder beside ``out`` to build the output in, removed when the block ends.

    First checks that ``out`` may be replaced (:func:`check_replaceable`) and removes what
    killed builds left beside it and in the temporary folder. Build into a folder inside
    the staging folder, then :func:`swap_into_place` it: a failed build leaves ``out`` as it was.
    """
    check_replaceable(out, inputs=inputs, bundle=bundle)
    out.parent.mkdir(parents=True, exist_ok=True)
    for folder in (out.parent, None):  # None: the temporary folder
        remove_stale(folder)
    staging = make_scratch("staging", out.parent, prefix=f".{out.name}.")
    try:
        yield staging
    finally:
        remove_scratch(staging)


def swap_into_place(built: Path, out: Path, bundle: Path | None = None) -> Path | None:
    """Replace ``out`` with ``built`` so a failed build never leaves a half-written output,
    then move ``bundle`` (the archive built beside ``built``) beside ``out``; its new path.

    The old ``out`` is moved aside first, and moved back if ``built`` cannot take its place.
    """
    _swap(built, out)
    if bundle is None:
        return None
    placed = out.with_name(bundle.name)
    os.replace(bundle, placed)
    return placed


def _swap(built: Path, out: Path) -> None:
    old = None
    if out.exists() or out.is_symlink():
        old = out.with_name(f".{out.name}.tlsite-old-{os.getpid()}")
        os.replace(out, old)
    try:
        os.replace(built, out)
    except BaseException:
        if old is not None:
            os.replace(old, out)
        raise
    if old is None:
        return
    if old.is_dir() and not old.is_symlink():
        mark_for_removal(old)  # a build killed while this is removed leaves it to the next build
        remove_scratch(old)
    else:
        old.unlink(missing_ok=True)
