"""Compile ids: the ``[frame/frame_compile_id_attempt]`` labels every trace record carries.

The display string and folder name follow tlparse exactly, because users and scripts already
know them (``[0/0_1]``, ``-_0_0_1``). Normalisation rules are kept here, in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The envelope keys of a compile id, in the order of its fields.
FIELDS = ("compiled_autograd_id", "frame_id", "frame_compile_id", "attempt")


@dataclass(frozen=True, order=True)
class CompileId:
    """The four optional integers that name one compilation attempt."""

    compiled_autograd_id: int | None = None
    frame_id: int | None = None
    frame_compile_id: int | None = None
    attempt: int | None = None

    @classmethod
    def from_envelope(cls, envelope: dict[str, Any]) -> CompileId | None:
        """Read the id from an envelope; ``None`` when a field is present but malformed."""
        values: list[int | None] = []
        for name in FIELDS:
            value = envelope.get(name)
            if value is None:
                values.append(None)
            elif type(value) is int and value >= 0:
                values.append(value)
            else:
                return None
        return cls(*values)

    @property
    def display(self) -> str:
        """tlparse's label: ``[0/0]``, ``[0/0_1]``, ``[!0/-/-]``, ``[-/-]``."""
        ca = "" if self.compiled_autograd_id is None else f"!{self.compiled_autograd_id}/"
        frame = "-" if self.frame_id is None else str(self.frame_id)
        fcid = "-" if self.frame_compile_id is None else str(self.frame_compile_id)
        attempt = "" if not self.attempt else f"_{self.attempt}"
        return f"[{ca}{frame}/{fcid}{attempt}]"

    @property
    def dirname(self) -> str:
        """tlparse's folder name: ``CA_F_FC_A`` with ``-`` for a missing field."""
        return "_".join("-" if v is None else str(v) for v in self.fields())

    def fields(self) -> tuple[int | None, ...]:
        return (self.compiled_autograd_id, self.frame_id, self.frame_compile_id, self.attempt)

    @property
    def is_empty(self) -> bool:
        return all(v is None for v in self.fields())

    def directory_key(self) -> CompileId:
        """Key of the compile-id entry: runtime records without an attempt join attempt 0."""
        if self.frame_compile_id is not None and self.attempt is None:
            return CompileId(self.compiled_autograd_id, self.frame_id, self.frame_compile_id, 0)
        return self

    def frame_key(self) -> CompileId:
        """Key shared by all attempts of one compile (tlparse's metrics index key)."""
        if self.frame_compile_id is not None:
            return CompileId(self.compiled_autograd_id, self.frame_id, self.frame_compile_id, 0)
        return self

    @property
    def short(self) -> str:
        """The display string without brackets, e.g. ``0/1_2``."""
        return self.display[1:-1]


def parse_compile_id_string(text: str) -> CompileId | None:
    """Parse ``"0/1"``, ``"[0/1_2]"`` or ``"!0/3/1"`` (torch's ``CompileId.__str__``)."""
    text = text.strip().strip("[]")
    ca: int | None = None
    if text.startswith("!"):
        head, _, text = text[1:].partition("/")
        if not head.isdigit():
            return None
        ca = int(head)
        if not text:
            return CompileId(ca)
    frame, sep, rest = text.partition("/")
    if not sep:
        return None
    fcid, _, attempt = rest.partition("_")

    def num(part: str) -> int | bool | None:
        if part in ("-", ""):
            return None
        return int(part) if part.isdigit() else False

    values = [num(frame), num(fcid), num(attempt) if attempt else None]
    if any(v is False for v in values):
        return None
    return CompileId(ca, *values)  # type: ignore[arg-type]
