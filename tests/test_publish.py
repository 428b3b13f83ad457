"""``tlsite publish``: a report committed to a branch of a local bare repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from corpus import TLPARSE_INPUTS

from tlsite.cli import build, example_trace
from tlsite.mkdocs_plugin.publish import PublishError, pages_url, resolve_remote

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No user git configuration (publishing must not need one), and no browser."""
    home = tmp_path / "home"
    home.mkdir()
    drop = ("DISPLAY", "WAYLAND_DISPLAY", "GIT_DIR", "GIT_WORK_TREE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1", XDG_CONFIG_HOME=str(home))
    return env


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    path = tmp_path / "pages.git"
    git("init", "-q", "--bare", str(path))
    return path


def tlsite(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tlsite", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.slow
def test_publish_a_trace_to_a_local_bare_repository(
    tmp_path: Path, remote: Path, env: dict[str, str]
) -> None:
    done = tlsite("publish", str(example_trace()), "--to", str(remote), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "gh-pages" in done.stdout
    index = git("--git-dir", str(remote), "show", "gh-pages:index.html")
    assert "<html" in index and "example.log" in index
    files = git("--git-dir", str(remote), "ls-tree", "-r", "--name-only", "gh-pages").split()
    assert ".nojekyll" in files
    assert "search/search_index.js" in files and "compile_directory.json" in files
    message = git("--git-dir", str(remote), "log", "-1", "--format=%s", "gh-pages")
    assert "report of example.log" in message
    assert "as public as that repository" in done.stdout  # not redacted: says so

    # again, from an already built site folder, with a message: one more commit on top
    site = tmp_path / "built"
    build(str(TLPARSE_INPUTS / "simple.log"), site, bundle="none")
    done = tlsite("publish", str(site), "--to", str(remote), "-m", "second", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    log = git("--git-dir", str(remote), "log", "--format=%s", "gh-pages").split("\n")
    assert log[:2] == ["second", message.strip()]
    assert "simple.log" in git("--git-dir", str(remote), "show", "gh-pages:index.html")

    # --no-history replaces the branch with one commit
    done = tlsite("publish", str(site), "--to", str(remote), "--no-history", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert git("--git-dir", str(remote), "rev-list", "--count", "gh-pages").strip() == "1"


@pytest.mark.slow
def test_publish_to_a_remote_name_and_a_branch(
    tmp_path: Path, remote: Path, env: dict[str, str]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    git("init", "-q", cwd=work)
    git("remote", "add", "origin", str(remote), cwd=work)
    done = tlsite(
        "publish",
        str(TLPARSE_INPUTS / "simple.log"),
        "--to",
        "origin",
        "--branch",
        "reports",
        "--redact",
        cwd=work,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    shown = git("--git-dir", str(remote), "show", "reports:index.html")
    assert "This report was redacted" in shown
    assert "/home/xmfan" not in git("--git-dir", str(remote), "show", "reports:raw.log")
    assert git("status", "--porcelain", cwd=work) == ""  # the user's repository is untouched


@pytest.mark.slow
def test_publish_errors_are_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    done = tlsite("publish", str(example_trace()), "--to", "no-such-remote", cwd=tmp_path, env=env)
    assert done.returncode == 1
    assert done.stderr.startswith("tlsite: error: no-such-remote: not a URL")
    assert len(done.stderr.strip().splitlines()) == 1


def test_pages_url_and_remote_resolution(tmp_path: Path) -> None:
    assert pages_url("https://github.com/Owner/repo.git") == "https://owner.github.io/repo/"
    assert pages_url("git@github.com:me/me.github.io.git") == "https://me.github.io/"
    assert pages_url("ssh://git@github.com/a/b") == "https://a.github.io/b/"
    assert pages_url("https://gitlab.com/a/b.git") is None
    assert pages_url(str(tmp_path)) is None
    assert resolve_remote("https://example.org/x.git") == "https://example.org/x.git"
    assert resolve_remote(str(tmp_path)) == str(tmp_path.resolve())
    with pytest.raises(PublishError):
        resolve_remote("nowhere", tmp_path)
