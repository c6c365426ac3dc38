"""The library behind `vllm-triage record`: one options object in, one DecisionRecord out.

It reads the case (the current diagnosis and plan, the baseline comparison, every validation
run's summary, the newest bundle for the model's recipe), asks the team what only the team knows
through the `ask` the caller passes (the CLI's prompt on a terminal), and leaves the judging to
vllm_triage.record.judge and the policy to the knowledge base (record.yaml, the recipe's review
triggers). Nothing is written here: the CLI saves the record into the case."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Protocol

from vllm_triage.baseline.models import Baseline, BaselineComparison
from vllm_triage.case import BASELINE_FILE, SUMMARY, Case, case_folder, fingerprint, read_artifact
from vllm_triage.errors import InputError
from vllm_triage.inputs import display_name
from vllm_triage.knowledge import KnowledgeBase, load_knowledge
from vllm_triage.knowledge.schema import Recipe
from vllm_triage.models import InputFile
from vllm_triage.plan.models import PATHS, PathId, Plan
from vllm_triage.record import judge
from vllm_triage.record import messages as m
from vllm_triage.record.models import (
    Adopted,
    DecisionRecord,
    DiagnosisRef,
    DriverChange,
    Judgement,
    Reason,
    Review,
    RollbackCondition,
    ScopeItem,
    Trigger,
    Unverified,
)
from vllm_triage.validate.models import ValidationRun

COMPARISON = "baseline-comparison"
MAX_REVIEW_DAYS = 3650
MAX_NAME = 120
MAX_REASON = 2000


class Ask(Protocol):
    """Asks the team what only the team knows (the CLI's prompt on a terminal). `question` is the
    English message id of vllm_triage.record.messages; the asker shows it in the reader's
    language."""

    def confirm(self, question: str) -> bool:
        """A yes/no answer."""
        ...

    def name(self, question: str) -> str:
        """Who answers."""
        ...


@dataclass(frozen=True)
class RecordOptions:
    """Which case, the path the team adopted (None: the plan's recommendation), the review
    period, and the answers only the team can give (None: not given; asked through `ask` when
    there is one, else recorded as unknown)."""

    case: Path = field(default_factory=case_folder)
    adopted: str | None = None
    reason: str | None = None
    review_days: int | None = None
    recipe: str | None = None
    maintenance_acceptable: bool | None = None
    approval_ready: bool | None = None
    answered_by: str | None = None
    ask: Ask | None = None
    today: date | None = None
    """The day the record is made (today when None); the re-evaluation date counts from it."""


def record(options: RecordOptions, *, kb: KnowledgeBase | None = None) -> DecisionRecord:
    """The decision record of the case. InputError (one line) for a case without a diagnosis or
    a plan, a corrupt or newer artifact, or options that make no sense."""
    kb = kb or load_knowledge()
    adopted_path = _adopted(options.adopted)
    days = _review_days(options.review_days, kb.record.review_days)
    answered_by = _name(options.answered_by)
    reason = _given_reason(options.reason)
    if (
        answered_by is None
        and options.ask is None
        and (options.maintenance_acceptable is not None or options.approval_ready is not None)
    ):
        raise InputError(
            "an answer needs who gave it: add --answered-by NAME to --maintenance-acceptable/"
            "--maintenance-not-acceptable or --approval-ready/--approval-not-ready"
        )
    case = Case(options.case)
    shown = display_name(options.case)
    made_from: list[InputFile] = []
    diagnosis = case.diagnosis()
    if diagnosis is None:
        raise InputError(
            f"the case {shown} holds no diagnosis: run `vllm-triage diagnose --case {shown}` "
            "first (then plan, validate, record)"
        )
    made_from.append(fingerprint(case.diagnosis_path, case.relative(case.diagnosis_path)))
    plan = case.current("plan", Plan)
    if plan is None:
        raise InputError(
            f"the case {shown} holds no plan: run `vllm-triage plan --case {shown}` first"
        )
    plan_path = case.root / "plan.json"
    made_from.append(fingerprint(plan_path, case.relative(plan_path)))
    comparison = case.current(COMPARISON, BaselineComparison)
    compared: tuple[BaselineComparison, str] | None = None
    if comparison is not None:
        path = case.root / f"{COMPARISON}.json"
        compared = (comparison, case.relative(path))
        made_from.append(fingerprint(path, case.relative(path)))
    runs, notes = _runs(case, made_from)
    recipe = _recipe(kb, case, options.recipe, runs)
    if recipe is None:
        notes.append(Judgement(basis="note_no_recipe"))

    maintenance, approval = options.maintenance_acceptable, options.approval_ready
    chosen = adopted_path or plan.recommended.path
    widen_when = list(plan.plan.widen_when)
    if not widen_when and chosen != "no_driver_change":
        widen_when = list(kb.recovery.change_plan.widen_when)
    asks_approval = any(
        (rule := kb.record.widening_rule(text)) is not None
        and rule.check == "rollback_and_approval"
        for text in widen_when
    )
    if options.ask is not None:
        if maintenance is None:
            maintenance = options.ask.confirm(m.ASK_MAINTENANCE)
        if approval is None and asks_approval:
            approval = options.ask.confirm(m.ASK_APPROVAL)
        if answered_by is None and (maintenance is not None or approval is not None):
            answered_by = _name(options.ask.name(m.ASK_NAME))
    answered_at = datetime.now(UTC).isoformat() if answered_by else None

    if plan.diagnosis.created_at and diagnosis.created_at != plan.diagnosis.created_at:
        notes.append(
            Judgement(
                basis="note_plan_other_diagnosis",
                fields={"planned": plan.diagnosis.cause, "current": diagnosis.primary.cause},
            )
        )
    adopted = _adopted_entry(plan, chosen)
    if not adopted.follows_plan:
        notes.append(
            Judgement(basis="note_adopted_differs", fields={"recommended": adopted.recommended})
        )
    verified = judge.scope(runs)
    rollback_driver = _rollback_driver(case, comparison)
    asked = judge.Asked(approval, answered_by, answered_at)
    bound = _bound(kb, plan, chosen)
    widening = [
        judge.widening(
            text,
            (rule.check if (rule := kb.record.widening_rule(text)) is not None else None),
            runs,
            compared,
            rollback_driver,
            asked,
            bound,
        )
        for text in widen_when
    ]
    today = options.today or datetime.now(UTC).date()
    return DecisionRecord(
        adopted=adopted,
        reason=_reason(plan, chosen, reason),
        verified=verified,
        unverified=_unverified(kb, verified),
        rollback=[
            RollbackCondition(id=rule.id, target=rule.target, when=rule.when)
            for rule in kb.record.rollback
            if chosen in rule.paths
        ],
        rollback_procedure=list(plan.plan.rollback),
        review=_review(today, days, recipe),
        comparisons=[
            judge.start_failure_recurs(diagnosis, runs),
            judge.prefix_cache_hits(runs),
            judge.tool_calls_correct(runs),
            judge.maintenance_acceptable(
                maintenance if answered_by else None, answered_by, answered_at
            ),
        ],
        widening=widening,
        driver=_driver_change(plan, rollback_driver),
        validated_on=judge.validated_on(runs, bound),
        diagnosis=DiagnosisRef(
            artifact=case.relative(case.diagnosis_path),
            cause=diagnosis.primary.cause,
            phase=diagnosis.primary.phase,
            created_at=diagnosis.created_at,
        ),
        plan=case.relative(plan_path),
        plan_created_at=plan.created_at,
        recipe=recipe.id if recipe is not None else None,
        runs=[read.folder for read in runs],
        notes=notes,
    ).stamped(made_from)


# --- options ---------------------------------------------------------------------------------------


def _adopted(value: str | None) -> PathId | None:
    if value is None:
        return None
    for path in PATHS:
        if value.strip() == path:
            return path
    raise InputError(f"--adopted {value!r}: use one of {', '.join(PATHS)}")


def _review_days(value: int | None, default: int) -> int:
    if value is None:
        return default
    if not 0 <= value <= MAX_REVIEW_DAYS:
        raise InputError(f"--review-days must be 0 to {MAX_REVIEW_DAYS} days, not {value}")
    return value


def _name(value: str | None) -> str | None:
    if value is None:
        return None
    name = " ".join(value.split())
    if not name:
        return None
    if len(name) > MAX_NAME or not name.isprintable():
        raise InputError(f"--answered-by: {name[:40]!r} is not a name (at most {MAX_NAME})")
    return name


def _given_reason(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    text = value.strip()
    if len(text) > MAX_REASON:
        raise InputError(f"--reason: {len(text)} characters; at most {MAX_REASON}")
    return text


# --- reading the case -----------------------------------------------------------------------------


def _runs(case: Case, made_from: list[InputFile]) -> tuple[list[judge.RunRead], list[Judgement]]:
    """Every validation run with a summary, oldest first; a run without one is a note."""
    runs: list[judge.RunRead] = []
    notes: list[Judgement] = []
    for folder in case.runs():
        summary = folder / SUMMARY
        name = case.relative(folder)
        if not os.path.lexists(summary):
            notes.append(Judgement(basis="note_run_unfinished", fields={"run": name}))
            continue
        run = read_artifact(summary, ValidationRun)
        shown = case.relative(summary)
        made_from.append(fingerprint(summary, shown))
        runs.append(judge.RunRead(folder=name, summary=shown, run=run))
    return runs, notes


def _recipe(
    kb: KnowledgeBase, case: Case, given: str | None, runs: Sequence[judge.RunRead]
) -> Recipe | None:
    """The recipe whose triggers the record watches: the one named, else the one of the model
    the newest bundle's launch serves, else of the model a run validated."""
    if given is not None:
        return kb.recipe(given)
    newest = case.newest_bundle()
    if newest is not None:
        from vllm_triage.bundle.read import open_bundle

        with open_bundle(newest) as bundle:
            vllm = bundle.facts.vllm
            launch = vllm.launch if vllm is not None else None
        found = kb.recipe_for_model(launch.model if launch is not None else None)
        if found is not None:
            return found
    for read in reversed(runs):
        found = kb.recipe_for_model(read.run.model)
        if found is not None:
            return found
    return None


def _driver_change(plan: Plan, rollback_driver: str | None) -> DriverChange | None:
    """The plan's driver target as the record states it, with the way back."""
    target = plan.plan.target
    if target is None:
        return None
    return DriverChange(
        installed=target.installed,
        min_driver=target.min_driver,
        toolkit_driver=target.toolkit_driver,
        recommended_driver=target.recommended_driver,
        recommended_branch=target.recommended_branch,
        rollback_driver=rollback_driver,
    )


def _bound(kb: KnowledgeBase, plan: Plan, chosen: str) -> judge.Bound:
    """Where a run counts for the adopted path (recovery.yaml's evidence_on and
    evidence_meets_floor): the plan's nodes and the image's floor, or any node."""
    path = next((p for p in kb.recovery.paths if p.id == chosen), None)
    if path is None:
        return judge.Bound()
    target = plan.plan.target
    return judge.Bound(
        nodes=tuple(plan.constraints.nodes) if path.evidence_on == "plan_nodes" else (),
        min_driver=target.min_driver if path.evidence_meets_floor and target else None,
    )


def _rollback_driver(case: Case, comparison: BaselineComparison | None) -> str | None:
    """The driver to go back to: the before side of the comparison, else the first baseline."""
    if comparison is not None and comparison.before.driver:
        return comparison.before.driver
    captured: list[Baseline] = []
    for folder in case.baselines():
        path = folder / BASELINE_FILE
        if os.path.lexists(path):
            captured.append(read_artifact(path, Baseline))
    captured.sort(key=lambda b: b.created_at or "")
    for baseline in captured:
        if baseline.gpu is not None and baseline.gpu.driver_version:
            return baseline.gpu.driver_version
    return None


# --- the parts of the record ---------------------------------------------------------------------


def _adopted_entry(plan: Plan, path: PathId) -> Adopted:
    names = {plan.recommended.path: plan.recommended.name}
    names |= {alternative.path: alternative.name for alternative in plan.alternatives}
    return Adopted(
        path=path,
        name=names.get(path, path),
        recommended=plan.recommended.path,
        follows_plan=path == plan.recommended.path,
    )


def _reason(plan: Plan, path: PathId, given: str | None) -> Reason:
    """The plan's reason for the adopted path (against it, when the team chose otherwise)."""
    recommended = plan.recommended
    if path == recommended.path:
        main, others = (
            recommended.reason,
            [r for r in recommended.reasons if r != recommended.reason],
        )
    else:
        alternative = next((a for a in plan.alternatives if a.path == path), None)
        main = alternative.why_not if alternative is not None else recommended.reason
        others = [r for r in alternative.against if r != main] if alternative is not None else []
    return Reason(plan_reason=main, other_reasons=others, constraints=plan.constraints, given=given)


def _unverified(kb: KnowledgeBase, verified: Sequence[ScopeItem]) -> list[Unverified]:
    """The rungs no run passed, then what no run can prove (record.yaml)."""
    found = [
        Unverified(
            id=f"scope_{item.id}",
            name=m.SCOPE_NAMES[item.id],
            why=m.BASIS[item.basis],
            fields=item.fields,
            scope=item.id,
        )
        for item in verified
        if item.status != "verified"
    ]
    found += [
        Unverified(id=scope.id, name=scope.name, why=scope.why) for scope in kb.record.unverified
    ]
    return found


def _review(today: date, days: int, recipe: Recipe | None) -> Review:
    """The re-evaluation date and the triggers that bring it forward."""
    when = today + timedelta(days=days)
    triggers = [Trigger(id="review-date", kind="date", name=m.TRIGGER_DATE, date=when.isoformat())]
    if recipe is not None:
        triggers += [
            Trigger(
                id=trigger.id,
                kind=trigger.kind,
                name=trigger.name,
                registry=trigger.registry,
                repository=trigger.repository,
                tags=list(trigger.tags),
                tag_pattern=trigger.tag_pattern,
                min_version=trigger.min_version,
                note=trigger.note,
                source=trigger.source,
                as_of=trigger.as_of.isoformat(),
                certainty=trigger.certainty,
            )
            for trigger in recipe.review_triggers
        ]
    return Review(days=days, date=when.isoformat(), triggers=triggers)
