"""A small regular-expression highlighter for generated code (Python, C++, JSON).

Pygments tokenizes everything at about 1 MB/s; Inductor output code and FX graphs of a large
trace are tens of megabytes. This lexer highlights them about 12x faster: it only picks out
what helps reading generated code (strings, comments, keywords,
numbers, decorators, preprocessor lines) in one ``re.finditer`` pass, everything else stays
plain text. Its CSS classes are Pygments' short names, so the theme styles both alike.
"""

from __future__ import annotations

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

_PYTHON = re.compile(
    r"(?P<s>'''[\s\S]*?'''|\"\"\"[\s\S]*?\"\"\"|'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\")"
    r"|(?P<c1>\#[^\n]*)"
    r"|(?P<nf>(?<=\bdef )\w+)"
    r"|(?P<nc>(?<=\bclass )\w+)"
    r"|(?P<k>\b(?:" + "|".join(_PY_KEYWORDS) + r")\b)"
    r"|(?P<mi>\b\d+(?:\.\d*)?(?:[eE][+-]?\d+)?\b)"
    r"|(?P<nd>@[\w.]+)"
)
_CPP = re.compile(
    r"(?P<s>\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*')"
    r"|(?P<c1>//[^\n]*)"
    r"|(?P<cm>/\*[\s\S]*?\*/)"
    r"|(?P<cp>^[ \t]*\#[^\n]*)"
    r"|(?P<k>\b(?:" + "|".join(_CPP_KEYWORDS) + r")\b)"
    r"|(?P<mi>\b\d+(?:\.\d*)?(?:[eE][+-]?\d+)?[uUlLfF]*\b)",
    re.M,
)
_JSON = re.compile(
    r"(?P<nt>\"(?:[^\"\\\n]|\\.)*\"(?=\s*:))"
    r"|(?P<s2>\"(?:[^\"\\\n]|\\.)*\")"
    r"|(?P<kc>\b(?:true|false|null)\b)"
    r"|(?P<mi>-?\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\b)"
)
PATTERNS = {"python": _PYTHON, "cpp": _CPP, "json": _JSON}


def supports(lang: str) -> bool:
    return lang in PATTERNS


def tokens(text: str, lang: str) -> Iterator[tuple[str | None, str]]:
    """(css class or None, text) pieces covering ``text`` exactly."""
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
