"""What fills a tlsite zip bundle: compressed bytes per kind of entry, read from the archive.

    python bench/zip_contents.py SITE.zip [SITE2.zip ...]
    python bench/zip_contents.py --levels 1,6,9 SITE [SITE2 ...]

Prints one Markdown table per zip: each kind's deflated MB, entry count and size on disk, and
what the entries' headers (local header and directory record, with the name twice) add.
With ``--levels``, for site folders instead: what each group of files (those that always go
in, tlparse's artifact files, the input's copies) deflates to at each level of zlib-ng (as the
bundle deflates), each file on its own as a zip entry, and the CPU seconds deflating took.
"""

from __future__ import annotations

import argparse
import os
import re
import time
import zipfile
from collections import Counter
from pathlib import Path

from zlib_ng import zlib_ng

_KINDS = (
    ("compile pages (`-_*/index.html`)", re.compile(r"(?:rank_\d+/)?-_[^/]+/index\.html")),
    ("tlparse HTML pages (`-_*/*.html`)", re.compile(r"(?:rank_\d+/)?-_[^/]+/[^/]+\.html")),
    ("tlparse artifact files (`-_*/*.txt`, `.json`)", re.compile(r"(?:rank_\d+/)?-_[^/]+/.+")),
    ("`raw.log`", re.compile(r"(?:rank_\d+/)?raw\.log")),
    ("`raw.jsonl`", re.compile(r"(?:rank_\d+/)?raw\.jsonl")),
    ("provenance pages", re.compile(r"(?:rank_\d+/)?provenance_tracking_.*\.html")),
    ("other pages", re.compile(r".*\.html")),
    ("search index", re.compile(r"(?:rank_\d+/)?search/.*")),
    ("theme assets", re.compile(r"(?:rank_\d+/)?assets/.*")),
    ("`manifest.json`", re.compile(r"manifest\.json")),
    ("tlparse root files, payloads", re.compile(r".*")),
)


def contents(path: Path) -> tuple[int, dict[str, tuple[int, int, int]], int]:
    """The zip's size, ``{kind: (deflated bytes, entries, bytes on disk)}`` and header bytes."""
    deflated: Counter[str] = Counter()
    entries: Counter[str] = Counter()
    size: Counter[str] = Counter()
    headers = 0
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            name = info.filename.split("/", 1)[1]
            kind = next(label for label, pattern in _KINDS if pattern.fullmatch(name))
            deflated[kind] += info.compress_size
            entries[kind] += 1
            size[kind] += info.file_size
            headers += 30 + 46 + 2 * len(info.filename.encode("utf-8"))
    kinds = {kind: (deflated[kind], entries[kind], size[kind]) for kind in deflated}
    return path.stat().st_size, kinds, headers


def levels(site: Path, chosen: list[int]) -> None:
    """Each group of the site's files deflated at each level in ``chosen``: MB and CPU s."""
    from tlsite.core import bundle  # the bundle's own grouping (PYTHONPATH: the worktree)

    groups: dict[str, list[str]] = {}
    for name in bundle.site_listing(site):
        copy = bundle.input_copy_kind(name) is not None
        group = "input copies" if copy else "artifact files" if bundle._deferred(name) else "rest"
        groups.setdefault(group, []).append(name)
    print(f"\n`{site.name}`\n")
    print(
        "| group | files | on disk MB | "
        + " | ".join(f"level {n} MB (CPU s)" for n in chosen)
        + " |"
    )
    print("|---|---:|---:|" + "---:|" * len(chosen))
    for group, names in groups.items():
        cells = []
        for level in chosen:
            start, deflated = time.process_time(), 0
            for name in names:
                packer = zlib_ng.compressobj(level, zlib_ng.DEFLATED, -15)
                with open(site / name, "rb") as source:
                    while chunk := source.read(1 << 20):
                        deflated += len(packer.compress(chunk))
                deflated += len(packer.flush())
            cells.append(f"{deflated / 1e6:.2f} ({time.process_time() - start:.2f})")
        size = sum(os.path.getsize(site / name) for name in names)
        print(f"| {group} | {len(names):,} | {size / 1e6:.1f} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("zips", nargs="+", type=Path)
    parser.add_argument("--levels", help="site folders: deflate at these levels (1,6,9)")
    args = parser.parse_args()
    if args.levels:
        for site in args.zips:
            levels(site, [int(n) for n in args.levels.split(",")])
        return
    for path in args.zips:
        total, kinds, headers = contents(path)
        print(f"\n`{path.name}`: {total / 1e6:.2f} MB\n")
        print("| kind | deflated MB | entries | on disk MB |\n|---|---:|---:|---:|")
        for kind, (deflated, entries, size) in sorted(kinds.items(), key=lambda kv: -kv[1][0]):
            print(f"| {kind} | {deflated / 1e6:.2f} | {entries:,} | {size / 1e6:.1f} |")
        print(f"| zip entry headers | {headers / 1e6:.2f} | | |")


if __name__ == "__main__":
    main()
