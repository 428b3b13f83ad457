"""Text for the terminal: whatever came from a trace is shown, never obeyed.

File names, archive member names and trace text reach errors, summaries and the progress
display. A control character in them (ESC starting an ANSI or OSC sequence, BEL, a carriage
return, a C1 control, a bidirectional override) would let the trace repaint the terminal, hide
text or make a hyperlink; :func:`safe` shows each such character as a visible escape instead.
"""

from __future__ import annotations

import re
import sys
from typing import TextIO

#: C0 controls (with TAB and LF), DEL, C1 controls, and the Unicode format characters that
#: reorder or hide text (bidirectional embeddings, overrides and isolates, zero-width marks).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: object) -> str:
    """``text`` with every control character written as a visible escape (``\\x1b``).

    A file name that is not UTF-8 (its undecodable bytes are surrogates) is shown with
    those bytes escaped too, so printing it never raises.
    """
    shown = _CONTROL.sub(_visible, str(text))
    return shown.encode("utf-8", "backslashreplace").decode("utf-8")


def safe_lines(text: str) -> str:
    """:func:`safe` for each line of a message of several lines (its line breaks are kept)."""
    return "\n".join(safe(line) for line in text.split("\n"))


def markup_safe(text: object) -> str:
    """:func:`safe` text for a place rich reads as markup: ``[link=…]`` stays literal."""
    from rich.markup import escape

    return escape(safe(text))


def say(text: str, file: TextIO | None = None) -> None:
    """Print a message of tlsite's (its lines kept) whose parts may come from a trace."""
    print(safe_lines(text), file=file if file is not None else sys.stdout)
