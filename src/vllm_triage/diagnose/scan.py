"""One pass over one log: which signatures fire where, which start-up milestones were reached,
how the server stopped, which requests it answered, and which versions the log states."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO

from vllm_triage.diagnose.logfacts import decode_fact
from vllm_triage.diagnose.logreader import Block, LogLine, LogScanner, Prefilter, normalize
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
# Refused requests and stall lines are read one by one up to this many lines per rule; past it
# their lines are counted block by block in C (no level to read: see _count_followed).
MAX_COUNTED_PER_RULE = 1000
# An error rule past its cap: at most this many of its lines a block are read from the block's
# end (each one's level and the rules beside it decide whether it counts); a block that holds
# more makes its count a lower bound (see _follow_error).
MAX_FOLLOW_PROBES = 16
# Which rules count on a raw line, kept for this many distinct lines of at most so many bytes
# (a crash loop repeats its traceback lines byte for byte: each block's end is then decided
# without reading its lines again; the memory stays under half a megabyte).
MAX_KEPT_VERDICTS = 256
MAX_KEPT_LINE_BYTES = 2048
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
    """Where one signature fired in one file: its first lines as evidence, its last line and
    how many lines it counted on, past its cap too (`count_exact` False: the count is a lower
    bound; `last_exact` False: a later line than `last_line` may show it)."""

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
    count_exact: bool = True
    last_exact: bool = True


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
        # the attempt (restart count) a stop signal came in: its later milestones are teardown
        self.stopped_in: int | None = None
        self.requests = Requests()
        self.request_lines = 0
        self.facts: list[Fact] = []
        self.fact_values: dict[str, set[str]] = {}
        # lines of each first-phase milestone seen in this attempt (see MAX_MILESTONE_SIGHTINGS)
        self.sightings: dict[str, int] = {}
        self.by_key = {f"ms:{m.milestone.id}": m for m in compiled.milestones}
        self.ranks = {m.milestone.id: m.rank for m in compiled.milestones}
        # signatures past their cap, by prefilter group (see `block`); each rule's place in the
        # knowledge, which settles a line two refused-request rules show (see `_settles`)
        self.followed: dict[str, CompiledSignature] = {}
        self.rank = {id(rule): index for index, rule in enumerate(compiled.rules)}
        # raw line -> ids of the rules that count on it (see `counts_on`)
        self.verdicts: dict[bytes, frozenset[int]] = {}

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
                signatures.append(self.compiled.rules[index])
        for rule in signatures:
            if not rule.counts_at(line):
                self._quiet(rule)
        for rule in _counting(signatures, line):
            self._hit(rule, line)

    def counting(self, line: LogLine) -> list[CompiledSignature]:
        """The rules that count on the line, as `line` decides it (no state changes)."""
        matched = [
            self.compiled.rules[index]
            for kind, index in self.compiled.matches(encoded(line))
            if kind == "sig"
        ]
        return _counting(matched, line)

    def counts_on(self, rule: CompiledSignature, raw: bytes) -> bool:
        """Whether the rule counts on a raw line (its number does not matter), remembered per
        line."""
        verdict = self.verdicts.get(raw)
        if verdict is None:
            verdict = frozenset(map(id, self.counting(normalize(raw, 0))))
            if len(self.verdicts) >= MAX_KEPT_VERDICTS:
                self.verdicts.clear()
            if len(raw) <= MAX_KEPT_LINE_BYTES:
                self.verdicts[raw] = verdict
        return id(rule) in verdict

    def _milestone(self, milestone: CompiledMilestone, line: LogLine) -> None:
        if milestone.milestone.phase == "after_start" and self.stopped_in == self.tracker.restarts:
            return  # what a stopped server prints (an EngineDeadError of the teardown) is no start
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
        if event.kind == "stop_signal":
            self.stopped_in = self.tracker.restarts
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
            if sig.id in self.hits:
                self._follow(rule)  # its lines that count are still counted
            else:
                self.prefilter.deactivate(f"sig:{sig.id}")

    def _follow(self, rule: CompiledSignature) -> None:
        """Stop reading a rule's lines one by one; `block` counts them block by block."""
        key = f"sig:{rule.signature.id}"
        if key in self.followed:
            return
        self.followed[key] = rule
        if not self.prefilter.follow(key):
            # switched off before it had a hit (quiet): its later lines are not read
            hit = self.hits[rule.signature.id]
            hit.count_exact = hit.last_exact = False

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
            self._follow(rule)

    def block(self, block: Block) -> None:
        """Count and place the lines of the rules past their cap in a block just searched (the
        lines handed over one by one went through `line`)."""
        claimed: set[int] = set()
        present = [self.followed[key] for key in self.prefilter.followed_in(block)]
        for rule in sorted(present, key=self._settles):
            hit = self.hits[rule.signature.id]
            key = f"sig:{rule.signature.id}"
            if rule.signature.tier in ("stall", "request"):
                self._count_followed(hit, key, block, claimed)
            else:
                self._follow_error(hit, key, block)

    def _settles(self, rule: CompiledSignature) -> tuple[float, int]:
        """The order in which refused-request rules claim a line both show (see `_counting`)."""
        return -rule.signature.confidence, self.rank[id(rule)]

    def _count_followed(self, hit: Hit, key: str, block: Block, claimed: set[int]) -> None:
        """A stall or request rule counts on every line that shows it, whatever its level: the
        block's lines that show it are counted in C, less those a more certain request rule
        claimed (`claimed`, filled in that order)."""
        stops = self.prefilter.showing(key, block)
        if stops is None:  # a pattern without a literal to find its lines by
            hit.count_exact = hit.last_exact = False
            return
        if hit.rule.signature.tier == "request":
            shown, stops = stops, stops - claimed
            claimed |= shown
        hit.count += len(stops)
        if stops:
            last = max(stops)
            start = block.buf.rfind(b"\n", 0, last) + 1
            number = block.number(last)
            self._place(hit, normalize(block.line(start, last), number))

    def _follow_error(self, hit: Hit, key: str, block: Block) -> None:
        """An error rule counts only where its line's level and the rules beside it let it
        (`counts_on`), which takes reading the line: its lines are read from the block's end, the
        first that counts is its last line so far; while its count is exact, they are read on and
        counted, at most MAX_FOLLOW_PROBES a block (a block with more makes it a lower bound)."""
        placed = False
        for probes, (start, stop) in enumerate(self.prefilter.showing_backwards(key, block), 1):
            if probes > MAX_FOLLOW_PROBES:
                hit.count_exact = False
                if not placed:  # a line not read may be later than the last one placed
                    hit.last_exact = False
                return
            raw = block.line(start, stop)
            if not self.counts_on(hit.rule, raw):
                continue
            hit.count += 1
            if not placed:
                placed = True
                self._place(hit, normalize(raw, block.number(stop)))
            if not hit.count_exact:
                return  # the count is a lower bound already: the last line was what was left

    def _place(self, hit: Hit, line: LogLine) -> None:
        """A line past the cap that the rule counts on, the last of its block: the rule's last
        line if none later was handed over (every line not read is earlier)."""
        if line.number > hit.last_line:
            hit.last_line, hit.last_text, hit.last_exact = line.number, line.display, True

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


def _counting(signatures: list[CompiledSignature], line: LogLine) -> list[CompiledSignature]:
    """Of the rules that match a line, those that count on it: at a level where they count; a
    vague symptom only when no other rule does; of several refused-request rules, the most
    specific (one refused request, one finding)."""
    signatures = [rule for rule in signatures if rule.counts_at(line)]
    strong = [rule for rule in signatures if not rule.weak]
    requests = [rule for rule in strong if rule.signature.tier == "request"]
    if len(requests) > 1:
        best = max(requests, key=lambda rule: rule.signature.confidence)
        strong = [rule for rule in strong if rule.signature.tier != "request" or rule is best]
    return strong or signatures


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
        stream,
        state.prefilter,
        reading_ahead=reading_ahead,
        tracked=state.tracked,
        followed=state.block,
    )
    for number, raw in scanner.candidates():
        state.line(normalize(raw, number))
    return state.result(scanner)
