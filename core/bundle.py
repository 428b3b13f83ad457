"""Pack a built site into one archive that unzips anywhere and opens from ``index.html``.

Two formats: ``.zip`` (the default, because GitHub issues accept ``.zip`` attachments and
every system opens it) and ``.7z`` (LZMA2 over the whole site at once, several times smaller
because every page repeats the same header and navigation, but GitHub issues do not accept
it: use it for email, chat or release assets). Both hold exactly the site folder, into
which :func:`write_bundle` first writes ``manifest.json``: a list of every other file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import marshal
import os
import re
import sqlite3
import zipfile
from collections import deque
from collections.abc import (
    Callable,
    Collection,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
    Sequence,
)
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar

from zlib_ng import zlib_ng

from .source import printable_name
from .worker import WorkerProcess

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

_T = TypeVar("_T")

#: GitHub's limit for a file attached to an issue: "25 MB", read as the smaller, decimal
#: megabytes (a zip of 25.9 MB under a limit of 25 MiB was called attachable).
GITHUB_ATTACHMENT_LIMIT = 25_000_000
#: The zip's entries are deflated by zlib-ng (:func:`_deflate_entry`): deflate streams any unzip
#: reads, each level used here smaller than what zipfile's own zlib made at the level it
#: replaces (zlib's 1 and 6), in less CPU.
#: A fast level, for a zip expected to stay under the attachment limit at it: a zip smaller
#: than attachable gains a user nothing. zlib-ng's level 1 is a coarser strategy than zlib's.
FAST_LEVEL = 2
#: A small level, for a zip that may pass the limit at :data:`FAST_LEVEL` (so that every page
#: goes in, and the copies that fit): zlib-ng's 6 came out bigger than zlib's 6 on storms'
#: small pages, and the levels above 7 cost far more CPU for little size.
SMALL_LEVEL = 7
#: About the most a site's zip at :data:`FAST_LEVEL` takes per byte of its input log(s) (storms,
#: many-rank jobs, big traces): what a zip written while its site is built expects. An input
#: this expects under the limit has pages that fit at either level; only copies can be at stake.
FAST_ZIP_PER_INPUT_BYTE = 0.8
#: What a file is read in, to hash and deflate it; and the most bytes of files one task
#: deflates at the zip's end (see :func:`_chunks`).
_CHUNK = 1 << 20
#: The threads that deflate a zip's entries: zlib-ng's deflate, SHA-256 and reading a file
#: release the GIL, so that two files are deflated at once on two cores.
ZIP_THREADS = 2
#: The most entries :meth:`_Deflater.in_order` begins ahead of the one the archive takes
#: next (each waits in memory, deflated, until its turn).
_WINDOW = 2 * ZIP_THREADS
#: The most bytes of site files a build without a zip helper hands to the threads while it
#: runs: their entries wait in memory until the site is complete. A small trace's site is a
#: few MB; one whose log is small only on disk (gzip) has the rest deflated at the end.
_EARLY_BYTES = 32 * 1024 * 1024
_FIXED_DATE = (1980, 1, 1, 0, 0, 0)  # deterministic archives: same input, same bytes
_FIXED_TIMESTAMP = 315532800.0  # the same moment as seconds since the epoch (for .7z)


def site_files(site: Path) -> list[Path]:
    """Every file of the site, in a stable order."""
    return [site / name for name in _relative_files(site)]


def _relative_files(site: Path) -> list[str]:
    """Every file of the site by its ``/``-separated relative path, sorted.

    Plain strings, not :class:`~pathlib.Path` objects: a big site has over ten thousand
    files, and a path object apiece (with its interned parts) was megabytes.
    """
    return sorted(_walk(str(site)))


def _walk(folder: str, prefix: str = "") -> Iterator[str]:
    """The relative path of every file under ``folder``, one at a time, in no set order (a
    folder's names are not gathered first: one compile's artifacts may be a million files).
    Links to folders are neither followed nor listed, as :func:`os.walk` does."""
    with os.scandir(folder) as entries:
        for entry in entries:
            if not entry.is_dir():
                yield prefix + entry.name
            elif not entry.is_symlink():
                yield from _walk(entry.path, f"{prefix}{entry.name}/")


def site_listing(site: Path) -> list[str]:
    """:func:`_relative_files` without the manifest (it never lists itself)."""
    return [name for name in _relative_files(site) if name != MANIFEST_NAME]


class Digest(bytes):
    """A file's size (8 bytes, big-endian) and SHA-256 (32 bytes) in one object: a zip of
    ten thousand files keeps one per file until its manifest is written, and a tuple of an
    int and a hex string was three objects and 200 bytes apiece."""

    __slots__ = ()

    @classmethod
    def of(cls, size: int, sha256: bytes) -> Digest:
        return cls(size.to_bytes(8, "big") + sha256)

    @property
    def size(self) -> int:
        return int.from_bytes(self[:8], "big")

    @property
    def sha256(self) -> str:
        return self[8:].hex()


def deflate_level(expected: float) -> int:
    """The deflate level of a zip expected to take ``expected`` bytes at :data:`FAST_LEVEL`."""
    return FAST_LEVEL if expected <= GITHUB_ATTACHMENT_LIMIT else SMALL_LEVEL


def _site_level(site: Path, listing: Iterable[str]) -> int:
    """The deflate level of a zip of the finished ``site``: fast when its files, stored as
    they are, could not pass the limit, or else when a sample deflated fast says they stay
    under it (a zip that keeps all that fits costs no more than one that leaves out)."""
    folder = str(site)
    stored = sum(
        _ENTRY_HEADERS
        + 2 * len(f"{site.name}/{name}")
        + os.stat(os.path.join(folder, name)).st_size
        for name in listing
    )
    if stored <= GITHUB_ATTACHMENT_LIMIT:
        return FAST_LEVEL
    return deflate_level(compressed_estimate(site, list(listing), FAST_LEVEL))


def _add_to_zip(
    archive: zipfile.ZipFile, path: str | Path, name: str, level: int | None = None
) -> Digest:
    """Deflate ``path`` into ``archive`` as ``name`` (at ``level``, or else the archive's);
    return its size and SHA-256."""
    entry = _deflate_entry(str(path), name, archive.compresslevel if level is None else level)
    _put(archive, entry)
    return _hashed(name, entry.digest)


class _Entry(NamedTuple):
    """A site file as a zip entry deflated apart from the archive: its local header and data
    (``data``, the bytes the archive gets where the entry goes), its record for the archive's
    directory (``info``; None for a file only hashed), the file's digest (None when not
    taken) and its modification time when it was opened (None when not deflated here)."""

    info: zipfile.ZipInfo | None
    data: bytes
    digest: Digest | None
    mtime_ns: int | None = None


def _deflate_entry(path: str, name: str, level: int | None, hashed: bool = True) -> _Entry:
    """``path`` as the zip entry ``name`` deflated by zlib-ng at ``level`` in memory, with
    its digest (unless not ``hashed``); with no ``level``, only its digest.

    The entry is what :meth:`zipfile.ZipFile.open` writes to a seekable archive (its local
    header with the sizes and CRC-32, then a raw deflate stream), its file read and deflated
    in chunks of the same size wherever it goes (a deflate stream may differ with how its
    input is cut). Each chunk is read, hashed, checksummed and deflated with the GIL released,
    and there is little Python around them: a few entries are deflated at once on threads.
    """
    if level is None:
        return _Entry(None, b"", _file_digest(path))
    info = _entry_info(name, level)
    compressor = zlib_ng.compressobj(level, zlib_ng.DEFLATED, -15)  # a raw stream, as zipfile's
    sha256 = hashlib.sha256() if hashed else None
    parts = [b""]  # the local header, once the sizes are known
    crc = size = 0
    with open(path, "rb") as source:
        mtime_ns = os.fstat(source.fileno()).st_mtime_ns
        while chunk := source.read(_CHUNK):
            crc = zlib_ng.crc32(chunk, crc)
            if sha256 is not None:
                sha256.update(chunk)
            parts.append(compressor.compress(chunk))
            size += len(chunk)
    parts.append(compressor.flush())
    info.file_size, info.CRC = size, crc
    info.compress_size = sum(map(len, parts))
    if max(size, info.compress_size) > zipfile.ZIP64_LIMIT:  # as zipfile refuses it
        raise RuntimeError(f"{name}: a file too large for a zip entry without ZIP64")
    info.flag_bits = 0
    parts[0] = info.FileHeader(False)
    digest = None if sha256 is None else Digest.of(size, sha256.digest())
    return _Entry(info, b"".join(parts), digest, mtime_ns)


def _put(archive: zipfile.ZipFile, entry: _Entry) -> None:
    """Append ``entry`` (deflated apart) where ``archive``'s next entry goes: the same bytes
    as writing it there (its local header does not say where it is)."""
    info = entry.info
    assert info is not None and archive.fp is not None
    if archive.fp.tell() != archive.start_dir:  # a seek writes out what the file buffers
        archive.fp.seek(archive.start_dir)
    info.header_offset = archive.start_dir
    archive.fp.write(entry.data)
    archive.start_dir += len(entry.data)
    archive.filelist.append(info)
    archive.NameToInfo[info.filename] = info
    archive._didModify = True  # type: ignore[attr-defined]


class _Deflater:
    """A site's files deflated into zip entries (:func:`_deflate_entry`) on
    :data:`ZIP_THREADS` threads, a few ahead of the archive, which puts each in its place in
    the order it writes them (:meth:`in_order`): the same archive, byte for byte, as one
    deflated a file after the other. Files handed over :meth:`early` (while the site is
    built) are deflated at once and wait in memory until the archive takes them."""

    def __init__(self, site: Path) -> None:
        self.site = site
        self._pool = ThreadPoolExecutor(ZIP_THREADS, thread_name_prefix="tlsite-zip")
        #: the files handed over early: the level each was begun at, and its entry
        self._early: dict[str, tuple[int, Future[_Entry]]] = {}
        self._handed: set[str] = set()  # every file handed over early
        self._batch: list[tuple[str, int, Future[_Entry]]] = []  # not yet sent to the threads

    def early(self, name: str, level: int, size: int) -> None:
        """Deflate the site file ``name`` (final, ``size`` bytes) at ``level`` soon: files
        go to the threads :data:`ZIP_BATCH` at a time (a task apiece woke a thread, which then
        waited for the GIL, once per file), a big one at once."""
        if name not in self._handed:
            self._handed.add(name)
            future: Future[_Entry] = Future()
            self._early[name] = (level, future)
            self._batch.append((name, level, future))
            if len(self._batch) >= ZIP_BATCH or size >= _CHUNK:
                self._send_batch()

    def _send_batch(self) -> None:
        if self._batch:
            batch, self._batch = self._batch, []
            self._pool.submit(self._deflate_batch, batch)

    def _deflate_batch(
        self, batch: list[tuple[str, int, Future[_Entry]]], hashed: bool = True
    ) -> None:
        for name, level, future in batch:
            if future.set_running_or_notify_cancel():  # not cancelled by close()
                try:
                    future.set_result(self._deflate(name, level, hashed))
                except BaseException as error:
                    future.set_exception(error)

    def start(self, name: str, level: int | None, hashed: bool = True) -> Future[_Entry]:
        """Begin the entry of ``name`` at ``level`` (None: its digest only), or take the one
        begun early at that level (kept for later when only its digest is asked for)."""
        self._send_batch()
        begun = self._early.get(name)
        if begun is not None and level in (None, begun[0]):
            if level is not None:
                del self._early[name]
            return begun[1]
        return self.submit(self._deflate, name, level, hashed)

    def start_all(self, names: list[str], levels: list[int]) -> list[Future[_Entry]]:
        """:meth:`start` each of ``names`` at its level of ``levels``, not hashed: those not
        begun early in one task (a task apiece woke a thread, which then waited for the GIL,
        once per file). An entry begun early at another level is dropped: each name is
        asked for once."""
        self._send_batch()
        futures: list[Future[_Entry]] = []
        batch: list[tuple[str, int, Future[_Entry]]] = []
        for name, level in zip(names, levels, strict=True):
            begun = self._early.pop(name, None)
            if begun is not None and begun[0] == level:
                futures.append(begun[1])
                continue
            future: Future[_Entry] = Future()
            batch.append((name, level, future))
            futures.append(future)
        if batch:
            self._pool.submit(self._deflate_batch, batch, False)
        return futures

    def stale(self, name: str, entry: _Entry) -> bool:
        """Whether ``entry`` was begun early and the file has changed since (it was handed
        over before it was final: its size or modification time differs): then it is
        forgotten."""
        if name not in self._handed or entry.digest is None:
            return False
        now = os.stat(os.path.join(self.site, name))
        if (now.st_size, now.st_mtime_ns) == (entry.digest.size, entry.mtime_ns):
            return False
        self._early.pop(name, None)
        self._handed.discard(name)
        return True

    def _deflate(self, name: str, level: int | None, hashed: bool) -> _Entry:
        path = os.path.join(self.site, name)  # text: see _relative_files
        return _deflate_entry(path, f"{self.site.name}/{name}", level, hashed)

    def submit(self, function: Callable[..., _T], *args: Any) -> Future[_T]:
        """Run ``function(*args)`` on one of the threads."""
        return self._pool.submit(function, *args)

    def in_order(
        self, names: Iterable[str], begin: Callable[[str], Future[_T]]
    ) -> Iterator[tuple[str, _T]]:
        """Each of ``names`` with what ``begin`` began for it, in their order, at most
        :data:`_WINDOW` begun ahead of the one given back."""
        pending: deque[tuple[str, Future[_T]]] = deque()
        for name in names:
            pending.append((name, begin(name)))
            if len(pending) > _WINDOW:
                name, future = pending.popleft()
                yield name, future.result()
        while pending:
            name, future = pending.popleft()
            yield name, future.result()

    def close(self) -> None:
        """Stop the threads (a file or batch being deflated is finished first, in the
        background)."""
        for _, future in self._early.values():
            future.cancel()
        self._early.clear()
        self._batch.clear()
        self._pool.shutdown(wait=False, cancel_futures=True)


def _file_digest(path: str | Path) -> Digest:
    """The size and SHA-256 of ``path``."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as source:
        while chunk := source.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return Digest.of(size, digest.digest())


