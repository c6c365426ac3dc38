"""From signature hits, milestones, facts and the compat verdict to a diagnosis: the evidence
weighed (the first root error, unless a later one explains it), the cascade after it, a healthy
server called healthy, what (not) to do, and the decision behind it (`--explain`).

The order of the weighing:
1. A root error (a message that names a failure of the server) wins; within a file the earliest,
   unless a later root error lists it under `outranks` (it explains it: "found version 11080"
   explains an earlier undefined CUDA symbol); across files the most certain.
2. With no root error, a server that started and shows no failing symptom is healthy
   (`no_failure`), whatever its refused requests say: those become request findings.
3. Then a refused request (a chat template or tool-call setup the clients need), then the most
   certain symptom, then a stall the log ends on, else `unknown` with where the log stopped.
4. Version facts (the log's own, the flags', a bundle's) decide driver advice: a driver below what
   the software needs takes the primary place from a cause it explains; a message alone never
   advises a driver change.
Messages after the server began to stop (a SIGTERM, a shutdown) are its teardown, not a failure.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from vllm_triage.diagnose.logfacts import FactSet, Shortfall
from vllm_triage.diagnose.scan import FileScan, Hit
from vllm_triage.i18n import N_
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.knowledge.schema import Recipe
from vllm_triage.models import (
    PHASE_ORDER,
    CompatVerdict,
    CompatWording,
    Diagnosis,
    DifferentialCause,
    Evidence,
    Fact,
    Finding,
    Phase,
    Requests,
    Role,
    RuleMatch,
    Said,
    Serving,
    Wording,
    join_sentences,
    said,
)
from vllm_triage.versions import CudaVersion, VersionError

Outcome = Literal["primary", "outranked", "teardown", "request", "ignored"]
# A stall counts only when the log ends on it: within this many non-empty lines of the end, or of
# the stop when the process was stopped while it hung.
STALL_WINDOW = 5
STALL_BEFORE_STOP = 10
_EVIDENCE_LIMIT = 5
# The signatures the analyzer names: the driver threshold's (its advice on what not to do), and
# the catch-all (dropped from the findings once a known cause is found). `knowledge check` fails
# when the data lacks one; without it the analyzer still works (no advice, or one finding more).
THRESHOLD_RULE = "VT101"
CATCH_ALL_RULE = "VT999"
# The finding that counts the access log's refused requests, which name no reason of their own
ACCESS_LOG_RULE = "access log"
NAMED_RULES = frozenset({THRESHOLD_RULE, CATCH_ALL_RULE})
# The milestone (phases.yaml) of lines that exist only when requests were processed; without it
# a served server counts as served only by its access log. `knowledge check` fails when the data
# lacks a milestone named here.
SERVED_MILESTONE = "served"
NAMED_MILESTONES = frozenset({SERVED_MILESTONE})
# A symptom below this says too little to be a failure on its own (the catch-all).
_MEANINGFUL = 0.3
_TIMESTAMPS = (
    re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?Z?"),
    re.compile(r"\b\d{2}-\d{2} \d{2}:\d{2}:\d{2}\b"),
    re.compile(r"\b\d{4}/\d{2}/\d{2} - \d{2}:\d{2}:\d{2}\b"),
    re.compile(r"\b[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}\b"),
)
_SIGNAL = re.compile(r"SIG[A-Z]+|KeyboardInterrupt|signal \d+")
_CLOCKS = (
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}"), "%Y-%m-%dT%H:%M:%S"),
    (re.compile(r"\b\d{2}-\d{2} \d{2}:\d{2}:\d{2}\b"), "%m-%dT%H:%M:%S"),
)
# Stopped by hand this long after the last progress line: it hung there.
STALL_SECONDS = 60.0


def _phase_of(hit: Hit) -> Phase:
    return hit.phase_seen or hit.rule.signature.phase


def _rule_name(hit: Hit) -> str:
    return f"{hit.rule.signature.id} {hit.rule.signature.name}"


def _driver_ceiling(facts: dict[str, str]) -> CudaVersion | None:
    """Decode PyTorch's "found version 12080" into the CUDA release the driver supports."""
    try:
        return CudaVersion.from_api_int(int(facts["driver_cuda_api"]))
    except (KeyError, ValueError, VersionError):
        return None


def _facts_said(facts: dict[str, str]) -> list[Said]:
    """What a signature's extracted values say, one clause each (joined with "; ")."""
    parts = []
    if ceiling := _driver_ceiling(facts):
        parts.append(
            said(
                N_("the driver supports CUDA up to {ceiling} (found version {api})"),
                ceiling=str(ceiling),
                api=facts["driver_cuda_api"],
            )
        )
    if required := facts.get("required_cuda"):
        parts.append(said(N_("the image requires CUDA >= {required}"), required=required))
    if tokens := facts.get("kv_tokens"):
        parts.append(said(N_("the KV cache holds {tokens} tokens"), tokens=tokens))
    if estimate := facts.get("estimated_max_len"):
        parts.append(
            said(N_("the largest length that fits is about {estimate}"), estimate=estimate)
        )
    return parts


# The phases as a sentence names them.
_PHASE_WORDS: dict[str, str] = {
    "before_weights": N_("before weights"),
    "during_load": N_("during load"),
    "after_start": N_("after start"),
    "unknown": N_("unknown"),
}
# The scanner's one reason for moving a hit's phase (scan.py words it), read back into a template
# so that it is translated; any other reason is shown as it is.
_PHASE_WHY = re.compile(
    r"right after it, line (?P<line>[0-9]+) shows the server running \(milestone (?P<id>[^)]+)\)"
)


def _phase_said(phase: str) -> Said:
    return Said(text=_PHASE_WORDS.get(phase, phase.replace("_", " ")))


