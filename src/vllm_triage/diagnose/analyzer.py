"""From signature hits, milestones and the compat verdict to a diagnosis: the first root error,
the cascade after it, and what (not) to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vllm_triage.diagnose.scan import FileScan, Hit
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.knowledge.schema import Recipe
from vllm_triage.models import (
    PHASE_ORDER,
    CompatVerdict,
    Diagnosis,
    Evidence,
    Finding,
    Phase,
    Role,
)
from vllm_triage.versions import CudaVersion, VersionError

# A stall counts only when the log ends on it: within this many non-empty lines of the end.
STALL_WINDOW = 5
_EVIDENCE_LIMIT = 5
_THRESHOLD_RULE = "VT101"


@dataclass(frozen=True)
class _Candidate:
    hit: Hit
    order: int


def _phase_of(hit: Hit) -> Phase:
    return hit.phase_seen or hit.rule.signature.phase


def _driver_ceiling(facts: dict[str, str]) -> CudaVersion | None:
    """Decode PyTorch's "found version 12080" into the CUDA release the driver supports."""
    try:
        return CudaVersion.from_api_int(int(facts["driver_cuda_api"]))
    except (KeyError, ValueError, VersionError):
        return None


def _facts_text(facts: dict[str, str]) -> str:
    parts = []
    if ceiling := _driver_ceiling(facts):
        parts.append(
            f"the driver supports CUDA up to {ceiling} (found version {facts['driver_cuda_api']})"
        )
    if required := facts.get("required_cuda"):
        parts.append(f"the image requires CUDA >= {required}")
    if tokens := facts.get("kv_tokens"):
        parts.append(f"the KV cache holds {tokens} tokens")
    if estimate := facts.get("estimated_max_len"):
        parts.append(f"the largest length that fits is about {estimate}")
    return "; ".join(parts)


def _finding(hit: Hit, role: Role, compat: CompatVerdict | None) -> Finding:
    sig = hit.rule.signature
    phase = _phase_of(hit)
    facts = dict(hit.facts)
    if ceiling := _driver_ceiling(facts):
        facts["driver_cuda_ceiling"] = str(ceiling)
    summary = sig.summary
    if extra := _facts_text(hit.facts):
        summary = f"{summary} Here: {extra}."
    advised = sig.driver_change_advised
    confidence = sig.confidence
    if advised and compat and compat.verdict in ("compatible", "conditional"):
        advised = False
        confidence = max(0.3, confidence - 0.3)
        summary += (
            f" But the compat verdict says CUDA {compat.cuda} runs on driver {compat.driver}: check "
            "that --driver is this host's driver and --image-cuda the image's CUDA."
        )
    return Finding(
        cause=sig.cause_in(phase),
        phase=phase,
        confidence=round(confidence, 2),
        evidence=hit.evidence[:_EVIDENCE_LIMIT],
        summary=summary,
        next_steps=list(sig.next_steps),
        avoid=list(sig.avoid),
        driver_change_advised=advised,
        rule=_finding_rule(hit),
        role=role,
        facts=facts,
    )


def _finding_rule(hit: Hit) -> str:
    return f"{hit.rule.signature.id} {hit.rule.signature.name}"


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
                )
            else:
                merged[rule_id].evidence.extend(hit.evidence)
                for key, value in hit.facts.items():
                    merged[rule_id].facts.setdefault(key, value)
    return merged


def _stall_applies(hit: Hit, scans: Sequence[FileScan]) -> bool:
    scan = next(s for s in scans if s.name == hit.file)
    last_lines = {line.number for line in scan.tail[-STALL_WINDOW:]}
    return any(ev.line in last_lines for ev in hit.evidence)


def _choose_primary(scans: Sequence[FileScan]) -> Hit | None:
    """The earliest root error (per file; the most certain across files), else the best symptom."""
    roots: list[Hit] = []
    for scan in scans:
        file_roots = [h for h in scan.hits.values() if h.rule.signature.tier == "root"]
        if file_roots:
            roots.append(
                min(file_roots, key=lambda h: (h.first_line, -h.rule.signature.confidence))
            )
    if roots:
        return max(roots, key=lambda h: h.rule.signature.confidence)
    symptoms = [h for s in scans for h in s.hits.values() if h.rule.signature.tier == "symptom"]
    meaningful = [h for h in symptoms if h.rule.signature.confidence >= 0.3]
    if meaningful:
        return max(meaningful, key=lambda h: (h.rule.signature.confidence, -h.first_line))
    stalls = [
        h
        for s in scans
        for h in s.hits.values()
        if h.rule.signature.tier == "stall" and _stall_applies(h, scans)
    ]
    if stalls:
        return max(stalls, key=lambda h: h.rule.signature.confidence)
    return symptoms[0] if symptoms else None