#: tlparse's copies of artifacts (files in a compile's folder) whose text their compile page
#: shows in full, and its pages of compilation metrics records (which tlsite writes as a
#: pointer to the page's table of them): the renderer lists them
#: (``PreparedReport.artifact_copies``) and hands them to the bundle. A storm's copies are a
#: quarter of its zip: when the zip would pass the attachment limit even without the input's
#: copies, these are left out (the manifest says which); a copy of text the page cuts short
#: stays.
ARTIFACT_COPIES = "artifact copies"
#: The site's copies of the input: tlparse's ``raw.log`` (the log itself) and ``raw.jsonl``
#: (its records again, as JSON lines), at the root or in each rank's folder. No page shows
#: them, and a storm's or a many-rank job's make up a third of its zip: a bundle that would pass
#: GitHub's attachment limit with them leaves them out (the manifest says which, and why).
RAW_LOG = "raw.log"
RAW_JSONL = "raw.jsonl"
INPUT_COPIES = (RAW_LOG, RAW_JSONL)  # kept in this order while the zip stays attachable
_INPUT_COPY = re.compile(r"(?:rank_\d+/)?(raw\.log|raw\.jsonl)")
_SAMPLE_BYTES = 4 << 20
#: More than a zip entry can take beyond its file's size (its headers, and the stored
#: blocks deflate falls back to on data that does not compress; for files up to a few
#: hundred megabytes).
_DEFLATE_OVERHEAD = 64 << 10
_ENTRY_HEADERS = 30 + 46  # a zip entry's local header and directory record, besides its name
_MANIFEST_LINE = 64  # about what a file's line in the manifest deflates to (its SHA-256: 32)
#: About what a file left out of the zip takes in its manifest, deflated: its line without a
#: SHA-256 and its name in its group's list (a storm leaves out tens of thousands).
_LEFT_OUT_LINE = 16
_LEFT_OUT_WHY = {
    ARTIFACT_COPIES: "tlparse's copies of artifacts whose text their compile page shows in full, "
    "and its pages of compilation metrics records, whose fields the compile page shows: with "
    "these the zip would pass GitHub's 25 MB attachment limit (they are in the site folder)",
    RAW_LOG: "the input log itself: with it the zip would pass GitHub's 25 MB attachment limit "
    "(it is in the site folder; attach the trace gzipped if asked)",
    RAW_JSONL: "the input log's records again, as tlparse writes them: with them the zip would "
    "pass GitHub's 25 MB attachment limit (it is in the site folder)",
}


