"""A fast first pass over large logs: Hyperscan finds where an active pattern may match, RE2 decides.

RE2's DFA reads about 200 MB/s with the knowledge's few hundred patterns; Hyperscan's SIMD
literal matchers read several times faster, and release the GIL while they do, so a second core
can hash and count lines meanwhile. Hyperscan only proposes: every line it points at is checked
again with RE2 (`Prefilter.wanted`), so what the scan finds stays exactly what RE2 finds.

For that, Hyperscan must never miss a line RE2 would match. It matches bytes, RE2 matches UTF-8
characters: `a.b` matches `aéb` in RE2 (one character) but not byte by byte (two bytes). So each
pattern is rewritten into one that matches a superset, line by line: wherever one character is
expected (`.`, a negated class, `\\S`, `\\W` not followed by `*` or `+`), a run of non-ASCII bytes
is accepted too, and a non-ASCII literal is kept as one unit. A pattern the rewriter does not
fully understand is not guessed at: the whole pattern set then stays with RE2.

Hyperscan's literal matchers are fast and a leading class or repeat (`[|] +[0-9]+ +NVIDIA ...`)
slows the whole database down (one pattern anchored at `^ *'/`, a two-byte literal, doubled the
scan's time), so each pattern is also cut to start at its longest run of literal characters
(`from_longest_literal`): every line the pattern matches holds a match of that tail, so the tail is
a superset too, and RE2 still decides.

Each expression reports at most one match per scan call (HS_FLAG_SINGLEMATCH), in order of end
offset; the callback stops the scan at the first match of a pattern that is still active, and the
next call starts at the next line. Patterns switched off meanwhile cost one report per call at
most, so the database, made for the groups active when it is compiled, is compiled again only
when groups are switched back on (a restart in the log). A database takes a few tenths of a
second to compile: it is kept in the user's cache folder (vllm_triage.usercache) for
the next run on a log of the same kind.
"""

from __future__ import annotations

import hashlib
import platform
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from vllm_triage.usercache import read_cached, write_cached

if TYPE_CHECKING:
    import hyperscan

# One more non-ASCII character where the rewritten pattern expects one character.
_HIGH_RUN = r"[\x80-\xff]+"
# Escapes that mean the same byte by byte as in RE2's UTF-8 mode (ASCII classes, anchors).
_SAME_ESCAPES = frozenset("swbBtnrfv")
# Escapes for one character of a negated ASCII class: a non-ASCII character is one of them.
_NEGATED_ESCAPES = frozenset("SW")


def _class_end(pattern: str, start: int) -> int | None:
    """The index just past the character class that opens at `start` (None if it never closes)."""
    i = start + 1
    if i < len(pattern) and pattern[i] == "^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1  # a ] right after [ or [^ is a literal
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
        elif c == "[" and pattern.startswith("[:", i):
            close = pattern.find(":]", i + 2)
            if close < 0:
                return None
            i = close + 2
        elif c == "]":
            return i + 1
        else:
            i += 1
    return None


def _unbounded_next(pattern: str, i: int) -> bool:
    """Whether the atom ending before `i` is repeated without an upper bound and may be absent or
    single (`*` or `+`): byte by byte, such a run covers any run of characters."""
    return i < len(pattern) and pattern[i] in "*+"


# Hyperscan finds literals fast and leading classes and repeats (`[|] +[0-9]+ +NVIDIA ...`) slowly.
_LEAD_LITERAL = 4
_SPECIAL = frozenset(".[](){}*+?|^$\\")
_OPTIONAL = frozenset("?*{")


def _group_end(pattern: str, start: int) -> int | None:
    """The index just past the group that opens at `start`, when nothing in it is an alternative
    at its own level (None otherwise, or when it never closes)."""
    end = _paren_end(pattern, start)
    if end is None or len(_alternatives(pattern[start + 1 : end - 1])) > 1:
        return None
    return end


def _paren_end(pattern: str, start: int) -> int | None:
    """The index just past the group that opens at `start`, alternatives in it or not (None
    when it never closes)."""
    depth, i = 0, start
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            end = _class_end(pattern, i)
            if end is None:
                return None
            i = end
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _literal_run(pattern: str, i: int) -> int:
    """How many characters, in a row from `i`, every match has there: plain characters and escaped
    punctuation, through groups without alternatives; an atom that may be absent ends the run."""
    run = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "(":
            end = _group_end(pattern, i)
            if end is None or (end < len(pattern) and pattern[end] in _OPTIONAL):
                return run
            i += 1
            continue
        if c == ")":
            i += 1
            continue
        if c == "\\" and i + 1 < len(pattern) and not pattern[i + 1].isalnum():
            width = 2
        elif c not in _SPECIAL:
            width = 1
        else:
            return run
        following = pattern[i + width] if i + width < len(pattern) else ""
        if following in _OPTIONAL:
            return run
        run += 1
        if following == "+":
            return run
        i += width
    return run


