"""An attempt's timeline (sessions/output/timeline.py) as inline SVG, for the HTML report.

Time runs across, from the scenario's start (0) to its end; one row per process of the client's
tree and one per server. Spans are bars (an invocation's band, a process alive, a busy stretch
on the CPU, a server's connection); marks are shapes, each kind its own shape and colour (never
colour alone: an endpoint connect is a blue circle, any other connect a magenta diamond). Every
mark and span carries a <title> (a tooltip: its time and label); labels and row names are client
text, escaped (sessions/output/escape.py). Nothing is fetched: no fonts, no images, no links.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from sessions.output.escape import html as esc
from sessions.output.escape import visible
from sessions.output.timeline import round_step

if TYPE_CHECKING:
    from sessions.output.timeline import Mark, Span, Timeline

WIDTH, LABEL_W, RIGHT, AXIS_H, ROW_H = 960, 180, 12, 22, 22
PLOT_W = WIDTH - LABEL_W - RIGHT

# kind -> (colour, share of the row's height, what the legend calls it)
SPANS = {
    "invocation": ("#eaeef2", 1.0, "invocation"),
    "alive": ("#8c959f", 0.22, "process alive"),
    "busy": ("#fb8500", 0.5, "busy on the CPU"),
    "connection": ("#54aeff", 0.5, "server connection"),
}
# kind -> (shape, colour, what the legend calls it)
MARKS = {
    "invocation-start": ("tick", "#57606a", "invocation starts"),
    "invocation-end": ("tick", "#24292f", "invocation ends"),
    "exec": ("circle", "#2a9d8f", "exec"),
    "exit": ("square", "#24292f", "exit"),
    "connect-endpoint": ("circle", "#0969da", "connect to the endpoint"),
    "connect-other": ("diamond", "#bf3989", "connect elsewhere"),
    "start": ("triangle", "#0550ae", "transfer starts"),
    "commit": ("diamond", "#1a7f37", "commit"),
    "reject": ("cross", "#cf222e", "reject"),
    "fault": ("star", "#e36209", "fault fired"),
    "claim": ("square", "#8250df", "client claim"),
    "signal": ("triangle", "#bf3989", "signal sent"),
    "truncate": ("cross", "#9a6700", "file truncated"),
    "server-start": ("tick", "#1a7f37", "server process starts"),
    "server-exit": ("cross", "#24292f", "server process ends"),
}
_OTHER = ("circle", "#6e7781", None)


def _shape(shape: str, x: float, y: float, colour: str, r: float = 5.0) -> str:
    """One mark's outline at (x, y)."""
    fill = f'fill="{colour}"'
    if shape == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" {fill}/>'
    if shape == "square":
        return (f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r:.1f}" '
                f'height="{2 * r:.1f}" {fill}/>')
    if shape == "tick":
        return (f'<line x1="{x:.1f}" y1="{y - 2 * r:.1f}" x2="{x:.1f}" y2="{y + 2 * r:.1f}" '
                f'stroke="{colour}" stroke-width="2"/>')
    if shape == "cross":
        return (f'<path d="M{x - r:.1f} {y - r:.1f}L{x + r:.1f} {y + r:.1f}M{x - r:.1f} '
                f'{y + r:.1f}L{x + r:.1f} {y - r:.1f}" stroke="{colour}" stroke-width="2.5"/>')
    points = {"diamond": [(0, -1.2), (1.2, 0), (0, 1.2), (-1.2, 0)],
              "triangle": [(-0.9, -1.1), (1.2, 0), (-0.9, 1.1)],
              "star": [(math.sin(a * math.pi / 5) * (1.4 if a % 2 == 0 else 0.6),
                        -math.cos(a * math.pi / 5) * (1.4 if a % 2 == 0 else 0.6))
                       for a in range(10)]}[shape]
    return ('<polygon points="' + " ".join(f"{x + dx * r:.1f},{y + dy * r:.1f}"
                                         for dx, dy in points) + f'" {fill}/>')


def _ms(t_ns: int, digits: int = 1) -> str:
    ms = t_ns / 1e6
    return f"{ms:,.{digits}f} ms" if ms < 10_000 else f"{ms / 1000:,.{digits + 1}f} s"


def _step(end_ns: int) -> int:
    """A round tick interval giving at most 8 ticks (at least 1 ns)."""
    return int(round_step(max(end_ns / 8, 1)))


class _Scale:
    def __init__(self, tl: Timeline):
        times = [m.t_ns for m in tl.marks] + [s.end_ns for s in tl.spans]
        self.end = max([tl.end_ns, 1, *times])

    def x(self, t_ns: int) -> float:
        return LABEL_W + PLOT_W * min(max(t_ns, 0), self.end) / self.end