#: The smallest file of a compile's folder that the zip's worker deflates ahead (see
#: :class:`_Ahead`) while those handed over so far are smaller on average: a storm's
#: thousands of small files are left out of its zip, and would be deflated for nothing (and
#: a trace of a million small artifacts would keep a million entries in memory). A big
#: trace's files are big on average, and its small ones, deflated at the end, were most of
#: the time only the zip's worker ran after the last page.
_AHEAD_MIN_BYTES = 16 << 10
_ARTIFACT_FILE = re.compile(r"(?:rank_\d+/)?-_[^/]+/[^/]+")  # a file in a compile's folder
#: tlparse's page of a compilation metrics record in a compile's folder (see ARTIFACT_COPIES)
_METRICS_PAGE = re.compile(r"(?:rank_\d+/)?-_[^/]+/[^/]*compilation_metrics_\d+\.html")


def _deferred(name: str) -> bool:
    """Whether the site file ``name`` goes into the zip only once it is known to fit: a copy of
    the input, or an artifact's file in a compile's folder (its page says if it is a copy)."""
    if input_copy_kind(name) is not None:
        return True
    return _ARTIFACT_FILE.fullmatch(name) is not None and (
        not name.endswith(".html")  # tlparse's own pages stay, but for the metrics pointers
        or _METRICS_PAGE.fullmatch(name) is not None
    )


def input_copy_kind(name: str) -> str | None:
    """``raw.log`` or ``raw.jsonl`` when the site file ``name`` is a copy of the input."""
    match = _INPUT_COPY.fullmatch(name)
    return match.group(1) if match else None


