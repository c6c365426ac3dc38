"""One pass over one log: which signatures fire where, and which start-up milestones were reached."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import BinaryIO

from vllm_triage.diagnose.logreader import LogLine, LogScanner, Prefilter, normalize
from vllm_triage.diagnose.signatures import CompiledMilestone, CompiledSignature
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.models import Evidence, Phase

MAX_EVIDENCE_PER_RULE = 3
# A phrase that keeps matching only inside INFO lines stops being looked for after this many.
MAX_QUIET_MATCHES = 200


@dataclass
class Hit:
    """Where one signature fired in one file."""

    rule: CompiledSignature
    file: str
    first_line: int
    phase_seen: Phase | None
    evidence: list[Evidence] = field(default_factory=list)
    facts: dict[str, str] = field(default_factory=dict)


@dataclass
class FileScan:
    """What one pass over a file found."""

    name: str
    lines_read: int
    hits: dict[str, Hit]
    milestones: dict[str, int]
    phase_reached: Phase | None
    restarts: int
    tail: list[LogLine]


class _PhaseTracker:
    """Follows start-up milestones in order; an early milestone after later ones is a restart."""

    def __init__(self, milestones: list[CompiledMilestone]):
        self._milestones = milestones
        self.rank = -1
        self.first_seen: dict[str, int] = {}
        self.restarts = 0

    @property
    def phase(self) -> Phase | None:
        return self._milestones[self.rank].milestone.phase if self.rank >= 0 else None

    def see(self, milestone: CompiledMilestone, line: int) -> bool:
        """Record a milestone; True when it starts a new attempt (the process restarted)."""
        self.first_seen.setdefault(milestone.milestone.id, line)
        restarted = milestone.milestone.phase == "before_weights" and self.phase not in (
            None,
            "before_weights",
        )
        if restarted:
            self.restarts += 1
            self.rank = milestone.rank
        else:
            self.rank = max(self.rank, milestone.rank)
        return restarted


def scan_log(stream: BinaryIO, name: str, kb: KnowledgeBase) -> FileScan:
    """Stream one log once and collect signature hits (with evidence) and milestones."""
    rules = [CompiledSignature.of(s) for s in kb.signatures]
    milestones = [CompiledMilestone.of(m, rank) for rank, m in enumerate(kb.phases.milestones)]
    groups = {f"sig:{r.signature.id}": r.signature.patterns for r in rules}
    groups |= {f"ms:{m.milestone.id}": m.milestone.patterns for m in milestones}
    prefilter = Prefilter(groups)
    scanner = LogScanner(stream, prefilter)
    tracker = _PhaseTracker(milestones)
    hits: dict[str, Hit] = {}
    quiet_matches: dict[str, int] = {}

    for number, raw in scanner.candidates():
        line = normalize(raw, number)
        for milestone in milestones:
            if milestone.seen_in(line):
                if tracker.see(milestone, number):
                    prefilter.activate(f"ms:{m.milestone.id}" for m in milestones)
                elif milestone.milestone.phase != "before_weights":
                    prefilter.deactivate(f"ms:{milestone.milestone.id}")
        for rule in rules:
            sig = rule.signature
            if not rule.regex.search(line.message):
                continue
            if not rule.counts_at(line):
                quiet_matches[sig.id] = quiet_matches.get(sig.id, 0) + 1
                if quiet_matches[sig.id] >= MAX_QUIET_MATCHES:
                    prefilter.deactivate(f"sig:{sig.id}")
                continue
            hit = hits.get(sig.id)
            if hit is None:
                hit = hits[sig.id] = Hit(rule, name, number, tracker.phase)
            hit.evidence.append(Evidence(file=name, line=number, text=line.display))
            for key, value in rule.extract(line).items():
                hit.facts.setdefault(key, value)
            if len(hit.evidence) >= MAX_EVIDENCE_PER_RULE:
                prefilter.deactivate(f"sig:{sig.id}")

    tail = [normalize(raw, number) for number, raw in scanner.tail]
    return FileScan(
        name=name,
        lines_read=scanner.lines_read,
        hits=hits,
        milestones=tracker.first_seen,
        phase_reached=tracker.phase,
        restarts=tracker.restarts,
        tail=[line for line in tail if line.message],
    )