def from_longest_literal(pattern: str) -> str:
    """The pattern from its longest run of at least _LEAD_LITERAL literal characters at its top
    level on (the first of equal ones; a group of alternatives counts as its weakest one): a
    superset (every line the pattern matches holds a match of its tail), and Hyperscan's literal
    matchers then do the work that a leading class, repeat, anchor or short literal would make
    slow. The pattern itself when it has alternatives at its top level, or no such run past its
    start."""
    if _group_end(f"({pattern})", 0) is None:
        return pattern
    found = _longest_run(pattern)
    if found is None:
        return pattern
    best, run = found
    if run < _LEAD_LITERAL or best == 0 or pattern[:best] == "^":
        return pattern
    return pattern[best:]


def _longest_run(pattern: str) -> tuple[int, int] | None:
    """(index, length) of the longest literal run at the top level of `pattern` (an alternative
    of a group, or a whole one without alternatives at its top): a group of alternatives there
    is as long as its weakest alternative's longest run. None for what does not parse."""
    best, best_run = 0, 0
    i = 0
    while i < len(pattern):
        run = _literal_run(pattern, i)
        c = pattern[i]
        if c == "\\":
            step = i + 2
        elif c == "[":
            step = _class_end(pattern, i) or -1
        elif c == "(":
            step = _paren_end(pattern, i) or -1
            alternatives = _alternatives(pattern[i + 1 : step - 1]) if step > 0 else []
            if len(alternatives) > 1:
                weakest = [_longest_run(alternative) for alternative in alternatives]
                optional = step < len(pattern) and pattern[step] in _OPTIONAL
                if not optional and all(weakest):
                    run = min(found[1] for found in weakest if found is not None)
        else:
            step = i + 1
        if step < 0:
            return None
        if run > best_run:
            best, best_run = i, run
        i = step
    return best, best_run


def _alternatives(body: str) -> list[str]:
    """A group's body cut at its own level's `|`."""
    parts, depth, begin, i = [], 0, 0, 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i = _class_end(body, i) or len(body)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            parts.append(body[begin:i])
            begin = i + 1
        i += 1
    parts.append(body[begin:])
    return parts


