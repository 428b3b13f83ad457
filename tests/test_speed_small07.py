"""Work a typical 1-5 MB build did twice, done once, with the same site and zip (issue #19,
``small07``).

The tests check what a user gets (every file of the zip is the site's, and the manifest's
digests are right) and that the work is done once; no test measures time
(``bench/ab_build.py`` does).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import pytest
from corpus import PROJECT_ROOT, TORCH_213

from tlsite import __version__
from tlsite.cli import BuildOutcome, build
from tlsite.core import bundle
from tlsite.core.bundle import MANIFEST_NAME, write_bundle

SIMPLE_213 = next(TORCH_213.glob("simple/*.log"))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> BuildOutcome:
    """One built report (no bundle); each test bundles it its own way."""
    out = tmp_path_factory.mktemp("small07") / "report"
    return build(str(SIMPLE_213), out, bundle="none")


def test_each_file_of_the_zip_is_hashed_once(
    site: BuildOutcome, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The input's copies and tlparse's files go into the zip at its end, once it is known
    that they fit: their SHA-256 for the manifest was taken when they were listed, and is not
    taken again when they are deflated. The zip still holds the site's bytes, and the
    manifest the right digest of each."""
    hashed: dict[str, int] = {"bytes": 0}

    class Counting:
        def __init__(self) -> None:
            self._hash = hashlib.sha256()

        def update(self, data: bytes) -> None:
            hashed["bytes"] += len(data)
            self._hash.update(data)

        def digest(self) -> bytes:
            return self._hash.digest()

    monkeypatch.setattr(bundle, "hashlib", types.SimpleNamespace(sha256=Counting))
    zipped, _ = write_bundle(site.site, "zip", trace="t.log", version=__version__)
    files = [p for p in site.site.rglob("*") if p.is_file() and p.name != MANIFEST_NAME]
    assert (site.site / "raw.log").is_file()  # a deferred file is among them
    # each file once, and the manifest as it goes in
    manifest_size = (site.site / MANIFEST_NAME).stat().st_size
    assert hashed["bytes"] == sum(p.stat().st_size for p in files) + manifest_size
    with zipfile.ZipFile(zipped) as archive:
        contents = {n: archive.read(n) for n in archive.namelist()}
    manifest = json.loads(contents[f"report/{MANIFEST_NAME}"])
    listed = {entry["path"]: entry["sha256"] for entry in manifest["files"]}
    for path in files:
        name = path.relative_to(site.site).as_posix()
        assert contents[f"report/{name}"] == path.read_bytes()
        assert listed[name] == hashlib.sha256(path.read_bytes()).hexdigest()


#: A small build in a process of its own, as the ``tlsite`` command runs it: which modules
#: did it import?
_SMALL_BUILD = """
import sys
from tlsite.cli import main
main(["build", "--example", "-o", sys.argv[1], "--no-browser", "--quiet"])
print("multiprocessing imported:", "multiprocessing" in sys.modules)
"""


def test_a_build_without_helper_processes_imports_no_multiprocessing(tmp_path: Path) -> None:
    """A small build starts no helper process, so it does not import what starting and
    talking to one needs (``multiprocessing.connection``, its pipes' wrappers)."""
    done = subprocess.run(
        [sys.executable, "-c", _SMALL_BUILD, str(tmp_path / "site")],
        env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT.parent)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert "multiprocessing imported: False" in done.stdout
