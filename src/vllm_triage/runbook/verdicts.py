"""Each artifact's verdict at a glance, in the reader's language: one function from an entry's
structured fields and a catalog. `case show` stores the English one in the entry's `verdict`
(the JSON contract); the renderings call it again with the reader's catalog."""

from __future__ import annotations

from vllm_triage.i18n import Catalog
from vllm_triage.runbook.models import (
    BaselineCaptureEntry,
    BundleEntry,
    CaseEntry,
    ComparisonEntry,
    DiagnosisEntry,
    FleetScanEntry,
    PlanEntry,
    PrefixCheckEntry,
    RecordEntry,
    ReportEntry,
    UnreadableEntry,
    ValidationEntry,
)


def verdict(entry: CaseEntry, tr: Catalog) -> str:
    """What the artifact found, in one line."""
    if isinstance(entry, BundleEntry):
        return _bundle(entry, tr)
    if isinstance(entry, DiagnosisEntry):
        return _diagnosis(entry, tr)
    if isinstance(entry, PlanEntry):
        return _plan(entry, tr)
    if isinstance(entry, BaselineCaptureEntry):
        return _baseline(entry, tr)
    if isinstance(entry, ValidationEntry):
        return _validation(entry, tr)
    if isinstance(entry, ComparisonEntry):
        return _comparison(entry, tr)
    if isinstance(entry, PrefixCheckEntry):
        return _prefix_check(entry, tr)
    if isinstance(entry, RecordEntry):
        return _record(entry, tr)
    if isinstance(entry, FleetScanEntry):
        return _fleet_scan(entry, tr)
    if isinstance(entry, ReportEntry):
        return _report(entry, tr)
    return _unreadable(entry, tr)


def _bundle(entry: BundleEntry, tr: Catalog) -> str:
    failed = entry.probes.get("failed", 0) + entry.probes.get("timed_out", 0)
    text = tr("{ok} probes ok, {failed} failed", ok=entry.probes.get("ok", 0), failed=failed)
    if entry.failed_probes:
        text += f" ({', '.join(entry.failed_probes)})"
    if entry.problems:
        text += "; " + tr("{count} integrity problem(s)", count=entry.problems)
    return text


def _diagnosis(entry: DiagnosisEntry, tr: Catalog) -> str:
    confidence = format(entry.confidence, ".2f")
    text = tr(
        "{cause} ({phase}, confidence {confidence})",
        cause=entry.cause,
        phase=entry.phase,
        confidence=confidence,
    )
    advice = tr("driver change advised") if entry.driver_change_advised else tr("no driver change")
    return f"{text}; {advice}"


def _plan(entry: PlanEntry, tr: Catalog) -> str:
    text = tr("recommends {name} ({path})", name=tr(entry.recommended_name), path=entry.recommended)
    if entry.recommended_driver or entry.min_driver:
        text += "; " + tr(
            "driver target {target}, minimum to start {minimum}",
            target=_target(entry),
            minimum=entry.min_driver or "?",
        )
    if entry.flow:
        text += "; " + tr("flow {flow}", flow=entry.flow)
    return text


def _target(entry: PlanEntry) -> str:
    if entry.recommended_driver and entry.recommended_branch:
        return f"{entry.recommended_driver} ({entry.recommended_branch})"
    return entry.recommended_driver or "?"


def _baseline(entry: BaselineCaptureEntry, tr: Catalog) -> str:
    if not entry.complete:
        return tr("incomplete: no baseline.json (the capture did not finish)")
    parts = [
        tr(
            "driver {driver} on {node}, {gpus} GPUs, {jobs} job(s)",
            driver=entry.driver or "?",
            node=entry.node or "?",
            gpus="?" if entry.gpus is None else entry.gpus,
            jobs="?" if entry.jobs is None else entry.jobs,
        )
    ]
    if entry.endpoint_ok is True:
        seconds = "?" if entry.endpoint_seconds is None else f"{entry.endpoint_seconds:.1f}"
        parts.append(tr("short request ok in {seconds} s", seconds=seconds))
    elif entry.endpoint_ok is False:
        parts.append(tr("short request failed"))
    if entry.failed_probes:
        parts.append(tr("probes failed: {probes}", probes=", ".join(entry.failed_probes)))
    return "; ".join(parts)