def _phase_why(reason: str) -> Said:
    if found := _PHASE_WHY.fullmatch(reason):
        return said(
            N_("right after it, line {line} shows the server running (milestone {milestone})"),
            line=found["line"],
            milestone=found["id"],
        )
    return Said(text=reason)


def _english(sentences: Sequence[Said]) -> str:
    return join_sentences([sentence.say() for sentence in sentences])


def _wording(
    summary: Sequence[Said], next_steps: Sequence[Said] = (), avoid: Sequence[Said] = ()
) -> Wording | None:
    """A finding's wording, when any of its texts was composed (None: all are message ids)."""
    composed = len(summary) > 1 or any(item.fields for item in (*summary, *next_steps, *avoid))
    if not composed:
        return None
    return Wording(summary=list(summary), next_steps=list(next_steps), avoid=list(avoid))


def _texts(wording: Sequence[Said]) -> list[str]:
    return [item.say() for item in wording]


@dataclass
class _Weighing:
    """The decision as it is made: what each matched rule became, and why."""

    matches: list[RuleMatch] = field(default_factory=list)

    def add(self, hit: Hit, outcome: Outcome, why: Said | str) -> None:
        """Record what a hit became; `why` is a message id as it is, or composed wording."""
        why = why if isinstance(why, Said) else Said(text=why)
        sig = hit.rule.signature
        phase = _phase_of(hit)
        self.matches.append(
            RuleMatch(
                rule=_rule_name(hit),
                cause=sig.cause_in(phase),
                tier=sig.tier,
                phase=phase,
                file=hit.file,
                line=hit.first_line,
                confidence=sig.confidence,
                outcome=outcome,
                why=why.say(),
                why_wording=why if why.fields else None,
            )
        )


def _finding(
    hit: Hit,
    role: Role,
    compat: CompatVerdict | None,
    shortfall: Shortfall | None = None,
) -> Finding:
    sig = hit.rule.signature
    phase = _phase_of(hit)
    facts = dict(hit.facts)
    if ceiling := _driver_ceiling(facts):
        facts["driver_cuda_ceiling"] = str(ceiling)
    summary = [Said(text=sig.summary)]
    extra = _facts_said(hit.facts)
    evidence = hit.evidence[:_EVIDENCE_LIMIT]
    if shortfall is not None and sig.cause == "driver_too_old":
        extra = shortfall.said()
        if api := hit.facts.get("driver_cuda_api"):
            extra = [said(N_("found version {api}: {facts}"), api=api, facts=extra)]
        evidence = _unique([*evidence, *shortfall.evidence])
    if extra:
        summary.append(said(N_("Here: {facts}."), facts=extra))
    if hit.phase_why and phase != sig.phase:
        summary.append(
            said(
                N_("Phase {phase}: {why}."), phase=_phase_said(phase), why=_phase_why(hit.phase_why)
            )
        )
    advised = sig.driver_change_advised or bool(shortfall and shortfall.too_old)
    confidence = sig.confidence
    if advised and compat and compat.verdict in ("compatible", "conditional"):
        advised = False
        confidence = max(0.3, confidence - 0.3)
        summary.append(
            said(
                N_(
                    "But the compat verdict says CUDA {cuda} runs on driver {driver}: check that "
                    "--driver is this host's driver and --image-cuda the image's CUDA."
                ),
                cuda=compat.cuda,
                driver=compat.driver,
            )
        )
    elif sig.cause == "driver_too_old" and not advised:
        summary.append(
            Said(
                text=N_(
                    "No version fact (the driver's CUDA next to the build's) decides it, so no "
                    "driver change is advised yet: check the candidates first."
                )
            )
        )
    return Finding(
        cause=sig.cause_in(phase),
        phase=phase,
        confidence=round(confidence, 2),
        evidence=evidence[: _EVIDENCE_LIMIT + 2],
        summary=_english(summary),
        next_steps=list(sig.next_steps),
        avoid=list(sig.avoid),
        driver_change_advised=advised,
        rule=_rule_name(hit),
        role=role,
        facts=facts,
        count=hit.count if sig.tier == "request" else None,
        wording=_wording(summary),
        count_exact=hit.count_exact if sig.tier == "request" else None,
    )


def _teardown(hit: Hit, scan: FileScan) -> bool:
    """A symptom printed after the server began to stop: the stop's own noise."""
    stop = scan.stop
    return (
        hit.rule.signature.tier in ("symptom", "stall")
        and stop is not None
        and hit.first_line > stop.line
    )


def _survived(hit: Hit, scan: FileScan) -> bool:
    """A warning the start-up went on past: the same attempt later reached the server's start."""
    started = scan.started_at
    return (
        hit.level == "WARNING"
        and started is not None
        and hit.first_line < started.line
        and hit.attempt == scan.restarts
    )


def _root_of_file(roots: list[Hit], weighing: _Weighing) -> Hit:
    """The earliest root error (ties on one line: the most specific, i.e. certain), unless a later
    one explains it (`outranks`)."""
    # A root error logged as a WARNING let the process go on: an error after it is what stopped
    # it, so warnings come after the errors (a warning still wins by `outranks`).
    ordered = sorted(
        roots,
        key=lambda h: (h.level == "WARNING", h.first_line, -h.rule.signature.confidence),
    )
    winner = ordered[0]
    for other in ordered[1:]:
        if winner.rule.signature.id in other.rule.signature.outranks:
            weighing.add(
                winner,
                "outranked",
                said(
                    N_("{rule} (line {line}) explains it: it lists {id} under outranks"),
                    rule=_rule_name(other),
                    line=other.first_line,
                    id=winner.rule.signature.id,
                ),
            )
            winner = other
    for hit in ordered:
        if hit is winner or any(m.rule == _rule_name(hit) for m in weighing.matches):
            continue
        if hit.first_line == winner.first_line:
            template = N_("same line as {rule}, which is more certain")
        elif hit.first_line > winner.first_line:
            template = N_(
                "a later root error than {rule} (line {line}): the first error is the cause, "
                "what follows is its cascade"
            )
        elif hit.level == "WARNING":
            template = N_(
                "a warning: the process went on past it, and {rule} (line {line}) is the error "
                "that stopped it"
            )
        else:
            template = N_("{rule} (line {line}) explains it")
        line = {"line": winner.first_line} if "{line}" in template else {}
        weighing.add(hit, "outranked", said(template, rule=_rule_name(winner), **line))
    return winner


