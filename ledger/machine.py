"""Machines as data: states, start states, edges with actors and guards, fixed fields.

A machine governs the documents of one kind in one database (``type: "job"`` in ``jobs``).
It is checked when declared (``InvalidMachine``), checked on every write in the write's
transaction (``Forbidden`` with a readable reason), and renders itself as Mermaid.

**Roles.** An edge may admit only people holding a role (``user(roles=("approver",))``). The
engine does not know where roles live: the hub gives the rules a role source
(``Rules.roles_from``), a function of the actor and a reader of documents *in the write's
transaction*, and the rules call it only when a pattern or a guard asks, once per write. So a
role is never cached: a write is judged by the role its actor holds when it is written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .actor import ADMIN, ActorPattern, RoleOf, user
from .document import check_db, check_field
from .errors import Forbidden, LedgerError
from .guards import Guard, GuardContext
from .move import VERBS, Move

Doc = dict[str, Any]


class InvalidMachine(LedgerError):
    """A machine declaration is wrong (unreachable state, edge without actor, ...)."""

    code = "invalid_machine"
    status = 500  # a declaration in the code is wrong: a bug to fix, never the client's doing


@dataclass(frozen=True)
class Edge:
    """Documents in one of ``src`` may move to ``dst`` when written by ``by`` and every guard holds."""

    src: tuple[str, ...]
    dst: str
    by: tuple[ActorPattern, ...]
    guards: tuple[Guard, ...] = ()

    def __init__(
        self,
        src: str | Sequence[str],
        dst: str,
        by: ActorPattern | Sequence[ActorPattern],
        guards: Sequence[Guard] = (),
    ) -> None:
        object.__setattr__(self, "src", (src,) if isinstance(src, str) else tuple(src))
        object.__setattr__(self, "dst", dst)
        object.__setattr__(self, "by", (by,) if isinstance(by, ActorPattern) else tuple(by))
        object.__setattr__(self, "guards", tuple(guards))

    def allows(self, actor: str, role: RoleOf | None = None) -> bool:
        """Whether ``actor`` may take this edge (``role``: the actor's role, where the rules know roles;
        without it an edge that needs a role admits every actor of its kind)."""
        return any(p.matches(actor, role) for p in self.by)


@dataclass
class Machine:
    """The state machine of one kind of document in one database (see the module docstring)."""

    db: str
    kind_field: str
    kind: str
    start: dict[str, Guard | None]
    edges: list[Edge]
    fixed: tuple[str, ...] = ()
    terminal: frozenset[str] = frozenset()
    max_attempts: int = 3
    create_by: tuple[ActorPattern, ...] | None = None
    delete_by: tuple[ActorPattern, ...] = (ADMIN,)
    states: tuple[str, ...] = field(default=())
    indexes: tuple[str, ...] = ()
    invariants: tuple[Guard, ...] = ()
    settled: frozenset[str] = frozenset()
    moves: dict[str, Move] = field(default_factory=dict)

    def __init__(
        self,
        db: str,
        *,
        type: str | None = None,  # noqa: A002 - mirrors the document field
        kind: str | None = None,
        start: Mapping[str, Guard | None] | Iterable[str],
        edges: Sequence[Edge],
        fixed: Sequence[str] = (),
        terminal: Iterable[str] | None = None,
        max_attempts: int = 3,
        create_by: Sequence[ActorPattern] | None = None,
        delete_by: Sequence[ActorPattern] = (ADMIN,),
        indexes: Sequence[str] = (),
        invariants: Sequence[Guard] = (),
        settled: Iterable[str] = (),
        moves: Sequence[Move] = (),
    ) -> None:
        """``indexes``: the fields of ``db`` that the machine's ticks and handlers query
        (``status`` is indexed for every database already). ``invariants``: guards every write of an
        existing document must pass, whatever its edge (a field that may change only until some
        step, where ``fixed`` is too strict). ``settled``: states where the document's work has
        ended although a follow-up step may still leave them (a post ``done``, before its first
        comment); with the terminal states they are the machine's ``ends``. ``moves``: the person
        edges named for what an operator does (``ledger.move``), each one an edge people may take."""
        check_db(db)
        if (type is None) == (kind is None):
            raise InvalidMachine(f"machine for {db!r}: give exactly one of type= or kind=")
        self.db = db
        self.kind_field = "type" if type is not None else "kind"
        self.kind = type if type is not None else kind  # type: ignore[assignment]
        self.start = dict(start) if isinstance(start, Mapping) else {s: None for s in start}
        self.edges = list(edges)
        self.fixed = tuple(check_field(f) for f in fixed)
        self.max_attempts = max_attempts
        self.create_by = tuple(create_by) if create_by is not None else None
        self.delete_by = tuple(delete_by)
        self.indexes = tuple(check_field(f) for f in indexes)
        self.invariants = tuple(invariants)
        self.settled = frozenset(settled)
        self.moves = {}
        for move in moves:
            if move.verb in self.moves:
                raise InvalidMachine(f"machine for {db!r}: move {move.verb!r} is declared twice")
            self.moves[move.verb] = move
        seen: list[str] = list(self.start)
        for edge in self.edges:
            for s in (*edge.src, edge.dst):
                if s not in seen:
                    seen.append(s)
        self.states = tuple(seen)
        exits = {s for e in self.edges for s in e.src if s != e.dst}
        self.terminal = frozenset(terminal) if terminal is not None else frozenset(set(seen) - exits)
        self._validate()

    @property
    def name(self) -> str:
        """``db/kind``: how messages and diagrams name this machine."""
        return f"{self.db}/{self.kind}"

    def _validate(self) -> None:
        where = f"machine {self.name}"
        if not self.start:
            raise InvalidMachine(f"{where}: needs at least one start state")
        for edge in self.edges:
            if not edge.by:
                raise InvalidMachine(f"{where}: edge {'|'.join(edge.src)} -> {edge.dst} has no actor")
            for g in edge.guards:
                if not isinstance(g, Guard):
                    raise InvalidMachine(f"{where}: guard {g!r} on {edge.dst} is not a Guard")
        for g in self.invariants:
            if not isinstance(g, Guard):
                raise InvalidMachine(f"{where}: invariant {g!r} is not a Guard")
        for state in self.settled:
            if state not in self.states:
                raise InvalidMachine(f"{where}: settled state {state!r} is not a state")
        for state in self.terminal:
            if state not in self.states:
                raise InvalidMachine(f"{where}: terminal state {state!r} is not a state")
            out = [e for e in self.edges if state in e.src]
            if out:
                raise InvalidMachine(
                    f"{where}: terminal state {state!r} has an exit to {out[0].dst!r}; terminals have no exits"
                )
        for move in self.moves.values():
            if move.verb not in VERBS:
                raise InvalidMachine(f"{where}: move {move.verb!r} is not one of {', '.join(VERBS)}")
            for src in move.src:
                if not any(src in e.src and e.dst == move.dst and any(p.kind in ("user", "admin") for p in e.by)
                           for e in self.edges):
                    raise InvalidMachine(f"{where}: move {move.verb} {src} -> {move.dst} has no edge a person may take")
        reached = set(self.start)
        grew = True
        while grew:
            grew = False
            for edge in self.edges:
                if edge.dst not in reached and any(s in reached for s in edge.src):
                    reached.add(edge.dst)
                    grew = True
        unreachable = [s for s in self.states if s not in reached]
        if unreachable:
            raise InvalidMachine(f"{where}: state(s) {', '.join(unreachable)} cannot be reached from a start state")

    @property
    def ends(self) -> frozenset[str]:
        """The states where a document's work has ended: the terminal states and the settled ones."""
        return self.terminal | self.settled

    @property
    def at_rest(self) -> frozenset[str]:
        """The states no actor moves a document out of by itself (no tick, handler or device edge leaves
        them): the terminal states and those only a person leaves (a job ``failed``, which a person's
        ``retry`` may take back to ``pending``)."""
        return frozenset(s for s in self.states if not any(
            s in e.src and e.dst != s and any(p.kind in ("tick", "handler", "device") for p in e.by) for e in self.edges))

    def person_edge(self, edge: Edge) -> bool:
        """Whether only people (a user or the admin) may take ``edge``."""
        return all(p.kind in ("user", "admin") for p in edge.by)

    @property
    def follow_ups(self) -> frozenset[str]:
        """End states reached only from another end (``commented``, only ever after ``done``): arriving
        there records a follow-up step, not a second outcome."""
        ends = self.ends
        out = set()
        for state in ends - set(self.start):
            sources = {src for e in self.edges if e.dst == state for src in e.src if src != state}
            if sources and sources <= ends:
                out.add(state)
        return frozenset(out)

    def governs(self, doc: Doc | None) -> bool:
        """Whether ``doc`` is of this machine's kind (or the machine takes any kind)."""
        return doc is not None and doc.get(self.kind_field) == self.kind

    def check(self, old: Doc | None, new: Doc | None, actor: str, now_ms: int,
              settings: Callable[[str], Any] | None = None, doc_id: str = "", role: RoleOf | None = None) -> None:
        """Raise Forbidden unless ``actor`` may move the document from ``old`` to ``new``.

        ``old`` is the head body (None for a new document), ``new`` None for a delete;
        ``settings`` gives guards the hub's settings sections by name, ``doc_id`` the document's id,
        ``role`` the actor's role (None: the rules know no roles).
        """
        noun = self.kind
        ctx = GuardContext(actor=actor, now_ms=now_ms, max_attempts=self.max_attempts, noun=noun, settings=settings, doc_id=doc_id,
                           role_of=role)
        is_admin = actor == "admin"
        if new is None:
            if not is_admin and not any(p.matches(actor, role) for p in self.delete_by):
                who = ", ".join(str(p) for p in self.delete_by)
                raise Forbidden(f"{actor} may not delete a {noun} (only {who})")
            return
        if new.get(self.kind_field) != self.kind:
            raise Forbidden(f"a {noun}'s {self.kind_field} cannot change")
        status = new.get("status")
        if not isinstance(status, str) or status not in self.states:
            raise Forbidden(
                f"status {status!r} is not a state of {self.name}; states: {', '.join(self.states)}"
            )
        if is_admin:
            return
        if old is None:
            if status not in self.start:
                raise Forbidden(f"a new {noun} must start in {' or '.join(self.start)}, not {status}")
            if self.create_by is not None and not any(p.matches(actor, role) for p in self.create_by):
                raise Forbidden(f"{actor} may not create a {noun}")
            validator = self.start[status]
            refused = validator(None, new, ctx) if validator else None
            if refused:
                raise Forbidden(refused)
            return
        for name in self.fixed:
            if old.get(name) != new.get(name):
                raise Forbidden(f"field {name!r} of a {noun} is fixed and cannot change")
        before = old.get("status")
        candidates = [e for e in self.edges if before in e.src and e.dst == status]
        if not candidates:
            raise Forbidden(f"no transition {before} -> {status} for a {noun}")
        allowed = [e for e in candidates if e.allows(actor, role)]
        if not allowed:
            who = ", ".join(sorted({str(p) for e in candidates for p in e.by}))
            held = ctx.role()
            as_role = f" as {held}" if held is not None and any(p.roles for e in candidates for p in e.by) else ""
            raise Forbidden(f"{actor}{as_role} may not move a {noun} from {before} to {status} (only {who})")
        for invariant in self.invariants:
            refused = invariant(old, new, ctx)
            if refused:
                raise Forbidden(refused)
        reasons = []
        for edge in allowed:
            refused = next((r for g in edge.guards if (r := g(old, new, ctx))), None)
            if refused is None:
                return
            reasons.append(refused)
        raise Forbidden(reasons[0])

    def describe(self) -> dict[str, Any]:
        """The machine as plain data (for JSON output and the API)."""
        return {
            "db": self.db, "field": self.kind_field, "kind": self.kind, "states": list(self.states),
            "start": list(self.start), "terminal": sorted(self.terminal), "settled": sorted(self.settled),
            "invariants": [str(g) for g in self.invariants], "maxAttempts": self.max_attempts,
            "moves": [m.describe() for m in self.moves.values()],
            "edges": [
                {"from": list(e.src), "to": e.dst, "by": [str(p) for p in e.by], "guards": [str(g) for g in e.guards]}
                for e in self.edges
            ],
            "mermaid": self.mermaid(),
        }

    def markdown(self) -> str:
        """The machine as Markdown: a line naming it, then its diagram in a mermaid fence."""
        counted = any(g.name.startswith(("claim", "attempts")) for e in self.edges for g in e.guards)
        limit = f" (at most {self.max_attempts} attempts)" if counted else ""
        notes = ""
        if self.invariants:
            notes += f"\nEvery write of an existing document also holds: {', '.join(f'`{g}`' for g in self.invariants)}.\n"
        for m in self.moves.values():
            names = list(m.reset)
            resets = (f", resetting {', '.join(f'`{f}`' for f in names[:6])}{f' and {len(names) - 6} more' if len(names) > 6 else ''}"
                      if names else "")
            tally = f", counting `{m.count}`" if m.count else ""
            notes += (f"\nA person's `{m.verb}` (one document, or many with `skyhub db bulk {m.verb}`): "
                      f"{' | '.join(f'`{s}`' for s in m.src)} -> `{m.dst}`{resets}{tally}.\n")
        if self.settled:
            notes += (f"\nIts work has ended in {', '.join(f'`{s}`' for s in sorted(self.settled))} too "
                      "(a follow-up step may still leave it).\n")
        return (f"**{self.db}** documents with `{self.kind_field}: \"{self.kind}\"`{limit}:\n\n```mermaid\n{self.mermaid()}\n```\n"
                + notes)

    def mermaid(self) -> str:
        """The machine as a Mermaid state diagram (for the README and the console)."""
        lines = ["stateDiagram-v2"]
        for state in self.states:
            if _sid(state) != state:
                lines.append(f'    state "{state}" as {_sid(state)}')
        for state in self.start:
            lines.append(f"    [*] --> {_sid(state)}")
        for edge in self.edges:
            who = ", ".join(str(p) for p in edge.by)
            guards = f" [{', '.join(str(g) for g in edge.guards)}]" if edge.guards else ""
            for src in edge.src:
                lines.append(f"    {_sid(src)} --> {_sid(edge.dst)}: {who}{guards}")
        for state in self.states:
            if state in self.terminal:
                lines.append(f"    {_sid(state)} --> [*]")
        return "\n".join(lines)


