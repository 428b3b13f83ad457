"""A content-addressed payload store on disk, so memory does not grow with the trace.

Payloads are written once per distinct content (keyed by their MD5) and read back only when
a page or an output file needs them.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class PayloadRef:
    """A payload in the store: its MD5, size in bytes and number of lines."""

    md5: str
    size: int
    lines: int


class PayloadStore:
    """Payload files under one directory, named by the MD5 of their UTF-8 bytes."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self._owned = root is None
        self.root = Path(tempfile.mkdtemp(prefix="tlsite-store-") if root is None else root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._known: set[str] = set()

    def put(self, text: str, md5: str | None = None) -> PayloadRef:
        data = text.encode("utf-8")
        digest = md5 or hashlib.md5(data).hexdigest()
        if digest not in self._known:
            path = self.path(digest)
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(data)
            self._known.add(digest)
        return PayloadRef(digest, len(data), text.count("\n") + 1 if text else 0)

    def path(self, md5: str) -> Path:
        return self.root / md5[:2] / md5

    def read(self, ref: PayloadRef) -> str:
        return self.path(ref.md5).read_text(encoding="utf-8")

    def read_bytes(self, ref: PayloadRef) -> bytes:
        return self.path(ref.md5).read_bytes()

    def copy_to(self, ref: PayloadRef, dest: Path) -> None:
        """Place the payload at ``dest``: a hard link when possible, else a copy."""
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.exists():
            dest.unlink()
        try:
            os.link(self.path(ref.md5), dest)
        except OSError:
            shutil.copyfile(self.path(ref.md5), dest)

    def spill_path(self, name: str) -> Path:
        """A scratch file beside the payloads (raw.jsonl and chromium events are spilled here)."""
        return self.root / name

    def close(self) -> None:
        if self._owned:
            shutil.rmtree(self.root, ignore_errors=True)

    def __del__(self) -> None:  # best effort: temporary stores do not outlive the model
        with contextlib.suppress(Exception):
            self.close()
