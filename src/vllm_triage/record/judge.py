"""The record's judgements over the case's artifacts, as pure functions: which runs prove which
part of the scope, the four comparisons, the widening conditions. No files are read here
(vllm_triage.record.api reads them); every judgement names the artifact behind it and the
figures it read, and says `unknown` rather than guess when no artifact speaks to it.

"The newest run that climbed a rung" decides a rung's status: a later run that failed what an
earlier one passed is what the team lives with now. A rung a run skipped (not asked for) was
not climbed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from vllm_triage.baseline.models import BaselineComparison
from vllm_triage.models import Diagnosis
from vllm_triage.record.models import (
    SCOPES,
    Compared,
    Comparison,
    Proof,
    ScopeId,
    ScopeItem,
    ScopeStatus,
    ValidatedOn,
    Widening,
)
from vllm_triage.validate.credentials import public_url
from vllm_triage.validate.models import RungResult, StartSummary, ValidationRun
from vllm_triage.validate.node import same_node
from vllm_triage.versions import DriverVersion, VersionError

RUNG_OF: dict[ScopeId, str] = {
    "model_load": "health",
    "short_text": "short_text",
    "long_context": "target_context",
    "image": "image",
    "tool_calls": "tool_calls",
    "structured_output": "structured_output",
    "concurrency": "concurrency",
    "multi_node": "multi_node",
}
# The checks of a baseline comparison that are about the fabric multi-node traffic uses.
COMMUNICATION_CHECKS = (
    "nccl_version",
    "nccl_transport",
    "rdma_device",
    "rdma_port",
    "interface",
    "interface_state",
    "interface_mtu",
)
_MAX_FIGURES = 16
_MAX_REASON = 300
_SCALARS = (str, int, float, bool)
# Figures every rung reads after it ran (the server's KV-cache use at that moment): not what the
# rung proves; they stay in the run's own summary.
_AMBIENT = ("kv_cache_usage_perc",)


@dataclass(frozen=True)
class RunRead:
    """A validation run of the case: its folder (runs/<UTC>), its summary file, the summary."""

    folder: str
    summary: str
    run: ValidationRun

    @property
    def created(self) -> datetime | None:
        return _moment(self.run.created_at)


# --- small helpers ---------------------------------------------------------------------------------


def _moment(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def number(value: Any, digits: int = 3) -> str:
    """A figure as a sentence shows it: 0.124, 2008, a dash for none."""
    if value is None or isinstance(value, bool):
        return "\u2013" if value is None else str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}".rstrip("0").rstrip(".") if value else "0"
    return str(value)


def _reason(text: str | None) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= _MAX_REASON else text[: _MAX_REASON - 1] + "\u2026"


def _scalars(figures: dict[str, Any]) -> dict[str, Any]:
    """The scalar figures of a rung (lists and nested objects are in the run's own summary)."""
    found: dict[str, Any] = {}
    for key, value in figures.items():
        if len(found) >= _MAX_FIGURES:
            break
        if key in _AMBIENT:
            continue
        if value is None or isinstance(value, _SCALARS):
            found[key] = round(value, 4) if isinstance(value, float) else value
    return found


def _concurrency(figures: dict[str, Any]) -> dict[str, Any]:
    """The ramp at the last level that held: the level and its latency and throughput."""
    found: dict[str, Any] = {"last_good_level": figures.get("last_good_level")}
    levels = figures.get("levels")
    level = found["last_good_level"]
    if isinstance(levels, dict) and level is not None and isinstance(levels.get(str(level)), dict):
        at = levels[str(level)]
        for key in ("requests", "errors", "ttft_p50_s", "ttft_p95_s", "e2e_p50_s",
                    "output_tokens_per_s"):  # fmt: skip
            if isinstance(at.get(key), int | float):
                found[key] = at[key]
    return found


def _compared(run: ValidationRun, rung: str, keys: Iterable[str]) -> Compared | None:
    """The same rung on the second endpoint, when the run replayed it there."""
    comparison = run.comparison
    if comparison is None:
        return None
    found = next((r for r in comparison.rungs if r.name == rung), None)
    if found is None:
        return None
    wanted = list(keys)
    figures = {k: v for k, v in found.figures.items() if not wanted or k in wanted}
    return Compared(
        url=public_url(comparison.url),
        status=found.other,
        both_passed=found.both_passed,
        figures=dict(list(figures.items())[:_MAX_FIGURES]),
    )


def rung_proof(read: RunRead, rung: RungResult) -> Proof:
    """A run's rung as proof: where, against which endpoint, its status and figures."""
    figures = _concurrency(rung.figures) if rung.name == "concurrency" else _scalars(rung.figures)
    return Proof(
        artifact=read.summary,
        created_at=read.run.created_at,
        url=public_url(read.run.url),
        model=read.run.model,
        rung=rung.name,
        status=rung.status,
        figures=figures,
        compared=_compared(read.run, rung.name, figures),
    )


def starts_proof(read: RunRead, starts: StartSummary) -> Proof:
    """A run's start stability (validate --start-cmd --starts N) as proof."""
    return Proof(
        artifact=read.summary,
        created_at=read.run.created_at,
        url=public_url(read.run.url),
        model=read.run.model,
        rung="starts",
        status="passed" if starts.all_ready else "failed",
        figures={
            "node": starts.node,
            "requested": starts.requested,
            "ready": starts.ready,
            "engine_init_s": [round(s, 2) for s in starts.engine_init_s],
            "ready_s": [round(s, 2) for s in starts.ready_s],
        },
    )


def _times(values: Sequence[float]) -> str:
    return ", ".join(f"{value:.1f} s" for value in values) or "\u2013"


def _start_fields(read: RunRead, starts: StartSummary) -> dict[str, str]:
    fields = {
        "ready": str(starts.ready),
        "requested": str(starts.requested),
        "node": starts.node,
        "run": read.folder,
        "init": _times(starts.engine_init_s),
    }
    failed = next((s for s in starts.starts if s.outcome != "ready"), None)
    if failed is not None:
        cause = f" ({failed.diagnosis.cause})" if failed.diagnosis is not None else ""
        fields["number"] = str(failed.number)
        fields["outcome"] = _reason(f"{failed.outcome}{cause} {failed.reason or ''}")
    return fields


def climbed(runs: Sequence[RunRead], rung: str) -> list[tuple[RunRead, RungResult]]:
    """Each run that climbed the rung (a skipped rung was not), newest first."""
    found = []
    for read in reversed(runs):
        result = next((r for r in read.run.rungs if r.name == rung), None)
        if result is not None and result.status != "skipped":
            found.append((read, result))
    return found


def newest_starts(runs: Sequence[RunRead]) -> tuple[RunRead, StartSummary] | None:
    for read in reversed(runs):
        if read.run.starts is not None and read.run.starts.requested:
            return read, read.run.starts
    return None


# --- the verified scope ----------------------------------------------------------------------------


def scope(runs: Sequence[RunRead]) -> list[ScopeItem]:
    """Every part of the scope, each from the newest run that climbed its rung."""
    return [_scope_item(scope_id, runs) for scope_id in SCOPES]


def _scope_item(scope_id: ScopeId, runs: Sequence[RunRead]) -> ScopeItem:
    rung = RUNG_OF[scope_id]
    found = climbed(runs, rung)
    if scope_id == "model_load":
        starts = newest_starts(runs)
        newest_health = found[0][0] if found else None
        if starts is not None and (
            newest_health is None or runs.index(starts[0]) >= runs.index(newest_health)
        ):
            read, summary = starts
            return ScopeItem(
                id=scope_id,
                status="verified" if summary.all_ready else "failed",
                basis="starts_ready" if summary.all_ready else "starts_failed",
                fields=_start_fields(read, summary),
                proof=starts_proof(read, summary),
                runs=len(found),
            )
    if not found:
        skipped = any(r.name == rung for read in runs for r in read.run.rungs)
        if skipped:
            read = next(
                read for read in reversed(runs) if any(r.name == rung for r in read.run.rungs)
            )
            result = next(r for r in read.run.rungs if r.name == rung)
            return ScopeItem(
                id=scope_id,
                status="not_verified",
                basis="scope_skipped",
                fields={"run": read.folder, "reason": _reason(result.reason)},
                proof=rung_proof(read, result),
            )
        return ScopeItem(id=scope_id, status="not_verified", basis="scope_not_climbed")
    read, result = found[0]
    statuses: dict[str, ScopeStatus] = {"passed": "verified", "failed": "failed"}
    status = statuses.get(result.status, "not_verified")
    basis = {
        "passed": "scope_passed",
        "failed": "scope_failed",
        "not_supported": "scope_not_supported",
    }.get(result.status, "scope_skipped")
    return ScopeItem(
        id=scope_id,
        status=status,
        basis=basis,
        fields={"run": read.folder, "reason": _reason(result.reason)},
        proof=rung_proof(read, result),
        runs=len(found),
    )


# --- the four comparisons ------------------------------------------------------------------------


def start_failure_recurs(diagnosis: Diagnosis, runs: Sequence[RunRead]) -> Comparison:
    """Does the diagnosed start failure come back: the starts timed after the diagnosis (their
    own diagnoses), else whether a server answered after it."""
    cause = diagnosis.primary.cause
    if cause == "no_failure":
        return Comparison(
            id="start_failure_recurs", answer="unknown", basis="recurs_no_failure",
            fields={"cause": cause},
        )  # fmt: skip
    made = _moment(diagnosis.created_at)
    later = [r for r in runs if made is None or r.created is None or r.created > made]
    for read in reversed(later):
        starts = read.run.starts
        if starts is None or not starts.requested:
            continue
        proof = [starts_proof(read, starts)]
        failed = [s for s in starts.starts if s.outcome != "ready"]
        same = next((s for s in failed if s.diagnosis and s.diagnosis.cause == cause), None)
        if same is not None:
            return Comparison(
                id="start_failure_recurs", answer="yes", good=False, basis="recurs_same_cause",
                fields={"number": str(same.number), "run": read.folder, "cause": cause},
                proof=proof,
            )  # fmt: skip
        if failed:
            first = failed[0]
            other = first.diagnosis.cause if first.diagnosis else first.outcome
            return Comparison(
                id="start_failure_recurs", answer="no", good=False, basis="recurs_other_cause",
                fields={"number": str(first.number), "run": read.folder, "other": other,
                        "cause": cause},
                proof=proof,
            )  # fmt: skip
        return Comparison(
            id="start_failure_recurs", answer="no", good=True, basis="recurs_starts_ready",
            fields={"ready": str(starts.ready), "requested": str(starts.requested),
                    "run": read.folder, "cause": cause},
            proof=proof,
        )  # fmt: skip
    served = climbed(later, "health")
    up = next(((read, rung) for read, rung in served if rung.status == "passed"), None)
    if up is not None:
        read, rung = up
        return Comparison(
            id="start_failure_recurs", answer="no", good=True, basis="recurs_served",
            fields={"run": read.folder}, proof=[rung_proof(read, rung)],
        )  # fmt: skip
    return Comparison(id="start_failure_recurs", answer="unknown", basis="recurs_no_run")


def prefix_cache_hits(runs: Sequence[RunRead]) -> Comparison:
    """Does the prefix cache hit on an identical prefix: the newest same_prefix rung."""
    found = climbed(runs, "same_prefix")
    if not found:
        return Comparison(id="prefix_cache_hits", answer="unknown", basis="prefix_no_run")
    read, rung = found[0]
    proof = [rung_proof(read, rung)]
    figures = rung.figures
    hits = figures.get("hits", read.run.prefix_cache.hits)
    queries = figures.get("queries", read.run.prefix_cache.queries)
    fields = {"run": read.folder, "reason": _reason(rung.reason)}
    if rung.status == "not_supported":
        return Comparison(
            id="prefix_cache_hits", answer="unknown", basis="prefix_not_measured", fields=fields,
            proof=proof,
        )  # fmt: skip
    if rung.status == "passed" and isinstance(hits, int | float) and hits > 0:
        rate = figures.get("hit_rate")
        if rate is None and isinstance(queries, int | float) and queries:
            rate = hits / queries
        fields |= {
            "hits": number(hits),
            "queries": number(queries),
            "rate": number(rate),
            "first": number(figures.get("ttft_first_s")),
            "repeats": number(figures.get("ttft_repeats_p50_s")),
        }
        return Comparison(
            id="prefix_cache_hits", answer="yes", good=True, basis="prefix_hits", fields=fields,
            proof=proof,
        )  # fmt: skip
    return Comparison(
        id="prefix_cache_hits", answer="no", good=False, basis="prefix_no_hits", fields=fields,
        proof=proof,
    )  # fmt: skip


def tool_calls_correct(runs: Sequence[RunRead]) -> Comparison:
    """Are tool calls and structured output correct: the newest run that checked either."""
    for read in reversed(runs):
        rungs = {r.name: r for r in read.run.rungs if r.status != "skipped"}
        tools, structured = rungs.get("tool_calls"), rungs.get("structured_output")
        if tools is None and structured is None:
            continue
        proof = [rung_proof(read, rung) for rung in (tools, structured) if rung is not None]
        t, s = read.run.tool_calls, read.run.structured_output
        fields = {
            "run": read.folder,
            "mode": t.mode,
            "tool_valid": number(t.valid) if tools else "\u2013",
            "tool_requests": number(t.requests) if tools else "\u2013",
            "tool_errors": number(t.format_errors) if tools else "\u2013",
            "so_valid": number(s.valid) if structured else "\u2013",
            "so_requests": number(s.requests) if structured else "\u2013",
            "so_errors": number(s.format_errors) if structured else "\u2013",
        }
        checked = [rung for rung in (tools, structured) if rung is not None]
        errors = (t.format_errors if tools else 0) + (s.format_errors if structured else 0)
        if errors:
            return Comparison(
                id="tool_calls_correct", answer="no", good=False, basis="tools_errors",
                fields=fields, proof=proof,
            )  # fmt: skip
        failed = next((rung for rung in checked if rung.status == "failed"), None)
        if failed is not None:  # no format error: the rung failed for another reason (a parser)
            return Comparison(
                id="tool_calls_correct", answer="no", good=False, basis="tools_failed",
                fields=fields | {"rung": failed.name, "reason": _reason(failed.reason or "failed")},
                proof=proof,
            )  # fmt: skip
        if len(checked) == 2 and all(rung.status == "passed" for rung in checked):
            return Comparison(
                id="tool_calls_correct", answer="yes", good=True, basis="tools_correct",
                fields=fields, proof=proof,
            )  # fmt: skip
        return Comparison(
            id="tool_calls_correct", answer="unknown", basis="tools_partial", fields=fields,
            proof=proof,
        )  # fmt: skip
    return Comparison(id="tool_calls_correct", answer="unknown", basis="tools_no_run")


def maintenance_acceptable(
    answer: bool | None, answered_by: str | None, answered_at: str | None
) -> Comparison:
    """The team's answer, recorded with who gave it (unknown when nobody was asked)."""
    if answer is None or not answered_by:
        return Comparison(
            id="maintenance_acceptable", answer="unknown", basis="maintenance_not_asked"
        )
    return Comparison(
        id="maintenance_acceptable",
        answer="yes" if answer else "no",
        good=answer,
        basis="maintenance_yes" if answer else "maintenance_no",
        fields={"by": answered_by, "when": (answered_at or "")[:16].replace("T", " ")},
        answered_by=answered_by,
        answered_at=answered_at,
    )


# --- the widening conditions ---------------------------------------------------------------------


@dataclass(frozen=True)
class Asked:
    """What the team answered (None: not asked), who, when."""

    approval_ready: bool | None = None
    answered_by: str | None = None
    answered_at: str | None = None


# The baseline checks that compare an existing model's request before and after the change.
ENDPOINT_CHECKS = frozenset({"endpoint", "endpoint_slower", "endpoint_failing"})


def comparison_proof(comparison: BaselineComparison, artifact: str) -> Proof:
    return Proof(
        artifact=artifact,
        created_at=comparison.created_at,
        status=comparison.verdict,
        figures={
            "before": comparison.before.label,
            "after": comparison.after.label,
            "regressions": comparison.regressions,
            "expected": comparison.expected,
            "changed": comparison.changed,
        },
    )


@dataclass(frozen=True)
class Bound:
    """What a run must be tied to, to count for the plan's node: one of the plan's nodes (any
    node, when the plan names none), with a driver at or above the image's floor."""

    nodes: tuple[str, ...] = ()
    min_driver: str | None = None

    def untied(self, read: RunRead) -> tuple[str, dict[str, str]] | None:
        """Why the run is no evidence for the plan's node (a basis and its fields), or None."""
        node = read.run.node
        fields = {"run": read.folder, "nodes": ", ".join(self.nodes) or "\u2013"}
        if node.name is None:
            return "run_node_unknown", fields
        fields["node"] = node.name
        if self.nodes and not any(same_node(node.name, planned) for planned in self.nodes):
            return "run_other_node", fields
        if node.driver is None:
            return "run_driver_unknown", fields
        fields["driver"] = node.driver
        if self.min_driver is not None and _below(node.driver, self.min_driver):
            fields["floor"] = self.min_driver
            return "run_driver_below_floor", fields
        return None


def validated_on(runs: Sequence[RunRead], bound: Bound) -> ValidatedOn:
    """The newest run tied to the plan's node, with its node, driver, GPUs and image; else why
    the newest run is not tied (or that there is none)."""
    tied = [read for read in runs if bound.untied(read) is None]
    if tied:
        read = tied[-1]
        node = read.run.node
        return ValidatedOn(
            tied=True, basis="validated_on", run=read.folder, node=node.name,
            driver=node.driver, baseline=node.baseline, gpus=node.gpus,
            gpu_model=node.gpu_model, image=read.run.image, min_driver=bound.min_driver,
            fields={"run": read.folder, "node": str(node.name), "driver": str(node.driver),
                    "baseline": str(node.baseline)},
        )  # fmt: skip
    if not runs:
        return ValidatedOn(tied=False, basis="validated_no_run", min_driver=bound.min_driver)
    read = runs[-1]
    why = bound.untied(read)
    assert why is not None  # no run is tied, the newest among them
    basis, fields = why
    return ValidatedOn(
        tied=False, basis=basis, fields=fields, run=read.folder, node=read.run.node.name,
        driver=read.run.node.driver, image=read.run.image, min_driver=bound.min_driver,
    )  # fmt: skip


def _below(driver: str, floor: str) -> bool:
    try:
        return DriverVersion.parse(driver) < DriverVersion.parse(floor)
    except VersionError:
        return True  # a driver that does not read as one meets no floor


def _tied(
    runs: Sequence[RunRead], bound: Bound, wanted: Callable[[RunRead], bool]
) -> tuple[list[RunRead], tuple[str, dict[str, str]] | None]:
    """The runs `wanted` picks that are tied to the plan's node, and why the newest of the others
    is not (when no run is tied)."""
    picked = [read for read in runs if wanted(read)]
    tied = [read for read in picked if bound.untied(read) is None]
    why = bound.untied(picked[-1]) if picked and not tied else None
    return tied, why


def _untied(condition: str, check: str, why: tuple[str, dict[str, str]]) -> Widening:
    basis, fields = why
    return Widening(condition=condition, check=check, status="unknown", basis=basis, fields=fields)


def widening(
    condition: str,
    check: str | None,
    runs: Sequence[RunRead],
    comparison: tuple[BaselineComparison, str] | None,
    rollback_driver: str | None,
    asked: Asked,
    bound: Bound | None = None,
) -> Widening:
    """One widening condition judged by its check (record.yaml), from the case's artifacts; a
    condition about the plan's node counts only the runs tied to it (`bound`)."""
    bound = bound or Bound()
    if check == "engine_init_repeated":
        return _init_repeated(condition, runs, bound)
    if check == "regression_passes":
        return _regression(condition, comparison)
    if check == "requests_succeed":
        return _requests(condition, runs, bound)
    if check == "no_communication_error":
        return _communication(condition, runs, comparison)
    if check == "rollback_and_approval":
        return _approval(condition, rollback_driver, asked)
    return Widening(condition=condition, check=check, status="unknown", basis="no_check")


def _init_repeated(condition: str, runs: Sequence[RunRead], bound: Bound) -> Widening:
    check = "engine_init_repeated"
    tied, why = _tied(runs, bound, lambda read: bool(read.run.starts and read.run.starts.requested))
    if why is not None:
        return _untied(condition, check, why)
    found = newest_starts(tied)
    if found is None:
        return Widening(condition=condition, check=check, status="unknown", basis="init_no_run")
    read, starts = found
    proof = [starts_proof(read, starts)]
    fields = _start_fields(read, starts)
    if not starts.all_ready:
        return Widening(
            condition=condition, check=check, status="not_met", basis="init_failed",
            fields=fields, proof=proof,
        )  # fmt: skip
    if starts.requested < 2:
        return Widening(
            condition=condition, check=check, status="unknown", basis="init_once", fields=fields,
            proof=proof,
        )  # fmt: skip
    return Widening(
        condition=condition, check=check, status="met", basis="init_repeated", fields=fields,
        proof=proof,
    )  # fmt: skip


def _regression(condition: str, comparison: tuple[BaselineComparison, str] | None) -> Widening:
    check = "regression_passes"
    if comparison is None:
        return Widening(
            condition=condition, check=check, status="unknown", basis="regression_no_comparison"
        )
    compared, artifact = comparison
    fields = {
        "before": compared.before.label,
        "after": compared.after.label,
        "expected": str(compared.expected),
        "regressions": str(compared.regressions),
        "checks": ", ".join(sorted({i.check for i in compared.items if i.kind == "regression"})),
    }
    proof = [comparison_proof(compared, artifact)]
    if compared.verdict == "regression":
        return Widening(
            condition=condition, check=check, status="not_met", basis="regression_found",
            fields=fields, proof=proof,
        )  # fmt: skip
    if not any(i.check in ENDPOINT_CHECKS and i.kind != "not_compared" for i in compared.items):
        # the node's state held, but no existing model answered on both sides: not proven
        return Widening(
            condition=condition, check=check, status="unknown", basis="regression_no_endpoint",
            fields=fields, proof=proof,
        )  # fmt: skip
    return Widening(
        condition=condition, check=check, status="met", basis="regression_none", fields=fields,
        proof=proof,
    )  # fmt: skip


def _requests(condition: str, runs: Sequence[RunRead], bound: Bound) -> Widening:
    check = "requests_succeed"
    tied, why = _tied(
        runs,
        bound,
        lambda read: any(
            r.name in ("short_text", "target_context") and r.status != "skipped"
            for r in read.run.rungs
        ),
    )
    if why is not None:
        return _untied(condition, check, why)
    for read in reversed(tied):
        rungs = {r.name: r for r in read.run.rungs if r.status != "skipped"}
        short, target = rungs.get("short_text"), rungs.get("target_context")
        if short is None and target is None:
            continue
        proof = [rung_proof(read, rung) for rung in (short, target) if rung is not None]
        bad = next((r for r in (short, target) if r is not None and r.status != "passed"), None)
        if bad is not None:
            return Widening(
                condition=condition, check=check, status="not_met", basis="requests_failed",
                fields={"rung": bad.name, "run": read.folder,
                        "reason": _reason(bad.reason or bad.status)},
                proof=proof,
            )  # fmt: skip
        if short is not None and target is not None:
            tokens = target.figures.get("prompt_tokens")
            return Widening(
                condition=condition, check=check, status="met", basis="requests_passed",
                fields={"run": read.folder, "tokens": number(tokens)}, proof=proof,
            )  # fmt: skip
    return Widening(condition=condition, check=check, status="unknown", basis="requests_no_run")


def _communication(
    condition: str, runs: Sequence[RunRead], comparison: tuple[BaselineComparison, str] | None
) -> Widening:
    check = "no_communication_error"
    proof: list[Proof] = []
    regressions: list[str] = []
    if comparison is not None:
        compared, artifact = comparison
        regressions = sorted(
            {
                i.check
                for i in compared.items
                if i.kind == "regression" and i.check in COMMUNICATION_CHECKS
            }
        )
        proof.append(comparison_proof(compared, artifact))
    found = climbed(runs, "multi_node")
    if found:
        read, rung = found[0]
        proof.insert(0, rung_proof(read, rung))
        if rung.status != "passed":
            return Widening(
                condition=condition, check=check, status="not_met", basis="communication_failed",
                fields={"run": read.folder, "reason": _reason(rung.reason or rung.status)},
                proof=proof,
            )  # fmt: skip
    if regressions:
        return Widening(
            condition=condition, check=check, status="not_met",
            basis="communication_regression", fields={"checks": ", ".join(regressions)},
            proof=proof,
        )  # fmt: skip
    if not found:
        return Widening(
            condition=condition, check=check, status="unknown", basis="communication_no_run",
            proof=proof,
        )  # fmt: skip
    read = found[0][0]
    basis = "communication_passed" if comparison else "communication_passed_no_baseline"
    return Widening(
        condition=condition, check=check, status="met", basis=basis,
        fields={"run": read.folder}, proof=proof,
    )  # fmt: skip


def _approval(condition: str, rollback_driver: str | None, asked: Asked) -> Widening:
    check = "rollback_and_approval"
    driver = rollback_driver or "\u2013"
    if asked.approval_ready is None or not asked.answered_by:
        return Widening(
            condition=condition, check=check, status="unknown", basis="approval_not_asked",
            fields={"driver": driver},
        )  # fmt: skip
    when = (asked.answered_at or "")[:16].replace("T", " ")
    return Widening(
        condition=condition,
        check=check,
        status="met" if asked.approval_ready else "not_met",
        basis="approval_ready" if asked.approval_ready else "approval_not_ready",
        fields={"by": asked.answered_by, "when": when, "driver": driver},
        answered_by=asked.answered_by,
    )
