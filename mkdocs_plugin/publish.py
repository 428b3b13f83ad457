"""Publish a built report to a branch of a git remote, e.g. ``gh-pages`` for GitHub Pages.

The commit is made by ghp-import (what ``mkdocs gh-deploy`` uses): it streams the folder into
``git fast-import`` as one commit on the branch and adds ``.nojekyll``, so no git plumbing is
reimplemented here. ghp-import works in the git repository of its working directory, so it runs
in a scratch repository whose only remote is the target: the user's own repository (if any) is
never touched, and the remote can be given as a URL, a local path or a remote name alike.

By default the new commit goes on top of the branch's current tip (a plain push, refused if
someone else pushed meanwhile); ``no_history`` replaces the branch with one commit (a forced
push), so old reports do not accumulate.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tlsite.core.cleanup import remove_stale, scratch_folder
from tlsite.core.source import is_inside

#: The scratch repository's name for the target remote.
_REMOTE = "tlsite"
_GIT_TIMEOUT_S = 600
_URL = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|[\w.-]+@[\w.-]+:)", re.IGNORECASE)
_GITHUB = re.compile(
    r"^(?:https?://(?:[^@/]+@)?github\.com/|git@github\.com:|ssh://git@github\.com/)"
    r"(?P<owner>[\w.-]+)/(?P<repo>[\w.-]+?)(?:\.git)?/?$",
    re.IGNORECASE,
)


#: The user information of a URL (``https://user:TOKEN@host``, ``https://TOKEN@host``).
_USERINFO = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)[^/@\s]+@", re.IGNORECASE)
#: A secret passed as a URL query parameter (``?access_token=…``).
_QUERY_SECRET = re.compile(
    r"(?P<key>[?&](?:access_token|token|private_token|password|passwd|pass|key|secret)=)[\w.~%+=-]+",
    re.IGNORECASE,
)


class PublishError(Exception):
    """Publishing failed; the message says why in one line (git's own words when it failed),
    with any credentials of the remote's URL left out."""

    def __init__(self, message: str) -> None:
        super().__init__(redact_credentials(message))


def redact_credentials(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***``: the token of
    ``https://user:TOKEN@github.com/…`` is a password, and messages end up in CI logs."""
    text = _USERINFO.sub(r"\g<scheme>***@", text)
    return _QUERY_SECRET.sub(r"\g<key>***", text)


def check_branch(branch: str) -> None:
    """Refuse a name git would not accept for a new branch (``HEAD``, ``a..b``, ``-x``): pushed
    as ``refs/heads/<name>``, it would make a ref no one can check out or delete by name."""
    if branch == "HEAD" or branch.startswith("-"):
        raise PublishError(f"--branch {branch}: not a valid branch name")
    done = _git(["check-ref-format", "--branch", branch], Path.cwd(), check=False)
    if done.returncode != 0 or done.stdout.strip() != branch:
        raise PublishError(f"--branch {branch}: not a valid branch name")


@dataclass
class Published:
    """Where a report went."""

    remote: str  # the URL or path pushed to, without its credentials
    branch: str
    commit: str
    pages_url: str | None
    skipped: list[str] = field(default_factory=list)  # one line per link left out


def is_built_site(path: Path) -> bool:
    """True for a folder tlsite (or MkDocs) built: it has ``index.html`` at its root."""
    return path.is_dir() and (path / "index.html").is_file()


def pages_url(remote: str) -> str | None:
    """The GitHub Pages address of a GitHub remote (``https://owner.github.io/repo/``), if any."""
    match = _GITHUB.match(remote.strip())
    if match is None:
        return None
    owner, repo = match["owner"].lower(), match["repo"]
    if repo.lower() == f"{owner}.github.io":
        return f"https://{owner}.github.io/"
    return f"https://{owner}.github.io/{repo}/"


def resolve_remote(remote: str, cwd: Path | None = None) -> str:
    """A URL as given; a remote name of the repository in ``cwd`` as its URL; a path, absolute."""
    if _URL.match(remote):
        return remote
    cwd = cwd or Path.cwd()
    named = _git(["remote", "get-url", remote], cwd, check=False)
    if named.returncode == 0 and named.stdout.strip():
        return named.stdout.strip()
    path = Path(remote).expanduser()
    if path.exists():
        return str(path.resolve())
    raise PublishError(
        f"{remote}: not a URL, an existing path, or a remote of a git repository in {cwd}"
    )


def publish_site(
    site: Path,
    remote: str,
    *,
    branch: str = "gh-pages",
    message: str = "tlsite report",
    no_history: bool = False,
) -> Published:
    """Commit the folder ``site`` (plus ``.nojekyll``) to ``branch`` of ``remote`` and push it."""
    if not is_built_site(site):
        raise PublishError(f"{site}: not a built site (no index.html)")
    check_branch(branch)
    remove_stale()  # a killed publish's scratch repository: its .git/config holds the URL
    url = resolve_remote(remote)
    outside = links_outside(site)
    skipped = [
        f"{site / name}: a link to outside the site folder; not published" for name in outside
    ]
    with scratch_folder("publish") as scratch:  # its .git/config holds the URL
        repo = Path(scratch) / "repo"
        repo.mkdir()
        if outside:  # ghp-import would push what they point at: publish a copy without them
            site = _copy_without(site, Path(scratch) / "site", set(outside))
        _git(["init", "-q"], repo)
        _git(["remote", "add", _REMOTE, url], repo)
        heads = _git(["ls-remote", "--heads", _REMOTE, branch], repo, check=False)
        if heads.returncode != 0:
            raise PublishError(f"{url}: {_last_line(heads.stderr) or 'cannot be reached'}")
        if heads.stdout.strip() and not no_history:
            # ghp-import builds on <remote>/<branch> when that ref exists
            refspec = f"+refs/heads/{branch}:refs/remotes/{_REMOTE}/{branch}"
            _git(["fetch", "-q", "--depth=1", _REMOTE, refspec], repo)
        command = [
            sys.executable,
            "-m",
            "ghp_import",
            str(site.resolve()),
            "--no-jekyll",
            "--push",
            "--remote",
            _REMOTE,
            "--branch",
            branch,
            "--message",
            message,
        ]
        if no_history:
            command.append("--no-history")
        try:
            done = subprocess.run(
                command,
                cwd=repo,
                env=_identity_env(repo),
                capture_output=True,
                text=True,
                timeout=_GIT_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired as exc:  # its text holds the command: no traceback
            raise PublishError(f"ghp-import gave no answer in {_GIT_TIMEOUT_S} s") from exc
        if done.returncode != 0:
            raise PublishError(f"ghp-import failed: {_last_line(done.stderr or done.stdout)}")
        commit = _git(["rev-parse", f"refs/heads/{branch}"], repo).stdout.strip()
    shown = redact_credentials(url)
    return Published(
        remote=shown, branch=branch, commit=commit, pages_url=pages_url(shown), skipped=skipped
    )


def links_outside(site: Path) -> list[str]:
    """The symlinks in ``site`` (files or folders) that lead out of it, as paths under it."""
    root = os.path.realpath(site)
    found = []
    for folder, dirs, files in os.walk(root):
        for name in sorted(dirs + files):
            path = os.path.join(folder, name)
            if os.path.islink(path) and not is_inside(os.path.realpath(path), root):
                found.append(os.path.relpath(path, root))
    return sorted(found)


def _copy_without(site: Path, dest: Path, leave_out: set[str]) -> Path:
    """A copy of ``site`` (hard links where it can) without the paths in ``leave_out``."""
    root = os.path.realpath(site)

    def ignore(folder: str, names: list[str]) -> set[str]:
        rel = os.path.relpath(folder, root)
        return {n for n in names if os.path.normpath(os.path.join(rel, n)) in leave_out}

    def link_or_copy(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(root, dest, ignore=ignore, copy_function=link_or_copy)
    return dest


def _identity_env(repo: Path) -> dict[str, str]:
    """The environment for ghp-import, with a committer when git has none configured."""
    env = dict(os.environ)
    for key, setting, fallback in (
        ("GIT_COMMITTER_NAME", "user.name", "tlsite"),
        ("GIT_COMMITTER_EMAIL", "user.email", "tlsite@localhost"),
    ):
        if not env.get(key) and not _git(["config", setting], repo, check=False).stdout.strip():
            env[key] = fallback
    return env


def _git(args: list[str], cwd: Path, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=_GIT_TIMEOUT_S
        )
    except FileNotFoundError as exc:
        raise PublishError("git is not installed (publishing needs it)") from exc
    except subprocess.TimeoutExpired as exc:  # its text holds the URL: no traceback
        raise PublishError(f"git {args[0]} gave no answer in {_GIT_TIMEOUT_S} s") from exc
    if check and done.returncode != 0:
        raise PublishError(f"git {args[0]} failed: {_last_line(done.stderr)}")
    return done


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""
