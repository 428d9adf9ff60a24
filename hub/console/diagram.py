"""A machine drawn as SVG on the server: states as boxes with their live count, edges as arrows
with their actors. The layout is layered from the start states (a state's layer is its distance
from a start state), so the happy path reads left to right; edges that go back are drawn as
arcs under the boxes, and self-edges (heartbeats, intents) are listed in each box's tooltip.

The layout depends only on the machine, so it is computed once per machine and cached; a
request only fills in the counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from ledger import Machine

BOX_W, BOX_H = 150, 46
GAP_X, GAP_Y = 70, 22
PAD = 16


@dataclass(frozen=True)
class _Layout:
    pos: dict[str, tuple[int, int]]
    width: int
    height: int
    edges: tuple[tuple[str, str, str, bool], ...]  # (src, dst, actors, only people take it)
    loops: dict[str, str]


_CACHE: dict[int, tuple[Machine, _Layout]] = {}


def _layout(machine: Machine) -> _Layout:
    hit = _CACHE.get(id(machine))
    if hit is not None and hit[0] is machine:
        return hit[1]
    made = _compute(machine)
    if len(_CACHE) > 256:
        _CACHE.clear()
    _CACHE[id(machine)] = (machine, made)
    return made


def _compute(machine: Machine) -> _Layout:
    # forward edges: those a depth-first walk from the start states does not close a loop with
    succ: dict[str, list[str]] = {s: [] for s in machine.states}
    for e in machine.edges:
        for src in e.src:
            if src != e.dst and e.dst not in succ[src]:
                succ[src].append(e.dst)
    forward: list[tuple[str, str]] = []
    seen: set[str] = set()
    on_path: set[str] = set()

    def walk(s: str) -> None:
        seen.add(s)
        on_path.add(s)
        for d in succ[s]:
            if d in on_path:
                continue  # a way back: drawn as an arc
            forward.append((s, d))
            if d not in seen:
                walk(d)
        on_path.discard(s)

    for s in [*machine.start, *machine.states]:
        if s not in seen:
            walk(s)
    layer: dict[str, int] = {s: 0 for s in machine.states}
    for _ in machine.states:  # longest path over the forward edges (a DAG): the happy path reads left to right
        for s, d in forward:
            layer[d] = max(layer[d], layer[s] + 1)
    columns: dict[int, list[str]] = {}
    for s in machine.states:
        columns.setdefault(layer[s], []).append(s)
    rows = max(len(c) for c in columns.values())
    pos = {}
    for col, states in columns.items():
        offset = (rows - len(states)) * (BOX_H + GAP_Y) // 2
        for i, s in enumerate(states):
            pos[s] = (PAD + col * (BOX_W + GAP_X), PAD + offset + i * (BOX_H + GAP_Y))
    edges: dict[tuple[str, str], list[str]] = {}
    person: dict[tuple[str, str], bool] = {}
    moves = {(src, m.dst): m.label for m in machine.moves.values() for src in m.src}
    loops: dict[str, list[str]] = {}
    for e in machine.edges:
        who = [str(p) for p in e.by]
        for src in e.src:
            if src == e.dst:
                loops.setdefault(src, []).extend(w for w in who if w not in loops.get(src, []))
            else:
                bucket = edges.setdefault((src, e.dst), [])
                named = [f"{moves[(src, e.dst)]} by {w}" if (src, e.dst) in moves and w.startswith(("user", "admin")) else w for w in who]
                bucket.extend(w for w in named if w not in bucket)
                person[(src, e.dst)] = person.get((src, e.dst), True) and machine.person_edge(e)
    width = PAD * 2 + (max(columns) + 1) * BOX_W + max(columns) * GAP_X
    height = PAD * 2 + rows * BOX_H + (rows - 1) * GAP_Y + 60  # room for the arcs that go back
    return _Layout(pos, width, height, tuple((s, d, ", ".join(w), person[(s, d)]) for (s, d), w in edges.items()),
                   {s: ", ".join(w) for s, w in loops.items()})


def machine_svg(machine: Machine, counts: dict[str, int], *, link: str | None = None) -> str:
    """The SVG of ``machine`` with ``counts`` on its states. ``link``: a URL template with
    ``{status}`` that each state links to (the list of documents in that state)."""
    lay = _layout(machine)
    ident = "m-" + "".join(ch if ch.isalnum() else "-" for ch in machine.name)
    summary = ", ".join(f"{s} {counts.get(s, 0)}" for s in machine.states)
    out = [
        f'<svg class="machine" data-machine="{escape(machine.name)}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {lay.width} {lay.height}" '
        f'width="{lay.width}" height="{lay.height}" role="group" aria-labelledby="{ident}-t {ident}-d">',
        f'<title id="{ident}-t">State machine {escape(machine.name)}</title>',
        f'<desc id="{ident}-d">Documents by state: {escape(summary)}</desc>',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M 0 0 L 10 5 L 0 10 z" class="arrowhead"/></marker></defs>',
    ]
    back = 0
    for src, dst, who, by_person in lay.edges:
        (x1, y1), (x2, y2) = lay.pos[src], lay.pos[dst]
        label = f"{src} → {dst}: {who}"
        person = " person" if by_person else ""  # a person's edge (a retry, a cancel): drawn dashed
        if x2 > x1:
            sx, sy, ex, ey = x1 + BOX_W, y1 + BOX_H // 2, x2, y2 + BOX_H // 2
            mx = (sx + ex) // 2
            out.append(f'<g class="edge{person}"><title>{escape(label)}</title>'
                       f'<path d="M {sx} {sy} C {mx} {sy}, {mx} {ey}, {ex} {ey}" marker-end="url(#arrow)"/></g>')
        else:
            back += 1
            sx, ex = x1 + BOX_W // 2 + 10, x2 + BOX_W // 2 - 10
            sy, ey = y1 + BOX_H, y2 + BOX_H
            dip = max(sy, ey) + 18 + 8 * (back % 4)
            out.append(f'<g class="edge back{person}"><title>{escape(label)}</title>'
                       f'<path d="M {sx} {sy} C {sx} {dip}, {ex} {dip}, {ex} {ey}" marker-end="url(#arrow)"/></g>')
    for state in machine.states:
        x, y = lay.pos[state]
        n = counts.get(state, 0)
        kinds = ["state"]
        marks = []
        if state in machine.start:
            kinds.append("start")
            marks.append("start")
        if state in machine.terminal:
            kinds.append("terminal")
            marks.append("end")
        elif state in machine.at_rest:  # no actor moves it on: only a person (a failed job's retry)
            kinds.append("rest")
            marks.append("person")
        if n:
            kinds.append("busy")
        tip = f"{state}: {n} document{'s' if n != 1 else ''}" + (f"; also written by {lay.loops[state]} without moving" if state in lay.loops else "")
        box = (f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="8"/>'
               + (f'<rect class="inner" x="{x + 3}" y="{y + 3}" width="{BOX_W - 6}" height="{BOX_H - 6}" rx="6"/>' if state in machine.terminal else "")
               + f'<text x="{x + BOX_W // 2}" y="{y + 18}" class="name">{escape(state)}</text>'
               + f'<text x="{x + BOX_W // 2}" y="{y + 36}" class="count" data-state="{escape(state)}">{n:,}'
               + (f' <tspan class="mark">({"/".join(marks)})</tspan>' if marks else "") + "</text>")
        inner = f'<g class="{" ".join(kinds)}"><title>{escape(tip)}</title>{box}</g>'
        if link:
            inner = f'<a href="{escape(link.format(status=state))}" aria-label="{escape(tip)}">{inner}</a>'
        out.append(inner)
    out.append("</svg>")
    return "".join(out)
