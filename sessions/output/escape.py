"""Client text as each output shows it: data, never structure.

Text from a client (claims, process names, argv, paths) is carried as valid Unicode
(probes/text.py). Where it leaves, each renderer makes it inert for its reader:

    visible(s)   a terminal line (dashboard, progress): control characters (C0, DEL, C1), and
                 what XML or an encoder refuses, as visible escapes (`\\x1b`, `\\n`); no markup
                 is ever parsed from it (the dashboard draws it as Rich Text)
    markdown(s)  visible, and every Markdown metacharacter backslash-escaped: it cannot open a
                 heading, a table cell, a link or an HTML tag
    code(s)      visible, as a Markdown code span whose fence no backtick inside can close
    xml(s)       visible (so only characters XML allows remain); ElementTree escapes the rest
    html(s)      visible, then `&`, `<`, `>` and both quotes as character references: text in
                 an element or a quoted attribute of the HTML report, never a tag or an attribute

Evlab's own words pass through unchanged (they hold no control characters).
"""

import re
from html import escape as _html_escape

# What a terminal would act on or an encoder refuse: C0 controls, DEL and C1 controls,
# surrogates, and the two non-characters XML forbids; and the Unicode line and paragraph
# separators, which readers (Python's splitlines, editors, older JavaScript) take as newlines.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# CommonMark lets a backslash escape any ASCII punctuation; these are the ones that can open
# structure within a line (a heading, a table cell, a link or image, emphasis, code, HTML, an
# escape). Newlines are already visible escapes: client text never starts a line of its own.
_MARKDOWN = re.compile(r"([\\`*_\[\]#!|<>~])")


def _escape(m: re.Match) -> str:
    c = m.group()
    if c in _NAMED:
        return _NAMED[c]
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, limit: int | None = None) -> str:
    shown = _UNSAFE.sub(_escape, text)
    if limit is not None and len(shown) > limit:
        shown = shown[:limit - 1] + "…"
    return shown


def markdown(text: str) -> str:
    return _MARKDOWN.sub(r"\\\1", visible(text))


def code(text: str) -> str:
    shown = visible(text)
    fence = "`" * (max((len(run) for run in re.findall("`+", shown)), default=0) + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def xml(text: str) -> str:
    return visible(text)


def html(text: str) -> str:
    return _html_escape(visible(text), quote=True)
