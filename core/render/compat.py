"""Write tlparse-compatible machine outputs, so scripts written for tlparse keep working.

Every artifact file at tlparse's relative path and number, ``payloads/<md5>.txt``,
``raw.jsonl``, ``compile_directory.json``, ``chromium_events.json`` and ``raw.log``.
Pages tlparse rendered as HTML (metrics, guards, output code, dump files) are written as small
self-contained HTML pages at the same paths, linking to the full report page.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..analysis.provenance import fx_cache_hit_key, parse_kernel_stack_traces, shared_provenance
from ..analysis.views import guard_codes
from ..files_aside import FilesAside, write_text
from ..model import BODY_JSON, BODY_PAGE, BODY_PAYLOAD, CACHE_MARKS, Artifact, CompileUnit, Trace
from ..records import loads_bounded
from ..source import LogSource
from ..store import PayloadRef
from .templating import render


def pretty_json(text: str) -> str:
    """tlparse's JSON artifact body: 2-space indent, sorted keys; raw text when invalid."""
    try:
        value = loads_bounded(text)
    except ValueError:
        return text
    if not _has_exponent_float(value):
        return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    return "".join(_pretty(value, 0))


def _has_exponent_float(value: Any) -> bool:
    """Whether a float in ``value`` prints differently in Python and in Rust's serde_json: only
    those Python writes with an exponent (``7.4752e-05``, serde_json ``0.000074752``)."""
    if isinstance(value, float):
        return "e" in repr(value)
    if isinstance(value, dict):
        return any(_has_exponent_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_exponent_float(v) for v in value)
    return False


def serde_float(value: float) -> str:
    """A finite float as serde_json (ryu) writes it: the same shortest digits as Python's
    ``repr``, but plain from 1e-5 up to 1e16 and ``1.5e-7``/``1e17`` outside."""
    text = repr(abs(value))
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0.0"
    mantissa, _, exp = text.partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    point = len(whole) + int(exp or 0)  # value = 0.<digits> * 10**point
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0") or "0"
    last = point - len(digits)  # the power of ten of the last digit
    if last >= 0 and point <= 16:
        return f"{sign}{digits}{'0' * last}.0"
    if 0 < point <= 16:
        return f"{sign}{digits[:point]}.{digits[point:]}"
    if -5 < point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if len(digits) == 1:
        return f"{sign}{digits}e{point - 1}"
    return f"{sign}{digits[0]}.{digits[1:]}e{point - 1}"


def _pretty(value: Any, depth: int) -> Iterator[str]:
    """``json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)`` with floats written
    by :func:`serde_float` (depth is bounded: the value came from :func:`loads_bounded`)."""
    pad = "  " * (depth + 1)
    if isinstance(value, float) and math.isfinite(value):
        yield serde_float(value)
    elif isinstance(value, dict) and value:
        yield "{"
        for index, key in enumerate(sorted(value)):
            yield ("," if index else "") + "\n" + pad + json.dumps(key, ensure_ascii=False) + ": "
            yield from _pretty(value[key], depth + 1)
        yield "\n" + "  " * depth + "}"
    elif isinstance(value, list) and value:
        yield "["
        for index, item in enumerate(value):
            yield ("," if index else "") + "\n" + pad
            yield from _pretty(item, depth + 1)
        yield "\n" + "  " * depth + "]"
    else:
        yield json.dumps(value, ensure_ascii=False)


def unit_page_href(unit: CompileUnit, *, depth: int) -> str:
    """Relative link from a file ``depth`` folders deep to the unit's report page."""
    return "../" * depth + f"{unit.dirname}/index.html"


