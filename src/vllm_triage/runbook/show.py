"""The library behind `case show`: read every artifact of a case folder (bundles, diagnoses, plans,
baselines, validation runs, baseline comparisons, prefix checks, decision records, the report
page), say what each found at a glance, and the runbook's next step.

An artifact that cannot be read (corrupt, or written by a newer vllm-triage), or a folder of the
case that cannot be listed, is listed as `unreadable` with its one-line reason, and the rest of
the case is still shown; the next step is worked out without it and says so in a note. This
differs from `report`, which refuses such a case: a page for approvers that skipped an artifact
would mislead them, whereas `case show` is how a person finds the broken file in the first
place, and one bad file must not hide the rest of the incident from them. Only a case folder
that is itself unusable (missing, not a folder, not listable) is a one-line error (exit 2).

The report page has no JSON of its own: it is known by its path in the case (report.html, and
report.pdf beside it) and the time its file was written.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TypeVar

from vllm_triage.baseline.models import Baseline, BaselineComparison
from vllm_triage.bundle.read import open_bundle
from vllm_triage.case import (
    ARCHIVE_SUFFIX,
    BASELINE_FILE,
    BASELINES,
    LEGACY_RUN_PREFIX,
    PREFIX_CHECKS,
    REPORT,
    RUNS,
    SUMMARY,
    Case,
    CaseError,
    case_folder,
    parse_stamp,
    read_artifact,
)
from vllm_triage.errors import InputError
from vllm_triage.fleet.models import STATUSES, FleetScan
from vllm_triage.i18n import catalog
from vllm_triage.inputs import display_name
from vllm_triage.models import Diagnosis
from vllm_triage.plan.models import Plan
from vllm_triage.prefix.models import PrefixReport
from vllm_triage.record.models import DecisionRecord
from vllm_triage.runbook.models import (
    ArtifactKind,
    BaselineCaptureEntry,
    BundleEntry,
    CaseEntry,
    CaseSummary,
    ComparisonEntry,
    DiagnosisEntry,
    EndpointPair,
    FleetScanEntry,
    PlanEntry,
    PrefixCheckEntry,
    RecordEntry,
    ReportEntry,
    StartStability,
    UnreadableEntry,
    ValidationEntry,
)
from vllm_triage.runbook.next_step import after, moment, newest_artifact, next_step
from vllm_triage.runbook.verdicts import verdict
from vllm_triage.validate.models import ValidationRun

COMPARISON = "baseline-comparison"
"""The stem `baseline compare` saves its comparison under (baseline-comparison.json, .md)."""
PDF = "report.pdf"
_PROBE_STATES = ("ok", "failed", "timed_out", "not_available")
_USERINFO = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)?[^?#]*@")
_ENGLISH = catalog("en")

Model = TypeVar("Model", Diagnosis, Plan, BaselineComparison, DecisionRecord, FleetScan)


@dataclass(frozen=True)
class CaseShowOptions:
    """Which case folder to show; `today` decides whether a record's review is due (None: the
    current UTC day)."""

    case: Path = field(default_factory=case_folder)
    today: date | None = None


def case_show(options: CaseShowOptions) -> CaseSummary:
    """What the case holds (each artifact, when, its verdict) and the next step of the runbook;
    CaseError only for a case folder that cannot be used at all."""
    root = options.case
    if not os.path.lexists(root):
        raise CaseError(
            f"{display_name(root)}: no such case folder (collect, diagnose, validate and "
            "prefix-check make it)"
        )
    if not root.is_dir():
        raise CaseError(f"{display_name(root)}: not a folder")
    try:
        with os.scandir(root):
            pass
    except OSError as exc:
        raise CaseError(f"{display_name(root)}: cannot list ({exc.strerror or exc})") from None
    case = Case(root)
    today = options.today or datetime.now(UTC).date()
    entries: list[CaseEntry] = [
        *_listed(case, "bundle", "bundles", lambda: _bundles(case)),
        *_current_and_history(case, "diagnosis", "diagnosis", Diagnosis, _diagnosis_entry),
        *_current_and_history(case, "plan", "plan", Plan, _plan_entry),
        *_listed(case, "baseline", BASELINES, lambda: _baselines(case)),
        *_listed(case, "validation", RUNS, lambda: _validations(case)),
        *_current_and_history(
            case, "baseline_comparison", COMPARISON, BaselineComparison, _comparison_entry
        ),
        *_listed(case, "prefix_check", PREFIX_CHECKS, lambda: _prefix_checks(case)),
        *_current_and_history(
            case,
            "record",
            "record",
            DecisionRecord,
            lambda c, p, r, h: _record_entry(c, p, r, h, today),
        ),
        *_current_and_history(case, "fleet_scan", "fleet-scan", FleetScan, _fleet_scan_entry),
    ]
    report = _report(case, entries)
    if report is not None:
        entries.append(report)
    entries = [entry.model_copy(update={"verdict": verdict(entry, _ENGLISH)}) for entry in entries]
    shown = display_name(root)
    return CaseSummary(case=shown, artifacts=entries, next_step=next_step(shown, entries))


def _unreadable(
    kind: ArtifactKind, path: str, error: InputError, history: bool = False
) -> UnreadableEntry:
    message = " ".join(str(error).split())
    return UnreadableEntry(artifact=kind, path=path, verdict="", error=message, history=history)


def _listed(
    case: Case, kind: ArtifactKind, folder: str, read: Callable[[], list[CaseEntry]]
) -> list[CaseEntry]:
    """The entries of one kind; a folder of the case that cannot be listed is one unreadable
    entry (each artifact in it that cannot be read is one too, made by `read`)."""
    try:
        return read()
    except InputError as exc:
        return [_unreadable(kind, folder, exc)]


def _current_and_history(
    case: Case,
    kind: ArtifactKind,
    stem: str,
    model: type[Model],
    entry: Callable[[Case, Path, Model, bool], CaseEntry],
) -> list[CaseEntry]:
    """The earlier versions of <stem>.json (history/), then the current one."""
    found: list[CaseEntry] = []
    try:
        earlier = case.history(stem)
    except InputError as exc:
        found.append(_unreadable(kind, "history", exc, history=True))
        earlier = []
    current = case.root / f"{stem}.json"
    paths = [(path, True) for path in earlier]
    if os.path.lexists(current):
        paths.append((current, False))
    for path, history in paths:
        try:
            found.append(entry(case, path, read_artifact(path, model), history))
        except InputError as exc:
            found.append(_unreadable(kind, case.relative(path), exc, history))
    return found


# --- bundles ----------------------------------------------------------------------------------


def _bundles(case: Case) -> list[CaseEntry]:
    """One entry per bundle (its folder and its archive are one bundle), read from the folder."""
    by_name: dict[str, list[Path]] = {}
    for path in case.bundles():
        by_name.setdefault(path.name.removesuffix(ARCHIVE_SUFFIX), []).append(path)
    entries: list[CaseEntry] = []
    for paths in by_name.values():
        folder = next((p for p in paths if p.is_dir()), None)
        archive = next((p for p in paths if not p.is_dir()), None)
        shown = case.relative(folder or paths[0])
        try:
            with open_bundle(folder or paths[0]) as bundle:
                manifest, problems = bundle.manifest, len(bundle.problems)
        except InputError as exc:
            entries.append(_unreadable("bundle", shown, exc))
            continue
        counts = {state: 0 for state in _PROBE_STATES}
        for probe in manifest.probes:
            counts[probe.status] += 1
        entries.append(
            BundleEntry(
                path=shown,
                archive=case.relative(archive) if archive and folder else None,
                created_at=manifest.created_at,
                verdict="",
                probes=counts,
                failed_probes=[
                    p.name for p in manifest.probes if p.status in ("failed", "timed_out")
                ],
                problems=problems,
            )
        )
    return entries


# --- diagnosis, plan, comparison, record: one current each, earlier ones in history/ ---------


def _diagnosis_entry(case: Case, path: Path, diagnosis: Diagnosis, history: bool) -> CaseEntry:
    primary = diagnosis.primary
    return DiagnosisEntry(
        path=case.relative(path),
        created_at=diagnosis.created_at,
        verdict="",
        history=history,
        cause=primary.cause,
        phase=primary.phase,
        confidence=primary.confidence,
        driver_change_advised=primary.driver_change_advised,
        compat=diagnosis.compat.verdict if diagnosis.compat else None,
    )


def _plan_entry(case: Case, path: Path, plan: Plan, history: bool) -> CaseEntry:
    target = plan.plan.target
    return PlanEntry(
        path=case.relative(path),
        created_at=plan.created_at,
        verdict="",
        history=history,
        recommended=plan.recommended.path,
        recommended_name=plan.recommended.name,
        alternatives=[a.path for a in plan.alternatives],
        cause=plan.diagnosis.cause,
        diagnosis_created_at=plan.diagnosis.created_at,
        min_driver=target.min_driver if target else None,
        toolkit_driver=target.toolkit_driver if target else None,
        recommended_driver=target.recommended_driver if target else None,
        recommended_branch=target.recommended_branch if target else None,
        flow=plan.plan.flow.id if plan.plan.flow else None,
    )


def _comparison_entry(
    case: Case, path: Path, comparison: BaselineComparison, history: bool
) -> CaseEntry:
    return ComparisonEntry(
        path=case.relative(path),
        created_at=comparison.created_at,
        verdict="",
        history=history,
        before=comparison.before.label,
        after=comparison.after.label,
        result=comparison.verdict,
        regressions=comparison.regressions,
        expected=comparison.expected,
        changed=comparison.changed,
        regression_checks=_unique(i.check for i in comparison.items if i.kind == "regression"),
        expected_checks=_unique(i.check for i in comparison.items if i.kind == "expected"),
    )


def _record_entry(
    case: Case, path: Path, record: DecisionRecord, history: bool, today: date
) -> CaseEntry:
    review = record.review.date
    try:
        due: bool | None = date.fromisoformat(review) <= today
    except ValueError:
        due = None
    return RecordEntry(
        path=case.relative(path),
        created_at=record.created_at,
        verdict="",
        history=history,
        adopted=record.adopted.path,
        review_on=review,
        due=due,
    )


def _fleet_scan_entry(case: Case, path: Path, scan: FleetScan, history: bool) -> CaseEntry:
    counts = scan.counts or {s: sum(n.status == s for n in scan.nodes) for s in STATUSES}
    minimums = {n.min_driver for n in scan.nodes if n.status == "needs_upgrade" and n.min_driver}
    return FleetScanEntry(
        path=case.relative(path),
        created_at=scan.created_at,
        verdict="",
        history=history,
        image=scan.image,
        cuda=scan.cuda,
        nodes=len(scan.nodes),
        counts={status: counts[status] for status in STATUSES if counts.get(status)},
        min_driver=max(minimums, key=_driver_key) if minimums else None,
        waves=len(scan.waves),
    )


def _driver_key(version: str) -> tuple[int, ...]:
    """580.95.05 as (580, 95, 5), so that drivers compare as versions, not as text."""
    return tuple(int(part) if part.isdigit() else 0 for part in version.split("."))


def _unique(values: Iterable[str]) -> list[str]:
    found: list[str] = []
    for value in values:
        if value not in found:
            found.append(value)
    return found


# --- baselines, runs, prefix checks: one file or folder each --------------------------------


def _baselines(case: Case) -> list[CaseEntry]:
    """Each baselines/<label>/, oldest capture first (one that did not finish, or cannot be read,
    has no time and comes last)."""
    entries: list[CaseEntry] = []
    for folder in case.baselines():
        shown = case.relative(folder)
        path = folder / BASELINE_FILE
        if not os.path.lexists(path):
            entries.append(
                BaselineCaptureEntry(
                    path=shown, created_at=None, verdict="", label=folder.name, complete=False
                )
            )
            continue
        try:
            baseline = read_artifact(path, Baseline)
        except InputError as exc:
            entries.append(_unreadable("baseline", case.relative(path), exc))
            continue
        gpu, host, endpoint = baseline.gpu, baseline.host, baseline.endpoint
        entries.append(
            BaselineCaptureEntry(
                path=shown,
                created_at=baseline.created_at,
                verdict="",
                label=baseline.label,
                complete=True,
                node=baseline.node or (host.node_name if host else None),
                driver=gpu.driver_version if gpu else None,
                gpus=len(gpu.gpus) if gpu else None,
                jobs=len(gpu.processes) if gpu else None,
                endpoint_ok=endpoint.ok if endpoint else None,
                endpoint_seconds=endpoint.seconds if endpoint else None,
                failed_probes=[
                    p.name for p in baseline.probes if p.status in ("failed", "timed_out")
                ],
            )
        )
    return sorted(entries, key=lambda e: (e.created_at is None, moment(e.created_at)))


def _validations(case: Case) -> list[CaseEntry]:
    entries: list[CaseEntry] = []
    for folder in case.runs():
        summary = folder / SUMMARY
        try:
            entries.append(_validation(case, folder))
        except InputError as exc:
            entries.append(_unreadable("validation", case.relative(summary), exc))
    return entries


def _validation(case: Case, folder: Path) -> ValidationEntry:
    summary = folder / SUMMARY
    when = _stamp_time(folder.name.removeprefix(LEGACY_RUN_PREFIX))
    if not os.path.lexists(summary):
        return ValidationEntry(path=case.relative(folder), created_at=when, verdict="", passed=None)
    run = read_artifact(summary, ValidationRun)
    starts = run.starts
    pair = run.comparison
    return ValidationEntry(
        path=case.relative(folder),
        created_at=run.created_at or when,
        verdict="",
        passed=run.passed,
        failed_rung=next((r.name for r in run.rungs if r.status == "failed"), None),
        interrupted=run.interrupted,
        url=_public(run.url),
        model=run.model,
        rungs=len(run.rungs),
        starts=StartStability(
            requested=starts.requested, ready=starts.ready, engine_init_s=starts.engine_init_s
        )
        if starts is not None
        else None,
        comparison=EndpointPair(
            url=_public(pair.url), passed=pair.passed, both_passed=pair.both_passed
        )
        if pair is not None
        else None,
    )


def _prefix_checks(case: Case) -> list[CaseEntry]:
    entries: list[CaseEntry] = []
    for path in case.prefix_checks():
        try:
            report = read_artifact(path, PrefixReport)
        except InputError as exc:
            entries.append(_unreadable("prefix_check", case.relative(path), exc))
            continue
        entries.append(
            PrefixCheckEntry(
                path=case.relative(path),
                created_at=report.created_at or _stamp_time(path.stem),
                verdict="",
                reusable_share=report.reusable_share,
                reusable_share_if_fixed=report.reusable_share_if_fixed,
                problems=[c.kind for c in report.problems],
            )
        )
    return entries


# --- the report page ----------------------------------------------------------------------------


def _report(case: Case, entries: list[CaseEntry]) -> CaseEntry | None:
    """report.html by its path and the time it was written; stale when an artifact is newer."""
    page = case.root / REPORT
    try:
        written = os.lstat(page)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return _unreadable("report", REPORT, InputError(f"{REPORT}: {exc.strerror or exc}"))
    created = datetime.fromtimestamp(written.st_mtime, UTC).isoformat()
    newest = newest_artifact(entries)
    try:  # a report.pdf older than the page is an earlier report's
        pdf = PDF if os.lstat(case.root / PDF).st_mtime >= written.st_mtime else None
    except OSError:
        pdf = None
    return ReportEntry(
        path=case.relative(page),
        created_at=created,
        verdict="",
        pdf=pdf,
        stale=newest is not None and after(newest.created_at, created),
    )


def _public(url: str) -> str:
    """A URL without `user:password@` (validate writes none; a summary placed by hand might). The
    user part as vllm_triage.validate.credentials finds it, without importing its HTTP client."""
    return _USERINFO.sub(lambda match: match.group("scheme") or "", url, count=1)


def _stamp_time(name: str) -> str | None:
    moment: datetime | None = parse_stamp(name)
    return moment.isoformat() if moment else None
