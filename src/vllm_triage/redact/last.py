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
from typing import Any

import re2

from vllm_triage.knowledge.schema import RedactionRule, re2_superset
from vllm_triage.redact.scanner import MIN_RUN, Found, line_end, random_token

# A run of letters and digits at least MIN_RUN long with a letter that is not hex: the only runs
# `random_token` can pass (its longest run; hex runs, numbers and short runs are kept), spelt by
# where the first such letter is, so that RE2 yields few matches (each costs a Python call).
_HEX = b"[0-9a-fA-F]"
_RUN = b"[A-Za-z0-9]"
_LONG_RUN = re2.compile(
    b"|".join(
        [
            _HEX + b"{%d}[g-zG-Z]" % at + _RUN + b"{%d,}" % (MIN_RUN - 1 - at)
            for at in range(MIN_RUN)
        ]
        + [_HEX + b"{%d,}[g-zG-Z]" % MIN_RUN + _RUN + b"*"]
    )
)
_DIGIT = re.compile(rb"[0-9]")
_COUNTED = re.compile(r"(?<!\\)\{([0-9]+),[0-9]*\}")
# A digest's name this far before a token keeps it (sha256 47DEQpj8...: evidence).
_KEPT_AFTER_WINDOW = 24


@dataclass(frozen=True)
class LastRule:
    """A last rule compiled: its Python pattern, and the RE2 that finds its lines (None: the
    mixed runs of an entropy rule)."""

    rule: RedactionRule
    pattern: re.Pattern[str]
    lines: Any
    bigrams: frozenset[str]

    @classmethod
    def of(cls, rule: RedactionRule) -> LastRule:
        pattern = re.compile(rule.match, re.MULTILINE | re.ASCII)
        if rule.entropy is not None:
            return cls(rule, pattern, None, frozenset(rule.word_bigrams))
        options = re2.Options()
        options.max_mem = 64 << 20
        # Counted repeats loosened (`{8,1000}` to `+`): still a superset, and a far smaller DFA.
        loose = _COUNTED.sub(lambda m: "*" if m.group(1) == "0" else "+", re2_superset(rule.match))
        lines = re2.compile(("(?m)" + loose).encode(), options)
        return cls(rule, pattern, lines, frozenset())

    def find(self, text: str, data: bytes) -> list[Found]:
        """The rule's secrets in `text` (its group `secret`), less those its checks keep: too
        little entropy, or a digest's name shortly before. `data`: scanner.ascii_bytes(text)."""
        found: list[Found] = []
        kept_after = tuple(word.lower() for word in self.rule.exceptions)
        for start, end in _candidate_lines(self, text, data):
            for match in self.pattern.finditer(text, start, end):
                secret_start, secret_end = match.span("secret")
                entropy = self.rule.entropy
                secret = match.group("secret")
                if entropy is not None and not random_token(secret, entropy, self.bigrams):
                    continue
                before = text[max(start, secret_start - _KEPT_AFTER_WINDOW) : secret_start]
                if kept_after and any(word in before.lower() for word in kept_after):
                    continue
                found.append(Found(secret_start, secret_end, self.rule.id))
        return found


def _candidate_lines(rule: LastRule, text: str, data: bytes) -> Iterator[tuple[int, int]]:
    """The lines (start, end) that hold a place where the rule can match, each once, in order.
    `data` is the text with non-ASCII characters as one byte each, so offsets are shared."""
    covered = -1
    for hit in (rule.lines or _LONG_RUN).finditer(data):
        start, end = hit.span()
        if rule.lines is None and _DIGIT.search(data, start, end) is None:
            continue
        if start <= covered:
            continue
        line_start = text.rfind("\n", 0, start) + 1
        covered = line_end(text, max(start, end - 1))
        yield line_start, covered
