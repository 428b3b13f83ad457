"""Pack a built site into one archive that unzips anywhere and opens from ``index.html``."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

#: GitHub's limit for a file attached to an issue.
GITHUB_ATTACHMENT_LIMIT = 25 * 1024 * 1024
_FIXED_DATE = (1980, 1, 1, 0, 0, 0)  # deterministic archives: same input, same bytes


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