def _axis(scale: _Scale, height: float) -> list[str]:
    out = []
    step = _step(scale.end)
    for t in range(0, scale.end + 1, step):
        x = scale.x(t)
        out.append(f'<line x1="{x:.1f}" y1="{AXIS_H - 4}" x2="{x:.1f}" y2="{height:.1f}" '
                   'stroke="#d8dee4" stroke-width="1"/>')
        out.append(f'<text x="{x:.1f}" y="{AXIS_H - 8}" text-anchor="middle" '
                   f'class="tick">{_ms(t, 0 if step >= 1_000_000 else 1)}</text>')
    return out


def _span(s: Span, y: float, scale: _Scale) -> str:
    colour, share, _ = SPANS.get(s.kind, ("#afb8c1", 0.4, None))
    h = ROW_H * share * (0.9 if share == 1.0 else 1)
    x0, x1 = scale.x(s.start_ns), scale.x(s.end_ns)
    tip = f"{_ms(s.start_ns)} – {_ms(s.end_ns)} · {s.kind}: {s.label}"
    return (f'<g class="span" data-kind="{esc(s.kind)}"><title>{esc(tip)}</title>'
            f'<rect x="{x0:.1f}" y="{y - h / 2:.1f}" width="{max(x1 - x0, 1.5):.1f}" '
            f'height="{h:.1f}" rx="2" fill="{colour}"/></g>')


def _mark(m: Mark, y: float, scale: _Scale) -> str:
    shape, colour, _ = MARKS.get(m.kind, _OTHER)
    tip = f"{_ms(m.t_ns)} · {m.kind}: {m.label}"
    return (f'<g class="mark" data-kind="{esc(m.kind)}"><title>{esc(tip)}</title>'
            f'{_shape(shape, scale.x(m.t_ns), y, colour)}</g>')


def svg(tl: Timeline) -> str:
    """The timeline as one <svg> element (empty rows: a sentence instead)."""
    if not tl.rows:
        return '<p class="note">No timeline: nothing was recorded for this attempt.</p>'
    scale = _Scale(tl)
    height = AXIS_H + ROW_H * len(tl.rows) + 4
    row_y = {row: AXIS_H + ROW_H * (i + 0.5) for i, row in enumerate(tl.rows)}
    out = [f'<svg class="timeline" viewBox="0 0 {WIDTH} {height:.0f}" role="img" '
           f'aria-label="{esc(f"timeline of {tl.scenario}")}">', *_axis(scale, height)]
    for i, row in enumerate(tl.rows):
        y = row_y[row]
        if i % 2:
            out.append(f'<rect x="0" y="{y - ROW_H / 2:.1f}" width="{WIDTH}" height="{ROW_H}" '
                       'fill="#f6f8fa"/>')
        out.append(f'<text x="4" y="{y + 4:.1f}" class="row"><title>{esc(row)}</title>'
                   f'{esc(visible(row, 26))}</text>')
    out += [_span(s, row_y[s.row], scale)   # an invocation's band under the other bars
            for s in sorted(tl.spans, key=lambda s: s.kind != "invocation") if s.row in row_y]
    out += [_mark(m, row_y[m.row], scale) for m in sorted(tl.marks, key=lambda m: m.t_ns)
            if m.row in row_y]
    out.append("</svg>")
    return "\n".join(out)


def legend(tl: Timeline) -> str:
    """What each shape and bar means: the kinds this timeline shows, in a fixed order."""
    items = []
    spans, marks = {s.kind for s in tl.spans}, {m.kind for m in tl.marks}
    for kind, (colour, _, word) in SPANS.items():
        if kind in spans:
            items.append(f'<li><svg viewBox="0 0 16 12" class="key"><rect x="1" y="3" '
                         f'width="14" height="6" rx="2" fill="{colour}"/></svg>{word}</li>')
    for kind, (shape, colour, word) in MARKS.items():
        if kind in marks:
            items.append(f'<li><svg viewBox="0 0 16 16" class="key">'
                         f'{_shape(shape, 8, 8, colour, 4.5)}</svg>{word}</li>')
    items += [f'<li><svg viewBox="0 0 16 16" class="key">{_shape("circle", 8, 8, _OTHER[1], 4.5)}'
              f'</svg>{esc(kind)}</li>' for kind in sorted(marks - set(MARKS))]
    return f'<ul class="legend">{"".join(items)}</ul>' if items else ""
