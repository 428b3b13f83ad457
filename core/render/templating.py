"""The Jinja2 environment for every template tlsite renders (HTML autoescaped)."""

from __future__ import annotations

from functools import cache

import jinja2


@cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("tlsite.core.render", "templates"),
        autoescape=jinja2.select_autoescape(["html"], default_for_string=False),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )


def render(template: str, **context: object) -> str:
    return environment().get_template(template).render(**context)
