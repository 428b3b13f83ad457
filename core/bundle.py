"""Pack a built site into one archive that unzips anywhere and opens from ``index.html``.

Two formats: ``.zip`` (the default, because GitHub issues accept ``.zip`` attachments and
every system opens it) and ``.7z`` (LZMA2 over the whole site at once, several times smaller
because every page repeats the same header and navigation, but GitHub issues do not accept
it: use it for email, chat or release assets). Both hold exactly the site folder, into
which :func:`write_bundle` first writes ``manifest.json``: a list of every other file.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: GitHub's limit for a file attached to an issue.
GITHUB_ATTACHMENT_LIMIT = 25 * 1024 * 1024
_FIXED_DATE = (1980, 1, 1, 0, 0, 0)  # deterministic archives: same input, same bytes
_FIXED_TIMESTAMP = 315532800.0  # the same moment as seconds since the epoch (for .7z)


def site_files(site: Path) -> list[Path]:
    """Every file of the site, in a stable order."""
    files = [p for p in site.rglob("*") if p.is_file()]
    return sorted(files, key=lambda p: p.relative_to(site).as_posix())


def write_zip(site: Path, dest: Path, *, root: str | None = None) -> int:
    """Zip ``site`` into ``dest`` under the folder ``root``; return the archive size."""
    root = root if root is not None else site.name
    tmp = dest.with_name(dest.name + ".part")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for path in site_files(site):
            name = f"{root}/{path.relative_to(site).as_posix()}" if root else path.name
            info = zipfile.ZipInfo(name, date_time=_FIXED_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            with open(path, "rb") as source, archive.open(info, "w") as target:
                while chunk := source.read(1 << 20):
                    target.write(chunk)
    os.replace(tmp, dest)
    return dest.stat().st_size


#: The bundle formats ``--bundle`` accepts ("none" writes no bundle).
BUNDLE_FORMATS = ("zip", "7z", "none")
#: The file at the root of every bundle that says what is inside.
MANIFEST_NAME = "manifest.json"
_MANIFEST_NOTE = (
    "A tlsite report: a static website built from one PyTorch TORCH_TRACE log. Open "
    "index.html in a browser (it works from disk, offline). Besides the report pages it holds "
    "the files tlparse writes (raw.log: the log itself; raw.jsonl; payloads/; one file per "
    "artifact), so it contains everything the trace contains: model code, graphs, file paths "
    "and whatever was logged. Share it knowingly."
)


def manifest_json(
    site: Path, *, trace: str, version: str, extra: Mapping[str, Any] | None = None
) -> bytes:
    """The bundle's manifest: every file with its size and SHA-256, the trace and tlsite version.

    The manifest itself (``MANIFEST_NAME`` at the root) is not listed. Hashing reads each file
    once more, which is cheap next to compressing it.
    """
    files = []
    total = 0
    for path in site_files(site):
        if path == site / MANIFEST_NAME:
            continue
        digest = hashlib.sha256()
        with open(path, "rb") as source:
            while chunk := source.read(1 << 20):
                digest.update(chunk)
        size = path.stat().st_size
        total += size
        files.append(
            {"path": path.relative_to(site).as_posix(), "size": size, "sha256": digest.hexdigest()}
        )
    manifest: dict[str, Any] = {
        "generator": f"tlsite {version}",
        "trace": trace,
        "note": _MANIFEST_NOTE,
        **(extra or {}),
        "file_count": len(files),
        "total_size": total,
        "files": files,
    }
    return (json.dumps(manifest, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def write_7z(site: Path, dest: Path, *, root: str | None = None) -> int:
    """Like :func:`write_zip`, as a solid LZMA2 ``.7z`` archive (much smaller, not for issues)."""
    import py7zr

    root = root if root is not None else site.name
    tmp = dest.with_name(dest.name + ".part")
    from py7zr.helpers import ArchiveTimestamp

    fixed = ArchiveTimestamp.from_datetime(_FIXED_TIMESTAMP)
    with py7zr.SevenZipFile(tmp, "w") as archive:
        for path in site_files(site):
            name = path.relative_to(site).as_posix()
            archive.write(path, f"{root}/{name}" if root else name)
            # py7zr stores each file's own times (ctime cannot even be set): fixed times
            # make the same site give the same archive, as in the zip
            info = archive.header.files_info.files[-1]
            for key in ("creationtime", "lastwritetime", "lastaccesstime"):
                info[key] = fixed
    os.replace(tmp, dest)
    return dest.stat().st_size


def write_bundle(
    site: Path,
    fmt: str,
    *,
    trace: str,
    version: str,
    extra: Mapping[str, Any] | None = None,
) -> tuple[Path | None, int]:
    """Write ``site/manifest.json``, then ``site`` as ``<site>.zip`` or ``<site>.7z`` beside it.

    The manifest goes into the folder itself, so the bundle is exactly the folder. Returns the
    bundle's path and size; ``fmt == "none"`` writes nothing (and no manifest).
    """
    if fmt not in BUNDLE_FORMATS:
        raise ValueError(f"bundle format must be one of {', '.join(BUNDLE_FORMATS)}, not {fmt!r}")
    if fmt == "none":
        return None, 0
    manifest = manifest_json(site, trace=trace, version=version, extra=extra)
    (site / MANIFEST_NAME).write_bytes(manifest)
    dest = site.with_name(f"{site.name}.{fmt}")
    writer = write_zip if fmt == "zip" else write_7z
    return dest, writer(site, dest)
