"""Builds by another revision of tlsite, for tests that compare what a user gets with it.

A change meant to keep the site and zip byte-identical (a speed change) is checked against
the revision before it: ``TLSITE_BASE_REV`` names it (any revision of this repository), and
the tests that need it skip without it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from corpus import PROJECT_ROOT

#: The revision to compare with (a commit, tag or branch of this repository), if any.
BASE_REV = os.environ.get("TLSITE_BASE_REV")
needs_base_rev = pytest.mark.skipif(not BASE_REV, reason="TLSITE_BASE_REV not set")
TIMEOUT_S = 600


def snapshot(revision: str, into: Path) -> Path:
    """``git archive`` of ``revision`` as ``into/tlsite``; returns ``into`` (a PYTHONPATH).
    Skips the test when the revision is not in this checkout's history."""
    package = into / "tlsite"
    package.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(PROJECT_ROOT), "archive", revision], capture_output=True
    )
    if archive.returncode != 0:
        pytest.skip(f"revision {revision} is not in this checkout's history")
    subprocess.run(["tar", "-x", "-C", str(package)], input=archive.stdout, check=True)
    return into


def cli_build(trace: Path, out: Path, pythonpath: Path) -> Path:
    """``tlsite build trace -o out`` by the tlsite importable from ``pythonpath``."""
    command = [sys.executable, "-m", "tlsite", "build", str(trace), "-o", str(out)]
    command += ["--no-browser", "--quiet"]
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    subprocess.run(command, check=True, timeout=TIMEOUT_S, env=env, stdout=subprocess.DEVNULL)
    return out


def site_files(site: Path) -> dict[str, bytes]:
    """Every file of a site by its relative path."""
    return {p.relative_to(site).as_posix(): p.read_bytes() for p in site.rglob("*") if p.is_file()}


def zip_in_order(site: Path) -> list[tuple[str, bytes]]:
    """The entries of ``site``'s zip (beside it), in the archive's order, by their path
    below its top folder: two builds meant to write the same archive give the same list."""
    with zipfile.ZipFile(site.with_name(f"{site.name}.zip")) as bundle:
        return [(name.split("/", 1)[1], bundle.read(name)) for name in bundle.namelist()]


def zip_entries(archive: Path) -> dict[str, bytes]:
    """A zip's entries by their path below its top folder (named after the site)."""
    with zipfile.ZipFile(archive) as bundle:
        return {name.split("/", 1)[1]: bundle.read(name) for name in bundle.namelist()}


def assert_built_as_by_base(trace: Path, tmp: Path, base: str | None = None) -> None:
    """``trace``'s site and zip are byte for byte what ``base`` (else :data:`BASE_REV`)
    builds."""
    rev = base or BASE_REV
    assert rev
    ours = cli_build(trace, tmp / "new" / "site", PROJECT_ROOT.parent)
    theirs = cli_build(trace, tmp / "old" / "site", snapshot(rev, tmp / "base"))
    ours_files, their_files = site_files(ours), site_files(theirs)
    assert ours_files.keys() == their_files.keys()
    assert [name for name in ours_files if ours_files[name] != their_files[name]] == []
    assert zip_entries(ours.with_name("site.zip")) == zip_entries(theirs.with_name("site.zip"))
