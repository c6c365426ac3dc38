"""One pass over one log: which signatures fire where, which start-up milestones were reached,
how the server stopped, which requests it answered, and which versions the log states."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO

from vllm_triage.diagnose.logfacts import decode_fact
from vllm_triage.diagnose.logreader import LogLine, LogScanner, Prefilter, normalize
from vllm_triage.diagnose.signatures import (
    CompiledKnowledge,
    CompiledMilestone,
    CompiledSignature,
    compiled_knowledge,
    encoded,
)
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.models import Evidence, Fact, Phase, Requests

MAX_EVIDENCE_PER_RULE = 3
# A phrase that keeps matching only inside INFO lines stops being looked for after this many.
MAX_QUIET_MATCHES = 200
# Refused requests and stall lines are counted up to this many lines per rule.
MAX_COUNTED_PER_RULE = 1000
# Access-log lines are counted up to this many per file; past it the counts are lower bounds.
MAX_REQUEST_LINES = 2_000
# A start-up milestone of the first phase is looked for again and again (a later one after the
# server went further is a restart). Within one attempt, after this many lines of it it is no
# longer proposed line by line: its last line is still found at each block's end (the last
# milestone the log shows stays exact) until the attempt goes further or a restart comes.
MAX_MILESTONE_SIGHTINGS = 16
# Distinct values kept per fact rule and file (the diagnosis reads the first of each value).
MAX_FACT_VALUES = 8
# A serving-loop frame or a request line this close after an error puts the error after start
# (a traceback prints the error first and the API server's reaction after it).
CONTEXT_AFTER_LINES = 40


@dataclass
class Hit:
    """Where one signature fired in one file."""

    rule: CompiledSignature
    file: str
    first_line: int
    phase_seen: Phase | None
    evidence: list[Evidence] = field(default_factory=list)
    facts: dict[str, str] = field(default_factory=dict)
    last_line: int = 0
    count: int = 0
    phase_why: str | None = None
    level: str | None = None
    attempt: int = 0
    last_text: str = ""


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
    last_milestone: tuple[str, Evidence] | None = None
    started_at: Evidence | None = None
    events: dict[str, Evidence] = field(default_factory=dict)
    requests: Requests = field(default_factory=Requests)
    facts: list[Fact] = field(default_factory=list)

    @property
    def stop(self) -> Evidence | None:
        """The first line of the stop: a stop signal or the start of a shutdown."""
        found = [e for kind, e in self.events.items() if kind in ("stop_signal", "shutdown")]
        return min(found, key=lambda e: e.line) if found else None


class _PhaseTracker:
    """Follows start-up milestones in order; an early milestone after later ones is a restart."""

    def __init__(self, milestones: list[CompiledMilestone]):
        self._milestones = milestones
        self.rank = -1
        self.first_seen: dict[str, int] = {}
        self.restarts = 0
        self.last: tuple[str, Evidence] | None = None
        self.started_at: Evidence | None = None

    @property
    def phase(self) -> Phase | None:
        return self._milestones[self.rank].milestone.phase if self.rank >= 0 else None

    def see(self, milestone: CompiledMilestone, line: LogLine, name: str) -> bool:
        """Record a milestone; True when it starts a new attempt (the process restarted)."""
        self.first_seen.setdefault(milestone.milestone.id, line.number)
        restarted = milestone.milestone.phase == "before_weights" and self.phase not in (
            None,
            "before_weights",
        )
        if restarted:
            self.restarts += 1
            self.rank = milestone.rank
            self.started_at = None
        else:
            self.rank = max(self.rank, milestone.rank)
        evidence = Evidence(file=name, line=line.number, text=line.display)
        self.last = (milestone.milestone.id, evidence)
        if milestone.milestone.phase == "after_start" and self.started_at is None:
            self.started_at = evidence
        return restarted


class _Scan:
    """The state of one pass over one file."""

    def __init__(self, name: str, compiled: CompiledKnowledge):
        self.name = name
        self.compiled = compiled
        self.prefilter = Prefilter(compiled.groups)
        self.tracker = _PhaseTracker(compiled.milestones)
        self.hits: dict[str, Hit] = {}
        self.quiet: dict[str, int] = {}
        self.pending: list[Hit] = []
        self.events: dict[str, Evidence] = {}
        self.requests = Requests()
        self.request_lines = 0
        self.facts: list[Fact] = []
        self.fact_values: dict[str, set[str]] = {}
        # lines of each first-phase milestone seen in this attempt (see MAX_MILESTONE_SIGHTINGS)
        self.sightings: dict[str, int] = {}
        self.by_key = {f"ms:{m.milestone.id}": m for m in compiled.milestones}
        self.ranks = {m.milestone.id: m.rank for m in compiled.milestones}

    def evidence(self, line: LogLine) -> Evidence:
        return Evidence(file=self.name, line=line.number, text=line.display)

    def line(self, line: LogLine) -> None:
        signatures: list[CompiledSignature] = []
        for kind, index in self.compiled.matches(encoded(line)):
            if kind == "ms":
                self._milestone(self.compiled.milestones[index], line)
            elif kind == "life":
                self._lifecycle(index, line)
            elif kind == "req":
                self._request(index, line)
            elif kind == "fact":
                self._fact(index, line)
            else:
                rule = self.compiled.rules[index]
                if rule.counts_at(line):
                    signatures.append(rule)
                else:
                    self._quiet(rule)
        strong = [rule for rule in signatures if not rule.weak]
        requests = [rule for rule in strong if rule.signature.tier == "request"]
        if len(requests) > 1:
            # one refused request, one finding: the most specific rule says what it was
            best = max(requests, key=lambda rule: rule.signature.confidence)
            strong = [rule for rule in strong if rule.signature.tier != "request" or rule is best]
        for rule in strong or signatures:
            self._hit(rule, line)

    def _milestone(self, milestone: CompiledMilestone, line: LogLine) -> None:
        key = f"ms:{milestone.milestone.id}"
        went_on = self.tracker.phase in (None, "before_weights")
        if self.tracker.see(milestone, line, self.name):
            self.prefilter.activate(self.by_key)
            self.pending.clear()
            self.sightings.clear()
        elif milestone.milestone.phase != "before_weights":
            self.prefilter.deactivate(key)
            if went_on and self.sightings:
                # past the first phase a first-phase milestone is a restart: look for it again
                self.prefilter.activate(self.prefilter.tracked & set(self.by_key))
                self.sightings.clear()
        elif self.tracker.phase == "before_weights":
            seen = self.sightings[key] = self.sightings.get(key, 0) + 1
            if seen >= MAX_MILESTONE_SIGHTINGS:
                self.prefilter.track(key)
        if milestone.milestone.phase == "after_start":
            for hit in self.pending:
                if line.number - hit.first_line <= CONTEXT_AFTER_LINES:
                    hit.phase_seen = "after_start"
                    hit.phase_why = (
                        f"right after it, line {line.number} shows the server running "
                        f"(milestone {milestone.milestone.id})"
                    )
            self.pending.clear()

    def _lifecycle(self, index: int, line: LogLine) -> None:
        event = self.compiled.lifecycle[index]
        self.events.setdefault(event.kind, self.evidence(line))
        self.prefilter.deactivate(f"life:{event.id}")

    def _request(self, index: int, line: LogLine) -> None:
        access = self.compiled.requests[index]
        status = access.reader.value(line)
        if status is None:
            return
        requests = self.requests
        requests.by_status[status] = requests.by_status.get(status, 0) + 1
        if status >= "500":
            requests.server_errors += 1
        elif status >= "400":
            requests.client_errors += 1
        elif access.is_probe(line):
            requests.probes += 1
        else:
            requests.ok += 1
        if status >= "400" and requests.first_error is None:
            requests.first_error = self.evidence(line)
        self.request_lines += 1
        if self.request_lines >= MAX_REQUEST_LINES:
            requests.capped = True
            for rule in self.compiled.requests:
                self.prefilter.deactivate(f"req:{rule.rule.id}")

    def tracked(self, key: str, number: int, raw: bytes) -> None:
        """The last line of a milestone no longer proposed line by line, in the block just read:
        the last milestone the log shows when no proposed one came after it."""
        milestone = self.by_key.get(key)
        last = self.tracker.last
        if milestone is None:
            return
        # a line that shows two milestones counts as the later one (as `matches` orders them)
        if last is None or (number, milestone.rank) > (last[1].line, self.ranks[last[0]]):
            line = normalize(raw, number)
            self.tracker.last = (milestone.milestone.id, self.evidence(line))

    def _fact(self, index: int, line: LogLine) -> None:
        rule = self.compiled.facts[index]
        value = decode_fact(rule.rule.decode, rule.reader.value(line))
        # the diagnosis reads the first line of each value (FactSet): a value read again is
        # not kept, and a rule keeps at most MAX_FACT_VALUES values
        values = self.fact_values.setdefault(rule.rule.id, set())
        if value is not None and value not in values and len(values) < MAX_FACT_VALUES:
            values.add(value)
            self.facts.append(
                Fact(key=rule.rule.key, value=value, source="log", evidence=self.evidence(line))
            )
            self.prefilter.deactivate(f"fact:{rule.rule.id}")

    def _quiet(self, rule: CompiledSignature) -> None:
        sig = rule.signature
        self.quiet[sig.id] = self.quiet.get(sig.id, 0) + 1
        if self.quiet[sig.id] >= MAX_QUIET_MATCHES:
            self.prefilter.deactivate(f"sig:{sig.id}")

    def _hit(self, rule: CompiledSignature, line: LogLine) -> None:
        sig = rule.signature
        hit = self.hits.get(sig.id)
        if hit is None:
            hit = self.hits[sig.id] = Hit(rule, self.name, line.number, self.tracker.phase)
            hit.level, hit.attempt = line.level, self.tracker.restarts
            if hit.phase_seen != "after_start" and sig.tier in ("root", "symptom"):
                self.pending.append(hit)
        hit.last_line, hit.last_text = line.number, line.display
        hit.count += 1
        if len(hit.evidence) < MAX_EVIDENCE_PER_RULE:
            hit.evidence.append(self.evidence(line))
            for key, value in rule.extract(line).items():
                hit.facts.setdefault(key, value)
        counted = sig.tier in ("stall", "request")
        limit = MAX_COUNTED_PER_RULE if counted else MAX_EVIDENCE_PER_RULE
        if hit.count >= limit:
            self.prefilter.deactivate(f"sig:{sig.id}")

    def result(self, scanner: LogScanner) -> FileScan:
        tail = [normalize(raw, number) for number, raw in scanner.tail]
        tracker = self.tracker
        return FileScan(
            name=self.name,
            lines_read=scanner.lines_read,
            hits=self.hits,
            milestones=tracker.first_seen,
            phase_reached=tracker.phase,
            restarts=tracker.restarts,
            tail=[line for line in tail if line.message],
            last_milestone=tracker.last,
            started_at=tracker.started_at,
            events=self.events,
            requests=self.requests,
            facts=self.facts,
        )


def scan_log(
    stream: BinaryIO,
    name: str,
    kb: KnowledgeBase,
    *,
    reading_ahead: Callable[[], None] | None = None,
) -> FileScan:
    """Stream one log once and collect signature hits (with evidence), milestones, the stop,
    the access-log requests and the facts the log states. `reading_ahead` is called when a large
    log's search reaches the blocks another thread reads ahead (see LogScanner)."""
    state = _Scan(name, compiled_knowledge(kb))
    scanner = LogScanner(
        stream, state.prefilter, reading_ahead=reading_ahead, tracked=state.tracked
    )
    for number, raw in scanner.candidates():
        state.line(normalize(raw, number))
    return state.result(scanner)
