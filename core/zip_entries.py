"""The entries a zip is written with, kept in a file on disk until the zip is closed.

:mod:`zipfile` keeps a :class:`~zipfile.ZipInfo` per entry (and a name index) until it writes
the archive's central directory at the end, and the zip bundle's worker also keeps each
file's digest for the manifest: some 520 bytes per file, 6 MB for a site of 12,000 files,
held while the site is built. An :class:`EntryLog` takes each entry out of the archive as
soon as it is written and appends its fields (and digest) to a file; :meth:`EntryLog.entries`
gives them back, in order, for the central directory and the manifest, at the very end.
"""

from __future__ import annotations

import os
import struct
import zipfile
from collections.abc import Iterator

#: A record's fixed part: sizes of the two names and of the extra field, whether the file
#: is in the archive, date and time, and the fields of the central directory.
_FIXED = struct.Struct("<HHH?6HQIQQHHIBBB40s")


class EntryLog:
    """Entries appended to a file: ``(site-relative name, ZipInfo or None, digest)``.

    The digest is opaque bytes of 40 (the bundle's size + SHA-256); a ``None`` ZipInfo
    records a file that was only hashed, not written into the archive.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._file = open(self.path, "w+b")  # noqa: SIM115 - closed by close()

    def take(self, archive: zipfile.ZipFile, name: str, digest: bytes) -> None:
        """Move the entry just written to ``archive`` into the log (``name``: its file in
        the site)."""
        info = archive.filelist.pop()
        archive.NameToInfo.pop(info.filename, None)
        self.record(name, info, digest)

    def record(self, name: str, info: zipfile.ZipInfo | None, digest: bytes) -> None:
        encoded = name.encode("utf-8")
        filename = b"" if info is None else info.filename.encode("utf-8")
        extra = b"" if info is None else info.extra
        fields = _FIXED.pack(
            len(encoded),
            len(filename),
            len(extra),
            info is not None,
            *(info.date_time if info is not None else (1980, 1, 1, 0, 0, 0)),
            0 if info is None else info.header_offset,
            0 if info is None else info.CRC,
            0 if info is None else info.compress_size,
            0 if info is None else info.file_size,
            0 if info is None else info.flag_bits,
            0 if info is None else info.compress_type,
            0 if info is None else info.external_attr,
            0 if info is None else info.create_version,
            0 if info is None else info.extract_version,
            0 if info is None else info.create_system,
            digest,
        )
        self._file.write(fields + encoded + filename + extra)

    def entries(self) -> Iterator[tuple[str, zipfile.ZipInfo | None, bytes]]:
        """Every entry recorded, in order."""
        self._file.flush()
        self._file.seek(0)
        read = self._file.read
        while header := read(_FIXED.size):
            name_size, filename_size, extra_size, in_archive, *rest = _FIXED.unpack(header)
            date_time, rest = tuple(rest[:6]), rest[6:]
            name = read(name_size).decode("utf-8")
            filename = read(filename_size).decode("utf-8")
            extra = read(extra_size)
            *fields, digest = rest
            if not in_archive:
                yield name, None, digest
                continue
            info = zipfile.ZipInfo(filename, date_time=date_time)  # type: ignore[arg-type]
            (
                info.header_offset,
                info.CRC,
                info.compress_size,
                info.file_size,
                info.flag_bits,
                info.compress_type,
                info.external_attr,
                info.create_version,
                info.extract_version,
                info.create_system,
            ) = fields
            info.extra = extra
            yield name, info, digest

    def close(self) -> None:
        """Close and remove the log."""
        self._file.close()
        if os.path.exists(self.path):
            os.remove(self.path)
