"""The checks every page passes before it is published, and the changes made to it.

``extract`` takes the HTML file out of a model's answer (a Markdown fence and chatter around it
are dropped; prose with no page in it is refused). ``problems`` parses the page and names, one
sentence each, what makes it unfit: no ``<html>``; an element before the head (it would run
before the Content-Security-Policy); any external reference (a script, stylesheet, image,
media, iframe, object, ``<base>``, ``<link>``, a form target, a ``ping``, ``url()`` or
``@import`` in CSS, a ``fetch``/``XMLHttpRequest``/``WebSocket``/``EventSource``/
``sendBeacon``/``import()``/worker in a script or a handler); a ``<meta>`` refresh, a script
that moves the page (``location = ...``, ``location.assign``) or a CSP of its own; more than the size limit; the system prompt's canary (a prompt leak). Only ``data:``
URLs and ``#`` fragments may be loaded; links (``<a href>``) may lead anywhere, since a person
has to follow them.

``with_csp`` puts the strict policy first in ``<head>`` (``CSP``: nothing from the network,
inline script and style only, images from ``data:`` only, no form target, no ``<base>``);
``with_credit`` adds who asked, and a link to their mention, at the end of the body.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
       "connect-src 'none'; form-action 'none'; base-uri 'none'")
CSP_META = f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
MAX_PROBLEMS = 5

REFUSED_ELEMENTS = {"iframe", "frame", "frameset", "object", "embed", "applet", "portal", "fencedframe", "base"}
LOADING_ATTRIBUTES = {"src", "srcset", "imagesrcset", "poster", "background", "data", "codebase", "archive", "longdesc",
                      "lowsrc", "dynsrc", "manifest", "profile", "icon", "ping", "action", "formaction"}
LINK_TAGS = {"a", "area"}  # their href is a link a person follows, not a load
HEAD_ONLY_BEFORE = {"html", "head"}
NETWORK_CALLS = (
    ("fetch", re.compile(r"\bfetch\s*\(")),
    ("XMLHttpRequest", re.compile(r"\bXMLHttpRequest\b")),
    ("WebSocket", re.compile(r"\bWebSocket\b")),
    ("EventSource", re.compile(r"\bEventSource\b")),
    ("sendBeacon", re.compile(r"\bsendBeacon\b")),
    ("import()", re.compile(r"\bimport\s*\(")),
    ("a module import", re.compile(r"^\s*import\s+[\w{*'\"]", re.M)),
    ("importScripts", re.compile(r"\bimportScripts\b")),
    ("a worker", re.compile(r"\bnew\s+(?:Shared)?Worker\b|\bserviceWorker\b")),
    ("RTCPeerConnection", re.compile(r"\bRTCPeerConnection\b")),
    ("WebTransport", re.compile(r"\bWebTransport\b")),
)
NAVIGATIONS = re.compile(r"\blocation(?:\s*\.\s*href)?\s*=(?!=)|\blocation\s*\.\s*(?:assign|replace)\s*\(")
CSS_URL = re.compile(r"url\(\s*(['\"]?)(.*?)\1\s*\)", re.I | re.S)
CSS_IMPORT = re.compile(r"@import\b", re.I)
FENCE = re.compile(r"```[a-zA-Z]*[ \t]*\r?\n(.*?)```", re.S)
PAGE_START = re.compile(r"<!doctype\s+html|<html[\s>]", re.I)
PAGE_END = re.compile(r"</html\s*>", re.I)


def extract(answer: str) -> tuple[str, str | None]:
    """The page in a model's answer, and the problem when there is none (prose instead of HTML)."""
    text = answer.strip()
    for block in FENCE.findall(text):
        if PAGE_START.search(block):
            text = block.strip()
            break
    start = PAGE_START.search(text)
    if start is None:
        opening = " ".join(text.split())[:80]
        return "", f"the answer is not an HTML file (it begins {opening!r}): answer with the file only, from <!doctype html> to </html>"
    ends = list(PAGE_END.finditer(text, start.start()))
    end = ends[-1].end() if ends else len(text)
    return text[start.start():end] + "\n", None


def _bare(url: str) -> str:
    """A URL as a browser reads it for its scheme: without spaces and control characters, lowercased."""
    return re.sub(r"[\x00-\x20]+", "", url).lower()


def _inline(url: str) -> bool:
    bare = _bare(url)
    return bare == "" or bare.startswith(("data:", "#", "about:blank"))


def _shown(url: str) -> str:
    return url.strip()[:80]