def _stall_applies(hit: Hit, scan: FileScan) -> bool:
    """A stall is where the log stops: its last line is among the log's last lines (or, when the
    process was stopped by hand, just before the stop, a long time after it), and no start-up
    milestone came after it (the start went on past it)."""
    if scan.last_milestone is not None and scan.last_milestone[1].line > hit.last_line:
        return False
    stop = scan.stop
    if stop is None or scan.started_at is not None:
        last_lines = {line.number for line in scan.tail[-STALL_WINDOW:]}
        return hit.last_line in last_lines or any(ev.line in last_lines for ev in hit.evidence)
    # stopped during start-up: what follows the stop is its teardown, the stop is the end
    if not 0 <= stop.line - hit.last_line <= STALL_BEFORE_STOP:
        return False
    waited = _seconds_between(hit.last_text, stop.text)
    return waited is not None and waited >= STALL_SECONDS


def _seconds_between(first: str, later: str) -> float | None:
    """Seconds between two lines' own timestamps (vLLM's MM-DD HH:MM:SS or ISO 8601), when both
    carry one of the same kind."""
    for pattern, layout in _CLOCKS:
        one, two = pattern.search(first), pattern.search(later)
        if one and two:
            try:
                start = datetime.strptime(one.group(0).replace(" ", "T", 1), layout)
                end = datetime.strptime(two.group(0).replace(" ", "T", 1), layout)
            except ValueError:
                return None
            return (end - start).total_seconds()
    return None


def _time_of(evidence: Evidence | None) -> str | None:
    if evidence is None:
        return None
    for pattern in _TIMESTAMPS:
        if match := pattern.search(evidence.text):
            return match.group(0)
    return None


def _serving(scans: Sequence[FileScan]) -> Serving:
    """How the server's life shows across the logs."""
    requests = Requests()
    for scan in scans:
        counted = scan.requests
        requests.ok += counted.ok
        requests.probes += counted.probes
        requests.client_errors += counted.client_errors
        requests.server_errors += counted.server_errors
        requests.capped = requests.capped or counted.capped
        for status, count in counted.by_status.items():
            requests.by_status[status] = requests.by_status.get(status, 0) + count
        if requests.first_error is None:
            requests.first_error = counted.first_error
    started = [s.started_at for s in scans if s.started_at is not None]
    stops = [s.stop for s in scans if s.stop is not None]
    stop = min(stops, key=lambda e: e.line) if stops else None
    signals = [s.events["stop_signal"] for s in scans if "stop_signal" in s.events]
    lasts = [s.last_milestone for s in scans if s.last_milestone is not None]
    last = lasts[0] if lasts else None
    served = requests.ok > 0 or any(SERVED_MILESTONE in s.milestones for s in scans)
    return Serving(
        started=bool(started),
        served=served,
        started_at=started[0] if started else None,
        last_milestone=last[0] if last else None,
        last_milestone_at=last[1] if last else None,
        requests=requests,
        stopped_by_signal=bool(signals),
        stop=signals[0] if signals else stop,
        stop_time=_time_of(signals[0] if signals else stop),
        shutdown_complete=any("shutdown_done" in s.events for s in scans),
    )


def _requests_said(requests: Requests) -> list[Said]:
    """The access log's requests in words: the total by status, the probes, the refused."""
    total = requests.ok + requests.probes + requests.client_errors + requests.server_errors
    if not total:
        return [Said(text=N_("no access-log lines"))]
    refused = requests.client_errors + requests.server_errors
    statuses = ", ".join(
        f"{status}: {count}" for status, count in sorted(requests.by_status.items())
    )
    template = (
        N_("at least {total} requests in its access log ({statuses})")
        if requests.capped
        else N_("{total} requests in its access log ({statuses})")
    )
    clauses = [said(template, total=total, statuses=statuses)]
    if requests.probes:
        clauses.append(
            said(N_("{probes} of them health or metrics probes"), probes=requests.probes)
        )
    if refused:
        clauses.append(said(N_("{refused} answered with an error"), refused=refused))
    return clauses


def _stop_said(serving: Serving) -> list[Said]:
    """How the log ends: still running, stopped by a signal or shut down, and in order or not."""
    stop = serving.stop
    if stop is None:
        return [Said(text=N_("It was still running when the log ends."))]
    if serving.stopped_by_signal:
        found = _SIGNAL.search(stop.text)
        how = Said(text=found.group(0)) if found else Said(text=N_("a stop signal"))
        if serving.stop_time:
            sentence = said(
                N_("It was stopped by {how} at {time} (line {line})."),
                how=how,
                time=serving.stop_time,
                line=stop.line,
            )
        else:
            sentence = said(N_("It was stopped by {how} (line {line})."), how=how, line=stop.line)
    elif serving.stop_time:
        sentence = said(
            N_("It began to shut down at {time} (line {line})."),
            time=serving.stop_time,
            line=stop.line,
        )
    else:
        sentence = said(N_("It began to shut down (line {line})."), line=stop.line)
    if serving.shutdown_complete:
        return [sentence, Said(text=N_("The shutdown completed in order."))]
    return [sentence]