def byte_superset(pattern: str) -> str | None:
    """A pattern that, matched byte by byte (Hyperscan without UTF-8 mode), matches every line that
    `pattern` matches in RE2's UTF-8 mode; None when the pattern uses something this rewriter
    does not handle (then it must not be used for Hyperscan at all).

    The knowledge's patterns are portable (schema.check_portable_pattern: no (?...), no \\d), so
    what is left is literals, escaped punctuation, `.`, classes, groups, `|`, quantifiers and
    anchors."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            if i + 1 >= len(pattern):
                return None
            escaped = pattern[i + 1]
            i += 2
            if escaped in _NEGATED_ESCAPES:
                atom = f"\\{escaped}"
                out.append(atom if _unbounded_next(pattern, i) else f"(?:{atom}|{_HIGH_RUN})")
            elif escaped in _SAME_ESCAPES or (escaped.isascii() and not escaped.isalnum()):
                out.append(f"\\{escaped}")
            else:
                return None  # \x.., \p{..}, back-references, \d: not guessed at
        elif c == "[":
            end = _class_end(pattern, i)
            if end is None:
                return None
            body = pattern[i:end]
            if not body.isascii():
                return None
            i = end
            negated = body.startswith("[^") or "\\S" in body or "\\W" in body
            if body.startswith("[^"):
                # RE2 reads one line at a time: a match never holds a newline. Hyperscan reads
                # the block, and a run of `[^|]*` that may cross lines keeps its state alive
                # to the end of the block (a fifth of the scan's time for one such pattern).
                body = body[:-1] + "\\n]"
            if negated and not _unbounded_next(pattern, i):
                out.append(f"(?:{body}|{_HIGH_RUN})")
            else:
                out.append(body)
        elif c == ".":
            i += 1
            out.append("." if _unbounded_next(pattern, i) else f"(?:.|{_HIGH_RUN})")
        elif c == "(":
            if pattern.startswith("(?", i):
                return None  # flags change what a byte means (case folding of non-ASCII)
            out.append(c)
            i += 1
        elif not c.isascii():
            out.append(f"(?:{c})")  # its bytes as one unit under a quantifier
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


class FastFailed(Exception):
    """Hyperscan failed while scanning (the scan goes on with RE2)."""


class FastFinder:
    """A compiled Hyperscan database over a list of patterns (ids are their indexes)."""

    def __init__(self, database: hyperscan.Database):
        import hyperscan

        self._hs = hyperscan
        self._database = database
        self._scratch = hyperscan.Scratch(database)
        # the pattern whose match ended the last `first_end`
        self.stopped_by: int | None = None

    @classmethod
    def compile(
        cls, patterns: Mapping[int, str], whole: frozenset[int] = frozenset()
    ) -> FastFinder | None:
        """The finder for these patterns (by id), or None when Hyperscan is not installed, the
        CPU lacks what it needs, or a pattern cannot be rewritten or compiled (RE2 alone then).
        A database is compiled once per process and pattern list, and kept in the user's cache
        folder for the next run (see _load and _store). The patterns in `whole` are not cut to
        their longest literal run: their tail proposed too many lines that RE2 then refused."""
        try:
            import hyperscan
        except ImportError:
            return None
        ids, expressions = [], []
        for pattern_id, pattern in sorted(patterns.items()):
            rewritten = byte_superset(
                pattern if pattern_id in whole else from_longest_literal(pattern)
            )
            if rewritten is None:
                return None
            ids.append(pattern_id)
            expressions.append(rewritten.encode())
        if not ids:
            return None
        flags = hyperscan.HS_FLAG_MULTILINE | hyperscan.HS_FLAG_ALLOWEMPTY
        flags |= hyperscan.HS_FLAG_SINGLEMATCH
        key = _key(str(getattr(hyperscan, "__version__", "")), flags, ids, expressions)
        with _CACHE_LOCK:
            if key in _CACHE:
                database = _CACHE[key]
                return None if database is None else cls(database)
        database = _load(key)
        if database is None:
            database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            try:
                database.compile(expressions=expressions, ids=ids, flags=[flags] * len(ids))
            except hyperscan.error:
                database = None
            else:
                _store(key, database)
        with _CACHE_LOCK:
            if len(_CACHE) >= 8:
                _CACHE.clear()
            _CACHE[key] = database
        return None if database is None else cls(database)

    def first_end(
        self,
        view: memoryview,
        start: int,
        end: int,
        active: list[bool],
        seen: set[int] | None = None,
    ) -> int | None:
        """The offset in `view` where the first match of an active pattern in view[start:end]
        ends (at most one report per pattern); None if none. An inactive pattern reported before
        that is passed over and added to `seen` (the prefilter learns which groups it no longer
        proposes show a line in the block)."""
        found: list[int] = []
        passed = set() if seen is None else seen

        def on_match(pattern: int, _from: int, to: int, _flags: int, _context: object) -> bool:
            if active[pattern]:
                found.append(to)
                self.stopped_by = pattern
                return True  # stop the scan here
            passed.add(pattern)
            return False

        # the stub says bytes or str; the extension takes any buffer (no copy of the block)
        data: Any = view[start:end]
        try:
            self._database.scan(data, match_event_handler=on_match, scratch=self._scratch)
        except self._hs.ScanTerminated:
            pass
        except self._hs.error as exc:
            raise FastFailed(str(exc)) from exc
        return start + found[0] if found else None


class FastCompile:
    """Compiles a FastFinder in a background thread (Hyperscan releases the GIL while it
    compiles): meanwhile the reading thread reads ahead, or, after a restart in the log, RE2
    searches on."""

    def __init__(self, patterns: Mapping[int, str], whole: frozenset[int] = frozenset()):
        self._patterns = dict(patterns)
        self._whole = whole
        self._result: FastFinder | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hyperscan-compile", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._result = FastFinder.compile(self._patterns, self._whole)
        finally:
            self._done.set()

    @property
    def ready(self) -> bool:
        return self._done.is_set()

    def result(self, wait: bool = False) -> FastFinder | None:
        """The finder once compiled (None while compiling unless `wait`, or when unusable)."""
        if wait:
            self._done.wait()
        return self._result if self._done.is_set() else None


_CACHE_LOCK = threading.Lock()
# key (see _key) -> database, or None when it cannot be compiled
_CACHE: dict[str, hyperscan.Database | None] = {}

# The databases kept between runs (vllm_triage.usercache: private to the user, size capped).
_DISK_PREFIX = "hyperscan-"
_DISK_MAX_BYTES = 64 << 20
_DISK_FILES = 16


def _key(version: str, flags: int, ids: list[int], expressions: list[bytes]) -> str:
    """What a database is made from: Hyperscan's version, the machine, flags and patterns."""
    digest = hashlib.sha256()
    for part in (version, platform.machine(), str(flags)):
        digest.update(part.encode() + b"\0")
    for pattern_id, expression in zip(ids, expressions, strict=True):
        digest.update(f"{pattern_id}\0{len(expression)}\0".encode() + expression)
    return digest.hexdigest()


def _load(key: str) -> hyperscan.Database | None:
    """The database kept under this key, if there is one this user alone could have written and
    this machine's Hyperscan accepts; else None (it is compiled again)."""
    import hyperscan

    payload = read_cached(f"{_DISK_PREFIX}{key[:32]}.db", key, _DISK_MAX_BYTES)
    if payload is None:
        return None
    try:
        database = hyperscan.loadb(payload, hyperscan.HS_MODE_BLOCK)
        # this CPU can run it (a cache folder shared between machines)
        database.scan(b"probe\n", _ignore, scratch=hyperscan.Scratch(database))
    except hyperscan.error:
        return None
    return database


def _ignore(*_args: object) -> None:
    return None


def _store(key: str, database: hyperscan.Database) -> None:
    """Keep the database for the next run (the oldest go past _DISK_FILES)."""
    import hyperscan

    try:
        payload = hyperscan.dumpb(database)
    except hyperscan.error:
        return
    write_cached(f"{_DISK_PREFIX}{key[:32]}.db", key, payload, keep_newest=_DISK_FILES)