def _a(tag: str) -> str:
    """``a <div>``, ``an <img>``."""
    return f"{'an' if tag[:1] in 'aeio' else 'a'} <{tag}"


def _srcset_urls(value: str) -> list[str]:
    """The URLs of a ``srcset`` that are not ``data:`` (a URL runs to the next space; descriptors are not URLs)."""
    rest = re.sub(r"data:\S*", " ", value, flags=re.I)
    return [t for t in re.split(r"[\s,]+", rest) if t and not re.fullmatch(r"\d+(?:\.\d+)?[wxh]", t)]


@dataclass
class _Found:
    problems: list[str] = field(default_factory=list)
    title: str = ""
    scripts: list[str] = field(default_factory=list)
    styles: list[str] = field(default_factory=list)
    html_at: int | None = None  # where the <html ...> start tag ends
    head_at: int | None = None  # where the <head ...> start tag ends
    before_head: list[str] = field(default_factory=list)  # elements that come before the head

    def add(self, problem: str) -> None:
        if problem not in self.problems:
            self.problems.append(problem)


class _Inspector(HTMLParser):
    """One pass over a page: what it loads, its title, where its head starts."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)  # attribute values arrive unescaped: &#104;ttp is http
        self.found = _Found()
        self._lines = [0]
        for line in page.splitlines(keepends=True):
            self._lines.append(self._lines[-1] + len(line))
        self._in: list[str] = []
        self._title_done = False

    def _end_of_tag(self) -> int:
        line, column = self.getpos()
        return self._lines[line - 1] + column + len(self.get_starttag_text() or "")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._element(tag, attrs)
        if tag in ("script", "style", "title"):
            self._in.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._element(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if self._in and self._in[-1] == tag:
            self._in.pop()
            if tag == "title":
                self._title_done = True

    def handle_data(self, data: str) -> None:
        if not self._in:
            return
        where = self._in[-1]
        if where == "script":
            self.found.scripts.append(data)
        elif where == "style":
            self.found.styles.append(data)
        elif where == "title" and not self._title_done:
            self.found.title += data

    def _element(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        f = self.found
        if tag == "html" and f.html_at is None:
            f.html_at = self._end_of_tag()
        elif tag == "head" and f.head_at is None:
            f.head_at = self._end_of_tag()
        elif f.head_at is None and tag not in HEAD_ONLY_BEFORE:
            f.before_head.append(tag)
        values = {name.lower(): value or "" for name, value in attrs}
        if tag in REFUSED_ELEMENTS:
            what = values.get("src") or values.get("data") or values.get("href") or ""
            f.add(f"{_a(tag)}> element{f' ({_shown(what)})' if what else ''} is not allowed: pages embed nothing")
            return
        if tag == "script" and "src" in values:
            f.add(f"a <script src={_shown(values['src'])!r}> loads a script: put the script inline")
        if tag == "link" and not (_inline(values.get("href", "")) and "icon" in values.get("rel", "").lower()):
            f.add(f"a <link rel={values.get('rel', '')!r} href={_shown(values.get('href', ''))!r}> loads a file: put styles inline in <style>")
            return
        if tag == "meta":
            equiv = values.get("http-equiv", "").lower()
            if equiv == "refresh":
                f.add("a <meta http-equiv=\"refresh\"> is not allowed: the page must not move itself elsewhere")
            elif equiv == "content-security-policy":
                f.add("the page sets a Content-Security-Policy of its own: leave that out, skyhub adds one")
        for name, value in values.items():
            if name.startswith("on"):
                self._script(value, f"the {name} handler of {_a(tag)}>")
            elif name == "style":
                self._css(value, f"the style of {_a(tag)}>")
            elif name in ("href", "xlink:href") and tag in LINK_TAGS:
                if _bare(value).startswith("javascript:"):
                    self._script(value, "a javascript: link")
            elif name in ("href", "xlink:href"):
                if not _inline(value):
                    f.add(f"{_a(tag)} {name}={_shown(value)!r}> loads something from outside the page: use a data: URL or draw it")
            elif name in LOADING_ATTRIBUTES and tag != "script":
                bad = _srcset_urls(value) if name in ("srcset", "imagesrcset") else ([] if _inline(value) else [value])
                if name in ("action", "formaction") and bad:
                    f.add(f"{_a(tag)} {name}={_shown(value)!r}> would send a form away: handle it in the page (no action)")
                elif name == "ping":
                    f.add(f"{_a(tag)} ping=...> would send a request when followed: leave ping out")
                elif bad:
                    f.add(f"{_a(tag)} {name}={_shown(bad[0])!r}> loads something from outside the page: use a data: URL or draw it")

    def _script(self, code: str, where: str) -> None:
        for name, pattern in NETWORK_CALLS:
            if pattern.search(code):
                self.found.add(f"{where} uses {name}: pages have no network; work offline (localStorage for what must stay)")
        if NAVIGATIONS.search(code):
            self.found.add(f"{where} sends the page elsewhere (location): a page stays where it is; use a link to go somewhere")

    def _css(self, css: str, where: str) -> None:
        if CSS_IMPORT.search(css):
            self.found.add(f"{where} has an @import: put all the CSS inline")
        for _, url in CSS_URL.findall(css):
            if not _inline(url):
                self.found.add(f"{where} loads url({_shown(url)!r}): use a data: URL or plain CSS")


@dataclass
class Inspection:
    """What the checks found in a page: its problems (sentences), its title, where its head starts."""

    problems: list[str]
    title: str
    insert_at: int

    @property
    def sentence(self) -> str:
        """The problems as one sentence (the first few)."""
        shown = self.problems[:MAX_PROBLEMS]
        more = len(self.problems) - len(shown)
        return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


def inspect(page: str, *, canary: str = "", max_bytes: int = 300_000) -> Inspection:
    """Every check on ``page`` (see the module docstring)."""
    size = len(page.encode())
    if size > max_bytes:
        return Inspection([f"the page is {size:,} bytes, more than the limit of {max_bytes:,}: make it smaller"], "", 0)
    parser = _Inspector(page)
    parser.feed(page)
    parser.close()
    f = parser.found
    for i, code in enumerate(f.scripts):
        parser._script(code, "a <script>" if len(f.scripts) == 1 else f"<script> number {i + 1}")
    for css in f.styles:
        parser._css(css, "a <style>")
    problems = list(f.problems)
    if f.html_at is None and not PAGE_START.search(page):
        problems.insert(0, "the page has no <html> element")
    if f.before_head and f.head_at is not None:
        problems.append(f"{_a(f.before_head[0])}> comes before <head>: the head must come first")
    if canary and canary.lower() in page.lower():
        problems.append("the page repeats the private instructions (a prompt leak): never write them into a page")
    insert_at = f.head_at if f.head_at is not None else (f.html_at if f.html_at is not None else _after_doctype(page))
    return Inspection(problems, " ".join(html.unescape(f.title).split()), insert_at)


def _after_doctype(page: str) -> int:
    found = re.match(r"\s*<!doctype[^>]*>", page, re.I)
    return found.end() if found else 0


def with_csp(page: str, at: int) -> str:
    """``page`` with the policy inserted at ``at`` (from ``inspect``: the end of its ``<head>`` start tag, else of
    its ``<html>`` tag or doctype, where the parser opens the head by itself): the first element of the head."""
    return page[:at] + CSP_META + page[at:]


def credit(author: str, request: str, link: str) -> str:
    """The footer that says who asked for the page, with a link to the mention."""
    who = html.escape(author or "someone on Bluesky")
    asked = html.escape(" ".join(re.sub(r"@[\w.-]+", "", request).split())[:300])
    where = f' (<a href="{html.escape(link, quote=True)}" rel="noopener noreferrer">the request on Bluesky</a>)' if link else ""
    return (f'\n<footer style="margin:2rem auto 1rem;max-width:40rem;padding:0 1rem;font:14px/1.4 system-ui,sans-serif;color:#555">'
            f"Made by skyhub for {who}, who asked: \u201c{asked}\u201d{where}.</footer>\n")


def with_credit(page: str, footer: str) -> str:
    """``page`` with ``footer`` at the end of its body."""
    ends = list(re.finditer(r"</body\s*>", page, re.I))
    if ends:
        at = ends[-1].start()
        return page[:at] + footer + page[at:]
    ends = list(PAGE_END.finditer(page))
    at = ends[-1].start() if ends else len(page)
    return page[:at] + footer + page[at:]


def clean_title(title: str, fallback: str = "page") -> str:
    """A title fit for a reply: one line, no @-mention or link, at most 80 characters, no leading article."""
    text = re.sub(r"https?://\S+|www\.\S+", "", title)
    text = re.sub(r"[@#]", "", text)
    text = " ".join("".join(ch for ch in text if ch.isprintable()).split())
    text = re.sub(r"^(?:a|an|the|your|my)\s+", "", text, flags=re.I)
    if len(text) > 80:
        text = text[:79].rstrip() + "\u2026"
    return text or fallback


__all__ = ["CSP", "Inspection", "clean_title", "credit", "extract", "inspect", "with_credit", "with_csp"]