def _healthy(serving: Serving, requests_findings: list[Finding]) -> Finding:
    started = serving.started_at
    evidence = [e for e in (started, serving.stop) if e is not None]
    if serving.requests.first_error is not None:
        evidence.append(serving.requests.first_error)
    served = _requests_said(serving.requests)
    if started and serving.served:
        template = N_("The server started at line {line} ({text}); it served requests: {requests}.")
    elif started:
        template = N_(
            "The server started at line {line} ({text}); no request was served yet ({requests})."
        )
    elif serving.served:
        template = N_("The server started; it served requests: {requests}.")
    else:
        template = N_("The server started; no request was served yet ({requests}).")
    fields: dict[str, str | int | Said | list[Said]] = {"requests": served}
    if started:
        fields.update(line=started.line, text=started.text[:120])
    summary = [Said(text=N_("Nothing failed.")), said(template, **fields), *_stop_said(serving)]
    if any(f.rule != ACCESS_LOG_RULE for f in requests_findings):
        summary.append(
            Said(
                text=N_(
                    "Some requests were refused; the request findings say which and why: they "
                    "are about what clients sent or the server's request options, not a failed "
                    "server."
                )
            )
        )
    elif requests_findings:
        summary.append(
            Said(
                text=N_(
                    "Some requests were refused, and this log does not say why: the reason is in "
                    "the answer the client got. Until it is read, a chat template or tool-call "
                    "setup the clients need is not ruled out."
                )
            )
        )
    return Finding(
        cause="no_failure",
        phase="after_start",
        confidence=0.9 if serving.served or serving.stopped_by_signal else 0.75,
        evidence=evidence,
        summary=_english(summary),
        next_steps=[
            N_(
                "If someone reported a failure, compare its time with this log; for refused "
                "requests read the request findings (their first example and count)."
            ),
            N_("To prove the server works end to end, run `vllm-triage validate URL` against it."),
        ],
        avoid=[
            N_(
                "Do not change the driver, the image or the launch flags: the server started and "
                "served."
            ),
            N_(
                "Do not read the messages printed after the stop signal (a force kill of the "
                "engine, an EngineDeadError) as a crash: they are the shutdown."
            ),
        ],
        driver_change_advised=False,
        rule=None,
        role="root",
        wording=_wording(summary),
    )


def _access_finding(requests: Requests) -> Finding | None:
    refused = requests.client_errors + requests.server_errors
    if not refused:
        return None
    statuses = ", ".join(
        f"{status}: {count}"
        for status, count in sorted(requests.by_status.items())
        if status >= "400"
    )
    template = (
        N_(
            "At least {refused} requests were answered with an HTTP error ({statuses}) while the "
            "server ran."
        )
        if requests.capped
        else N_(
            "{refused} requests were answered with an HTTP error ({statuses}) while the server ran."
        )
    )
    summary = [said(template, refused=refused, statuses=statuses)]
    return Finding(
        cause="no_failure",
        phase="after_start",
        confidence=0.6,
        evidence=[requests.first_error] if requests.first_error else [],
        summary=_english(summary),
        next_steps=[
            N_(
                "4xx: the server refused the request itself, and a line of this log that names "
                "why is a request finding of its own; otherwise the reason is only in the answer "
                "the client got (its error.message). Send the request again with `curl -sS -i` "
                "and read it, or run `vllm-triage validate URL`, whose short_text and tool_calls "
                "rungs record the server's reason. The usual ones: no chat template for the "
                "model, tools without --enable-auto-tool-choice and --tool-call-parser, a prompt "
                "longer than max_model_len, an unknown model name, an image for a text-only model."
            ),
            N_("5xx: the server failed on a request: read the server's log around the first one."),
        ],
        avoid=[N_("Do not change the driver for refused requests.")],
        driver_change_advised=False,
        rule=ACCESS_LOG_RULE,
        role="request",
        count=refused,
        wording=_wording(summary),
    )


# The compat verdicts as a sentence names them.
_VERDICT_WORDS: dict[str, str] = {
    "compatible": N_("compatible"),
    "conditional": N_("conditional"),
    "forward_compat_only": N_("forward compat only"),
    "incompatible": N_("incompatible"),
}


