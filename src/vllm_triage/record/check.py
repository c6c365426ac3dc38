"""The library behind `vllm-triage record check`: re-evaluate the triggers of the case's decision
record that can be seen from here, and say whether the decision is due for review.

The review date is compared with today; an image trigger reads the registry's tag list (the one
the trigger names, or --registry for every one of them, e.g. a mirror). A registry that cannot be
reached, or answers something that is not a tag list, leaves its trigger unknown: that is an
answer, not an error, and it does not make the decision due; the answer lists it as unchecked
(and the command exits 4 when nothing else is due, so that a scheduled check learns it checked
less than the record asks). Nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

from vllm_triage.case import RECORD, Case, case_folder, fingerprint
from vllm_triage.errors import InputError
from vllm_triage.inputs import display_name
from vllm_triage.record.models import DecisionRecord, RecordReview, Trigger, TriggerResult
from vllm_triage.record.registry import (
    DEFAULT_DEADLINE_S,
    RegistryError,
    check_registry_url,
    list_tags,
    matching,
)

MAX_FOUND = 20
TagLister = Callable[[str, str], list[str]]


@dataclass(frozen=True)
class RecordCheckOptions:
    """Which case's record to check, against which registry (None: each trigger's own), by when
    (seconds for each registry's answer, all told), and the day to compare the review date with
    (today when None)."""

    case: Path = field(default_factory=case_folder)
    registry: str | None = None
    deadline_s: float = DEFAULT_DEADLINE_S
    today: date | None = None


def record_check(options: RecordCheckOptions, *, tags: TagLister | None = None) -> RecordReview:
    """The record's triggers as they stand now, and whether the decision is due for review.
    InputError (one line) for a case without a record, a corrupt or newer record, or a registry
    URL that is not one."""
    registry = check_registry_url(options.registry) if options.registry is not None else None
    if not 0 < options.deadline_s <= 600:
        raise InputError(
            f"--deadline must be above 0 and at most 600 seconds, not {options.deadline_s}"
        )
    case = Case(options.case)
    shown = display_name(options.case)
    decision = case.current("record", DecisionRecord)
    if decision is None:
        raise InputError(
            f"the case {shown} holds no decision record: run `vllm-triage record --case {shown}` "
            "first"
        )
    path = case.root / RECORD
    today = options.today or datetime.now(UTC).date()

    def lister(where: str, repository: str) -> list[str]:
        return list_tags(where, repository, deadline_s=options.deadline_s)

    seen: dict[tuple[str, str], list[str] | RegistryError] = {}
    results = []
    for trigger in decision.review.triggers:
        if trigger.kind == "date":
            results.append(_date(trigger, today))
            continue
        where = registry or trigger.registry
        results.append(_image(trigger, where, tags or lister, seen))
    return RecordReview(
        record=case.relative(path),
        record_created_at=decision.created_at,
        adopted=decision.adopted.path,
        review_date=decision.review.date,
        today=today.isoformat(),
        due=any(result.status == "met" for result in results),
        triggers=results,
        unchecked=[result.id for result in results if result.status == "unknown"],
    ).stamped([fingerprint(path, case.relative(path))])


def _date(trigger: Trigger, today: date) -> TriggerResult:
    when = date.fromisoformat(trigger.date) if trigger.date else None
    met = when is not None and when <= today
    return TriggerResult(
        id=trigger.id,
        kind="date",
        name=trigger.name,
        status="met" if met else "not_met" if when is not None else "unknown",
        basis="date_due" if met else "date_not_due",
        fields={"date": trigger.date or "\u2013", "today": today.isoformat()},
    )


def _image(
    trigger: Trigger,
    registry: str | None,
    lister: TagLister,
    seen: dict[tuple[str, str], list[str] | RegistryError],
) -> TriggerResult:
    """An image trigger against the registry's tags (each repository listed once per check)."""
    base = TriggerResult(
        id=trigger.id,
        kind="image_tag",
        name=trigger.name,
        status="unknown",
        basis="tag_unknown",
        registry=registry,
        repository=trigger.repository,
    )
    if registry is None or trigger.repository is None:
        return base.model_copy(
            update={"fields": {"registry": registry or "\u2013", "error": "no registry named"}}
        )
    key = (registry, trigger.repository)
    if key not in seen:
        try:
            seen[key] = lister(registry, trigger.repository)
        except RegistryError as exc:
            seen[key] = exc
    listed = seen[key]
    if isinstance(listed, RegistryError):
        return base.model_copy(update={"fields": {"registry": registry, "error": str(listed)}})
    found = matching(listed, trigger.tags, trigger.tag_pattern, trigger.min_version)
    fields = {
        "registry": registry,
        "repository": trigger.repository,
        "count": str(len(found)),
        "read": str(len(listed)),
        "tags": ", ".join(found[:MAX_FOUND]),
    }
    return base.model_copy(
        update={
            "status": "met" if found else "not_met",
            "basis": "tag_found" if found else "tag_not_found",
            "fields": fields,
            "found": found[:MAX_FOUND],
            "tags_read": len(listed),
        }
    )
