"""Where a rule set's keywords are in a text: which are there at all, and where each is while it
is rare enough for its rules to read only the lines around it.

One pass for all keywords, case-insensitive: Hyperscan where it is installed (its literal
matchers read several GB/s), RE2 otherwise. A keyword frequent in the text's first _SAMPLE
bytes is not looked for further (in vLLM logs `token` and `api` are on most lines; a Python
step per place would cost more than all the rules), nor one past `limit` places: the caller
reads the whole text for those.
"""

from __future__ import annotations

import threading
from typing import Any

import re2

# A keyword seen more than _SAMPLE_PLACES times in the first _SAMPLE bytes is taken as frequent.
_SAMPLE = 64 * 1024
_SAMPLE_PLACES = 8
# Finders kept compiled, one per set of keywords left out (a log's blocks share a few such sets).
_MAX_FINDERS = 64

Places = dict[str, list[int] | None]


class KeywordFinder:
    """The keywords (lower case, ASCII) of a rule set, found in ASCII bytes. Thread-safe."""

    def __init__(self, words: list[str], *, hyperscan: bool = True) -> None:
        self._words = sorted({word for word in words if word and word.isascii()})
        self._hyperscan = hyperscan
        self._finders: dict[frozenset[str], _Finder | None] = {}
        self._lock = threading.Lock()

    def places(self, data: bytes, limit: int) -> Places:
        """Every keyword in `data`, with where it starts, or None once past `limit` places."""
        places: Places = {}
        if len(data) > _SAMPLE:
            self._look(data[:_SAMPLE], places, _SAMPLE_PLACES)
            for word, kept in places.items():
                places[word] = None if kept is None else []  # looked for again, from the start
        self._look(data, places, limit)
        return places

    def _look(self, data: bytes, places: Places, limit: int) -> None:
        skipped = frozenset(word for word, kept in places.items() if kept is None)
        position = 0
        while (finder := self._finder(skipped)) is not None:
            stopped = finder.scan(data, position, places, limit)
            if stopped is None:
                return
            full, position = stopped
            for word in full:
                places[word] = None  # frequent: look on from here for the others only
            skipped = skipped | set(full)

    def _finder(self, skipped: frozenset[str]) -> _Finder | None:
        with self._lock:
            if skipped in self._finders:
                return self._finders[skipped]
        words = [word for word in self._words if word not in skipped]
        fast = _HyperscanFinder.of(words) if words and self._hyperscan else None
        finder = (fast or _Re2Finder(words)) if words else None
        with self._lock:
            if len(self._finders) >= _MAX_FINDERS:
                self._finders.clear()
            self._finders[skipped] = finder
        return finder


class _Finder:
    """One compiled alternation of keywords."""

    def scan(
        self, data: bytes, position: int, places: Places, limit: int
    ) -> tuple[list[str], int] | None:
        """Adds the places of its keywords in data[position:] to `places`; stops at the first
        place where keywords pass `limit` and returns them with where to go on, or None at the
        end."""
        raise NotImplementedError


class _Re2Finder(_Finder):
    def __init__(self, words: list[str]) -> None:
        options = re2.Options()
        options.case_sensitive = False
        longest_first = sorted(words, key=len, reverse=True)
        source = "|".join(re2.escape(word) for word in longest_first)
        self._regex = re2.compile(source.encode("ascii"), options)
        self._by_first: dict[int, list[tuple[str, bytes]]] = {}
        for word in longest_first:
            self._by_first.setdefault(ord(word[0]), []).append((word, word.encode("ascii")))
        self._longest = len(longest_first[0])

    def scan(
        self, data: bytes, position: int, places: Places, limit: int
    ) -> tuple[list[str], int] | None:
        while (hit := self._regex.search(data, position)) is not None:
            at = hit.start()
            position = at + 1
            here = data[at : at + self._longest].lower()
            full = [
                word
                for word, encoded in self._by_first.get(here[0], ())
                if here.startswith(encoded) and _add(places, word, at, limit)
            ]
            if full:
                return full, position
        return None


class _HyperscanFinder(_Finder):
    def __init__(self, hyperscan: Any, database: Any, words: list[str]) -> None:
        self._hs, self._database, self._words = hyperscan, database, words

    @classmethod
    def of(cls, words: list[str]) -> _HyperscanFinder | None:
        """The finder, or None where Hyperscan is not installed or will not compile them."""
        try:
            import hyperscan
        except ImportError:
            return None
        database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        try:
            database.compile(
                expressions=[re2.escape(word).encode("ascii") for word in words],
                ids=list(range(len(words))),
                flags=[hyperscan.HS_FLAG_CASELESS] * len(words),
            )
        except hyperscan.error:
            return None
        return cls(hyperscan, database, words)

    def scan(
        self, data: bytes, position: int, places: Places, limit: int
    ) -> tuple[list[str], int] | None:
        # One pass sees every place of every keyword, so a keyword past the limit is simply
        # marked and the others go on (a callback per place: few once the sample left out the
        # frequent ones).
        hits: list[tuple[int, int]] = []

        def on_match(index: int, _from: int, to: int, _flags: int, _context: object) -> bool:
            hits.append((position + to - len(self._words[index]), index))
            return False

        view: Any = memoryview(data)[position:]  # the stub says bytes; any buffer will do
        try:
            self._database.scan(view, match_event_handler=on_match, scratch=self._scratch())
        except self._hs.error:
            return _Re2Finder(self._words).scan(data, position, places, limit)
        for at, index in sorted(hits):
            word = self._words[index]
            if _add(places, word, at, limit):
                places[word] = None
        return None

    def _scratch(self) -> Any:
        # a scratch space per scan: it costs about a microsecond, and scans may run in threads
        return self._hs.Scratch(self._database)


def _add(places: Places, word: str, at: int, limit: int) -> bool:
    """Notes `word` at `at`; True when that is one place past `limit` (the word is frequent)."""
    kept = places.setdefault(word, [])
    if kept is None:
        return False
    if len(kept) >= limit:
        return True
    kept.append(at)
    return False
