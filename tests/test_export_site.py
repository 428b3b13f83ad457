"""The draft-export report of a built site: tlparse's export tests 8-9, our torch 2.13 fixture
(whose records tlparse 0.4.3 rejects), and export overviews that lead with the report.

Sites are built once per trace per session. What each page must show comes from
``tests/fixtures/README.md`` (the fixture's four failures) and from the export analysis
(``export_failures``), which ``test_export_report.py`` checks against tlparse.
"""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from browser import SiteOpener
from corpus import FIXTURE_TRACES, tlparse_input, trace_lines

from tlsite.cli import build
from tlsite.core import load
from tlsite.core.analysis.export_report import export_failures

EXPORT_DRAFT = FIXTURE_TRACES / "export_draft" / "export_draft.log"
#: tests/fixtures/README.md: what torch 2.13's draft_export logged for the fixture.
DRAFT_FAILURES = [
    ("Guard Evaluated", "s77 > 4"),
    ("Data Dependent Error", "u0 > 2"),
    ("Missing Fake Kernel", "torch.ops.tlsite.scale_rows.default"),
    ("Mismatched Fake Kernel", "torch.ops.tlsite.pad_rows.default"),
]
HOSTILE = "<img src=x onerror=alert(1)>[click](javascript:alert(2)){ onclick=alert(3) }"


def export_traces() -> list[Path]:
    return [tlparse_input("export.log"), tlparse_input("export_guard_added.log"), EXPORT_DRAFT]


def article(page_html: str) -> str:
    match = re.search(r"(?s)<article\b.*?</article>", page_html)
    assert match is not None
    return match.group(0)


def text_of(fragment: str) -> str:
    fragment = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", fragment)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def failure_rows(page_html: str) -> list[list[str]]:
    """The report's failures table: [#, type, reason, where] texts per row."""
    table = re.search(r"(?s)<table>.*?</table>", article(page_html))
    assert table is not None, "the report has no failures table"
    rows = re.findall(r"(?s)<tr>(.*?)</tr>", table.group(0))
    return [[text_of(c) for c in re.findall(r"(?s)<td\b[^>]*>(.*?)</td>", r)] for r in rows[1:]]


def section(page_html: str, anchor: str) -> str:
    """The HTML from the heading with ``id=anchor`` to the next h2."""
    start = page_html.index(f'id="{anchor}"')
    end = page_html.find("<h2", start)
    return page_html[start : end if end >= 0 else len(page_html)]


# -- tlparse tests 8 and 9, and the torch 2.13 fixture ------------------------------------------
@pytest.mark.parametrize("log", export_traces(), ids=lambda p: p.name)
def test_report_lists_every_failure_the_trace_logged(log: Path, site_of: Any) -> None:
    page = (site_of(log) / "export_report.html").read_text(encoding="utf-8")
    rows = failure_rows(page)
    failures = export_failures(load(log))
    assert [row[1] for row in rows] == [f.type for f in failures]
    for row, failure in zip(rows, failures, strict=True):
        subject = failure.expr if failure.is_guard else f"torch.ops.{failure.op}"
        assert subject and subject in row[2], (row, subject)
        body = text_of(section(page, f"failure-{row[0]}"))
        assert subject in body
        if failure.source_line:
            assert " ".join(failure.source_line.split()) in body  # the user's line of code
    assert "issue" in text_of(article(page)).lower()


def test_export_log_data_dependent_error_shows_its_tree_locals_and_stacks(site_of: Any) -> None:
    """tlparse test 8: the tree goes from the guard down to the unbacked symbol u0."""
    page = (site_of(tlparse_input("export.log")) / "export_report.html").read_text(encoding="utf-8")
    rows = failure_rows(page)
    assert [r[1] for r in rows] == ["Data Dependent Error"]
    assert "Eq((((-u0)//3)) + 5, 0)" in rows[0][2] and "False" in rows[0][2]
    body = section(page, "failure-1")
    tree = re.search(r'(?s)<ul class="tlsite-expr-tree">.*</ul>', body)
    assert tree is not None
    depth = max(m.count("<ul") for m in re.findall(r"(?s)(?:<ul>)+", tree.group(0)))
    assert tree.group(0).count("<li>") == 9  # eq … neg, then the symbol
    assert "u0</code> unbacked symbol" in tree.group(0) and depth >= 1
    text = text_of(body)
    assert "return z[:a]" in text  # the user's line
    assert "Locals" in text and "(((-u0)//3)) + 5" in text
    assert "L['args'][0][1].size()[0]" in text  # symbol s0's source
    assert "User stack" in text and "Framework stack" in text


def test_export_guard_added_log_shows_the_guard(site_of: Any) -> None:
    """tlparse test 9."""
    page = (site_of(tlparse_input("export_guard_added.log")) / "export_report.html").read_text(
        encoding="utf-8"
    )
    rows = failure_rows(page)
    assert [r[1] for r in rows] == ["Guard Evaluated"]
    assert "Eq(s0, 3)" in rows[0][2]
    assert "assert a.shape[0] == 3" in text_of(section(page, "failure-1"))