def _threshold_finding(kb: KnowledgeBase, compat: CompatVerdict, recipe: Recipe | None) -> Finding:
    """The compat verdict as a finding. A GPU whose architecture the build's CUDA no longer
    carries (`unsupported_gpu_arch`) is no driver threshold: no driver change is advised, and the
    verdict's advice (a build for an older CUDA, another GPU) is what to do. Otherwise the driver
    upgrade, worded by the verdict's advice where it has one: that stops at the GPU's last driver
    branch (never r590 or newer for Maxwell, Pascal or Volta)."""
    base = kb.signature(THRESHOLD_RULE)
    avoid = list(base.avoid) if base is not None else []
    evidence = [Evidence(file="compat", line=0, text=compat.explanation)]
    rule = f"compat {compat.rule}"
    worded = compat.wording or CompatWording(
        explanation=[Said(text=compat.explanation)],
        advice=[Said(text=text) for text in compat.advice],
    )
    if compat.cause == "unsupported_gpu_arch":
        summary = [
            *worded.explanation,
            said(
                N_(
                    "The driver ({driver}, {branch}) is not what stops it: no driver change is "
                    "advised."
                ),
                driver=compat.driver,
                branch=compat.driver_branch,
            ),
        ]
        return Finding(
            cause="unsupported_gpu_arch",
            phase="before_weights",
            confidence=0.9,
            evidence=evidence,
            summary=_english(summary),
            next_steps=_texts(worded.advice),
            avoid=[
                N_(
                    "Do not change the driver for this: no driver adds kernels for this GPU's "
                    "architecture to a build that lacks them."
                ),
                N_(
                    "Do not tune --max-model-len, --gpu-memory-utilization or parallelism flags: "
                    "this build cannot run on this GPU at all."
                ),
            ],
            driver_change_advised=False,
            rule=rule,
            role="threshold",
            wording=_wording(summary, worded.advice),
        )
    if worded.advice:
        steps = list(worded.advice)
    else:
        upgrade = (
            said(
                N_(
                    "Upgrade the host driver to {branch} (>= {driver}) in a maintenance window: "
                    "one isolated node first, with a baseline saved and a rollback ready."
                ),
                branch=compat.min_branch,
                driver=str(compat.min_driver),
            )
            if compat.min_branch
            else said(
                N_(
                    "Upgrade the host driver to a newer branch (>= {driver}) in a maintenance "
                    "window: one isolated node first, with a baseline saved and a rollback ready."
                ),
                driver=str(compat.min_driver),
            )
        )
        steps = [upgrade]
        if compat.verdict == "forward_compat_only":
            steps.append(
                said(
                    N_(
                        "Or, without a driver change: install {package} on this data-center GPU "
                        "host and put its compat directory first on LD_LIBRARY_PATH."
                    ),
                    package=f"cuda-compat-{compat.cuda.replace('.', '-')}",
                )
            )
    steps.append(
        Said(
            text=N_(
                "If the shared cluster cannot change today, validate on an isolated node that "
                "already has a compatible driver."
            )
        )
    )
    if recipe:
        steps.append(Said(text=recipe.driver_note.strip()))
    summary = [
        said(
            N_(
                "CUDA {cuda} needs driver >= {min_driver}; this host has {driver} ({branch}, CUDA "
                "up to {ceiling}): {verdict}."
            ),
            cuda=compat.cuda,
            min_driver=str(compat.min_driver),
            driver=compat.driver,
            branch=compat.driver_branch,
            ceiling=str(compat.driver_cuda_ceiling),
            verdict=Said(text=_VERDICT_WORDS.get(compat.verdict, compat.verdict)),
        )
    ]
    return Finding(
        cause="driver_too_old",
        phase="before_weights",
        confidence=0.9,
        evidence=evidence,
        summary=_english(summary),
        next_steps=_texts(steps),
        avoid=avoid,
        driver_change_advised=True,
        rule=rule,
        role="threshold",
        wording=_wording(summary, steps),
    )


def _shortfall_finding(kb: KnowledgeBase, shortfall: Shortfall) -> Finding:
    """The facts show the driver below the need: a version fact, so a driver change is advised."""
    base = kb.signature(THRESHOLD_RULE)
    summary = [
        said(N_("The driver is older than the software needs: {facts}."), facts=shortfall.said()),
        said(
            N_(
                "A CUDA {need}.x build cannot run on a CUDA {ceiling}.x driver (minor-version "
                "compatibility stays within one major)."
            ),
            need=shortfall.need.major,
            ceiling=shortfall.ceiling.major,
        ),
    ]
    upgrade = (
        N_(
            "Upgrade the host driver (>= {driver}) in a maintenance window, one node first; or "
            "use a build for CUDA {major}.x (an older PyTorch / vLLM wheel or image)."
        )
        if shortfall.min_driver
        else N_(
            "Upgrade the host driver in a maintenance window, one node first; or use a build for "
            "CUDA {major}.x (an older PyTorch / vLLM wheel or image)."
        )
    )
    fields: dict[str, str | int | Said | list[Said]] = {"major": shortfall.ceiling.major}
    if shortfall.min_driver:
        fields["driver"] = shortfall.min_driver
    steps = [
        said(upgrade, **fields),
        said(
            N_("Confirm with `vllm-triage compat --driver <host driver> --cuda {cuda}`."),
            cuda=f"{shortfall.need.major}.{shortfall.need.minor}",
        ),
    ]
    return Finding(
        cause="driver_too_old",
        phase="before_weights",
        confidence=0.9,
        evidence=shortfall.evidence,
        summary=_english(summary),
        next_steps=_texts(steps),
        avoid=list(base.avoid) if base is not None else [],
        driver_change_advised=True,
        rule="facts driver-below-need",
        role="threshold",
        wording=_wording(summary, steps),
    )


# Error-level lines as servers around vLLM write them (besides the level a vLLM, logging or glog
# prefix gives): Go's and Rust's "Error:" and panics, logfmt levels, a Python traceback.
_ERROR_LINE = re.compile(
    r"^(?:Error:|panic:|fatal error:|FATAL\b|Traceback \(most recent call last\))"
    r"|\blevel=(?:error|fatal|panic)\b"
)
_ERROR_LEVELS = ("ERROR", "CRITICAL", "FATAL")


def unnamed_error(scans: Sequence[FileScan], hits: Sequence[Hit]) -> Evidence | None:
    """An error-level line at the end of a log, after start-up and before any stop, that no rule
    matched: a server that failed in a way no signature knows is not healthy, and the line is what
    the reader needs to see."""
    # A line a rule names is explained, unless only the catch-all names it (it names no cause).
    rules = {hit.rule.signature.id: hit.rule for hit in hits if not hit.rule.weak}.values()
    for scan in scans:
        started = scan.started_at.line if scan.started_at else 0
        stop = scan.stop.line if scan.stop else None
        for line in reversed(scan.tail):
            if line.number <= started or (stop is not None and line.number >= stop):
                continue
            if any(rule.regex.search(line.message) for rule in rules):
                continue
            if line.level in _ERROR_LEVELS or _ERROR_LINE.search(line.message):
                return Evidence(file=scan.name, line=line.number, text=line.display)
    return None


