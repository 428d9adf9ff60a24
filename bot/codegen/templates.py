"""The ``templates`` provider: today's offline generator. It recognises a few kinds of app in
the request (timer, to-do list, counter, dice) and falls back to a notes page; every page is
one HTML file with its CSS and JavaScript inline. It sends nothing anywhere.
"""

from __future__ import annotations

import html
import re

KINDS = [
    ("timer", ("pomodoro", "timer", "countdown", "stopwatch")),
    ("todo", ("todo", "to-do", "to do", "checklist", "task list", "tasks")),
    ("counter", ("counter", "tally", "count ")),
    ("dice", ("dice", "die roll", "roll a", "random number")),
]

SCRIPTS = {
    "timer": """
let total = 25 * 60, left = total, timer = null;
const show = () => { const m = String(Math.floor(left / 60)).padStart(2, '0'), s = String(left % 60).padStart(2, '0');
  document.getElementById('clock').textContent = m + ':' + s; document.title = m + ':' + s; };
function start() { if (timer) return; timer = setInterval(() => { if (left > 0) { left--; show(); } else { clearInterval(timer); timer = null; alert('Time is up!'); } }, 1000); }
function pause() { clearInterval(timer); timer = null; }
function reset() { pause(); left = total; show(); }
function setMinutes(m) { total = m * 60; reset(); }
show();""",
    "todo": """
const key = 'todo:' + location.pathname; let items = JSON.parse(localStorage.getItem(key) || '[]');
function save() { localStorage.setItem(key, JSON.stringify(items)); render(); }
function add(e) { e.preventDefault(); const t = document.getElementById('new'); if (t.value.trim()) { items.push({t: t.value.trim(), d: false}); t.value = ''; save(); } }
function render() { const ul = document.getElementById('list'); ul.innerHTML = '';
  items.forEach((it, i) => { const li = document.createElement('li'); const c = document.createElement('input'); c.type = 'checkbox'; c.checked = it.d;
    c.onchange = () => { it.d = c.checked; save(); }; const s = document.createElement('span'); s.textContent = it.t; if (it.d) s.className = 'done';
    const x = document.createElement('button'); x.textContent = '×'; x.onclick = () => { items.splice(i, 1); save(); }; li.append(c, s, x); ul.append(li); }); }
render();""",
    "counter": """
let n = Number(localStorage.getItem('count:' + location.pathname) || 0);
function show() { document.getElementById('n').textContent = n; localStorage.setItem('count:' + location.pathname, n); }
function step(d) { n += d; show(); } show();""",
    "dice": """
function roll() { const sides = Number(document.getElementById('sides').value) || 6;
  document.getElementById('out').textContent = 1 + Math.floor(Math.random() * sides); }""",
    "notes": """
const key = 'notes:' + location.pathname; const area = document.getElementById('notes');
area.value = localStorage.getItem(key) || ''; area.oninput = () => localStorage.setItem(key, area.value);""",
}

BODIES = {
    "timer": '<div id="clock" class="big">25:00</div><p><button onclick="start()">Start</button> <button onclick="pause()">Pause</button> '
             '<button onclick="reset()">Reset</button></p><p><button onclick="setMinutes(25)">Focus 25</button> '
             '<button onclick="setMinutes(5)">Break 5</button> <button onclick="setMinutes(15)">Long break 15</button></p>',
    "todo": '<form onsubmit="add(event)"><input id="new" placeholder="Add a task" aria-label="New task" autofocus> <button>Add</button></form><ul id="list"></ul>',
    "counter": '<div id="n" class="big">0</div><p><button onclick="step(-1)">−</button> <button onclick="step(1)">+</button> '
               '<button onclick="n = 0; show()">Reset</button></p>',
    "dice": '<p><label>Sides <input id="sides" type="number" value="6" min="2"></label> <button onclick="roll()">Roll</button></p><div id="out" class="big">?</div>',
    "notes": '<textarea id="notes" rows="16" aria-label="Notes" placeholder="Write here; it stays in this browser."></textarea>',
}

TITLES = {"timer": "Timer", "todo": "To-do list", "counter": "Counter", "dice": "Dice roller", "notes": "Notes"}

STYLE = """body{font-family:system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem;color:#1d2330;background:#f7f8fb}
h1{font-size:1.4rem}.big{font-size:4rem;font-weight:700;text-align:center;margin:1rem 0}button{font-size:1rem;min-height:44px;min-width:44px;padding:.4rem .9rem;border-radius:.4rem;border:1px solid #99a;background:#fff;cursor:pointer}
input,textarea{font-size:1rem;padding:.4rem;border-radius:.4rem;border:1px solid #99a;width:100%;box-sizing:border-box}form input{width:auto}
ul{list-style:none;padding:0}li{display:flex;gap:.5rem;align-items:center;padding:.3rem 0}li span{flex:1}.done{text-decoration:line-through;color:#889}
"""


def kind_of(prompt: str) -> str:
    """The kind of app ``prompt`` asks for: the first of ``KINDS`` with a keyword in it, else "notes"."""
    lowered = prompt.lower()
    for kind, words in KINDS:
        # whole words only: "discount" is not a counter, "how to do" is not a to-do list
        if any(re.search(rf"(?<![a-z]){re.escape(w.strip())}(?![a-z])", lowered) for w in words):
            return kind
    return "notes"


def clean_prompt(text: str) -> str:
    """The prompt without its @-mentions ("Your app" when nothing else is left)."""
    return re.sub(r"@[\w.-]+", "", text).strip() or "Your app"


def render(prompt: str) -> tuple[str, str]:
    """The page for ``prompt`` and its title: one HTML document, its style and script inline."""
    kind = kind_of(prompt)
    title = TITLES[kind]
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{html.escape(title)}</title><style>{STYLE}</style></head>
<body><main><h1>{html.escape(title)}</h1>
{BODIES[kind]}
</main>
<script>{SCRIPTS[kind]}</script></body></html>
"""
    return page, title