def test_torch_213_fixture_shows_the_issues_torch_reports_and_the_guard(site_of: Any) -> None:
    """torch 2.13 logs ``frame_locals`` with lists (``k: ['u0']``); tlparse 0.4.3 rejects them.
    torch's own report lists 3 issues; the evaluated guard is listed apart (torch lists a
    guard only when the export was retried after a constraint violation)."""
    site = site_of(EXPORT_DRAFT)
    page = (site / "export_report.html").read_text(encoding="utf-8")
    rows = failure_rows(page)
    issues = DRAFT_FAILURES[1:]
    assert [(r[1], next(s for _, s in issues if s in r[2])) for r in rows] == issues
    guards = text_of(section(page, "guards"))
    assert DRAFT_FAILURES[0][1] in guards and "retried" in guards
    dde = text_of(section(page, "failure-1"))
    assert "['u0']" in dde  # the list-valued local tlparse cannot read
    assert "u0 unbacked symbol" in dde and "export_draft.py:45 in forward" in dde
    mismatch = text_of(section(page, "failure-3"))
    assert "mismatch between fake value u1 and real value 5" in mismatch
    assert "How to write a fake kernel" in mismatch
    program = section(page, "exported-program")
    assert "ExportedProgram" in text_of(program)
    raw = re.search(r'href="([^"]*exported_program_\d+\.txt)"', program)
    assert raw is not None and (site / html.unescape(raw.group(1))).is_file()


@pytest.mark.parametrize("log", export_traces(), ids=lambda p: p.name)
def test_export_overview_leads_with_the_report(log: Path, site_of: Any) -> None:
    site = site_of(log)
    overview = (site / "index.html").read_text(encoding="utf-8")
    body = article(overview)
    lead = body[: body.index('id="at-a-glance"')]  # before the usual overview
    failures = export_failures(load(log))
    assert 'href="export_report.html"' in lead
    for number, failure in enumerate(failures, 1):
        assert f'href="export_report.html#failure-{number}"' in lead
        assert failure.type in text_of(lead)
    report = (site / "export_report.html").read_text(encoding="utf-8")
    for number in range(1, len(failures) + 1):
        assert f'id="failure-{number}"' in report
    # the report is the first entry of the navigation
    nav = overview[overview.index("md-nav--primary") : overview.index("<article")]
    first = re.search(r'<a href="([^"]+)" class="md-nav__link', nav)
    assert first is not None and first.group(1) == "export_report.html"


def test_ordinary_traces_have_no_export_report(site_of: Any) -> None:
    site = site_of(tlparse_input("simple.log"))
    assert not (site / "export_report.html").exists()
    assert "export_report.html" not in (site / "index.html").read_text(encoding="utf-8")


# -- hostile records ----------------------------------------------------------------------------
def hostile_export_trace(tmp_path: Path) -> Path:
    frame = {"line": 3, "name": "forward", "filename": "model.py", "loc": HOSTILE}
    text = trace_lines({"missing_fake_kernel": {"op": HOSTILE}})
    text += trace_lines({"mismatched_fake_kernel": {"op": "ns.op", "reason": HOSTILE}})
    text += trace_lines(
        {
            "expression_created": {
                "method": HOSTILE,
                "result": HOSTILE,
                "result_id": 1,
                "arguments": [HOSTILE],
                "argument_ids": [],
                "user_stack": [frame],
            }
        }
    )
    text += trace_lines(
        {
            "guard_added": {
                "expr": HOSTILE,
                "prefix": "eval",
                "expr_node_id": 1,
                "frame_locals": {"locals": {HOSTILE: [HOSTILE]}, "loc": HOSTILE},
                "user_stack": [frame],
                "stack": [frame],
            }
        }
    )
    text += trace_lines({"exported_program": {}}, f"class M:  # {HOSTILE}")
    log = tmp_path / "hostile_export.log"
    log.write_text(text, encoding="utf-8")
    return log


class Tags(HTMLParser):
    """Every tag name and attribute of an HTML fragment."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.names: set[str] = set()
        self.attributes: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.names.add(tag)
        self.attributes.extend(attrs)


def test_trace_text_cannot_become_markup(tmp_path: Path, open_site: SiteOpener) -> None:
    log = hostile_export_trace(tmp_path)
    site = tmp_path / "site"
    build(str(log), site, make_zip=False)
    for name in ("export_report.html", "index.html"):
        tags = Tags()
        tags.feed(article((site / name).read_text(encoding="utf-8")))
        assert "img" not in tags.names and "script" not in tags.names, name
        assert [a for a in tags.attributes if a[0].startswith("on")] == [], name
        assert [a for a in tags.attributes if "javascript" in (a[1] or "")] == [], name
    page = (site / "export_report.html").read_text(encoding="utf-8")
    assert len(failure_rows(page)) == 2  # the guard is not an issue torch would list
    assert HOSTILE in text_of(section(page, "guards"))  # shown, literally
    opened, report = open_site(site / "export_report.html")
    opened.wait_for_load_state("load")
    assert report.dialogs == [] and report.console_errors == []
    assert json.dumps(report.outside_requests) == "[]"


# -- in the browser -----------------------------------------------------------------------------
def test_export_pages_open_offline_without_errors(site_of: Any, open_site: SiteOpener) -> None:
    site = site_of(EXPORT_DRAFT)
    for name in ("index.html", "export_report.html"):
        page, report = open_site(site / name)
        assert page.locator("h1").first.text_content()
        assert report.outside_requests == []
        assert report.console_errors == []
    page, _ = open_site(site / "index.html")
    page.click('a[href="export_report.html#failure-1"]')
    page.wait_for_url(re.compile(r"export_report\.html#failure-1$"))
    assert "Data Dependent Error" in (page.locator("#failure-1").text_content() or "")
