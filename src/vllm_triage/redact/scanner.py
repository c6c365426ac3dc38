"""A published secret scanner's rules over text, applied as that scanner applies them.

The rules are data (knowledge/data/gitleaks_rules.yaml: gitleaks' default rule set, with its
source and commit). A rule runs only on text that holds one of its keywords (one RE2 pass over the
lowercased text finds them all); its secret is the rule's group (or the first group that matched,
or the whole match); a secret below the rule's entropy is dropped, and so is one that the rule's
or the global allowlists describe. The redactor runs this after its own rules, on what they left
in clear.
"""

from __future__ import annotations

import codecs
import math
import re
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import re2

from vllm_triage.knowledge.schema import SecretAllowlist, SecretRule, SecretRuleSet
from vllm_triage.redact.compiled import CompiledOnce
from vllm_triage.redact.keywords import KeywordFinder

# The prefix of a scanner rule's id in markers and counts: [REDACTED:gl_github_pat:...].
RULE_PREFIX = "gl_"

_SUB = "vllm_triage_sub"


def _substitute(error: UnicodeError) -> tuple[str, int]:
    assert isinstance(error, UnicodeEncodeError)
    return "\x1a" * (error.end - error.start), error.end


codecs.register_error(_SUB, _substitute)


def ascii_bytes(text: str) -> bytes:
    """`text` as ASCII bytes with every non-ASCII character as one SUB (0x1A), so that byte
    offsets are those of `text`: RE2's Python binding converts offsets between UTF-8 and
    characters on every match of a non-ASCII text (quadratic on a long one), lone surrogates
    (undecodable bytes) do not encode at all, and no key is made of non-ASCII characters."""
    return text.encode("ascii", _SUB)


def ascii_proxy(text: str) -> str:
    """`text` with every non-ASCII character as one SUB, as `ascii_bytes` makes it."""
    return text if text.isascii() else ascii_bytes(text).decode("ascii")


_RUNS = re.compile(r"[A-Za-z0-9]+")
_DIGIT = re.compile(r"[0-9]")
_HEX = re.compile(r"[0-9a-fA-F]+")
_WORDS = re.compile(r"[A-Z]?[a-z]{3,}|[A-Z]{3,}(?![a-z])")
# The shortest alphanumeric run a random token has (shorter ones are ids, words, numbers).
MIN_RUN = 16
# The share of a run's letter pairs among English's commonest from which the run reads as words.
_WORD_PAIRS = 0.2
# A keyword rule reads the lines of its keywords and this far past each (a value on the next
# lines of pretty-printed JSON, a PEM key block); past this many keywords in a text, all of it.
_AFTER = 8 * 1024
_MAX_WINDOWS = 64


@dataclass(frozen=True)
class Found:
    """A secret in the text: where it is, and the marker id of the rule that found it."""

    start: int
    end: int
    rule_id: str


def line_end(text: str, position: int) -> int:
    """Where the line holding `position` ends (its newline, or the text's end)."""
    newline = text.find("\n", position)
    return len(text) if newline < 0 else newline


def marker_id(rule: SecretRule) -> str:
    """The rule's id as a marker and a count name carry it (lower case, digits, underscores)."""
    return RULE_PREFIX + rule.id.replace("-", "_")


def shannon_entropy(text: str) -> float:
    """Bits per character of `text`, as gitleaks measures a secret."""
    if not text:
        return 0.0
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in Counter(text).values())


def random_token(token: str, bits: float, bigrams: frozenset[str] = frozenset()) -> bool:
    """Whether a token reads as random (a key with no name or prefix to tell it): its longest
    alphanumeric run is MIN_RUN characters or more, mixes letters and digits, is not hex
    (digests, request and device ids) nor mostly words (class and model names: runs of letters
    about a third of them vowels, as words have, where random letters have a fifth; a run in
    lower case alone, with no case to mark its words, must also pair its letters as English
    does, often among `bigrams`, which random letters hit a few times in a hundred), and carries
    at least `bits` bits per character. C++ mangled symbols (`_Z...`) are names too."""
    if token.startswith("_Z") or not _DIGIT.search(token):
        return False
    run = max(_RUNS.findall(token), key=len, default="")
    if run[:2] in ("0x", "0X"):
        run = run[2:]  # a hex number (a GUID, an address)
    if len(run) < MIN_RUN or run.isdigit() or run.isalpha() or _HEX.fullmatch(run):
        return False
    words = _WORDS.findall(run)
    letters = sum(map(len, words))
    vowels = sum(c in "aeiouAEIOU" for word in words for c in word)
    if (
        letters * 2 >= len(run)
        and vowels * 10 >= letters * 3
        and (not run.islower() or _common_pairs(words, bigrams) >= _WORD_PAIRS)
    ):
        return False  # mostly runs of letters with the vowels (and, in one case, pairs) of words
    return shannon_entropy(run) >= bits


def _common_pairs(words: list[str], bigrams: frozenset[str]) -> float:
    """The share of the letter pairs inside `words` that are among `bigrams`."""
    pairs = [word[i : i + 2].lower() for word in words for i in range(len(word) - 1)]
    return sum(pair in bigrams for pair in pairs) / len(pairs) if pairs else 0.0


