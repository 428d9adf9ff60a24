"""Charts drawn on the server as SVG: done and failed per minute (stacked bars, failed hatched)
and queue depth over time (lines), each with a title and a text description for screen readers,
patterns as well as colours, so no series is told apart by colour alone, and their values written
on them (each bar's count above it, each line's last value at its end). They take the page's full
width (the viewBox scales)."""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape

W, H = 960, 200
LEFT, RIGHT, TOP, BOTTOM = 44, 12, 14, 26
DASHES = ("", "6 3", "2 3", "10 3 2 3", "1 2")


def _hhmm(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%H:%M")


def _scale(peak: int) -> int:
    for step in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000):
        if peak <= step * 4:
            return step * 4
    return peak


def _frame(ident: str, title: str, desc: str, top: int, start: int, end: int) -> list[str]:
    plot_h = H - TOP - BOTTOM
    out = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
        f'role="img" aria-labelledby="{ident}-t {ident}-d">',
        f'<title id="{ident}-t">{escape(title)}</title><desc id="{ident}-d">{escape(desc)}</desc>',
    ]
    for i in range(5):
        y = TOP + plot_h - plot_h * i // 4
        out.append(f'<line class="grid" x1="{LEFT}" x2="{W - RIGHT}" y1="{y}" y2="{y}"/>'
                   f'<text class="axis" x="{LEFT - 6}" y="{y + 4}" text-anchor="end">{top * i // 4:,}</text>')
    out.append(f'<text class="axis" x="{LEFT}" y="{H - 8}">{_hhmm(start)} UTC</text>'
               f'<text class="axis" x="{W - RIGHT}" y="{H - 8}" text-anchor="end">{_hhmm(end)} UTC</text>')
    return out


def bars_svg(ident: str, title: str, minutes: list[int], values: list[int], failed: list[int] | None = None) -> str:
    """Bars per minute (``minutes``: epoch ms of each bucket, oldest first): ``values`` (done) below,
    ``failed`` stacked on top and hatched; each bar's total written above it."""
    failed = failed or [0] * len(values)
    totals = [v + f for v, f in zip(values, failed, strict=True)]
    done_sum, failed_sum, peak = sum(values), sum(failed), max(totals, default=0)
    top = _scale(peak)
    desc = f"{done_sum:,} done and {failed_sum:,} failed in the last hour; at most {peak:,} in one minute" + (
        f"; last minute {values[-1]:,} done, {failed[-1]:,} failed" if values else "")
    out = _frame(ident, title, desc, top, minutes[0] if minutes else 0, minutes[-1] if minutes else 0)
    out.insert(2, f'<defs><pattern id="{ident}-hatch" width="5" height="5" patternUnits="userSpaceOnUse">'
                  '<rect width="5" height="5" fill="#fde8e8"/><path d="M0 5L5 0" stroke="#a4141b" stroke-width="1.5"/></pattern></defs>')
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM
    bw = plot_w / max(1, len(values))
    for i, (v, f) in enumerate(zip(values, failed, strict=True)):
        if not v + f:
            continue
        x, width = LEFT + i * bw + 1, max(1.0, bw - 2)
        h_done, h_failed = plot_h * v / top, plot_h * f / top
        base = TOP + plot_h
        label = f"{_hhmm(minutes[i])}: {v:,} done, {f:,} failed"
        if v:
            out.append(f'<rect class="bar" x="{x:.1f}" y="{base - max(1.0, h_done):.1f}" width="{width:.1f}" '
                       f'height="{max(1.0, h_done):.1f}"><title>{label}</title></rect>')
        if f:
            out.append(f'<rect class="bar failed" fill="url(#{ident}-hatch)" x="{x:.1f}" y="{base - h_done - max(1.0, h_failed):.1f}" '
                       f'width="{width:.1f}" height="{max(1.0, h_failed):.1f}"><title>{label}</title></rect>')
        y = base - h_done - h_failed - 3
        out.append(f'<text class="value" x="{x + width / 2:.1f}" y="{max(TOP - 2, y):.1f}" text-anchor="middle">{v + f:,}</text>')
    out.append("</svg>")
    return "".join(out)


def lines_svg(ident: str, title: str, samples: list[tuple[int, dict[str, int]]], window: tuple[int, int]) -> str:
    """One line per series over ``window`` (start, end in epoch ms); samples are (time, {series: value})."""
    names = sorted({n for _, d in samples for n in d})
    peak = max((v for _, d in samples for v in d.values()), default=0)
    top = _scale(peak)
    last = samples[-1][1] if samples else {}
    desc = ("no samples yet (the hub samples once a minute)" if not samples else
            "now: " + ", ".join(f"{n} {last.get(n, 0):,}" for n in names) + f"; highest {peak:,}")
    start, end = window
    out = _frame(ident, title, desc, top, start, end)
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM
    span = max(1, end - start)
    for k, name in enumerate(names):
        points = [(LEFT + plot_w * (t - start) / span, TOP + plot_h - plot_h * d.get(name, 0) / top) for t, d in samples]
        dash = DASHES[k % len(DASHES)]
        style = f' stroke-dasharray="{dash}"' if dash else ""
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        out.append(f'<polyline class="line s{k % 5}" points="{path}"{style}><title>{escape(name)}</title></polyline>')
        if points:
            x, y = points[-1]
            value = samples[-1][1].get(name, 0)
            out.append(f'<circle class="dot s{k % 5}" cx="{x:.1f}" cy="{y:.1f}" r="3"/>'
                       f'<text class="value" x="{min(x + 5, W - RIGHT):.1f}" y="{max(TOP + 4, y - 5):.1f}" '
                       f'text-anchor="{"end" if x + 40 > W - RIGHT else "start"}">{escape(name)} {value:,}</text>')
    out.append("</svg>")
    return "".join(out)


def legend(names: list[str]) -> list[tuple[str, str, int]]:
    """(name, dash pattern, colour index) per series, for the legend next to a line chart."""
    return [(n, DASHES[k % len(DASHES)], k % 5) for k, n in enumerate(sorted(names))]