@dataclass
class CompatWriter:
    """Writes the compatible outputs of one trace into ``out``."""

    trace: Trace
    out: Path
    raw_log: Path | LogSource | Callable[[], Iterator[bytes]] | None = None
    #: called with each file's path as it is written; without it, the paths are kept in
    #: ``written`` (a path per artifact: a compile may have hundreds of thousands)
    on_written: Callable[[str], None] | None = None
    written: list[str] = field(default_factory=list)
    #: a helper process that writes the files of artifacts, loose payloads and provenance
    #: notes (a storm's thousands of small files) while the build goes on: then the files
    #: written are told to ``on_written`` by :meth:`finish`, once they are all on disk
    aside: FilesAside | None = None
    #: folders made so far (a storm's compile folders take many files each)
    _folders: set[str] = field(default_factory=set, init=False, repr=False)

    def _wrote(self, path: str) -> None:
        if self.on_written is None or self.aside is not None:
            self.written.append(path)
        else:
            self.on_written(path)

    def written_aside(self) -> bool:
        """Whether the files handed to the helper are all on disk (:meth:`finish` would not
        wait for it); the helper is told that no more files come."""
        if self.aside is None:
            return True
        self.aside.end()
        return self.aside.done()

    def finish(self) -> None:
        """Wait for the files written aside, then tell ``on_written`` every file written."""
        if self.aside is None:
            return
        aside, self.aside = self.aside, None
        aside.finish()
        if self.on_written is not None:
            for path in self.written:
                self.on_written(path)
            self.written = []

    def _folder(self, folder: str) -> None:
        if folder not in self._folders:
            if self.aside is None:
                os.makedirs(folder, exist_ok=True)
            else:
                self.aside.folder(folder)
            self._folders.add(folder)

    def _copy(self, ref: PayloadRef, dest: str) -> None:
        if self.aside is None:
            self.trace.store.copy_to(ref, dest)
        else:
            self.trace.store.flush()  # the helper reads the pack file
            self.aside.copy(dest, ref.offset, ref.size)

    def _text(self, dest: str, text: str) -> None:
        if self.aside is None:
            write_text(dest, text)
        else:
            self.aside.text(dest, text)

    def write_all(self) -> list[str]:
        self.out.mkdir(parents=True, exist_ok=True)
        for unit in self.trace.units.values():
            for artifact in unit.artifacts:
                self._write_artifact(unit, artifact)
        if self.trace.loose_payloads:
            self._folder(os.path.join(self.out, "payloads"))
        for key, ref in self.trace.loose_payloads.items():
            self._copy(ref, os.path.join(self.out, "payloads", f"{key}.txt"))
            self._wrote(f"payloads/{key}.txt")
        self._write_provenance_aliases()
        self._write_raw_jsonl()
        self._write_compile_directory()
        self._write_chromium_events()
        if isinstance(self.raw_log, Path):
            shutil.copyfile(self.raw_log, self.out / "raw.log")  # in-kernel copy where it can
            self._wrote("raw.log")
        elif isinstance(self.raw_log, LogSource):
            self.raw_log.copy_to(self.out / "raw.log")  # the bytes that were parsed
            self._wrote("raw.log")
        elif self.raw_log is not None:
            with open(self.out / "raw.log", "wb") as dest:
                for chunk in self.raw_log():
                    dest.write(chunk)
            self._wrote("raw.log")
        return self.written

    # -- artifacts --------------------------------------------------------------------------
    def _write_artifact(self, unit: CompileUnit, artifact: Artifact) -> None:
        if artifact.path is None:
            return
        # paths as text: a Path apiece interned the name of every one of thousands of files
        dest = os.path.join(self.out, artifact.path)
        self._folder(os.path.dirname(dest))
        if artifact.body == BODY_PAYLOAD and artifact.payload is not None:
            self._copy(artifact.payload, dest)
        elif artifact.body == BODY_PAYLOAD:
            self._text(dest, "")
        elif artifact.body == BODY_JSON and artifact.payload is not None:
            self._copy(self.trace.store.derived(artifact.payload, pretty_json), dest)
        elif artifact.body == BODY_JSON:
            self._text(dest, pretty_json(""))
        elif artifact.body == BODY_PAGE:
            self._text(dest, self._page(unit, artifact))
        self._wrote(artifact.path)
        if artifact.readable_path:
            readable = self._readable_page(unit, artifact)
            self._text(os.path.join(self.out, artifact.readable_path), readable)
            self._wrote(artifact.readable_path)

    @staticmethod
    def _context(unit: CompileUnit, artifact: Artifact, path: str, title: str) -> dict[str, Any]:
        """What every compatibility page shows: a title and the way back to the report."""
        depth = path.count("/")
        return {
            "title": title,
            "report_href": unit_page_href(unit, depth=depth) + f"#artifact-{artifact.number}",
            "back_text": f"{unit.display} in the report",
            "note": None,
            "rows": None,
            "items": None,
            "sections": [],
            "numbered_lines": None,
            "code": None,
            "raw_href": None,
            "raw_text": None,
        }

    def _page(self, unit: CompileUnit, artifact: Artifact) -> str:
        path = artifact.path or ""
        depth = path.count("/")
        context = self._context(unit, artifact, path, f"{artifact.name} {unit.display}")
        payload = self.trace.read_payload(artifact.payload) if artifact.payload else ""
        if artifact.kind == "dynamo_guards":
            context["title"] = f"Guards {unit.display}"
            context["items"] = guard_codes(payload)
        elif is_metrics_page(artifact):
            # every field is in a table on the report page and in raw.jsonl; the config dumps
            # in them made a second copy here the biggest of these pages
            context["title"] = f"Compilation metrics {unit.display}"
            context["note"] = (
                "Every field of this record is in the Compilation metrics table of the report "
                f"page (above) and in raw.jsonl (line {artifact.line} of the log)."
            )
        elif artifact.kind == "dump_file":
            context["title"] = artifact.name
            context["numbered_lines"] = payload.split("\n")
        elif artifact.raw_file:
            # the code is shown highlighted in the report, and as text in payloads/: a third
            # copy here would only make the bundle bigger
            context["title"] = f"{artifact.filename} {unit.display}"
            context["note"] = "The generated code is on the report page above (highlighted)."
            context["raw_href"] = "../" * depth + artifact.raw_file
            context["raw_text"] = artifact.raw_file
        else:
            context["code"] = payload
        return render("compat_page.html", **context)

    def _readable_page(self, unit: CompileUnit, artifact: Artifact) -> str:
        text = self.trace.read_payload(artifact.payload) if artifact.payload else "{}"
        path = artifact.readable_path or ""
        context = self._context(unit, artifact, path, f"Kernel stack traces {unit.display}")
        context["sections"] = [
            {"heading": kernel, "blocks": traces}
            for kernel, traces in kernel_stack_traces(text).items()
        ]
        return render("compat_page.html", **context)

    def _write_provenance_aliases(self) -> None:
        """tlparse's ``provenance_tracking_<D>.html`` for a compile whose provenance page is an
        earlier compile's (the report builds that page once): a note linking to it."""
        same = shared_provenance(self.trace, any_folder=True)
        for unit in self.trace.units.values():
            first = same.get(id(unit))
            if first is None:
                continue
            path = f"provenance_tracking_{unit.dirname}.html"
            key = fx_cache_hit_key(self.trace, unit)
            why = f"an FX graph cache hit, key {key}" if key else "the same payloads"
            note = (
                f"{unit.display} logged the same graphs, generated code, node mapping and kernel "
                f"stack traces as {first.display} ({why}), so the report shows them once, on "
                f"{first.display}'s provenance page."
            )
            page = render(
                "compat_page.html",
                **{
                    **self._context(unit, unit.artifacts[0], path, f"Provenance {unit.display}"),
                    "report_href": f"provenance_tracking_{first.dirname}.html",
                    "back_text": f"Provenance {first.display}",
                    "note": note,
                },
            )
            self._text(os.path.join(self.out, path), page)
            self._wrote(path)

    # -- whole-trace files ------------------------------------------------------------------
    def _write_raw_jsonl(self) -> None:
        year = f"{self.trace.year or 1970:04d}-"
        with open(self.out / "raw.jsonl", "w", encoding="utf-8") as dest:
            table = {"string_table": self.trace.strings.as_list()}
            dest.write(json.dumps(table, ensure_ascii=False, separators=(",", ":")) + "\n")
            with open(self.trace.raw_jsonl_path, encoding="utf-8") as spill:
                # every line has one placeholder year, in our own key: replace in big batches
                while batch := spill.readlines(1 << 20):
                    text = "".join(batch)
                    dest.write(text.replace('"timestamp": "0000-', f'"timestamp": "{year}'))
        self._wrote("raw.jsonl")

    def _write_chromium_events(self) -> None:
        with open(self.out / "chromium_events.json", "w", encoding="utf-8") as dest:
            dest.write("[")
            first = True
            with open(self.trace.chromium_path, encoding="utf-8") as spill:
                for line in spill:
                    dest.write("\n  " if first else ",\n  ")
                    dest.write(line.rstrip("\n"))
                    first = False
            dest.write("\n]\n" if not first else "]\n")
        self._wrote("chromium_events.json")

    def _write_compile_directory(self) -> None:
        """``compile_directory.json``, one artifact at a time.

        The text ``json.dumps(directory, indent=2, sort_keys=True)`` gives (tlparse's layout),
        without holding the whole directory, or one compile's part of it: a dict per artifact,
        tens of MB for a 1 GB trace or a compile of 100,000 artifacts.
        """
        units: dict[str, list[CompileUnit]] = {}
        for unit in self.trace.units.values():
            units.setdefault(unit.key, []).append(unit)
        with open(self.out / "compile_directory.json", "w", encoding="utf-8") as dest:
            dest.write("{" if units else "{}")
            for index, key in enumerate(sorted(units)):
                dest.write(",\n  " if index else "\n  ")
                dest.write(f'{json.dumps(key, ensure_ascii=False)}: {{\n    "artifacts": [')
                count = 0
                for unit in units[key]:
                    for entry in _directory_entries(unit):  # one at a time: a compile may
                        value = _indented_json(entry)
                        dest.write(",\n      " if count else "\n      ")  # have 100,000s
                        dest.write(value.replace("\n", "\n      "))
                        count += 1
                dest.write("\n    ]\n  }" if count else "]\n  }")
            dest.write("\n}\n" if units else "\n")
        self._wrote("compile_directory.json")


