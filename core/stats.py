"""Parse health: every input line is accounted for, and every skipped one has a reason.

Line-level outcomes partition the physical lines of a log (``total == sum of outcomes``).
Record-level findings (an MD5 mismatch, an unknown event type, a malformed field) are noted
on top, with the line of the record they concern.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

#: Line outcomes that mean "read and used".
READ_OUTCOMES = ("record", "payload", "interned", "blank")

#: Line outcomes that mean "skipped", with the text shown to users.
SKIP_REASONS: dict[str, str] = {
    "bad_header": "not a trace line (no glog header)",
    "bad_json": "the record's JSON does not parse",
    "not_object": "the record's JSON is not an object",
    "not_utf8": "not valid UTF-8",
    "orphan_payload": "payload line with no record before it (that record was skipped)",
    "other_rank": "record naming another rank than the first one seen in this log",
    "bad_str": "malformed string-table (str) record",
}

#: Record-level findings: the record was still used.
FINDING_REASONS: dict[str, str] = {
    "md5_mismatch": "payload MD5 does not match has_payload (lines lost or changed)",
    "unknown_event": "event type tlsite has no special view for (shown generically)",
    "unknown_key": "top-level key tlsite does not know (kept in raw.jsonl)",
    "bad_field": "a metadata field has an unexpected type (the field was ignored)",
    "bad_payload": "payload could not be decoded as its declared format (shown as text)",
    "bad_compile_id": "compile-id fields are malformed (listed under 'unknown')",
    "not_listed": "records past the most kept of one type in a compile, or in all (counted, "
    "and in raw.log and raw.jsonl)",
    "input_cut": "the input breaks off here (cut or damaged compressed data): nothing after it",
    "input_damaged": "the input is damaged (its data does not match its CRC): lines from the "
    "damage on may be garbage",
}

#: How a line of ``LogSource.breaks`` ends when the log is read up to the break.
SHOWS_WHAT_CAME_BEFORE = "; the report shows what came before"

#: Findings about the input as a whole: one each at most, always kept and always told.
INPUT_FINDINGS = ("input_cut", "input_damaged")

SAMPLE_LIMIT = 200
SAMPLE_CHARS = 160
#: Characters of the first line quoted when a file is not a trace.
FIRST_LINE_CHARS = 60
#: Line outcomes of a line that holds a record (a glog header and a JSON object), used or not.
RECORD_OUTCOMES = ("record", "interned", "other_rank", "bad_str")


@dataclass(frozen=True, slots=True)
class Sample:
    """One example of a skipped line or a finding, for the Parse health page."""

    line: int
    reason: str
    detail: str


@dataclass(frozen=True)
class LogPart:
    """One of several logs of one process read as one: its name and the lines it fills in the
    whole (and in ``raw.log``)."""

    name: str
    first_line: int
    last_line: int
    breaks: tuple[str, ...] = ()  # where its data broke off (see ``LogSource.breaks``)

    @property
    def lines(self) -> int:
        return self.last_line - self.first_line + 1


@dataclass
class ParseStats:
    """Counters and examples for one log."""

    source: str = ""
    total_lines: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    findings: Counter[str] = field(default_factory=Counter)
    samples: list[Sample] = field(default_factory=list)
    lines_by_reason: dict[str, list[int]] = field(default_factory=dict)
    unknown_events: Counter[str] = field(default_factory=Counter)
    unknown_keys: Counter[str] = field(default_factory=Counter)
    detected_rank: int | None = None
    first_line: str | None = None  # the first non-blank line, shortened (see shorten_line)
    parts: tuple[LogPart, ...] = ()  # the logs read one after the other, when there are several

    def read(self, outcome: str, count: int = 1) -> None:
        self.outcomes[outcome] += count

    def skip(self, reason: str, line: int, detail: str = "", count: int = 1) -> None:
        """Account ``count`` lines starting at ``line`` as skipped for ``reason``."""
        self.outcomes[reason] += count
        self._note(reason, line, detail)

    def find(self, reason: str, line: int, detail: str = "") -> None:
        self.findings[reason] += 1
        self._note(reason, line, detail)

    def _note(self, reason: str, line: int, detail: str) -> None:
        numbers = self.lines_by_reason.setdefault(reason, [])
        if len(numbers) < 10_000:
            numbers.append(line)
        if len(self.samples) < SAMPLE_LIMIT or reason in INPUT_FINDINGS:
            if len(detail) > SAMPLE_CHARS:
                detail = detail[:SAMPLE_CHARS] + "…"
            self.samples.append(Sample(line, reason, detail))

    @property
    def skipped_lines(self) -> int:
        return sum(n for k, n in self.outcomes.items() if k in SKIP_REASONS)

    @property
    def accounted_lines(self) -> int:
        return sum(self.outcomes.values())

    @property
    def records(self) -> int:
        return self.outcomes["record"]

    def summary(self) -> str:
        """One line for the terminal, e.g. ``trace.log: 1,204 records; 2 lines skipped (…)``."""
        parts = [
            count_text(self.records, "record") + " from " + count_text(self.total_lines, "line")
        ]
        skipped = {k: n for k, n in self.outcomes.items() if k in SKIP_REASONS and n}
        if skipped:
            detail = ", ".join(f"{n:,} {k.replace('_', ' ')}" for k, n in sorted(skipped.items()))
            first = min(self.lines_by_reason[k][0] for k in skipped)
            skipped_text = count_text(self.skipped_lines, "line")
            parts.append(f"{skipped_text} skipped ({detail}; first at line {first})")
        if mismatches := self.findings["md5_mismatch"]:
            parts.append(f"{mismatches:,} payload MD5 mismatch{'' if mismatches == 1 else 'es'}")
        for sample in self.samples:
            if sample.reason == "input_cut":
                parts.append(f"{sample.detail} (line {sample.line:,})")
            elif sample.reason == "input_damaged":
                parts.append(f"{sample.detail} (it shows from line {sample.line:,} on)")
        return f"{self.source}: " + "; ".join(parts)

    @property
    def break_line(self) -> int | None:
        """The first line where the input broke off or its damage shows (None: whole); lines
        past it may be garbage read from damaged data."""
        lines = [n for reason in INPUT_FINDINGS for n in self.lines_by_reason.get(reason, ())]
        return min(lines) if lines else None

    @property
    def garbage_from(self) -> int | None:
        """The first line that may be garbage when the input broke (None: whole): the break, or
        the first unreadable line before it (damaged compressed data decodes to garbage for a
        while before the decoder notices)."""
        line = self.break_line
        if line is None:
            return None
        reasons = (*SKIP_REASONS, "md5_mismatch")
        firsts = [self.lines_by_reason[k][0] for k in reasons if self.lines_by_reason.get(k)]
        return min([line, *firsts])

    def break_text(self) -> str:
        """Where the input breaks off, in words, at its file's own line ("" when whole):
        ``the input breaks off at line 699 of trace.log.gz``."""
        line = self.break_line
        if line is None:
            return ""
        name, local = self.source, line
        for part in self.parts:
            if part.first_line <= line <= part.last_line:
                name, local = part.name, line - part.first_line + 1
        cut = line in self.lines_by_reason.get("input_cut", ())
        what = "breaks off at" if cut else "is damaged from"
        return f"the input {what} line {local:,} of {name}"

    def why_not_clean(self) -> str:
        """What ``--strict`` fails on, as a phrase (empty when :attr:`is_clean`)."""
        parts = []
        if skipped := self.skipped_lines:
            parts.append(f"{skipped:,} input line{' was' if skipped == 1 else 's were'} skipped")
        if damaged := self.findings["md5_mismatch"]:
            were = "payload was" if damaged == 1 else "payloads were"
            parts.append(f"{damaged:,} {were} damaged (MD5 mismatch)")
        if self.findings["input_cut"]:
            parts.append("the input breaks off before its end")
        if self.findings["input_damaged"]:
            parts.append("the input's compressed data is damaged (CRC mismatch)")
        return " and ".join(parts)

    def not_a_trace(self) -> str | None:
        """Why the input is not a TORCH_TRACE log when no line of it held a record, else None.

        A file that is not a trace (a text file, a binary) would otherwise build an empty
        report that looks clean; a damaged trace with some records left still builds.
        """
        if any(self.outcomes[outcome] for outcome in RECORD_OUTCOMES):
            return None
        broken = [s.detail for s in self.samples if s.reason in INPUT_FINDINGS]
        if broken:
            detail = broken[0].removesuffix(SHOWS_WHAT_CAME_BEFORE)
            return f"the data breaks off before any record ({detail})"
        if self.first_line is None:
            return "not a TORCH_TRACE log: it holds only blank lines"
        return (
            "not a TORCH_TRACE log: no trace record (a glog header, then a JSON object) could "
            f"be read from it; it starts with {self.first_line}"
        )

    @property
    def is_clean(self) -> bool:
        """True when nothing was skipped, no payload was damaged and the input was whole (what
        --strict checks)."""
        return (
            self.skipped_lines == 0
            and not self.findings["md5_mismatch"]
            and not any(self.findings[reason] for reason in INPUT_FINDINGS)
        )


def shorten_line(raw: bytes) -> str:
    """A line quoted for a message: control characters and undecodable bytes escaped, cut."""
    shown: list[str] = []
    length = 0
    for char in raw[: FIRST_LINE_CHARS * 4].decode("utf-8", "surrogateescape"):
        if "\udc80" <= char <= "\udcff":  # an undecodable byte, kept whole as one escape
            token = f"\\x{ord(char) - 0xDC00:02x}"
        else:
            token = char if char.isprintable() else repr(char)[1:-1]
        length += len(token)
        if length > FIRST_LINE_CHARS:  # cut between characters, never inside an escape
            shown.append("…")
            break
        shown.append(token)
    return '"' + "".join(shown) + '"'


def count_text(number: int, noun: str) -> str:
    """``1 line``, ``2,048 lines``."""
    return f"{number:,} {noun}{'' if number == 1 else 's'}"