def _sid(state: str) -> str:
    """Mermaid ids cannot hold '-': ``pending-build`` is drawn as an alias."""
    return state.replace("-", "_")


@dataclass
class DbPolicy:
    """Who may write free-form documents (no machine governs them) and who may write blind."""

    free: tuple[ActorPattern, ...] = (user(), ADMIN)
    blind: tuple[ActorPattern, ...] = (user(), ADMIN)


Reader = Callable[[str, str], "Doc | None"]
"""``read(db, id)``: a document's head body (None when there is none or it was deleted), read in
the transaction of the write being judged."""
RoleSource = Callable[[str, Reader], "str | None"]
"""``role_of(actor, read)``: the role ``actor`` holds (None: none), found with ``read``."""


class Rules:
    """Every machine and database policy the store enforces."""

    def __init__(self, machines: Iterable[Machine] = ()) -> None:
        self._machines: dict[str, list[Machine]] = {}
        self._policies: dict[str, DbPolicy] = {}
        self._indexes: dict[tuple[str, str], None] = {}
        self._settings: Callable[[str], Any] | None = None
        self._roles: RoleSource | None = None
        for m in machines:
            self.declare(m)

    def roles_from(self, source: RoleSource) -> None:
        """Say where people's roles live: ``source(actor, read)`` returns the role of ``actor``, reading
        documents with ``read`` in the transaction of the write being judged. It is called only when an
        edge or a guard asks, at most once per write, and never cached: a role changed by another
        process is the one the next write is judged by. (On SQLite the reader is the write's own
        transaction. PostgreSQL judges a write just before the one statement that makes it, which is
        conditional on the document's head, not on the role's document: a role changed in those few
        milliseconds is in force from the next write.) Without a source, patterns with roles admit
        every actor of their kind (see ``ActorPattern``)."""
        self._roles = source

    @property
    def knows_roles(self) -> bool:
        """Whether a role source was given (``roles_from``)."""
        return self._roles is not None

    def role(self, actor: str, read: Reader) -> str | None:
        """The role ``actor`` holds, from the role source (None: none, or no source)."""
        return self._roles(actor, read) if self._roles is not None else None

    def _role_of(self, actor: str, read: Reader | None) -> RoleOf | None:
        """The actor's role as a function asked at most once, or None when roles cannot be known."""
        source = self._roles
        if source is None or read is None:
            return None
        found: list[str | None] = []

        def role() -> str | None:
            if not found:
                found.append(source(actor, read))
            return found[0]

        return role

    def configure(self, settings: Callable[[str], Any]) -> None:
        """Give guards the hub's settings: ``settings(name)`` returns a section (called when a
        guard asks, so a store whose writes need none loads none)."""
        self._settings = settings

    def declare(self, machine: Machine) -> Machine:
        """Add ``machine`` to the rules (one per database and kind); returns it."""
        same = [m for m in self._machines.get(machine.db, []) if m.kind_field == machine.kind_field and m.kind == machine.kind]
        if same:
            raise InvalidMachine(f"machine {machine.name} is declared twice")
        self._machines.setdefault(machine.db, []).append(machine)
        for name in machine.indexes:
            self.index(machine.db, name)
        return machine

    def allow(self, db: str, *, free: Sequence[ActorPattern] | None = None, blind: Sequence[ActorPattern] | None = None) -> None:
        """Widen or narrow who may write free-form and blind in ``db``."""
        current = self._policies.get(check_db(db), DbPolicy())
        self._policies[db] = DbPolicy(
            free=tuple(free) if free is not None else current.free,
            blind=tuple(blind) if blind is not None else current.blind,
        )

    def index(self, db: str, field: str) -> None:
        """Declare that documents of ``db`` are queried by ``field`` (the store indexes it)."""
        self._indexes[(check_db(db), check_field(field))] = None

    @property
    def indexes(self) -> list[tuple[str, str]]:
        """Every declared (db, field), in declaration order."""
        return list(self._indexes)

    @property
    def machines(self) -> list[Machine]:
        """Every declared machine, in declaration order."""
        return [m for ms in self._machines.values() for m in ms]

    def machine_for(self, db: str, *docs: Doc | None) -> Machine | None:
        """The machine that governs a write to ``db`` of these documents, if any."""
        for m in self._machines.get(db, ()):
            if any(m.governs(d) for d in docs):
                return m
        return None

    def check(self, db: str, old: Doc | None, new: Doc | None, actor: str, now_ms: int, *, blind: bool, doc_id: str = "",
              read: Reader | None = None) -> None:
        """Raise Forbidden, naming the rule, unless ``actor`` may write ``new`` over ``old`` in ``db`` now
        (``doc_id``: the document's id, for guards that check it; ``read``: documents in the write's
        transaction, for the role source)."""
        policy = self._policies.get(db, DbPolicy())
        if blind and old is not None and not any(p.matches(actor) for p in policy.blind):
            raise Forbidden(
                f"{actor} may not overwrite in {db!r} without a revision: read the document and pass its _rev (if_rev)"
            )
        machine = self.machine_for(db, old, new)
        if machine is not None:
            if old is not None and not machine.governs(old) and actor != "admin":
                raise Forbidden(f"a document in {db!r} cannot become a {machine.kind}")
            machine.check(old if machine.governs(old) else None, new, actor, now_ms, self._settings, doc_id,
                          self._role_of(actor, read))
            return
        if not any(p.matches(actor) for p in policy.free):
            raise Forbidden(f"{actor} may not write this document in {db!r}: no machine there allows it")
