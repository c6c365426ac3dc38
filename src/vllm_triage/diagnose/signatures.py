"""The knowledge's line patterns compiled for matching: which rules, milestones, stop lines,
access lines and facts a normalised line matches, and what it says.

Every pattern of the knowledge base goes into one RE2 set, built once per knowledge base: one
pass over a candidate line names every pattern it matches (instead of one search per rule).
Python's re is compiled only to read values out of a line (a "found version", an HTTP status),
for the few patterns that matched. The patterns are portable (RE2, re and grep -E read them
alike), so the set never says something re would not.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import re2

from vllm_triage.diagnose.logreader import LogLine
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.knowledge.schema import (
    LifecycleEvent,
    LogFactRule,
    Milestone,
    RequestLine,
    Signature,
)

# Lines logged at these levels are progress reports; an error phrase inside one is not an error.
_QUIET_LEVELS = {"DEBUG", "INFO"}
# A weak symptom (the catch-all for any "Error:") does not count inside a WARNING either: a
# warning that quotes an error ("... can cause `OSError: Too many open files`") is advice.
_QUIET_FOR_WEAK = _QUIET_LEVELS | {"WARNING"}
WEAK_CONFIDENCE = 0.3
_SET_MEMORY = 256 << 20

Kind = Literal["sig", "ms", "life", "req", "fact"]


def _alternation(patterns: Sequence[str]) -> str:
    return "|".join(f"(?:{p})" for p in patterns)


def encoded(line: LogLine) -> bytes:
    """A line's message as the RE2 gates read it (UTF-8; a lone surrogate cannot stop a scan)."""
    return line.message.encode("utf-8", "surrogatepass")


def _gate(patterns: Sequence[str]) -> Any:
    """The patterns as one RE2 expression over a line's UTF-8 bytes (see `encoded`)."""
    options = re2.Options()
    options.never_capture = True
    return re2.compile(_alternation(patterns).encode(), options)


@dataclass(frozen=True)
class _Matcher:
    """One rule's patterns matched on their own (RE2 first, then re), both compiled on first use:
    the scanner matches every rule at once with the set of CompiledKnowledge instead."""

    patterns: list[str]

    @classmethod
    def of(cls, patterns: list[str]) -> _Matcher:
        return cls(patterns)

    @cached_property
    def gate(self) -> Any:
        return _gate(self.patterns)

    @cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(_alternation(self.patterns))

    def search(self, line: LogLine, raw: bytes) -> bool:
        """Whether the line (raw: its `encoded` message) matches: RE2 first, then re."""
        return self.gate.search(raw) is not None and self.regex.search(line.message) is not None


@dataclass(frozen=True)
class CompiledSignature:
    signature: Signature
    matcher: _Matcher

    @classmethod
    def of(cls, signature: Signature) -> CompiledSignature:
        return cls(signature, _Matcher.of(signature.patterns))

    @property
    def regex(self) -> re.Pattern[str]:
        return self.matcher.regex

    @cached_property
    def extractors(self) -> dict[str, re.Pattern[str]]:
        return {name: re.compile(p) for name, p in self.signature.extract.items()}

    @property
    def weak(self) -> bool:
        """A symptom too vague to name a cause (the catch-all): it never counts in a warning."""
        return self.signature.tier == "symptom" and self.signature.confidence < WEAK_CONFIDENCE

    def fires_on(self, line: LogLine, raw: bytes) -> bool:
        return self.matcher.search(line, raw)

    def counts_at(self, line: LogLine) -> bool:
        """Whether a match on this line is evidence. A stall is read from progress lines, and a
        refused request is often logged at INFO; an error phrase in an INFO line is not an error."""
        if self.signature.tier in ("stall", "request") or self.signature.any_level:
            return True
        return line.level not in (_QUIET_FOR_WEAK if self.weak else _QUIET_LEVELS)

    def extract(self, line: LogLine) -> dict[str, str]:
        found = {}
        for name, regex in self.extractors.items():
            if match := regex.search(line.message):
                found[name] = match.group(1)
        return found


@dataclass(frozen=True)
class CompiledMilestone:
    milestone: Milestone
    rank: int
    matcher: _Matcher

    @classmethod
    def of(cls, milestone: Milestone, rank: int) -> CompiledMilestone:
        return cls(milestone, rank, _Matcher.of(milestone.patterns))

    def seen_in(self, line: LogLine, raw: bytes) -> bool:
        return self.matcher.search(line, raw)


