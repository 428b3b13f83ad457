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
import zlib
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


def write_zip(
    site: Path, dest: Path, *, root: str | None = None, skip: frozenset[str] = frozenset()
) -> int:
    """Zip ``site`` into ``dest`` under the folder ``root``; return the archive size.

    ``skip`` names files (relative to ``site``) left out of the archive.
    """
    root = root if root is not None else site.name
    tmp = dest.with_name(dest.name + ".part")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for path in site_files(site):
            relative = path.relative_to(site).as_posix()
            if relative not in skip:
                _add_to_zip(archive, path, f"{root}/{relative}" if root else relative)
    os.replace(tmp, dest)
    return dest.stat().st_size


def _add_to_zip(archive: zipfile.ZipFile, path: Path, name: str) -> None:
    info = zipfile.ZipInfo(name, date_time=_FIXED_DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    with open(path, "rb") as source, archive.open(info, "w") as target:
        while chunk := source.read(1 << 20):
            target.write(chunk)


#: The input log is the one file of a site that can be left out of a zip bundle: a bundle
#: that would pass GitHub's attachment limit with it leaves it out (the manifest says so).
RAW_LOG = "raw.log"
_SAMPLE_BYTES = 4 << 20


def compressed_estimate(path: Path) -> int:
    """About how many bytes ``path`` takes in a zip: a deflated sample, scaled up."""
    size = path.stat().st_size
    with open(path, "rb") as source:
        sample = source.read(_SAMPLE_BYTES)
    if not sample:
        return 0
    return int(len(zlib.compress(sample, 6)) * size / len(sample))


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
    dest = site.with_name(f"{site.name}.{fmt}")
    if fmt == "7z":
        manifest = manifest_json(site, trace=trace, version=version, extra=extra)
        (site / MANIFEST_NAME).write_bytes(manifest)
        return dest, write_7z(site, dest)
    return dest, _write_zip_bundle(site, dest, trace=trace, version=version, extra=extra)


def left_out_of_zip(site: Path) -> dict[str, str]:
    """The files the site's zip bundle left out, with why (from its manifest)."""
    try:
        manifest = json.loads((site / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    value = manifest.get("left_out_of_zip") if isinstance(manifest, dict) else None
    return value if isinstance(value, dict) else {}


def _write_zip_bundle(
    site: Path, dest: Path, *, trace: str, version: str, extra: Mapping[str, Any] | None
) -> int:
    """The zip bundle: everything, but the input log only if the bundle stays attachable."""
    (site / MANIFEST_NAME).unlink(missing_ok=True)
    size = write_zip(site, dest, skip=frozenset({RAW_LOG}))
    raw = site / RAW_LOG
    keep_raw = raw.is_file() and size + compressed_estimate(raw) <= GITHUB_ATTACHMENT_LIMIT
    details = dict(extra or {})
    if raw.is_file() and not keep_raw:
        details["left_out_of_zip"] = {
            RAW_LOG: "the input log itself: with it the zip would pass GitHub's 25 MB "
            "attachment limit (it is in the site folder; attach the trace gzipped if asked)"
        }
    manifest = manifest_json(site, trace=trace, version=version, extra=details)
    (site / MANIFEST_NAME).write_bytes(manifest)
    with zipfile.ZipFile(dest, "a", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        _add_to_zip(archive, site / MANIFEST_NAME, f"{site.name}/{MANIFEST_NAME}")
        if keep_raw:
            _add_to_zip(archive, raw, f"{site.name}/{RAW_LOG}")
    return dest.stat().st_size
