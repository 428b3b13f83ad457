"""``tlsite serve``: a built site over HTTP, for a report on a machine reached by SSH.

The standard library's threading HTTP server, with two limits a file server on a shared
machine needs: only files inside the site folder are answered (a request whose path resolves
outside it, through ``..`` or a symbolic link, gets 404), and only on the loopback interface
unless the user asks for another.
"""

from __future__ import annotations

import ipaddress
import os
import posixpath
import socket
import sys
import urllib.parse
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar, TextIO

from tlsite.core.source import is_inside

#: Content types the report needs that some systems' MIME tables lack or get wrong.
EXTRA_TYPES = {
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".json": "application/json",
    ".jsonl": "application/json",
    ".html": "text/html",
    ".css": "text/css",
    ".svg": "image/svg+xml",
    ".txt": "text/plain",
    ".log": "text/plain",
    ".py": "text/plain",
    ".woff2": "font/woff2",
    ".7z": "application/x-7z-compressed",
}


class SiteHandler(SimpleHTTPRequestHandler):
    """Answers files of one folder; nothing that resolves outside it."""

    extensions_map: ClassVar[dict[str, str]] = {
        **SimpleHTTPRequestHandler.extensions_map,
        **EXTRA_TYPES,
    }

    def __init__(self, *args, root: Path, quiet: bool = True, **kwargs) -> None:
        self.root = root
        self.quiet = quiet
        super().__init__(*args, directory=str(root), **kwargs)

    def translate_path(self, path: str) -> str:
        """The file a request names, or a path that does not exist when it leaves the root.

        The request path is decoded and normalised before anything is looked up, then the
        result is resolved (symbolic links followed) and must still lie inside the root.
        """
        path = urllib.parse.urlsplit(path).path
        decoded = urllib.parse.unquote(path) if "%" in path else path
        parts = [p for p in posixpath.normpath("/" + decoded).split("/") if p]
        if any(p in (".", "..") or "\\" in p or "\0" in p for p in parts):
            return str(self.root / "\0refused")
        candidate = self.root.joinpath(*parts)
        try:
            resolved = candidate.resolve(strict=False)
        except (OSError, RuntimeError):
            return str(self.root / "\0refused")
        if not is_inside(str(resolved), str(self.root)):
            return str(self.root / "\0refused")
        text = str(resolved)
        if decoded.endswith("/") and resolved.is_dir():
            text += os.sep
        return text

    def send_head(self):  # type: ignore[no-untyped-def]
        if "\0" in self.translate_path(self.path):
            self.send_error(404, "File not found")
            return None
        return super().send_head()

    def list_directory(self, path):  # type: ignore[no-untyped-def]
        self.send_error(404, "File not found")  # a site has index.html pages; no listings
        return None

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def log_message(self, format: str, *args) -> None:
        if not self.quiet:
            super().log_message(format, *args)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``localhost``, 127.x, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def make_server(site: Path, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """A server of ``site`` bound to ``host:port`` (port 0: a free port the system picks)."""
    root = site.resolve()
    handler = partial(SiteHandler, root=root)
    server_class = ThreadingHTTPServer
    if ":" in host:
        server_class = type("V6Server", (ThreadingHTTPServer,), {"address_family": socket.AF_INET6})
    server = server_class((host, port), handler)
    server.daemon_threads = True
    return server


def announce(server: ThreadingHTTPServer, host: str, out: TextIO = sys.stdout) -> str:
    """Print the URL and the SSH tunnel command that reaches it; returns the URL."""
    port = server.server_address[1]
    shown = host
    if ":" in shown:
        shown = f"[{shown}]"
    url = f"http://{shown}:{port}/"
    lines = [f"Serving the report at {url} (Ctrl-C to stop)"]
    if is_loopback(host):
        lines.append(
            f"From another machine: ssh -L {port}:localhost:{port} {socket.gethostname()} "
            f"then open http://localhost:{port}/"
        )
    else:
        lines.append(
            f"Warning: --host {host} is not loopback: anyone who can reach this machine on "
            f"port {port} can read the report (it holds your model's code and paths)."
        )
    print("\n".join(lines), file=out, flush=True)
    return url


def serve(site: Path, host: str = "127.0.0.1", port: int = 0) -> int:
    """Serve ``site`` until Ctrl-C; returns the exit code (0 when stopped by Ctrl-C)."""
    server = make_server(site, host, port)
    announce(server, host)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("\nStopped.", file=sys.stderr)
    finally:
        server.server_close()
    return 0