def compressed_estimate(site: Path, names: Sequence[str], level: int) -> int:
    """About how many bytes the site files ``names`` take in its zip deflated at ``level``: a
    deflated sample (up to a few MB: the first bytes of a big file, every so many of many
    small ones, each deflated on its own as a zip entry is), scaled up to their size, plus each
    entry's headers (which hold its name in the zip, so where the site is does not count)."""
    folder = str(site)
    paths = [os.path.join(folder, name) for name in names]  # text: see _relative_files
    size = sum(os.stat(path).st_size for path in paths)
    sampled = deflated = 0
    for path in paths[:: max(1, size // _SAMPLE_BYTES)]:
        with open(path, "rb") as source:
            chunk = source.read(max(_SAMPLE_BYTES - sampled, 1 << 16))
        sampled += len(chunk)
        deflated += len(zlib_ng.compress(chunk, level))
        if sampled >= _SAMPLE_BYTES:
            break
    headers = sum(_ENTRY_HEADERS + 2 * len(f"{site.name}/{name}") for name in names)
    return (int(deflated * size / sampled) if sampled else 0) + headers


#: The bundle formats ``--bundle`` accepts ("none" writes no bundle).
BUNDLE_FORMATS = ("zip", "7z", "none")
#: The file at the root of every bundle that says what is inside.
MANIFEST_NAME = "manifest.json"
_FILES_START = ' "files": [\n'  # the manifest's line that ends its summary fields
_MANIFEST_NOTE = (
    "A tlsite report: a static website built from one PyTorch TORCH_TRACE log. Open "
    "index.html in a browser (it works from disk, offline). Besides the report pages it holds "
    "the files tlparse writes (raw.log: the log itself; raw.jsonl; payloads/; one file per "
    "artifact), so it contains everything the trace contains: model code, graphs, file paths "
    "and whatever was logged. Share it knowingly."
)
#: Added to the note of a zip that left files out (its manifest names them).
_LEFT_OUT_NOTE = (
    " This zip leaves some of those files out, to stay under GitHub's attachment limit: "
    "left_out_of_zip says which and why; the site it was made from has them."
)


def manifest_json(
    site: Path, *, trace: str, version: str, extra: Mapping[str, Any] | None = None
) -> bytes:
    """The bundle's manifest: every file with its size and SHA-256, the trace and tlsite version.

    The manifest itself (``MANIFEST_NAME`` at the root) is not listed. A zip's manifest also
    says, once per group, which files it left out and why (``left_out_of_zip``); those are
    listed without a SHA-256 (see :func:`_manifest_chunks`).
    """
    listing = site_listing(site)
    chunks = _manifest_chunks(site, listing, {}, trace=trace, version=version, extra=extra)
    return "".join(chunks).encode("utf-8")


def _manifest_chunks(
    site: Path,
    listing: Sequence[str] | _Listing,
    digests: MutableMapping[str, Digest],
    *,
    trace: str,
    version: str,
    extra: Mapping[str, Any] | None,
    left_out: Collection[str] = (),
) -> Iterator[str]:
    """The manifest's JSON text: the summary fields, then one line per file of ``listing``.

    ``digests`` maps a file's relative path to the size and SHA-256 already taken (by
    :class:`ZipWriter`, as it compressed the file); the other files are read here and
    added to it. The files ``left_out`` of the zip get their path and size only: a digest
    vouches for what the bundle holds, and theirs were a storm's biggest part of the manifest.
    """
    total = 0
    missing = []
    for name, digest in _with_digests(listing, digests):
        if digest is None:
            missing.append(name)
        else:
            total += digest.size
    for name in missing:  # not while the catalog is read
        digest = digests[name] = _file_digest(os.path.join(site, name))
        total += digest.size
    summary: dict[str, Any] = {
        "generator": f"tlsite {version}",
        "trace": trace,
        "note": _MANIFEST_NOTE + (_LEFT_OUT_NOTE if left_out else ""),
        **(extra or {}),
        "file_count": len(listing),
        "total_size": total,
    }
    text = json.dumps(summary, indent=1, ensure_ascii=False)
    yield text.removesuffix("\n}") + ",\n" + _FILES_START
    last = len(listing) - 1
    for number, (name, found) in enumerate(_with_digests(listing, digests)):
        digest = found if found is not None else digests[name]
        # json.dumps of {"path", "size", "sha256"} (a dict apiece went through its encoder)
        sha256 = "" if name in left_out else f', "sha256": "{digest.sha256}"'
        path = json.dumps(name, ensure_ascii=False)
        yield f'  {{"path": {path}, "size": {digest.size}{sha256}}}{"," if number < last else ""}\n'
    yield " ]\n}\n"


def _with_digests(
    listing: Sequence[str] | _Listing, digests: Mapping[str, Digest]
) -> Iterator[tuple[str, Digest | None]]:
    """Each file of ``listing`` with its digest (None if it has none yet): from a catalog, in
    one query, not a look-up per file of a site of thousands."""
    if isinstance(listing, _Listing) and isinstance(digests, _Digests):
        yield from listing.with_digests()
    else:
        for name in listing:
            yield name, digests.get(name)


def _hashed(name: str, digest: Digest | None) -> Digest:
    """``digest``, which a file whose size decides what fits must have by then."""
    if digest is None:
        raise KeyError(name)
    return digest


def _write_manifest(site: Path, chunks: Iterable[str]) -> None:
    """Write ``site/manifest.json`` piece by piece (see :func:`_manifest_chunks`): a site of
    a million files has a manifest of 100 MB."""
    with open(site / MANIFEST_NAME, "w", encoding="utf-8", newline="\n") as manifest:
        manifest.writelines(chunks)


def write_7z(site: Path, dest: Path, *, root: str | None = None) -> int:
    """The site as a solid LZMA2 ``.7z`` archive under the folder ``root`` (much smaller than
    the zip, but not for GitHub issues)."""
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
    copies: Collection[str] = (),
) -> tuple[Path | None, int]:
    """Write ``site/manifest.json``, then ``site`` as ``<site>.zip`` or ``<site>.7z`` beside it.

    The manifest goes into the folder itself, so the bundle is exactly the folder. Returns the
    bundle's path and size; ``fmt == "none"`` writes only the manifest: it is also what marks
    the folder as tlsite's, which ``--overwrite`` may replace (see :mod:`tlsite.core.output`).
    ``copies``: the site's artifact copies (see :data:`ARTIFACT_COPIES`), which a zip over
    the attachment limit leaves out.
    """
    if fmt not in BUNDLE_FORMATS:
        raise ValueError(f"bundle format must be one of {', '.join(BUNDLE_FORMATS)}, not {fmt!r}")
    if fmt in ("none", "7z"):
        catalog = _Catalog(site.with_name(f"{site.name}.catalog"))
        try:
            listing = catalog.list_site(site)
            fields = {"trace": trace, "version": version, "extra": extra}
            _write_manifest(site, _manifest_chunks(site, listing, catalog.digests, **fields))
        finally:
            catalog.close()
    if fmt == "none":
        return None, 0
    dest = site.with_name(f"{site.name}.{fmt}")
    if fmt == "7z":
        return dest, write_7z(site, dest)
    fields = {"trace": trace, "version": version, "extra": extra, "copies": copies}
    return dest, _write_zip_bundle(site, dest, **fields)


def left_out_of_zip(site: Path) -> dict[str, str]:
    """The files the site's zip bundle left out, with why (from its manifest, where each group
    of them is ``{"why": ..., "files": [...]}`` under its name, see :func:`_complete_zip`)."""
    value = _manifest_summary(site).get("left_out_of_zip")
    groups = value.values() if isinstance(value, dict) else ()
    return {
        name: group["why"]
        for group in groups
        if isinstance(group, dict)
        for name in group.get("files", ())
    }


def _manifest_summary(site: Path) -> dict[str, Any]:
    """The fields of the site's manifest before its list of files, read without that list
    (a site of a million files has a manifest of 100 MB, and a dict per file to parse it);
    empty if it cannot be read."""
    head = []
    try:
        with open(site / MANIFEST_NAME, encoding="utf-8") as manifest:
            for line in manifest:
                if line == _FILES_START:
                    break
                head.append(line)
            else:
                return {}
        summary = json.loads("".join(head).rstrip().removesuffix(",") + "\n}")
    except (OSError, ValueError):
        return {}
    return summary if isinstance(summary, dict) else {}


def _write_zip_bundle(
    site: Path,
    dest: Path,
    *,
    trace: str,
    version: str,
    extra: Mapping[str, Any] | None,
    copies: Collection[str],
) -> int:
    """The zip bundle of a finished site (:class:`ZipWriter` without files given early)."""
    writer = ZipWriter(site, dest, background=False)
    try:
        return writer.finish(trace=trace, version=version, extra=extra, copies=copies)
    except BaseException:
        writer.abort()
        raise


#: Files named to the zip's worker in one message: a message apiece woke the thread that
#: feeds its pipe once per file (a storm's tens of thousands of tlparse files and pages).
ZIP_BATCH = 64


class ZipWriter:
    """The zip bundle of a site, written file by file while the site is still being built.

    Deflating a big report's pages and tlparse files takes seconds of CPU. With
    ``background``, a :class:`~.worker.WorkerProcess` compresses the files as they become
    final (named to it :data:`ZIP_BATCH` at a time), on the other core, while this process
    renders pages, its entries in the order they were handed over. Without, the files
    handed over are deflated at once on threads of this process (:class:`_Deflater`), and
    wait in memory: :meth:`finish` writes the archive in path order from the finished site,
    taking each entry deflated early that is at the level the site calls for (a small
    trace's: at most a few MB). :meth:`add` names a file that will not change again;
    :meth:`finish` adds every other file of the site, the copies that fit and the manifest
    (see :func:`_complete_zip`, in the worker when there is one; the digests and the
    archive's directory wait on disk, see :class:`_Catalog`), and moves it into place.
    Without a worker the same site always gives the same bytes, whatever was handed over.

    Files are deflated before the site is complete at the level its input's size
    (``input_size``, bytes of the trace's logs) calls for (see :class:`_WorkerLevel`);
    without a worker the level is chosen from the finished site.
    """

    def __init__(
        self,
        site: Path,
        dest: Path,
        *,
        background: bool = True,
        input_size: int | None = None,
    ) -> None:
        self.site = site
        self.dest = dest
        self._tmp = dest.with_name(dest.name + ".part")
        self._background = background
        self._worker: WorkerProcess | None = None
        self._input_size = input_size
        self._names: list[str] = []  # added, not yet handed to the worker
        self._deflater: _Deflater | None = None  # without a worker, once a file is added
        self._level = _WorkerLevel(input_size)  # of the files deflated early
        self._handed_bytes = 0  # of the files handed over so far, as they are

    def add(self, path: str | os.PathLike[str]) -> None:
        """Hand ``path`` (inside the site, final) to the worker, which starts with the first
        file (not before: while a big trace is read, an idle worker only took memory), or
        without one, begin deflating it on this process's threads: a file that goes in only if
        it fits (see :func:`_deferred`) only while the files handed over so far, as they
        are, are under the attachment limit (past it, it may be left out), and none past
        :data:`_EARLY_BYTES`."""
        if not self._background and self._worker is None:
            name = os.path.relpath(path, self.site).replace(os.sep, "/")
            size = os.stat(path).st_size
            self._handed_bytes += size
            if self._handed_bytes > _EARLY_BYTES:  # the rest is deflated at the end
                return
            if _deferred(name) and self._handed_bytes > GITHUB_ATTACHMENT_LIMIT:
                return
            if self._deflater is None:
                self._deflater = _Deflater(self.site)
            self._deflater.early(name, self._level.see(self.site, name), size)
            return
        if self._worker is None:
            self._background = False  # started once
            self._worker = WorkerProcess(
                "tlsite.core.bundle:_zip_service",
                str(self.site),
                str(self._tmp),
                "" if self._input_size is None else str(self._input_size),
            )
        self._names.append(os.path.relpath(path, self.site).replace(os.sep, "/"))
        if len(self._names) >= ZIP_BATCH:
            self._send_names()

    def _send_names(self) -> None:
        """Hand the names added since the last batch to the worker."""
        if self._worker is not None and self._names:
            names, self._names = self._names, []
            with contextlib.suppress(OSError):  # the worker is gone: finish() says why
                self._worker.send(names)

    def finish(
        self,
        *,
        trace: str,
        version: str,
        extra: Mapping[str, Any] | None,
        copies: Collection[str] = (),
    ) -> int:
        """Complete the archive and return its size (raises what the worker met).

        The worker completes the archive it has been writing (see :func:`_complete_zip`):
        the archive's directory and the files' digests are in its :class:`_Catalog` already.
        ``copies``: the site's artifact copies (see :data:`ARTIFACT_COPIES`).
        """
        manifest = {
            "trace": trace,
            "version": version,
            "extra": dict(extra or {}),
            "copies": list(copies),
        }
        if self._worker is None:
            catalog = _Catalog(_catalog_path(self._tmp))
            deflater, self._deflater = self._deflater or _Deflater(self.site), None
            try:
                _complete_zip(self.site, self._tmp, catalog, "w", **manifest, deflater=deflater)
            finally:
                catalog.close()
                deflater.close()
        else:
            self._send_names()
            worker, self._worker = self._worker, None
            try:
                worker.send(manifest)
                status, value = worker.receive()
            except (EOFError, OSError) as error:
                raise OSError(f"the zip bundle's worker process stopped: {error!r}") from error
            finally:
                worker.close()
            if status != "done":
                raise OSError(f"writing the zip bundle failed: {value}")
        os.replace(self._tmp, self.dest)
        return self.dest.stat().st_size

    def abort(self) -> None:
        """Stop the worker and remove the partial archive (the build failed)."""
        if self._worker is not None:
            self._worker.kill()
            self._worker = None
        if self._deflater is not None:
            self._deflater.close()
            self._deflater = None
        self._tmp.unlink(missing_ok=True)
        _catalog_path(self._tmp).unlink(missing_ok=True)
        _ahead_path(self._tmp).unlink(missing_ok=True)


def _complete_zip(
    site: Path,
    tmp: Path,
    catalog: _Catalog,
    mode: Literal["w", "a"],
    *,
    trace: str,
    version: str,
    extra: dict[str, Any],
    copies: Collection[str],
    deflater: _Deflater,
    ahead: _Ahead | None = None,
) -> None:
    """Add to ``tmp`` every file of ``site`` it lacks, then the manifest and the copies.

    ``catalog`` holds the files already in ``tmp`` (``mode`` "a"; "w" starts a new archive).
    A file that changed after it was compressed starts the archive again from the finished
    folder. The copies go in last, each group only if the archive stays attachable with it:
    first tlparse's ``copies`` of what the compile pages show (:data:`ARTIFACT_COPIES`), then
    the input's (see :data:`INPUT_COPIES`); the manifest says which were left out, and why,
    once per group (``left_out_of_zip``: ``{group: {"why": ..., "files": [...]}}``). ``ahead``
    holds the files deflated while the site was built (see :class:`_Ahead`); ``deflater``
    deflates the others, a few at once, and has those handed over early. An archive started
    here is deflated at the level the finished site calls for (see :func:`_site_level`); one
    appended to keeps its own.
    """
    listing = catalog.list_site(site)
    digests = catalog.digests
    folder = str(site)
    if catalog.unlisted() or any(
        os.stat(os.path.join(folder, name)).st_size != digest.size
        for name, digest in digests.items()
    ):
        catalog.clear()
        mode = "w"
        ahead = None
    level = catalog.level if mode == "a" else _site_level(site, listing)
    shown = set(copies)
    groups: dict[str, list[str]] = {ARTIFACT_COPIES: [], **{kind: [] for kind in INPUT_COPIES}}
    for name in listing:  # the files that go in only if they fit, by group, in listing order
        kind = input_copy_kind(name)
        if kind is not None:
            groups[kind].append(name)
        elif name in shown and _deferred(name):
            groups[ARTIFACT_COPIES].append(name)
    optional = {name for names in groups.values() for name in names}
    with _Zip(tmp, mode, catalog, level) as archive:
        _put_files(archive, deflater, catalog.undigested(), digests)  # in listing order
        # the deferred files that are not copies of what a page shows
        rest = (name for name in listing if _deferred(name) and name not in optional)
        _put_deferred(archive, deflater, rest, ahead)
    del archive  # before the archive is opened again, below
    # the manifest goes in too: a line per file, shorter for each file left out
    size = tmp.stat().st_size + len(listing) * _MANIFEST_LINE
    size -= len(optional) * (_MANIFEST_LINE - _LEFT_OUT_LINE)
    kept, smaller, left_out = _what_fits(
        site, listing, digests, groups, optional, size=size, level=level, ahead=ahead
    )
    if left_out:
        extra["left_out_of_zip"] = {
            kind: {"why": _LEFT_OUT_WHY[kind], "files": names} for kind, names in left_out.items()
        }
    fields = {"trace": trace, "version": version, "extra": extra}
    out = {name for names in left_out.values() for name in names}
    chunks = _manifest_chunks(site, listing, digests, **fields, left_out=out)
    _write_manifest(site, chunks)
    with _Zip(tmp, "a", catalog, level) as archive:
        _add_to_zip(archive, site / MANIFEST_NAME, f"{site.name}/{MANIFEST_NAME}")
        _put_deferred(archive, deflater, kept, ahead, smaller)


def _what_fits(
    site: Path,
    listing: _Listing,
    digests: MutableMapping[str, Digest],
    groups: dict[str, list[str]],
    optional: Collection[str],
    *,
    size: int,
    level: int,
    ahead: _Ahead | None,
) -> tuple[list[str], set[str], dict[str, list[str]]]:
    """Which ``groups`` of files that go in only if they fit (``optional``: all of their
    names) do, in an archive of ``size`` bytes without them: the files kept, those of them
    to deflate at :data:`SMALL_LEVEL` (not ``level``), and the groups left out. None fits
    when the rest is over the limit already; else they all fit whatever deflate makes of
    them, or else each group by its size deflated ``ahead``, or an estimate."""
    if size > GITHUB_ATTACHMENT_LIMIT:
        return [], set(), {kind: names for kind, names in groups.items() if names}
    if size + sum(  # the digests from the catalog, in one query
        _hashed(name, digest).size + _DEFLATE_OVERHEAD + _MANIFEST_LINE - _LEFT_OUT_LINE
        for name, digest in _with_digests(listing, digests)
        if name in optional
    ) <= (GITHUB_ATTACHMENT_LIMIT):
        return [name for names in groups.values() for name in names], set(), {}
    kept: list[str] = []
    smaller: set[str] = set()
    left_out: dict[str, list[str]] = {}
    for kind, names in groups.items():
        if not names:
            continue
        # the input's copies go before the pages' copies: none stays once those are left out
        if groups[ARTIFACT_COPIES] and ARTIFACT_COPIES in left_out:
            left_out[kind] = names
            continue
        estimate = _group_estimate(site, names, level, ahead)
        if size + estimate > GITHUB_ATTACHMENT_LIMIT and level != SMALL_LEVEL:
            # a zip expected to fit fast came out bigger: these may fit deflated smaller
            estimate = _group_estimate(site, names, SMALL_LEVEL, None)
            if size + estimate <= GITHUB_ATTACHMENT_LIMIT:
                smaller.update(names)
        if size + estimate <= GITHUB_ATTACHMENT_LIMIT:
            kept += names
            size += estimate
        else:
            left_out[kind] = names
    return kept, smaller, left_out


def _put_files(
    archive: zipfile.ZipFile,
    deflater: _Deflater,
    names: Iterable[str],
    digests: MutableMapping[str, Digest],
) -> None:
    """Deflate the site files ``names`` into ``archive`` in that order, recording each one's
    digest; the deferred ones (see :func:`_add_site_file`) are only hashed."""
    level = archive.compresslevel

    def begin(name: str) -> Future[_Entry]:
        return deflater.start(name, None if _deferred(name) else level)

    for name, entry in deflater.in_order(names, begin):
        if deflater.stale(name, entry):
            entry = begin(name).result()
        digests[name] = _hashed(name, entry.digest)
        if not _deferred(name):
            _put(archive, entry)


def _put_deferred(
    archive: zipfile.ZipFile,
    deflater: _Deflater,
    names: Iterable[str],
    ahead: _Ahead | None,
    smaller: Collection[str] = (),
) -> None:
    """Add the deferred files ``names`` at the end, in that order: those ``smaller`` deflated
    now at :data:`SMALL_LEVEL`; the others as they were deflated ``ahead``, if they were,
    else deflated now at the archive's level (not hashed again: a file's digest was taken
    when it was listed, and only that one goes in the manifest). Files deflated now go a
    batch per task (see :func:`_chunks`), two batches ahead of the one put in."""

    def from_ahead(name: str) -> bool:
        return ahead is not None and name not in smaller and name in ahead

    def begin(chunk: list[str]) -> list[Future[_Entry] | None]:
        """Each file of ``chunk`` begun on the threads; None for one deflated ahead."""
        now = [name for name in chunk if not from_ahead(name)]
        levels = [SMALL_LEVEL if name in smaller else archive.compresslevel for name in now]
        begun = iter(deflater.start_all(now, levels))
        return [None if from_ahead(name) else next(begun) for name in chunk]

    folder = str(deflater.site)
    chunks = _chunks((n, _size_now(folder, n, from_ahead(n))) for n in names)
    in_flight: deque[tuple[list[str], list[Future[_Entry] | None]]] = deque()
    try:
        while True:
            while len(in_flight) < ZIP_THREADS and (chunk := next(chunks, None)) is not None:
                in_flight.append((chunk, begin(chunk)))
            if not in_flight:
                return
            chunk, futures = in_flight.popleft()
            for name, future in zip(chunk, futures, strict=True):
                if future is None:  # read here: a task apiece only waited for the side file
                    assert ahead is not None
                    _put(archive, ahead.entry(name))
                else:
                    _put(archive, future.result())
    finally:  # after a failure, the batches begun are not deflated for nothing
        for _, futures in in_flight:
            for future in futures:
                if future is not None:
                    future.cancel()


def _size_now(folder: str, name: str, ahead: bool) -> int:
    """What deflating the site file ``name`` now holds in memory: its size, or nothing for
    one deflated ``ahead`` (read when it goes in, one at a time)."""
    return 0 if ahead else os.stat(os.path.join(folder, name)).st_size


def _chunks(sized: Iterable[tuple[str, int]]) -> Iterator[list[str]]:
    """The names of ``(name, size)`` in lists of at most :data:`ZIP_BATCH` files and
    :data:`_CHUNK` bytes (a bigger file alone): what one task deflates, and the archive
    holds in memory until it has them all."""
    chunk: list[str] = []
    size = 0
    for name, bytes_ in sized:
        if chunk and size + bytes_ > _CHUNK:
            yield chunk
            chunk, size = [], 0
        chunk.append(name)
        size += bytes_
        if len(chunk) == ZIP_BATCH:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def _group_estimate(site: Path, names: list[str], level: int, ahead: _Ahead | None) -> int:
    """About what a group of copies adds to the zip at ``level`` with its manifest lines (those
    deflated ahead by their size as they are)."""
    later = [name for name in names if ahead is None or name not in ahead]
    estimate = ahead.size(names) if ahead is not None else 0
    estimate += len(names) * (_MANIFEST_LINE - _LEFT_OUT_LINE)
    if later:
        estimate += compressed_estimate(site, later, level)
    return estimate


class _Ahead:
    """The files that go into the zip only at its end (see :func:`_deferred`: the input's
    copies, the files of a compile's folder) deflated while the site is built, in a side file
    beside the archive, each as the zip entry it would be: the zip copies their bytes in at the
    end instead of deflating them then, after the last page, while the other core idles.
    Whether the copies fit is known only at the end, so deflating them ahead is a bet: the
    input's copies, and the files of compile folders, each only while they are estimated to
    need at most half of the attachment limit (bigger ones rarely fit beside the pages, and
    would be deflated for nothing), the latter also only while the archive so far and they
    stay under the limit (past it, tlparse's copies cannot go in), and only files of
    :data:`_AHEAD_MIN_BYTES` or more (each keeps its entry in memory until the end) unless
    the archive is deflated at :data:`FAST_LEVEL`, which it is when everything is expected to
    fit (an archive under the limit holds a bounded number of entries), or those handed over
    so far are that big on average. The others are deflated at the end if they go in, as
    without a worker.
    """

    def __init__(self, path: Path, level: int) -> None:
        self._file = open(path, "w+b")  # noqa: SIM115 (closed by close())
        self.path = path
        self.level = level  # the archive's
        #: each file deflated ahead: its entry's record, where its bytes are in the side file
        #: and how many
        self._entries: dict[str, tuple[zipfile.ZipInfo, int, int]] = {}
        #: the input's copies handed over so far, deflated (or as estimated, when not deflated)
        self._deflated = 0
        #: the compile's files deflated so far
        self._artifacts = 0
        #: the compile's files handed over so far: how many, and their bytes
        self._handed = self._handed_bytes = 0

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def take(self, site: Path, name: str, archived: int) -> Digest | None:
        """Deflate the deferred file ``name`` if the bet holds (its digest), else None.
        ``archived``: the bytes of the archive so far. An input copy whose size is within the
        bet is deflated without an estimate (a small rank log would be deflated twice)."""
        path = os.path.join(site, name)
        size = os.stat(path).st_size
        copy = input_copy_kind(name) is not None
        bet = GITHUB_ATTACHMENT_LIMIT // 2
        if not copy:
            self._handed += 1
            self._handed_bytes += size
        if not copy and (
            (
                size < _AHEAD_MIN_BYTES
                and self.level != FAST_LEVEL
                and self._handed_bytes < self._handed * _AHEAD_MIN_BYTES
            )
            or self._artifacts > bet
            or archived + self._artifacts > GITHUB_ATTACHMENT_LIMIT
        ):
            return None
        if copy and self._deflated + size > bet:
            estimate = compressed_estimate(site, [name], self.level)
            if self._deflated + estimate > bet:
                self._deflated += estimate  # the copies after it are bet on as after it
                return None
        entry = _deflate_entry(path, f"{site.name}/{name}", self.level)
        assert entry.info is not None
        self._entries[name] = (entry.info, self._file.seek(0, os.SEEK_END), len(entry.data))
        self._file.write(entry.data)
        if copy:
            self._deflated += len(entry.data)
        else:
            self._artifacts += len(entry.data)
        return entry.digest

    def size(self, names: Iterable[str]) -> int:
        """What the files of ``names`` deflated ahead take in the zip (headers included)."""
        total = 0
        for name in names:
            if name in self._entries:
                info, _, length = self._entries[name]
                total += length + zipfile.sizeCentralDir
                total += len(info.filename.encode("utf-8"))  # its directory record's name
        return total

    def entry(self, name: str) -> _Entry:
        """The entry of ``name`` as it was deflated ahead. Not thread-safe: the side file is
        written (:meth:`take`) and read here on the zip worker's own thread only."""
        info, offset, length = self._entries[name]
        self._file.seek(offset)
        return _Entry(info, self._file.read(length), None)

    def close(self) -> None:
        self._file.close()
        self.path.unlink(missing_ok=True)


def _entry_info(name: str, level: int) -> zipfile.ZipInfo:
    """A new zip entry for a file named ``name`` in the archive, deflated at ``level``."""
    info = zipfile.ZipInfo(printable_name(name), date_time=_FIXED_DATE)  # a folder name from
    # the user may hold bytes that are not UTF-8, which a zip entry name cannot
    info.compress_type = zipfile.ZIP_DEFLATED
    info._compresslevel = level  # what ZipFile.write sets from the archive; open() does not
    info.external_attr = 0o644 << 16
    return info


class _Catalog:
    """What writing a site's zip keeps of every file until the archive is complete: its entry
    of the zip's central directory, its size and SHA-256 for the manifest, the site's sorted
    listing. They wait in a SQLite database beside the archive (on disk, with a few MB of
    cache): as objects they were over a kilobyte per file, and a trace of a million
    artifacts is a site of a million files.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.unlink(missing_ok=True)
        self._db = sqlite3.connect(path)
        self._db.executescript(
            """
            PRAGMA journal_mode = OFF;
            PRAGMA synchronous = OFF;
            CREATE TABLE entry (info BLOB);
            CREATE TABLE digest (name BLOB PRIMARY KEY, value BLOB) WITHOUT ROWID;
            CREATE TABLE listing (name BLOB PRIMARY KEY) WITHOUT ROWID;
            """
        )
        self.entries = _Entries(self._db)
        self.digests = _Digests(self._db)
        #: Where the archive's central directory starts (set as it is closed).
        self.start_dir = 0
        #: The deflate level of the archive's entries (set as it is started).
        self.level = SMALL_LEVEL

    def list_site(self, site: Path) -> _Listing:
        """Every file of ``site`` but the manifest (see :func:`site_listing`)."""
        self._db.execute("DELETE FROM listing")
        self._db.executemany(
            "INSERT INTO listing VALUES (?)",
            ((_key(name),) for name in _walk(str(site)) if name != MANIFEST_NAME),
        )
        return _Listing(self._db)

    def unlisted(self) -> bool:
        """Whether a file digested is not in the listing (it was removed since)."""
        query = "SELECT 1 FROM digest WHERE name NOT IN (SELECT name FROM listing) LIMIT 1"
        return self._db.execute(query).fetchone() is not None

    def undigested(self) -> list[str]:
        """The listed files without a digest yet (not handed over), in listing order: one
        query, not a look-up per file of a site of thousands."""
        query = "SELECT name FROM listing WHERE name NOT IN (SELECT name FROM digest) ORDER BY name"
        return [_name(key) for (key,) in self._db.execute(query)]

    def clear(self) -> None:
        """Forget the archive's entries and digests (it is started again)."""
        self.entries.clear()
        self._db.execute("DELETE FROM digest")
        self.start_dir = 0

    def close(self) -> None:
        self._db.close()
        self.path.unlink(missing_ok=True)


def _key(name: str) -> bytes:
    """A file name as a database key: its UTF-8 bytes sort as the name does (a name that is
    not UTF-8, with lone surrogates from the file system, keeps its place too)."""
    return name.encode("utf-8", "surrogatepass")


def _name(key: bytes) -> str:
    return key.decode("utf-8", "surrogatepass")


class _Listing:
    """The site's files by relative path, sorted, read from the catalog each time."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __iter__(self) -> Iterator[str]:
        for (key,) in self._db.execute("SELECT name FROM listing ORDER BY name"):
            yield _name(key)

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM listing").fetchone()[0])

    def with_digests(self) -> Iterator[tuple[str, Digest | None]]:
        """Each file with its digest in the catalog (None if it has none)."""
        query = (
            "SELECT listing.name, digest.value FROM listing"
            " LEFT JOIN digest ON digest.name = listing.name ORDER BY listing.name"
        )
        for key, value in self._db.execute(query):
            yield _name(key), None if value is None else Digest(value)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        found = self._db.execute("SELECT 1 FROM listing WHERE name = ?", (_key(name),))
        return found.fetchone() is not None


class _Digests(MutableMapping[str, Digest]):
    """Each compressed or hashed file's :class:`Digest`, by relative path, in the catalog."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __getitem__(self, name: str) -> Digest:
        found = self._db.execute("SELECT value FROM digest WHERE name = ?", (_key(name),))
        row = found.fetchone()
        if row is None:
            raise KeyError(name)
        return Digest(row[0])

    def __setitem__(self, name: str, digest: Digest) -> None:
        self._db.execute("INSERT OR REPLACE INTO digest VALUES (?, ?)", (_key(name), bytes(digest)))

    def __delitem__(self, name: str) -> None:
        if self._db.execute("DELETE FROM digest WHERE name = ?", (_key(name),)).rowcount == 0:
            raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        for (key,) in self._db.execute("SELECT name FROM digest"):
            yield _name(key)

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM digest").fetchone()[0])

    def items(self) -> Iterable[tuple[str, Digest]]:  # type: ignore[override]
        for key, value in self._db.execute("SELECT name, value FROM digest"):
            yield _name(key), Digest(value)


#: The attributes of a zip entry, kept as a tuple of their values.
_ENTRY_FIELDS = zipfile.ZipInfo.__slots__
#: Entries inserted into the catalog together.
_ENTRIES_AT_ONCE = 256


class _Entries:
    """The archive's entries in the catalog: the list :class:`zipfile.ZipFile` keeps as
    ``filelist`` (appended to as each file is written, iterated once when the central
    directory is written at the end)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self.count = 0
        self._waiting: list[tuple[bytes]] = []  # appended, not in the database yet

    def append(self, info: zipfile.ZipInfo) -> None:
        values = tuple(getattr(info, field, None) for field in _ENTRY_FIELDS)
        self._waiting.append((marshal.dumps(values),))
        self.count += 1
        if len(self._waiting) >= _ENTRIES_AT_ONCE:
            self.flush()

    def flush(self) -> None:
        """Insert the entries appended since the last flush (one statement for many: an
        insert apiece was most of what adding a small file took)."""
        if self._waiting:
            self._db.executemany("INSERT INTO entry VALUES (?)", self._waiting)
            self._waiting = []

    def clear(self) -> None:
        self._waiting = []
        self._db.execute("DELETE FROM entry")
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[zipfile.ZipInfo]:
        self.flush()
        for (blob,) in self._db.execute("SELECT info FROM entry ORDER BY rowid"):
            info = zipfile.ZipInfo.__new__(zipfile.ZipInfo)
            for field, value in zip(_ENTRY_FIELDS, marshal.loads(blob), strict=True):
                setattr(info, field, value)
            yield info


class _NoNames(dict[str, zipfile.ZipInfo]):
    """``ZipFile.NameToInfo`` that keeps nothing: each name is written once (the catalog's
    digests say which are in), and nothing here reads an entry back by name."""

    def __setitem__(self, name: str, info: zipfile.ZipInfo) -> None:
        pass


class _Zip(zipfile.ZipFile):
    """A deflated zip whose entries wait in a :class:`_Catalog` until the central directory
    is written, and which reopens to append (mode "a") without reading them back. Its
    entries are deflated at ``level`` (kept in the catalog: the level an archive appended to
    was started at).
    """

    def __init__(self, path: Path, mode: Literal["w", "a"], catalog: _Catalog, level: int) -> None:
        self._catalog = catalog
        catalog.level = level
        super().__init__(path, mode, compression=zipfile.ZIP_DEFLATED, compresslevel=catalog.level)
        self.filelist = catalog.entries  # type: ignore[assignment]
        self.NameToInfo = _NoNames()

    def _RealGetContents(self) -> None:
        """Mode "a": the entries are in the catalog; the directory starts where it ended."""
        self.start_dir = self._catalog.start_dir

    def close(self) -> None:
        if self.fp is not None:
            super().close()
            self._catalog.start_dir = self.start_dir


def _add_site_file(
    archive: zipfile.ZipFile,
    site: Path,
    name: str,
    digests: MutableMapping[str, Digest],
    ahead: _Ahead | None = None,
) -> None:
    """Deflate the site's file ``name`` into ``archive`` once, recording its digest.

    The manifest is written last, and the copies of the input and the files of a compile's
    folder are only hashed, or deflated ``ahead`` into a side file: :func:`_complete_zip` adds
    them once it knows which are copies of what a page shows and whether the archive stays
    attachable with those.
    """
    if name in digests or name == MANIFEST_NAME:
        return
    path = os.path.join(site, name)  # text: a Path apiece would intern every name
    if ahead is not None and _deferred(name):
        digests[name] = ahead.take(site, name, archive.start_dir) or _file_digest(path)
    elif _deferred(name):
        digests[name] = _file_digest(path)
    else:
        digests[name] = _add_to_zip(archive, path, f"{site.name}/{name}")


class _WorkerLevel:
    """The level a zip written while its site is built deflates at, from its input's size (the
    small level when that is not known): the trace's logs as the build found them, then,
    as each ``raw.log`` copy comes, as they are unpacked (a gzipped log's size undersold it).
    A single trace's copy comes before its pages; a job's ranks hand theirs over after their
    pages, so a gzipped rank's correction reaches the next rank."""

    def __init__(self, input_size: int | None) -> None:
        self._input = input_size
        self._copied = 0  # the raw.log copies seen so far

    @property
    def level(self) -> int:
        if self._input is None:
            return SMALL_LEVEL
        return deflate_level(max(self._input, self._copied) * FAST_ZIP_PER_INPUT_BYTE)

    def see(self, site: Path, name: str) -> int:
        """The level for ``name``, handed over now, and the files after it."""
        if input_copy_kind(name) == RAW_LOG:
            self._copied += os.stat(os.path.join(site, name)).st_size
        return self.level


def _zip_service(
    inbox: Connection, outbox: Connection, site: str, tmp: str, input_size: str
) -> None:
    """Worker process: deflate each file named in ``inbox`` into ``tmp`` (at the level the
    input's size calls for: ``input_size``, "" when not known, see :class:`_WorkerLevel`),
    then complete the archive with the manifest fields that end the input (see
    :func:`_complete_zip`).

    A message is a list of names. Answers ``("done", None)``, or ``("failed", why)`` after
    the first error (it keeps reading names until the end so that the builder never blocks
    on a full pipe). A run of files that go in as they come (pages, not deferred: see
    :func:`_add_site_file`) is deflated a few at once (:class:`_Deflater`), the entries in
    the order they came; a deferred file waits for those before it (whether it is deflated
    ahead depends on what the archive holds by then).
    """
    failure = None
    folder = Path(site)  # one Path, not two a file
    level = _WorkerLevel(int(input_size) if input_size else None)
    catalog = _Catalog(_catalog_path(Path(tmp)))
    ahead = _Ahead(_ahead_path(Path(tmp)), level.level)
    deflater = _Deflater(folder)
    pending: deque[tuple[str, Future[_Entry]]] = deque()  # begun, in the order they came

    def put_pending(keep: int) -> None:
        """Put the entries begun into the archive, in order, until ``keep`` are left (all are
        dropped after a failure)."""
        nonlocal failure
        while len(pending) > keep and failure is None:
            name, future = pending.popleft()
            try:
                entry = future.result()
                if name not in catalog.digests:  # handed over twice: it is in once
                    catalog.digests[name] = _hashed(name, entry.digest)
                    _put(archive, entry)
            except Exception as error:
                failure = f"{name}: {error}"
        if failure is not None:
            pending.clear()

    try:
        with _Zip(Path(tmp), "w", catalog, level.level) as archive:
            while isinstance(message := inbox.recv(), list):
                for name in message:
                    if failure is None:
                        try:
                            now = level.see(folder, name)
                            archive.compresslevel = ahead.level = catalog.level = now
                            if _deferred(name) or name == MANIFEST_NAME:
                                put_pending(0)
                                _add_site_file(archive, folder, name, catalog.digests, ahead)
                            else:
                                pending.append((name, deflater.start(name, now)))
                                put_pending(_WINDOW)
                        except Exception as error:
                            failure = f"{name}: {error}"
            put_pending(0)
        if failure is None:
            try:
                _complete_zip(
                    folder, Path(tmp), catalog, "a", **message, ahead=ahead, deflater=deflater
                )
            except Exception as error:
                failure = f"completing the archive: {error}"
    finally:
        catalog.close()
        ahead.close()
        deflater.close()
    outbox.send(("done", None) if failure is None else ("failed", failure))


def _catalog_path(tmp: Path) -> Path:
    """The :class:`_Catalog` of the archive being written as ``tmp``: beside it."""
    return tmp.with_name(tmp.name + ".catalog")


def _ahead_path(tmp: Path) -> Path:
    """The side file of :class:`_Ahead` for the archive being written as ``tmp``: beside it."""
    return tmp.with_name(tmp.name + ".ahead")