class _Allowlist:
    def __init__(self, allowlist: SecretAllowlist) -> None:
        self.regexes = [re2.compile(pattern) for pattern in allowlist.regexes]
        self.target = allowlist.regex_target
        self.stopwords = [word.lower() for word in allowlist.stopwords]
        self.all_of = allowlist.condition == "AND"
        # A path criterion never holds here: text has no path.
        self.has_paths = bool(allowlist.paths)

    def allows(self, secret: str, match: str, line: str) -> bool:
        target = {"secret": secret, "match": match, "line": line}[self.target]
        checks: list[bool] = []
        if self.regexes:
            checks.append(any(regex.search(target) for regex in self.regexes))
        if self.stopwords:
            lowered = secret.lower()
            checks.append(any(word in lowered for word in self.stopwords))
        if self.has_paths:
            checks.append(False)
        return all(checks) if self.all_of else any(checks)


class _Rule:
    def __init__(self, rule: SecretRule, allowlists: list[_Allowlist]) -> None:
        assert rule.regex is not None
        self.id = marker_id(rule)
        self.regex = re2.compile(rule.regex)
        self.group = rule.secret_group
        self.entropy = rule.entropy
        self.generic = rule.id.startswith("generic")
        self.allowlists = allowlists

    def find(self, data: bytes, offset: int = 0) -> Iterator[Found]:
        """The rule's secrets in `data` (ASCII: see ascii_bytes), offsets moved by `offset`."""
        for match in self.regex.finditer(data):
            span = self._secret_span(match)
            if span is None:
                continue
            start, end = span
            secret = data[start:end].decode("ascii")
            if self.entropy and (
                shannon_entropy(secret) <= self.entropy
                or (self.generic and not any(c.isdigit() for c in secret))
            ):
                continue
            line_start = data.rfind(b"\n", 0, start) + 1
            newline = data.find(b"\n", end)
            line = data[line_start : len(data) if newline < 0 else newline].decode("ascii")
            matched = match.group().decode("ascii")
            if any(a.allows(secret, matched, line) for a in self.allowlists):
                continue
            yield Found(offset + start, offset + end, self.id)

    def _secret_span(self, match: Any) -> tuple[int, int] | None:
        groups = match.re.groups
        if self.group and self.group <= groups:
            start, end = match.span(self.group)
        elif groups:
            index = next((i for i in range(1, groups + 1) if match.group(i)), None)
            if index is None:
                return None
            start, end = match.span(index)
        else:
            start, end = match.span()
        return (start, end) if end > start else None


class SecretScanner:
    """The rule set compiled: the keywords in one RE2 pattern, each rule's regex on first use."""

    def __init__(self, rules: SecretRuleSet) -> None:
        self._rules = [rule for rule in rules.rules if rule.regex is not None]
        self._global = _Allowlist(rules.global_allowlist)
        self._by_keyword: dict[str, list[int]] = {}
        self._always: list[int] = []
        for index, rule in enumerate(self._rules):
            if not rule.keywords:
                self._always.append(index)
            for keyword in rule.keywords:
                self._by_keyword.setdefault(keyword.lower(), []).append(index)
        self._compiled: dict[int, _Rule] = {}
        self._lock = threading.Lock()

    @cached_property
    def _keywords(self) -> KeywordFinder:
        return KeywordFinder(list(self._by_keyword))

    def find(self, text: str, data: bytes | None = None) -> list[Found]:
        """Every secret the rules find in `text`, in order, without overlaps. `data`: the text
        as ascii_bytes makes it, when the caller has it already."""
        data = ascii_bytes(text) if data is None else data
        places = self._keywords.places(data, _MAX_WINDOWS)
        candidates = set(self._always)
        for word in places:
            candidates.update(self._by_keyword[word])
        found: list[Found] = []
        for index in sorted(candidates):
            rule = self._rule(index)
            keywords = [k.lower() for k in self._rules[index].keywords if k.lower() in places]
            windows = _windows(data, [places[k] for k in keywords]) if keywords else None
            if windows is None:
                found += rule.find(data)
            else:
                for start, end in windows:
                    found += rule.find(data[start:end], start)
        found.sort(key=lambda f: (f.start, -f.end))
        kept: list[Found] = []
        for item in found:
            if not kept or item.start >= kept[-1].end:
                kept.append(item)
        return kept

    def _rule(self, index: int) -> _Rule:
        compiled = self._compiled.get(index)
        if compiled is None:
            with self._lock:
                rule = self._rules[index]
                compiled = _Rule(rule, [self._global, *map(_Allowlist, rule.allowlists)])
                self._compiled[index] = compiled
        return compiled


def _windows(data: bytes, places: list[list[int] | None]) -> list[tuple[int, int]] | None:
    """The parts of the text a keyword rule needs to read: from the start of each line that holds
    one of its keywords to _AFTER characters past it (a value on the next lines, a key block);
    None when the keywords are so frequent that the whole text is as cheap."""
    spans: list[tuple[int, int]] = []
    for positions in places:
        if positions is None:
            return None
        spans += [(data.rfind(b"\n", 0, p) + 1, min(len(data), p + _AFTER)) for p in positions]
    if len(spans) > _MAX_WINDOWS:
        return None
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


secret_scanner = CompiledOnce(SecretScanner)
"""The scanner of a knowledge base's rule set (compiled once, then shared)."""