@dataclass(frozen=True)
class _Valued:
    """A pattern list whose one group is a value (an HTTP status, a version)."""

    patterns: list[str]

    @cached_property
    def regexes(self) -> list[re.Pattern[str]]:
        return [re.compile(p) for p in self.patterns]

    def value(self, line: LogLine) -> str | None:
        for regex in self.regexes:
            if (match := regex.search(line.message)) and match.group(1):
                return match.group(1)
        return None


@dataclass(frozen=True)
class CompiledRequestLine:
    rule: RequestLine
    reader: _Valued

    @cached_property
    def probes(self) -> list[re.Pattern[str]]:
        return [re.compile(p) for p in self.rule.probes]

    def is_probe(self, line: LogLine) -> bool:
        """A health, metrics or model-list probe: answered, but not a request served."""
        return any(regex.search(line.message) for regex in self.probes)


@dataclass(frozen=True)
class CompiledFact:
    rule: LogFactRule
    reader: _Valued


_KINDS: tuple[Kind, ...] = ("ms", "life", "req", "fact", "sig")


def _order(owner: tuple[Kind, int]) -> tuple[int, int]:
    return _KINDS.index(owner[0]), owner[1]


@dataclass
class CompiledKnowledge:
    """Every line pattern of a knowledge base, compiled once: the RE2 set that names the patterns a
    line matches, and the prefilter groups (one per rule, milestone, stop line, access line and
    fact)."""

    rules: list[CompiledSignature]
    milestones: list[CompiledMilestone]
    lifecycle: list[LifecycleEvent]
    requests: list[CompiledRequestLine]
    facts: list[CompiledFact]
    groups: dict[str, list[str]] = field(default_factory=dict)
    _owners: list[tuple[Kind, int]] = field(default_factory=list)
    _set: Any = None

    @classmethod
    def of(cls, kb: KnowledgeBase) -> CompiledKnowledge:
        phases = kb.phases
        compiled = cls(
            rules=[CompiledSignature.of(s) for s in kb.signatures],
            milestones=[CompiledMilestone.of(m, rank) for rank, m in enumerate(phases.milestones)],
            lifecycle=list(phases.lifecycle),
            requests=[CompiledRequestLine(r, _Valued(r.patterns)) for r in phases.requests],
            facts=[CompiledFact(f, _Valued(f.patterns)) for f in phases.facts],
        )
        compiled._build()
        return compiled

    def _build(self) -> None:
        named: list[tuple[Kind, int, str, list[str]]] = []
        named += [
            ("sig", i, f"sig:{r.signature.id}", r.signature.patterns)
            for i, r in enumerate(self.rules)
        ]
        named += [
            ("ms", i, f"ms:{m.milestone.id}", m.milestone.patterns)
            for i, m in enumerate(self.milestones)
        ]
        named += [("life", i, f"life:{e.id}", e.patterns) for i, e in enumerate(self.lifecycle)]
        named += [
            ("req", i, f"req:{r.rule.id}", r.rule.patterns) for i, r in enumerate(self.requests)
        ]
        named += [("fact", i, f"fact:{f.rule.id}", f.rule.patterns) for i, f in enumerate(self.facts)]  # fmt: skip
        options = re2.Options()
        options.max_mem = _SET_MEMORY
        options.never_capture = True
        self._set = re2.Set.SearchSet(options)
        for kind, index, key, patterns in named:
            self.groups[key] = list(patterns)
            for pattern in patterns:
                self._set.Add(pattern.encode())
                self._owners.append((kind, index))
        self._set.Compile()

    def matches(self, raw: bytes) -> list[tuple[Kind, int]]:
        """Which milestones, stop lines, access lines, facts and rules match a line (raw: its
        `encoded` message), each once, in that order."""
        found = self._set.Match(raw)
        return sorted({self._owners[i] for i in found}, key=_order) if found else []

    @cached_property
    def by_id(self) -> dict[str, CompiledSignature]:
        return {r.signature.id: r for r in self.rules}


_CACHE: dict[int, tuple[KnowledgeBase, CompiledKnowledge]] = {}


def compiled_knowledge(kb: KnowledgeBase) -> CompiledKnowledge:
    """The compiled patterns of this knowledge base (built once per knowledge base)."""
    entry = _CACHE.get(id(kb))
    if entry is None or entry[0] is not kb:
        if len(_CACHE) >= 8:
            _CACHE.clear()
        entry = _CACHE[id(kb)] = (kb, CompiledKnowledge.of(kb))
    return entry[1]
