"""The runbook's next step for a case, decided from what it holds.

The steps, their commands and their sentences are data (vllm_triage.runbook.steps); this module
is the decision: which step's artifact is missing or out of date. In order:

1. no diagnosis: collect (no bundle) or diagnose the newest bundle; a bundle newer than the
   diagnosis: diagnose again (a new failure, or more evidence);
2. a decision record whose review date has come: review it;
3. no plan, or a plan that follows an earlier diagnosis: plan (a diagnosis that is no driver
   threshold goes to the plan too: it routes the cause to its own flow, no_driver_change); but a
   healthy server (no_failure) needs no plan: nothing to fix or restart, validate it (or stop);
4. then the steps the recommended path takes (steps.AFTER_PLAN), each satisfied by an artifact
   made after the one before it: for a driver upgrade, a baseline before the change, a passing
   validation after it, a baseline after it compared with the one before without regression,
   the record, the report; for the other paths fewer;
5. everything there: the review date of the record, else done.

Unreadable artifacts (corrupt, or from a newer vllm-triage) count as absent, and each adds a note.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from vllm_triage.runbook.models import (
    BaselineCaptureEntry,
    BundleEntry,
    CaseEntry,
    ComparisonEntry,
    DiagnosisEntry,
    NextStep,
    PlanEntry,
    RecordEntry,
    ReportEntry,
    Said,
    UnreadableEntry,
    ValidationEntry,
)
from vllm_triage.runbook.steps import AFTER_LABEL, AFTER_PLAN, BEFORE_LABEL, NOTES, REASONS

_Decision = tuple[str, dict[str, str]]
# The class of a server that started and served (or was stopped cleanly): no recovery to plan.
HEALTHY = "no_failure"
_DEFAULT_AFTER_PLAN = AFTER_PLAN["isolated_env"]
_VALIDATE_REASON = {
    "upgrade_driver": "validate_upgrade",
    "isolated_env": "validate_isolated",
    "custom_build": "validate_custom_build",
    "forward_compat": "validate_forward_compat",
    "no_driver_change": "validate_flow",
}


@dataclass
class _Case:
    """The current artifacts of a case (history and unreadable ones apart)."""

    bundles: list[BundleEntry] = field(default_factory=list)
    diagnosis: DiagnosisEntry | None = None
    plan: PlanEntry | None = None
    baselines: list[BaselineCaptureEntry] = field(default_factory=list)
    validations: list[ValidationEntry] = field(default_factory=list)
    comparison: ComparisonEntry | None = None
    record: RecordEntry | None = None
    report: ReportEntry | None = None
    unreadable: list[UnreadableEntry] = field(default_factory=list)
    entries: list[CaseEntry] = field(default_factory=list)

    @classmethod
    def of(cls, artifacts: Sequence[CaseEntry]) -> _Case:
        found = cls(entries=list(artifacts))
        for entry in artifacts:
            if getattr(entry, "history", False):
                continue
            if isinstance(entry, BundleEntry):
                found.bundles.append(entry)
            elif isinstance(entry, DiagnosisEntry):
                found.diagnosis = entry
            elif isinstance(entry, PlanEntry):
                found.plan = entry
            elif isinstance(entry, BaselineCaptureEntry):
                found.baselines.append(entry)
            elif isinstance(entry, ValidationEntry):
                found.validations.append(entry)
            elif isinstance(entry, ComparisonEntry):
                found.comparison = entry
            elif isinstance(entry, RecordEntry):
                found.record = entry
            elif isinstance(entry, ReportEntry):
                found.report = entry
            elif isinstance(entry, UnreadableEntry):
                found.unreadable.append(entry)
        found.bundles.sort(key=lambda b: moment(b.created_at))
        found.validations.sort(key=lambda v: moment(v.created_at))
        found.baselines.sort(key=lambda b: moment(b.created_at))
        return found


def next_step(case: str, artifacts: Sequence[CaseEntry]) -> NextStep:
    """The step after what the case holds (`artifacts` as case_show lists them; `case` is the
    folder as the commands should name it)."""
    state = _Case.of(artifacts)
    reason, fields = _decide(state)
    fields = {"case": shlex.quote(case), **fields}
    said = REASONS[reason]
    notes = [
        Said(id="unreadable", fields=values, text=NOTES["unreadable"].format(**values))
        for values in ({"path": u.path, "error": u.error} for u in state.unreadable)
    ]
    return NextStep(
        step=said.step,
        command=said.command.format(**fields),
        why=said.why.format(**fields),
        reason=reason,
        fields=fields,
        notes=notes,
    )


def newest_artifact(artifacts: Sequence[CaseEntry]) -> CaseEntry | None:
    """The current artifact made last, the report page aside (what a report must be newer than)."""
    current = [
        entry
        for entry in artifacts
        if entry.kind not in ("report", "unreadable")
        and not getattr(entry, "history", False)
        and entry.created_at is not None
    ]
    return max(current, key=lambda entry: moment(entry.created_at), default=None)


def _decide(case: _Case) -> _Decision:
    bundle = case.bundles[-1] if case.bundles else None
    diagnosis = case.diagnosis
    if diagnosis is None:
        if bundle is None:
            return "no_evidence", {}
        return "bundle_not_diagnosed", {"bundle": bundle.path}
    if bundle is not None and after(bundle.created_at, diagnosis.created_at):
        return "bundle_newer", {"bundle": bundle.path}
    if case.record is not None and case.record.due:
        return "review_due", {"date": case.record.review_on or "?"}
    plan = case.plan
    if plan is None and diagnosis.cause == HEALTHY:
        healthy = _Walk(case, diagnosis, None)
        decided = healthy.step("validate")
        if decided is not None:
            return decided
        return "healthy_validated", {"run": healthy.run.path if healthy.run else "?"}
    if plan is None:
        return ("plan_threshold" if diagnosis.driver_change_advised else "plan_flow"), {
            "cause": diagnosis.cause
        }
    if after(diagnosis.created_at, plan.created_at) or (
        plan.diagnosis_created_at is not None
        and diagnosis.created_at is not None
        and moment(plan.diagnosis_created_at) != moment(diagnosis.created_at)
    ):
        return "plan_outdated", {"plan": plan.path, "planned": plan.cause, "cause": diagnosis.cause}
    walk = _Walk(case, diagnosis, plan)
    for step in AFTER_PLAN.get(plan.recommended, _DEFAULT_AFTER_PLAN):
        decided = walk.step(step)
        if decided is not None:
            return decided
    return walk.finished()


@dataclass
class _Walk:
    """The steps after the plan, each satisfied by an artifact made after the one before."""

    case: _Case
    diagnosis: DiagnosisEntry
    plan: PlanEntry | None
    """None for a healthy server, which needs no plan (its only step: validate)."""
    since: str | None = None
    since_path: str = ""
    before: BaselineCaptureEntry | None = None
    run: ValidationEntry | None = None

    def __post_init__(self) -> None:
        start = self.plan or self.diagnosis
        self._moved(start.created_at, start.path)

    @property
    def recommended(self) -> str:
        return self.plan.recommended if self.plan else "no_driver_change"

    def step(self, step: str) -> _Decision | None:
        """None when the step has its artifact; else the reason it is the next step."""
        if step == "baseline_capture":
            return self._baseline_before()
        if step == "validate":
            return self._validate()
        if step == "baseline_compare":
            return self._compare()
        if step == "record":
            return self._record()
        if step == "report":
            return self._report()
        return None

    def finished(self) -> _Decision:
        record = self.case.record
        if record is not None and record.review_on:
            return "review_scheduled", {"date": record.review_on}
        return "done", {}

    def _moved(self, created_at: str | None, path: str) -> None:
        if self.since is None or after(created_at, self.since):
            self.since, self.since_path = created_at, path

    def _baseline_before(self) -> _Decision | None:
        """A complete baseline made after the diagnosis (the node before the change)."""
        captured = [
            b
            for b in self.case.baselines
            if b.complete and after(b.created_at, self.diagnosis.created_at)
        ]
        if not captured:
            return "baseline_before", {"label": self._free_label(BEFORE_LABEL)}
        self.before = captured[0]
        self._moved(self.before.created_at, self.before.path)
        return None

    def _validate(self) -> _Decision | None:
        """The newest run since: passed, with its starts ready and the compared side passing."""
        runs = [v for v in self.case.validations if after(v.created_at, self.since)]
        if not runs:
            fields: dict[str, str] = {"cause": self.diagnosis.cause}
            if self.diagnosis.cause == HEALTHY:  # nothing to apply or restart first
                return "healthy", fields
            fields["flow"] = (self.plan.flow if self.plan else None) or "?"
            if self.before is not None:
                fields["before"] = self.before.label
            return _VALIDATE_REASON.get(self.recommended, "validate_isolated"), fields
        last = runs[-1]
        fields = {"run": last.path}
        if last.passed is None or (last.interrupted and not last.passed):
            return "validation_unfinished", fields
        starts = last.starts
        if starts is not None and starts.ready < starts.requested:
            return "starts_failed", fields | {
                "ready": str(starts.ready),
                "requested": str(starts.requested),
            }
        if not last.passed:
            reason = "validation_failed"
            if self.recommended == "upgrade_driver":
                reason = "validation_failed_after_change"
            return reason, fields | {"rung": last.failed_rung or "?"}
        if last.comparison is not None and not last.comparison.both_passed:
            return "compared_endpoint_failed", fields | {"url": last.comparison.url}
        self.run = last
        self._moved(last.created_at, last.path)
        return None

    def _compare(self) -> _Decision | None:
        """A baseline after the one before, compared with it, without a regression."""
        before = self.before
        if before is None:
            return None
        later = [
            b for b in self.case.baselines if b.complete and after(b.created_at, before.created_at)
        ]
        if not later:
            return "baseline_after", {
                "run": self.run.path if self.run else "?",
                "before": before.label,
                "label": self._free_label(AFTER_LABEL),
            }
        newest = later[-1]
        plan = self.plan
        # r580: any release of the branch
        target = (plan.recommended_branch or plan.recommended_driver) if plan else None
        fields = {
            "before": shlex.quote(before.label),
            "after": shlex.quote(newest.label),
            "expect": f" --expect-driver {shlex.quote(target)}" if target else "",
        }
        comparison = self.case.comparison
        if comparison is None:
            return "compare", fields
        # The comparison stands for the pair it compared: a baseline captured after it (another
        # look at the node, an endpoint's check) does not undo it; one captured after a
        # regression is the retry, and is compared next.
        compared = next((b for b in later if b.label == comparison.after), None)
        if (
            comparison.before != before.label
            or compared is None
            or after(compared.created_at, comparison.created_at)
        ):
            return "compare_outdated", fields | {"comparison": comparison.path}
        if comparison.regressions:
            if after(newest.created_at, comparison.created_at):
                return "compare_outdated", fields | {"comparison": comparison.path}
            return "regression", {
                "comparison": comparison.path,
                "count": str(comparison.regressions),
                "checks": ", ".join(comparison.regression_checks) or "?",
                "label": self._free_label(AFTER_LABEL),
            }
        self._moved(comparison.created_at, comparison.path)
        return None

    def _record(self) -> _Decision | None:
        record = self.case.record
        if record is None:
            return "record", {
                "path": self.recommended,
                "run": self.run.path if self.run else "?",
            }
        if after(self.since, record.created_at):
            return "record_outdated", {"record": record.path, "newer": self.since_path}
        self._moved(record.created_at, record.path)
        return None

    def _report(self) -> _Decision | None:
        report = self.case.report
        if report is None:
            return "report", {}
        newest = newest_artifact(self.case.entries)
        if newest is not None and after(newest.created_at, report.created_at):
            return "report_outdated", {"newer": newest.path}
        return None

    def _free_label(self, label: str) -> str:
        """`label`, or label-2, label-3...: the first no baseline of the case has."""
        taken = {b.label for b in self.case.baselines}
        for attempt in range(1, 1000):
            candidate = label if attempt == 1 else f"{label}-{attempt}"
            if candidate not in taken:
                return candidate
        return f"{label}-new"


def after(created: str | None, reference: str | None) -> bool:
    """Whether an artifact was made after another (an unknown time counts as long ago)."""
    return moment(created) > moment(reference)


def moment(created: str | None) -> datetime:
    """An artifact's ISO 8601 time as a moment (UTC when it says no zone; long ago if unknown)."""
    if created is None:
        return datetime.min.replace(tzinfo=UTC)
    try:
        found = datetime.fromisoformat(created)
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return found if found.tzinfo else found.replace(tzinfo=UTC)