def _unknown(scans: Sequence[FileScan], serving: Serving) -> Finding:
    reached = _phase_reached(scans)
    tail = [
        Evidence(file=s.name, line=line.number, text=line.display)
        for s in scans
        for line in s.tail[-3:]
    ]
    lines = sum(s.lines_read for s in scans)
    milestone, at = serving.last_milestone, serving.last_milestone_at
    if not lines:
        summary = [Said(text=N_("The log is empty: there is nothing to diagnose."))]
    elif reached == "after_start" and (error := unnamed_error(scans, [])) is not None:
        summary = [
            said(
                N_(
                    "The server had started, then logged an error no signature recognises (line "
                    "{line}): {text}"
                ),
                line=error.line,
                text=error.text[:200],
            )
        ]
    elif reached == "after_start":
        summary = [
            said(
                N_("No known failure signature in {lines} lines; the server had started."),
                lines=lines,
            )
        ]
    elif milestone and at:
        summary = [
            said(
                N_(
                    "No known failure signature in {lines} lines; the log stops in phase {phase} "
                    "after {milestone} (line {line}) without an error it could name."
                ),
                lines=lines,
                phase=_phase_said(reached),
                milestone=milestone,
                line=at.line,
            )
        ]
    else:
        summary = [
            said(
                N_(
                    "No known failure signature in {lines} lines; the log stops in phase {phase} "
                    "without an error it could name."
                ),
                lines=lines,
                phase=_phase_said(reached),
            )
        ]
    if lines and reached != "after_start" and serving.stop is not None:
        summary.append(
            said(
                N_(
                    "It was stopped there (line {line}: {text}): a start killed half-way, not a "
                    "healthy server."
                ),
                line=serving.stop.line,
                text=serving.stop.text[:100],
            )
        )
    return Finding(
        cause="unknown",
        phase=reached,
        confidence=0.0,
        evidence=tail,
        summary=_english(summary),
        next_steps=[
            N_(
                "Collect the full log from the container's start (docker logs, or kubectl logs "
                "--previous for a restarted pod) and diagnose that."
            ),
        ],
        avoid=[N_("Do not change the driver or tune flags without evidence of the cause.")],
        driver_change_advised=False,
        rule=None,
        wording=_wording(summary),
    )


def _phase_reached(scans: Sequence[FileScan]) -> Phase:
    phases = [s.phase_reached for s in scans if s.phase_reached]
    return max(phases, key=PHASE_ORDER.index) if phases else "unknown"


def _with_fact_findings(
    primary: Finding | None,
    primary_is_root: bool,
    findings: list[Finding],
    fact_findings: Sequence[Finding],
) -> Finding | None:
    """Facts confirm a log cause (their evidence joins it) or stand beside it; they take the
    primary place only from a symptom that is less certain than they are."""
    for fact in fact_findings:
        if primary is not None and primary.cause == fact.cause:
            primary.evidence.extend(fact.evidence)
            primary.confidence = max(primary.confidence, fact.confidence)
        elif primary is None or (not primary_is_root and fact.confidence > primary.confidence):
            primary_is_root = True
            if primary is not None:
                findings.insert(0, primary.model_copy(update={"role": "related"}))
            primary = fact.model_copy(update={"role": "root"})
        else:
            findings.append(fact)
    return primary


@dataclass
class _Choice:
    """The primary hit (if any), how it was chosen, and whether the server was healthy."""

    hit: Hit | None = None
    healthy: bool = False
    is_root: bool = False


def _choose(scans: Sequence[FileScan], serving: Serving, weighing: _Weighing) -> _Choice:
    live: list[tuple[Hit, FileScan]] = []
    for scan in scans:
        for hit in scan.hits.values():
            if _teardown(hit, scan):
                weighing.add(
                    hit,
                    "teardown",
                    said(
                        N_("after the stop began (line {line}): the shutdown's own messages"),
                        line=scan.stop.line if scan.stop else 0,
                    ),
                )
            elif hit.rule.signature.tier == "root" and _survived(hit, scan):
                started = scan.started_at.line if scan.started_at else 0
                weighing.add(
                    hit,
                    "ignored",
                    said(
                        N_(
                            "a warning before the server started (line {line}): the start-up "
                            "went on past it"
                        ),
                        line=started,
                    ),
                )
            else:
                live.append((hit, scan))

    def tier(name: str) -> list[tuple[Hit, FileScan]]:
        return [(h, s) for h, s in live if h.rule.signature.tier == name]

    roots = tier("root")
    if roots:
        winners = []
        for scan in scans:
            mine = [h for h, s in roots if s is scan]
            if mine:
                winners.append(_root_of_file(mine, weighing))
        best = max(winners, key=lambda h: h.rule.signature.confidence)
        for other in winners:
            if other is not best:
                weighing.add(
                    other,
                    "outranked",
                    said(
                        N_("the first root error of {file}, less certain than {rule} in {best}"),
                        file=other.file,
                        rule=_rule_name(best),
                        best=best.file,
                    ),
                )
        _others_lost(live, best, weighing, N_("a root error names the cause"))
        return _Choice(best, is_root=True)

    failing = [h for h, _ in tier("symptom") if h.rule.signature.confidence >= _MEANINGFUL]
    # Healthy: started, nothing failing (a symptom logged as a warning, such as a slow step's
    # "No available shared memory broadcast block", is not a failure of a running server), and,
    # when requests were refused, proof that others were served (or an orderly stop): a start-up
    # followed only by refused requests names what the clients ran into.
    alarming = [h for h in failing if h.level != "WARNING"]
    refused = tier("request")
    # A refusal that names a cause (no chat template, no tool parser, a client library built for
    # another version of the API) is a failure after a healthy start, not a healthy server.
    misconfigured = [h for h, _ in refused if h.rule.signature.cause != "no_failure"]
    # Where the log ends: a stall of a running server (its first generation never finished)
    # names a hang, not a healthy server.
    stalls = [h for h, s in tier("stall") if _stall_applies(h, s)]
    hung = [h for h in stalls if h.rule.signature.phase == "after_start"]
    if (
        serving.started
        and not alarming
        and not misconfigured
        and not hung
        and (not refused or serving.served or serving.stopped_by_signal)
        and unnamed_error(scans, [h for h, _ in live]) is None
    ):
        for hit, _ in live:
            if hit.rule.signature.tier == "request":
                weighing.add(hit, "request", N_("a refused request of a healthy server"))
            else:
                weighing.add(
                    hit,
                    "ignored",
                    N_("the server started and shows no failure; this line names none"),
                )
        return _Choice(None, healthy=True)

    requests = tier("request")
    if requests:
        best = max(
            (h for h, _ in requests),
            key=lambda h: (
                h.rule.signature.cause != "no_failure",
                h.rule.signature.confidence,
                -h.first_line,
            ),
        )
        _others_lost(live, best, weighing, N_("no root error; a refused request names the cause"))
        return _Choice(best)
    if failing:
        best = max(failing, key=lambda h: (h.rule.signature.confidence, -h.first_line))
        _others_lost(live, best, weighing, N_("no root error; the most certain symptom"))
        return _Choice(best)
    for hit, _ in tier("stall"):
        if hit not in stalls:
            weighing.add(hit, "ignored", N_("the log goes on after it: not where it stopped"))
    if stalls:
        best = max(stalls, key=lambda h: h.rule.signature.confidence)
        _others_lost(live, best, weighing, N_("the log ends on it"))
        return _Choice(best)
    symptoms = [h for h, _ in tier("symptom")]
    for hit in symptoms:
        weighing.add(hit, "ignored", N_("too vague to name a cause on its own"))
    return _Choice(None)


