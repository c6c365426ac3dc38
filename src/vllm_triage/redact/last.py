"""The rules that run last, on what the other rules left in clear (a random token with no name, a
secret after a word of prose).

Their Python patterns bound a token with lookarounds, which RE2 cannot run; tried at every place
of a log they cost most of the redaction. So RE2 first finds the lines where each rule can match
(for an entropy rule: a run of letters and digits long and mixed enough to pass `random_token`;
for the others: a match of the pattern without its lookarounds), and the Python pattern runs on
those lines only. A last rule's match never spans lines, so what it finds is what it would find
on the whole text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import re2

from vllm_triage.knowledge.schema import RedactionRule, re2_superset
from vllm_triage.redact.scanner import MIN_RUN, Found, line_end, random_token

# A run of letters and digits at least MIN_RUN long with a letter that is not hex: the only runs
# `random_token` can pass (its longest run; hex runs, numbers and short runs are kept), spelt by
# where the first such letter is, so that RE2 yields few matches (each costs a Python call).
_HEX = "[0-9a-fA-F]"
_RUN = "[A-Za-z0-9]"
_LONG_RUN = "|".join(
    [f"{_HEX}{{{at}}}[g-zG-Z]{_RUN}{{{MIN_RUN - 1 - at},}}" for at in range(MIN_RUN)]
    + [f"{_HEX}{{{MIN_RUN},}}[g-zG-Z]{_RUN}*"]
)
_COUNTED = re.compile(r"(?<!\\)\{([0-9]+),[0-9]*\}")
# A digest's name this far before a token keeps it (sha256 47DEQpj8...: evidence).
_KEPT_AFTER_WINDOW = 24


@dataclass(frozen=True)
class LastRule:
    """A last rule compiled: its Python pattern, and the RE2 source of what its lines hold."""

    rule: RedactionRule
    pattern: re.Pattern[str]
    lines: str
    bigrams: frozenset[str]

    @classmethod
    def of(cls, rule: RedactionRule) -> LastRule:
        pattern = re.compile(rule.match, re.MULTILINE | re.ASCII)
        if rule.entropy is not None:
            return cls(rule, pattern, _LONG_RUN, frozenset(rule.word_bigrams))
        # Counted repeats loosened (`{8,1000}` to `+`): still a superset, and a far smaller DFA.
        loose = _COUNTED.sub(lambda m: "*" if m.group(1) == "0" else "+", re2_superset(rule.match))
        return cls(rule, pattern, loose, frozenset())

    def find_in(self, text: str, start: int, end: int) -> Iterator[Found]:
        """The rule's secrets in text[start:end] (whole lines; its group `secret`), less those
        its checks keep: too little entropy, or a digest's name shortly before."""
        kept_after = tuple(word.lower() for word in self.rule.exceptions)
        entropy = self.rule.entropy
        for match in self.pattern.finditer(text, start, end):
            secret_start, secret_end = match.span("secret")
            if entropy is not None and not random_token(
                match.group("secret"), entropy, self.bigrams
            ):
                continue
            before = text[max(start, secret_start - _KEPT_AFTER_WINDOW) : secret_start]
            if kept_after and any(word in before.lower() for word in kept_after):
                continue
            yield Found(secret_start, secret_end, self.rule.id)


class LastRules:
    """The last rules of a knowledge base, with one RE2 over what any of their lines holds."""

    def __init__(self, rules: list[RedactionRule]) -> None:
        self.rules = tuple(map(LastRule.of, rules))
        options = re2.Options()
        options.max_mem = 64 << 20
        source = "|".join(f"(?:{rule.lines})" for rule in self.rules)
        self._lines = re2.compile(f"(?m){source}".encode(), options) if self.rules else None

    def find(self, text: str, data: bytes) -> list[Found]:
        """Every last rule's secrets in `text`; `data` is scanner.ascii_bytes(text)."""
        found: list[Found] = []
        for start, end in self._candidate_lines(text, data):
            for rule in self.rules:
                found += rule.find_in(text, start, end)
        return found

    def _candidate_lines(self, text: str, data: bytes) -> Iterator[tuple[int, int]]:
        """The lines (start, end) that hold a place where a rule can match, each once, in order.
        `data` has one byte per character of `text`, so offsets are shared."""
        if self._lines is None:
            return
        covered = -1
        for hit in self._lines.finditer(data):
            start, end = hit.span()
            if start <= covered:
                continue
            line_start = text.rfind("\n", 0, start) + 1
            covered = line_end(text, max(start, end - 1))
            yield line_start, covered
