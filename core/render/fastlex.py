"""A small regular-expression highlighter for generated code (Python, C++, JSON).

Pygments tokenizes everything at about 1 MB/s; Inductor output code and FX graphs of a large
trace are tens of megabytes. This lexer highlights them about 12x faster: it only picks out
what helps reading generated code (strings, comments, keywords,
numbers, decorators, preprocessor lines) in one ``re.finditer`` pass, everything else stays
plain text. Its CSS classes are Pygments' short names, so the theme styles both alike.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

_PY_KEYWORDS = [
    "False",
    "None",
    "True",
    "and",
    "as",
    "assert",
    "async",
    "await",
    "break",
    "class",
    "continue",
    "def",
    "del",
    "elif",
    "else",
    "except",
    "finally",
    "for",
    "from",
    "global",
    "if",
    "import",
    "in",
    "is",
    "lambda",
    "nonlocal",
    "not",
    "or",
    "pass",
    "raise",
    "return",
    "try",
    "while",
    "with",
    "yield",
]
_CPP_KEYWORDS = [
    "auto",
    "bool",
    "break",
    "case",
    "char",
    "class",
    "const",
    "constexpr",
    "continue",
    "default",
    "delete",
    "do",
    "double",
    "else",
    "enum",
    "explicit",
    "extern",
    "false",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "namespace",
    "new",
    "nullptr",
    "operator",
    "private",
    "protected",
    "public",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_cast",
    "struct",
    "switch",
    "template",
    "this",
    "throw",
    "true",
    "try",
    "typedef",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "while",
    "int8_t",
    "int16_t",
    "int32_t",
    "int64_t",
    "uint8_t",
    "uint16_t",
    "uint32_t",
    "uint64_t",
    "size_t",
]

# Pieces shared by the specification patterns and the fast ones, so the two cannot drift.
_PY_STRING = r"'''[\s\S]*?'''|\"\"\"[\s\S]*?\"\"\"|'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\""
_PY_NUMBER = r"\d+(?:\.\d*)?(?:[eE][+-]?\d+)?"
_PY_DEF_NAME = r"(?<=\bdef )"
_PY_CLASS_NAME = r"(?<=\bclass )"
_CPP_STRING = r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'"
_CPP_NUMBER = r"\d+(?:\.\d*)?(?:[eE][+-]?\d+)?[uUlLfF]*"
_CPP_DIRECTIVE = r"^[ \t]*\#"
_JSON_STRING = r"\"(?:[^\"\\\n]|\\.)*\""
_JSON_NUMBER = r"\d+(?:\.\d+)?(?:[eE][+-]?\d+)?"
_JSON_WORDS = ["true", "false", "null"]

_PYTHON = re.compile(
    rf"(?P<s>{_PY_STRING})"
    r"|(?P<c1>\#[^\n]*)"
    rf"|(?P<nf>{_PY_DEF_NAME}\w+)"
    rf"|(?P<nc>{_PY_CLASS_NAME}\w+)"
    r"|(?P<k>\b(?:" + "|".join(_PY_KEYWORDS) + r")\b)"
    rf"|(?P<mi>\b{_PY_NUMBER}\b)"
    r"|(?P<nd>@[\w.]+)"
)
_CPP = re.compile(
    rf"(?P<s>{_CPP_STRING})"
    r"|(?P<c1>//[^\n]*)"
    r"|(?P<cm>/\*[\s\S]*?\*/)"
    rf"|(?P<cp>{_CPP_DIRECTIVE}[^\n]*)"
    r"|(?P<k>\b(?:" + "|".join(_CPP_KEYWORDS) + r")\b)"
    rf"|(?P<mi>\b{_CPP_NUMBER}\b)",
    re.M,
)
_JSON = re.compile(
    rf"(?P<nt>{_JSON_STRING}(?=\s*:))"
    rf"|(?P<s2>{_JSON_STRING})"
    r"|(?P<kc>\b(?:" + "|".join(_JSON_WORDS) + r")\b)"
    rf"|(?P<mi>-?\b{_JSON_NUMBER}\b)"
)
PATTERNS = {"python": _PYTHON, "cpp": _CPP, "json": _JSON}


def supports(lang: str) -> bool:
    return lang in PATTERNS


def tokens(text: str, lang: str) -> Iterator[tuple[str | None, str]]:
    """(css class or None, text) pieces covering ``text`` exactly: the specification."""
    pattern = PATTERNS[lang]
    position = 0
    for match in pattern.finditer(text):
        start = match.start()
        if start > position:
            yield None, text[position:start]
        yield match.lastgroup, match.group()
        position = match.end()
    if position < len(text):
        yield None, text[position:]


# --------------------------------------------------------------------------------------------
# The fast path. Each match is a gap (text that holds no token) followed by one token, by a
# character that looked like a token start but starts none (``x``: an unterminated quote),
# or by the end of the text. The gap is possessive and steps over whole words whose start
# is no token start and over runs of characters that start no token; everywhere else the
# token alternatives are tried in the specification's order, so the tokens are the same.
# A possessive gap never gives back, so a failed token cannot make the search quadratic.
#
# The patterns run on escaped text: html.escape(quote=False) only turns & < > into "&amp;",
# "&lt;" and "&gt;", made of characters that neither start, end nor extend any token (no
# keyword is "lt", "gt" or "amp"; no quote, digit, backslash or newline), so each match of
# the escaped text is the escaped match of the original.


def _prefix_tree(words: list[str]) -> str:
    """``words`` as one alternation shaped like a prefix tree (``de(?:f|l)``)."""
    branches: dict[str, list[str]] = {}
    for word in words:
        if word:
            branches.setdefault(word[0], []).append(word[1:])
    alternatives = [
        re.escape(first) + _prefix_tree(sorted(rests)) for first, rests in sorted(branches.items())
    ]
    if not alternatives:
        return ""
    tree = alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"
    return f"(?:{tree})?" if "" in words else tree


def _gap_then_token(
    tokens: str, *, word_token: str, skip: str, gaps: str = "", guard: str = "", flags: int = 0
) -> re.Pattern[str]:
    """A pattern for ``gap`` then ``tokens``, whose last alternative must match any character
    at which the gap stops and no token starts.

    ``word_token``: a token starts at this word start (other words are skipped whole);
    ``skip``: a character class that starts no token; ``gaps``: more gap steps
    (``|...``); ``guard``: a lookahead every gap step must pass.
    """
    gap = rf"(?:{guard}(?:{skip}++|(?!{word_token})\w++{gaps}))*+"
    return re.compile(rf"(?P<gap>{gap})(?:{tokens}|\Z)", flags)


def _quoted(quote: str) -> str:
    """A one-line string in ``quote`` with backslash escapes, written as an unrolled loop
    (``"[^"\\\n]*(?:\\.[^"\\\n]*)*"``): the same matches as ``"(?:[^"\\\n]|\\.)*"``,
    but the engine runs through plain characters without trying two alternatives at each."""
    plain = rf"[^{quote}\\\n]*"
    return rf"{quote}{plain}(?:\\.{plain})*{quote}"


_SINGLE_QUOTED = _quoted("'")
_DOUBLE_QUOTED = _quoted('"')
_PY_FAST_STRING = rf"'''[\s\S]*?'''|\"\"\"[\s\S]*?\"\"\"|{_SINGLE_QUOTED}|{_DOUBLE_QUOTED}"
_CPP_FAST_STRING = rf"{_DOUBLE_QUOTED}|{_SINGLE_QUOTED}"
_PY_TREE = _prefix_tree(sorted(_PY_KEYWORDS))
_CPP_TREE = _prefix_tree(sorted(_CPP_KEYWORDS))
_JSON_TREE = _prefix_tree(sorted(_JSON_WORDS))
_FAST_PATTERNS = {
    "python": _gap_then_token(
        rf"(?P<s>{_PY_FAST_STRING})|(?P<c1>\#[^\n]*)|(?P<nd>@[\w.]+)"
        rf"|(?P<nf>{_PY_DEF_NAME}\w+)|(?P<nc>{_PY_CLASS_NAME}\w+)"
        rf"|(?P<k>\b{_PY_TREE}\b)|(?P<mi>\b{_PY_NUMBER}\b)|(?P<x>['\"@])",
        word_token=rf"\b{_PY_TREE}\b|\b{_PY_NUMBER}\b|{_PY_DEF_NAME}\w|{_PY_CLASS_NAME}\w",
        skip=r"[^\w'\"\#@]",
    ),
    "cpp": _gap_then_token(
        rf"(?P<s>{_CPP_FAST_STRING})|(?P<c1>//[^\n]*)|(?P<cm>/\*[\s\S]*?\*/)"
        rf"|(?P<cp>{_CPP_DIRECTIVE}[^\n]*)"
        rf"|(?P<k>\b{_CPP_TREE}\b)|(?P<mi>\b{_CPP_NUMBER}\b)|(?P<x>['\"/])",
        word_token=rf"\b{_CPP_TREE}\b|\b{_CPP_NUMBER}\b",
        skip=r"[^\w'\"/\#\n]",
        gaps=r"|\n|/(?![/*])|\#",
        guard=rf"(?!{_CPP_DIRECTIVE})",
        flags=re.M,
    ),
    "json": _gap_then_token(
        # a key is a string followed by a colon: the empty group "nt" says so (matched once)
        rf"(?P<s2>{_DOUBLE_QUOTED})(?P<nt>(?=\s*:))?"
        rf"|(?P<kc>\b{_JSON_TREE}\b)|(?P<mi>-?\b{_JSON_NUMBER}\b)|(?P<x>\")",
        word_token=rf"\b{_JSON_TREE}\b|\b{_JSON_NUMBER}\b",
        skip=r"[^\w\"\-]",
        gaps=rf"|-(?!{_JSON_NUMBER}\b)",
    ),
}
#: Two spans of one class with nothing between them, which :func:`tokens` gives as one run.
_ADJACENT_SAME_CLASS = re.compile(r'(<span class="(\w+)">[^<\n]*)</span><span class="\2">')


def html_lines(text: str, lang: str) -> str:
    """``text`` highlighted, one ``<span>...\\n</span>`` per line: the HTML of :func:`tokens`
    with each run of one class in one span, split at line ends."""
    last_end, last_css = -1, None  # where the previous token ended, its class
    merge = False

    def wrap(match: re.Match[str]) -> str:
        nonlocal merge, last_end, last_css
        css = match.lastgroup
        if css == "gap" or css == "x":  # the end, or a character that starts no token
            return match.group()
        start, end = match.span()
        gap_end = match.end(1)  # the token is all after the gap
        if gap_end == last_end and css == last_css:
            merge = True
        last_end, last_css = end, css
        string = match.string
        value = string[gap_end:end]
        if "\n" in value:
            value = "\n".join(
                f'<span class="{css}">{part}</span>' if part else "" for part in value.split("\n")
            )
            return string[start:gap_end] + value
        return f'{string[start:gap_end]}<span class="{css}">{value}</span>'

    body = _FAST_PATTERNS[lang].sub(wrap, html.escape(text, quote=False))
    while merge:
        body, merged = _ADJACENT_SAME_CLASS.subn(r"\1", body)
        merge = merged > 0
    return escaped_lines(body)


def escaped_lines(escaped: str) -> str:
    """Wrap each line of already escaped HTML in ``<span>...\\n</span>``."""
    return "<span>" + escaped.replace("\n", "\n</span><span>") + "\n</span>"
