"""Material's search index with its entries on disk until the index is written.

Material's search plugin keeps one dict per page section until the build ends and then
serialises them all at once: for a report of thousands of compile ids that is the biggest
thing in memory by then (a 1 GB trace: 16,743 sections, 9.7 MB of objects, then the 4.2 MB
JSON text and its bytes on top). :class:`SpilledSearchIndex` writes each entry's JSON to a
file as the page is indexed and joins them when the index is written: the same bytes, the
same entries, in the same order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from material.plugins.search.plugin import SearchIndex

#: What Material's index ends with when it has no entries; the entries go in between.
_EMPTY_DOCS = '"docs":[]}'


class SpilledSearchIndex(SearchIndex):
    """A :class:`SearchIndex` whose entries wait in ``spill``, already joined as in the index."""

    def __init__(self, spill: Path, **config: Any) -> None:
        super().__init__(**config)
        self._spill_path = spill
        self._spill = open(spill, "w", encoding="utf-8")  # noqa: SIM115 - closed when written
        self.entry_count = 0

    def add_entry_from_context(self, page: Any) -> None:
        """Index the page as Material does, then move its entries to the spill file."""
        super().add_entry_from_context(page)
        for entry in self.entries:
            if self.entry_count:
                self._spill.write(",")
            # the encoding Material gives the whole index (compact, ASCII, str() for the rest)
            self._spill.write(json.dumps(entry, separators=(",", ":"), default=str))
            self.entry_count += 1
        self.entries = []

    def generate_search_index(self, prev: Any) -> str:
        """The index Material would write: its own text around the spilled entries."""
        self.entries = []
        empty = super().generate_search_index(None)
        if not empty.endswith(_EMPTY_DOCS):
            raise RuntimeError(f"unexpected search index layout from Material: {empty[-80:]!r}")
        self.close()
        docs = self._spill_path.read_text(encoding="utf-8")
        return f'{empty[: -len(_EMPTY_DOCS)]}"docs":[{docs}]}}'

    def close(self) -> None:
        self._spill.close()