def _threshold_finding(kb: KnowledgeBase, compat: CompatVerdict, recipe: Recipe | None) -> Finding:
    base = kb.signature(_THRESHOLD_RULE)
    assert base is not None, "the driver-threshold signature is part of the knowledge base"
    steps = [
        f"Upgrade the host driver to {compat.min_branch or 'a newer branch'} "
        f"(>= {compat.min_driver}) in a maintenance window: one isolated node first, with a "
        "baseline saved and a rollback ready.",
    ]
    if compat.verdict == "forward_compat_only":
        steps.append(
            f"Or, without a driver change: install cuda-compat-{compat.cuda.replace('.', '-')} "
            "on this data-center GPU host and put its compat directory first on LD_LIBRARY_PATH."
        )
    steps.append(
        "If the shared cluster cannot change today, validate on an isolated node that already has a "
        "compatible driver."
    )
    if recipe:
        steps.append(recipe.driver_note.strip())
    return Finding(
        cause="driver_too_old",
        phase="before_weights",
        confidence=0.9,
        evidence=[Evidence(file="compat", line=0, text=compat.explanation)],
        summary=(
            f"CUDA {compat.cuda} needs driver >= {compat.min_driver}; this host has {compat.driver} "
            f"({compat.driver_branch}, CUDA up to {compat.driver_cuda_ceiling}): "
            f"{compat.verdict.replace('_', ' ')}."
        ),
        next_steps=steps,
        avoid=list(base.avoid),
        driver_change_advised=True,
        rule=f"compat {compat.rule}",
        role="threshold",
    )


def _unknown(scans: Sequence[FileScan]) -> Finding:
    reached = _phase_reached(scans)
    tail = [
        Evidence(file=s.name, line=line.number, text=line.display)
        for s in scans
        for line in s.tail[-3:]
    ]
    lines = sum(s.lines_read for s in scans)
    if not lines:
        summary = "The log is empty: there is nothing to diagnose."
    elif reached == "after_start":
        summary = f"No known failure signature in {lines} lines; the server had started."
    else:
        summary = (
            f"No known failure signature in {lines} lines; the log stops in phase "
            f"{reached.replace('_', ' ')} without an error it could name."
        )
    return Finding(
        cause="unknown",
        phase=reached,
        confidence=0.0,
        evidence=tail,
        summary=summary,
        next_steps=[
            "Collect the full log from the container's start (docker logs, or kubectl logs "
            "--previous for a restarted pod) and diagnose that.",
        ],
        avoid=["Do not change the driver or tune flags without evidence of the cause."],
        driver_change_advised=False,
        rule=None,
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


def analyze(
    kb: KnowledgeBase,
    scans: Sequence[FileScan],
    compat: CompatVerdict | None = None,
    recipe: Recipe | None = None,
    fact_findings: Sequence[Finding] = (),
) -> Diagnosis:
    """Turn the scans of one incident's logs (and a bundle's fact findings) into a diagnosis."""
    primary_hit = _choose_primary(scans)
    merged = _merge_hits(scans)
    primary = (
        _finding(merged[primary_hit.rule.signature.id], "root", compat) if primary_hit else None
    )
    notes = []

    findings: list[Finding] = []
    for rule_id, hit in sorted(merged.items(), key=lambda item: (item[1].file, item[1].first_line)):
        if primary_hit and rule_id == primary_hit.rule.signature.id:
            continue
        sig = hit.rule.signature
        if sig.tier == "stall" or (sig.id == "VT999" and primary is not None):
            continue
        same_file_after = (
            primary_hit is not None
            and hit.file == primary_hit.file
            and hit.first_line >= primary_hit.first_line
        )
        role: Role = "cascade" if sig.tier == "symptom" and same_file_after else "related"
        findings.append(_finding(hit, role, compat))

    is_root = primary_hit is not None and primary_hit.rule.signature.tier == "root"
    primary = _with_fact_findings(primary, is_root, findings, fact_findings)

    if compat and compat.verdict in ("incompatible", "forward_compat_only"):
        threshold = _threshold_finding(kb, compat, recipe)
        explained = (
            primary_hit.rule.signature.explained_by_driver_threshold
            if primary_hit and primary is not None and primary.rule == _finding_rule(primary_hit)
            else primary is None
        )
        if primary is None or primary.cause in ("unknown", "driver_too_old") or explained:
            evidence = (primary.evidence if primary else []) + threshold.evidence
            log_agrees = primary is not None and (primary.cause == "driver_too_old" or explained)
            if primary is not None and primary.cause != "driver_too_old":
                findings.insert(0, primary.model_copy(update={"role": "cascade"}))
            agreement = _facts_text(primary.facts) if primary else ""
            primary = threshold.model_copy(
                update={
                    "summary": threshold.summary
                    + (f" The log agrees: {agreement}." if agreement else ""),
                    "evidence": evidence[: _EVIDENCE_LIMIT + 1],
                    "confidence": 0.97 if log_agrees else 0.8,
                    "role": "root",
                    "facts": primary.facts if primary else {},
                }
            )
        else:
            findings.insert(0, threshold)
            notes.append(
                "Fix the primary cause first; the driver threshold will stop this image next."
            )

    if primary is None:
        primary = _unknown(scans)
    for scan in scans:
        if scan.restarts:
            notes.append(
                f"{scan.name}: the process started {scan.restarts + 1} times in this log; the "
                "diagnosis uses the first error, the later attempts repeat or follow it."
            )
    milestones: dict[str, int] = {}
    for scan in scans:
        for key, line in scan.milestones.items():
            milestones.setdefault(key, line)
    return Diagnosis(
        primary=primary,
        findings=findings,
        compat=compat,
        inputs=[s.name for s in scans],
        lines_read=sum(s.lines_read for s in scans),
        phase_reached=_phase_reached(scans),
        milestones=milestones,
        notes=notes,
    )