def _others_lost(
    live: list[tuple[Hit, FileScan]], best: Hit, weighing: _Weighing, why: str
) -> None:
    if best.phase_why:
        weighing.add(
            best,
            "primary",
            said(
                N_("{why}; phase {phase}: {reason}"),
                why=Said(text=why),
                phase=_phase_of(best),
                reason=_phase_why(best.phase_why),
            ),
        )
    else:
        weighing.add(best, "primary", why)
    named = {m.rule for m in weighing.matches}
    for hit, _ in live:
        if _rule_name(hit) in named:
            continue
        tier = hit.rule.signature.tier
        if tier == "request":
            reason = said(N_("a refused request; {rule} is the failure"), rule=_rule_name(best))
        elif tier == "symptom":
            reason = said(
                N_("a symptom: {rule} (line {line}) is the cause it echoes"),
                rule=_rule_name(best),
                line=best.first_line,
            )
        elif tier == "stall":
            reason = Said(text=N_("a stall counts only when nothing else names the cause"))
        else:
            reason = said(N_("{rule} is more certain"), rule=_rule_name(best))
        weighing.add(hit, "outranked", reason)


def _with_requirements_met(scan: FileScan) -> FileScan:
    """The scan without the hits whose signature counts only beside another that did not fire
    in this file (`requires`)."""
    kept = {
        rule_id: hit
        for rule_id, hit in scan.hits.items()
        if all(required in scan.hits for required in hit.rule.signature.requires)
    }
    return scan if len(kept) == len(scan.hits) else dataclasses.replace(scan, hits=kept)


def analyze(
    kb: KnowledgeBase,
    scans: Sequence[FileScan],
    compat: CompatVerdict | None = None,
    recipe: Recipe | None = None,
    fact_findings: Sequence[Finding] = (),
    given: Sequence[Fact] = (),
) -> Diagnosis:
    """Turn the scans of one incident's logs (and a bundle's fact findings, and the facts the
    flags or the bundle give) into a diagnosis."""
    scans = [_with_requirements_met(scan) for scan in scans]
    weighing = _Weighing()
    serving = _serving(scans)
    facts = FactSet([*given, *(f for s in scans for f in s.facts)])
    shortfall = facts.shortfall(kb)
    choice = _choose(scans, serving, weighing)
    merged = _merge_hits(scans)
    primary_hit = merged[choice.hit.rule.signature.id] if choice.hit else None
    primary = _finding(primary_hit, "root", compat, shortfall) if primary_hit else None
    notes: list[Said] = []

    findings: list[Finding] = []
    request_findings: list[Finding] = []
    for rule_id, hit in sorted(merged.items(), key=lambda item: (item[1].file, item[1].first_line)):
        if primary_hit and rule_id == primary_hit.rule.signature.id:
            continue
        sig = hit.rule.signature
        scan = next(s for s in scans if s.name == hit.file)
        if sig.tier == "stall" or (sig.id == CATCH_ALL_RULE and primary is not None):
            continue
        if sig.tier == "request":
            request_findings.append(_finding(hit, "request", compat))
            continue
        if _teardown(hit, scan):
            if not choice.healthy:
                findings.append(_finding(hit, "teardown", compat))
            continue
        same_file_after = (
            primary_hit is not None
            and hit.file == primary_hit.file
            and hit.first_line >= primary_hit.first_line
        )
        role: Role = "cascade" if sig.tier == "symptom" and same_file_after else "related"
        findings.append(_finding(hit, role, compat))

    if choice.healthy:
        access = _access_finding(serving.requests)
        request_findings += [access] if access else []
        primary = _healthy(serving, request_findings)
        findings = [f for f in findings if f.rule and not f.rule.startswith(CATCH_ALL_RULE)]
    findings = request_findings + findings

    primary = _with_fact_findings(primary, choice.is_root, findings, fact_findings)
    primary = _weigh_versions(kb, primary, primary_hit, compat, shortfall, recipe, findings, notes)

    if primary is None:
        primary = _unknown(scans, serving)
    differential, weight = _differential(primary_hit, primary)
    if weight is not None:
        primary = primary.model_copy(update={"weight": weight})
    for scan in scans:
        if scan.restarts:
            notes.append(
                said(
                    N_(
                        "{file}: the process started {times} times in this log; the diagnosis "
                        "uses the first error, the later attempts repeat or follow it."
                    ),
                    file=scan.name,
                    times=scan.restarts + 1,
                )
            )
    milestones: dict[str, int] = {}
    for scan in scans:
        for key, line in scan.milestones.items():
            milestones.setdefault(key, line)
    serving = serving.model_copy(update={"healthy": choice.healthy})
    return Diagnosis(
        primary=primary,
        findings=findings,
        compat=compat,
        inputs=[s.name for s in scans],
        lines_read=sum(s.lines_read for s in scans),
        phase_reached=_phase_reached(scans),
        milestones=milestones,
        notes=_texts(notes),
        facts=facts.facts,
        serving=serving,
        decision=weighing.matches,
        notes_wording=notes if any(note.fields for note in notes) else [],
        differential=differential,
    )