_json_value = json.JSONEncoder(ensure_ascii=False).encode


def _indented_json(entry: dict[str, Any]) -> str:
    """``json.dumps(entry, indent=2, sort_keys=True, ensure_ascii=False)`` of a dict of
    plain values: ``indent`` takes json's Python encoder, which was most of the time a storm's
    directory took to write. (:func:`_pretty` is the general form, nested values and floats
    written as tlparse does; it is slower than ``json.dumps`` for one flat entry.)"""
    if not entry:
        return "{}"
    items = ",\n  ".join(f"{_json_value(key)}: {_json_value(entry[key])}" for key in sorted(entry))
    return f"{{\n  {items}\n}}"


def _directory_entries(unit: CompileUnit) -> Iterator[dict[str, Any]]:
    """The ``compile_directory.json`` entries of one compile id's outputs."""
    for artifact in unit.artifacts:
        yield {
            "name": artifact.name if artifact.is_link else artifact.filename,
            "number": artifact.listed_number or artifact.number,
            "readable_url": artifact.readable_path,
            "suffix": CACHE_MARKS.get(artifact.cache or "", ""),
            "url": artifact.url if artifact.is_link else artifact.path,
        }


def kernel_stack_traces(text: str) -> dict[str, list[str]]:
    """Kernel → readable stack traces, as tlparse's ``*_readable.html`` shows them."""
    return {k.kernel: k.traces for k in parse_kernel_stack_traces(text) or []}


def is_metrics_page(artifact: Artifact) -> bool:
    """Whether ``artifact``'s file is tlparse's page of a compilation metrics record: tlsite
    writes it as a pointer to the compile page, whose table shows every field of the record
    (so a zip bundle over the attachment limit may leave it out, as a copy)."""
    return artifact.body == BODY_PAGE and artifact.kind.endswith("compilation_metrics")