def _validation(entry: ValidationEntry, tr: Catalog) -> str:
    if entry.passed is None:
        return tr("unfinished: no summary.json (the run was killed)")
    rung = entry.failed_rung
    if entry.passed:
        text = tr("passed ({count} rungs)", count=entry.rungs)
    elif entry.interrupted:
        text = tr("interrupted (failed at {rung})", rung=rung) if rung else tr("interrupted")
    else:
        text = tr("failed at {rung}", rung=rung) if rung else tr("failed")
    starts = entry.starts
    if starts is not None:
        times = ", ".join(f"{s:.1f}" for s in starts.engine_init_s) or "-"
        text += "; " + tr(
            "starts {ready}/{requested} ready, engine init {times} s",
            ready=starts.ready,
            requested=starts.requested,
            times=times,
        )
    pair = entry.comparison
    if pair is not None:
        if pair.both_passed:
            text += "; " + tr("compared with {url}: both passed", url=pair.url)
        elif pair.passed:
            text += "; " + tr("compared with {url}: it passed, this one did not", url=pair.url)
        else:
            text += "; " + tr("compared with {url}: it did not pass", url=pair.url)
    return text


def _comparison(entry: ComparisonEntry, tr: Catalog) -> str:
    text = tr(
        "{before} -> {after}: {regressions} regression(s), {expected} expected change(s)",
        before=entry.before,
        after=entry.after,
        regressions=entry.regressions,
        expected=entry.expected,
    )
    if entry.regression_checks:
        text += f" ({', '.join(entry.regression_checks)})"
    return text


def _prefix_check(entry: PrefixCheckEntry, tr: Catalog) -> str:
    text = tr("{share} reusable", share=format(entry.reusable_share, ".0%"))
    if entry.reusable_share_if_fixed is not None:
        fixed = format(entry.reusable_share_if_fixed, ".0%")
        text += ", " + tr("{share} if fixed", share=fixed)
    if entry.problems:
        return f"{text} ({', '.join(entry.problems)})"
    return text + " (" + tr("no problem found") + ")"


def _record(entry: RecordEntry, tr: Catalog) -> str:
    adopted = (
        tr("adopted {path}", path=entry.adopted) if entry.adopted else tr("adopted path not stated")
    )
    if entry.review_on is None:
        return adopted + "; " + tr("no review date")
    if entry.due:
        return adopted + "; " + tr("review due since {date}", date=entry.review_on)
    return adopted + "; " + tr("review on {date}, not due yet", date=entry.review_on)


def _fleet_scan(entry: FleetScanEntry, tr: Catalog) -> str:
    counts = ", ".join(f"{status} {count}" for status, count in entry.counts.items())
    text = tr("{nodes} node(s) for CUDA {cuda}: {counts}", nodes=entry.nodes, cuda=entry.cuda,
              counts=counts or "-")  # fmt: skip
    if entry.min_driver:
        text += "; " + tr("minimum driver {driver}", driver=entry.min_driver)
    return text + "; " + tr("{count} rollout wave(s)", count=entry.waves)


def _report(entry: ReportEntry, tr: Catalog) -> str:
    text = tr("HTML page and {pdf}", pdf=entry.pdf) if entry.pdf else tr("HTML page")
    state = tr("older than the case's newest artifact") if entry.stale else tr("up to date")
    return f"{text}; {state}"


def _unreadable(entry: UnreadableEntry, tr: Catalog) -> str:
    return tr("unreadable {kind}: {error}", kind=entry.artifact, error=entry.error)