def _differential(
    hit: Hit | None, primary: Finding
) -> tuple[list[DifferentialCause], float | None]:
    """The other causes the primary's evidence fits, by their share of the real reports with it
    (the signature's differential), and the primary's own share; none when the primary is not
    that signature's finding."""
    if hit is None or primary.rule != _rule_name(hit):
        return [], None
    found = hit.rule.signature.differential
    if found is None or (hit.rule.signature.cause_by_phase and hit.phase_seen is not None):
        return [], None  # a phase seen in the log decides between a signature's causes
    total = sum(alternative.reports for alternative in found.causes)
    ranked = sorted(found.causes, key=lambda alternative: -alternative.reports)
    others = [
        DifferentialCause(
            cause=alternative.cause,
            weight=round(alternative.reports / total, 2),
            check=alternative.check,
        )
        for alternative in ranked
        if alternative.cause != primary.cause
    ]
    own = next((a.reports for a in found.causes if a.cause == primary.cause), None)
    return others, round(own / total, 2) if own is not None else None


def _weigh_versions(
    kb: KnowledgeBase,
    primary: Finding | None,
    primary_hit: Hit | None,
    compat: CompatVerdict | None,
    shortfall: Shortfall | None,
    recipe: Recipe | None,
    findings: list[Finding],
    notes: list[Said],
) -> Finding | None:
    """A version fact showing the driver below the need (the compat verdict, or the log's own
    facts) takes the primary place from a cause it explains; beside another cause it is named,
    to be fixed next."""
    if compat and compat.verdict in ("incompatible", "forward_compat_only"):
        threshold = _threshold_finding(kb, compat, recipe)
    elif compat is None and shortfall is not None and shortfall.too_old:
        if (
            primary is not None
            and primary.cause == "driver_too_old"
            and primary.driver_change_advised
        ):
            return primary  # the log's own message, with the facts already cited beside it
        threshold = _shortfall_finding(kb, shortfall)
    else:
        return primary
    explained = (
        primary_hit.rule.signature.explained_by_driver_threshold
        if primary_hit and primary is not None and primary.rule == _rule_name(primary_hit)
        else primary is None
    )
    same = primary is not None and primary.cause == threshold.cause
    if (
        primary is None
        or same
        or primary.cause in ("unknown", "driver_too_old", "no_failure")
        or explained
    ):
        evidence = (primary.evidence if primary else []) + threshold.evidence
        log_agrees = primary is not None and (same or explained)
        if primary is not None and not same:
            # beside a GPU the build cannot run on, the log's driver advice is moot
            advised = primary.driver_change_advised and threshold.driver_change_advised
            findings.insert(
                0, primary.model_copy(update={"role": "cascade", "driver_change_advised": advised})
            )
        agreement = _facts_said(primary.facts) if primary else []
        if threshold.rule and threshold.rule.startswith("facts") and primary is not None:
            agreement = []
        wording = threshold.wording or Wording(summary=[Said(text=threshold.summary)])
        if agreement:
            summary = [*wording.summary, said(N_("The log agrees: {facts}."), facts=agreement)]
            wording = wording.model_copy(update={"summary": summary})
        return threshold.model_copy(
            update={
                "summary": _english(wording.summary),
                "wording": _wording(wording.summary, wording.next_steps, wording.avoid),
                "evidence": _unique(evidence)[: _EVIDENCE_LIMIT + 2],
                "confidence": 0.97 if log_agrees else 0.8,
                "role": "root",
                "facts": primary.facts if primary else {},
            }
        )
    findings.insert(0, threshold)
    if threshold.cause == "unsupported_gpu_arch":
        notes.append(
            Said(
                text=N_(
                    "Fix the primary cause first; this GPU cannot run this image's CUDA build "
                    "either (the compat verdict says what can)."
                )
            )
        )
    else:
        notes.append(
            Said(
                text=N_(
                    "Fix the primary cause first; the driver threshold will stop this image next."
                )
            )
        )
    return primary


def _unique(evidence: Sequence[Evidence]) -> list[Evidence]:
    seen: set[tuple[str, int, str]] = set()
    kept = []
    for item in evidence:
        key = (item.file, item.line, item.text)
        if key not in seen:
            seen.add(key)
            kept.append(item)
    return kept


def _merge_hits(scans: Sequence[FileScan]) -> dict[str, Hit]:
    """One hit per rule across files, evidence from every file that shows it."""
    merged: dict[str, Hit] = {}
    for scan in scans:
        for rule_id, hit in scan.hits.items():
            if rule_id not in merged:
                merged[rule_id] = Hit(
                    hit.rule,
                    hit.file,
                    hit.first_line,
                    hit.phase_seen,
                    list(hit.evidence),
                    dict(hit.facts),
                    hit.last_line,
                    hit.count,
                    hit.phase_why,
                    hit.level,
                    hit.attempt,
                    hit.last_text,
                    hit.count_exact,
                    hit.last_exact,
                )
            else:
                merged[rule_id].evidence.extend(hit.evidence)
                merged[rule_id].count += hit.count
                merged[rule_id].count_exact &= hit.count_exact
                merged[rule_id].last_exact &= hit.last_exact
                for key, value in hit.facts.items():
                    merged[rule_id].facts.setdefault(key, value)
    return merged
