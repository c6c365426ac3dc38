"""Read the whole case for the report: every bundle, the diagnosis, the plan, the baselines and
their comparison, the validation runs with their request records, the prefix checks and the
record, each with the sha256 of the file it came from.

What is read is what the case already holds (redacted when it was written); the page redacts
every value it shows once more (report/page.py), so an artifact placed in the case by hand cannot
carry a secret onto it. An artifact that cannot be read (corrupt, or written by a newer
vllm-triage) is a one-line error naming it: a report that skipped it would mislead an approver.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from vllm_triage.baseline.models import Baseline, BaselineComparison
from vllm_triage.bundle.models import BundleFacts, Manifest
from vllm_triage.bundle.read import open_bundle
from vllm_triage.case import (
    ARCHIVE_SUFFIX,
    BASELINE_FILE,
    LEGACY_RUN_PREFIX,
    RECORD,
    REQUESTS,
    SUMMARY,
    Case,
    CaseError,
    fingerprint,
    parse_stamp,
    read_artifact,
)
from vllm_triage.errors import InputError
from vllm_triage.fleet.models import FleetScan
from vllm_triage.inputs import display_name
from vllm_triage.models import Diagnosis, InputFile
from vllm_triage.plan.models import Plan
from vllm_triage.prefix.models import PrefixReport
from vllm_triage.record.models import DecisionRecord
from vllm_triage.safejson import parse_json, read_capped
from vllm_triage.validate.credentials import public_url
from vllm_triage.validate.models import RequestRecord, ValidationRun

COMPARISON = "baseline-comparison"
FLEET_SCAN = "fleet-scan"
# requests.jsonl holds one small record per request (a ramp to 64 makes a few thousand); more
# than this is read up to the cap and said so.
MAX_REQUESTS_BYTES = 32 * 1024**2
MAX_RECORD_BYTES = 256 * 1024
MAX_ERROR_SAMPLES = 5


Model = TypeVar("Model", bound=BaseModel)


@dataclass(frozen=True)
class BundleRead:
    """One bundle: its folder (or archive) in the case, the manifest, the facts, and the files
    that no longer match the manifest."""

    path: str
    archive: str | None
    manifest: Manifest
    facts: BundleFacts
    problems: list[str]
    logs: list[str]


@dataclass(frozen=True)
class RequestTally:
    """The request records of a run (requests.jsonl), counted per rung."""

    total: int = 0
    ok: int = 0
    by_rung: dict[str, tuple[int, int]] = field(default_factory=dict)
    """rung -> (requests, failed)"""
    error_samples: list[str] = field(default_factory=list)
    unreadable: int = 0
    capped: bool = False


@dataclass(frozen=True)
class RunRead:
    """One validation run: its summary (None when the run was killed before writing it)."""

    path: str
    moment: str | None
    run: ValidationRun | None
    requests: RequestTally | None


@dataclass(frozen=True)
class PrefixRead:
    """One prefix-check report and where it is in the case."""

    path: str
    report: PrefixReport


@dataclass(frozen=True)
class RecordRead:
    """The decision record and where it is in the case."""

    path: str
    record: DecisionRecord


@dataclass(frozen=True)
class BaselineRead:
    """One baseline folder: its capture (None when the capture did not finish)."""

    label: str
    path: str
    capture: Baseline | None


@dataclass(frozen=True)
class FleetRead:
    """The fleet scan (`fleet scan --case`) and where it is in the case."""

    path: str
    scan: FleetScan


@dataclass
class CaseRead:
    """Everything the report shows, as read from the case."""

    case: str
    bundles: list[BundleRead] = field(default_factory=list)
    diagnosis: Diagnosis | None = None
    diagnosis_history: int = 0
    plan: Plan | None = None
    baselines: list[BaselineRead] = field(default_factory=list)
    comparison: BaselineComparison | None = None
    comparison_history: int = 0
    runs: list[RunRead] = field(default_factory=list)
    prefix_checks: list[PrefixRead] = field(default_factory=list)
    record: RecordRead | None = None
    fleet: FleetRead | None = None
    inputs: list[InputFile] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (
            self.bundles
            or self.diagnosis
            or self.plan
            or self.baselines
            or self.comparison
            or self.runs
            or self.prefix_checks
            or self.record
            or self.fleet
        )


def read_case(root: Path) -> CaseRead:
    """The case at `root` as the report shows it; CaseError for a missing folder or an artifact
    that cannot be read."""
    if not os.path.lexists(root):
        raise CaseError(
            f"{display_name(root)}: no such case folder (collect, diagnose, validate and "
            "prefix-check make it)"
        )
    if not root.is_dir():
        raise CaseError(f"{display_name(root)}: not a folder")
    case = Case(root)
    found = CaseRead(case=display_name(root))
    found.bundles = _bundles(case, found.inputs)
    found.diagnosis = _current(case, "diagnosis", Diagnosis, found.inputs)
    found.diagnosis_history = len(case.history("diagnosis"))
    found.plan = _current(case, "plan", Plan, found.inputs)
    found.baselines = _baselines(case, found.inputs)
    found.comparison = _current(case, COMPARISON, BaselineComparison, found.inputs)
    found.comparison_history = len(case.history(COMPARISON))
    found.runs = [_run(case, folder, found.inputs) for folder in case.runs()]
    for path in case.prefix_checks():
        report = read_artifact(path, PrefixReport)
        found.inputs.append(fingerprint(path, case.relative(path)))
        found.prefix_checks.append(PrefixRead(case.relative(path), report))
    record = _current(case, "record", DecisionRecord, found.inputs)
    if record is not None:
        found.record = RecordRead(case.relative(root / RECORD), record)
    scan = _current(case, FLEET_SCAN, FleetScan, found.inputs)
    if scan is not None:
        found.fleet = FleetRead(case.relative(root / f"{FLEET_SCAN}.json"), scan)
    return found


def _bundles(case: Case, inputs: list[InputFile]) -> list[BundleRead]:
    """One entry per bundle (its folder and its archive are one bundle), read from the folder."""
    by_name: dict[str, list[Path]] = {}
    for path in case.bundles():
        by_name.setdefault(path.name.removesuffix(ARCHIVE_SUFFIX), []).append(path)
    found = []
    for paths in by_name.values():
        folder = next((p for p in paths if p.is_dir()), None)
        archive = next((p for p in paths if not p.is_dir()), None)
        with open_bundle(folder or paths[0]) as bundle:
            manifest, facts = bundle.manifest, bundle.facts
            problems = list(bundle.problems)
            logs = [str(log) for log in bundle.logs]
            if folder is not None:
                inputs.append(
                    fingerprint(folder / "manifest.json", case.relative(folder / "manifest.json"))
                )
        if archive is not None and folder is None:
            inputs.append(fingerprint(archive, case.relative(archive)))
        found.append(
            BundleRead(
                path=case.relative(folder or paths[0]),
                archive=case.relative(archive) if archive and folder else None,
                manifest=manifest,
                facts=facts,
                problems=problems,
                logs=logs,
            )
        )
    return found


def _current(case: Case, stem: str, model: type[Model], inputs: list[InputFile]) -> Model | None:
    """The current <stem>.json of the case as its model, its fingerprint noted."""
    artifact = case.current(stem, model)
    if artifact is None:
        return None
    path = case.root / f"{stem}.json"
    inputs.append(fingerprint(path, case.relative(path)))
    return artifact


def _baselines(case: Case, inputs: list[InputFile]) -> list[BaselineRead]:
    """Each baselines/<label>/ with its baseline.json (a folder without one: a capture that did
    not finish, shown as such)."""
    found = []
    for folder in case.baselines():
        path = folder / BASELINE_FILE
        capture = None
        if os.path.lexists(path):
            capture = read_artifact(path, Baseline)
            inputs.append(fingerprint(path, case.relative(path)))
        found.append(BaselineRead(folder.name, case.relative(folder), capture))
    return found


def _run(case: Case, folder: Path, inputs: list[InputFile]) -> RunRead:
    moment = parse_stamp(folder.name.removeprefix(LEGACY_RUN_PREFIX))
    when = moment.isoformat() if moment else None
    summary = folder / SUMMARY
    requests = _requests(folder / REQUESTS)
    if not os.path.lexists(summary):
        return RunRead(case.relative(folder), when, None, requests)
    run = read_artifact(summary, ValidationRun)
    inputs.append(fingerprint(summary, case.relative(summary)))
    run = run.model_copy(update={"url": public_url(run.url)})
    comparison = run.comparison
    if comparison is not None:
        run = run.model_copy(
            update={"comparison": comparison.model_copy(update={"url": public_url(comparison.url)})}
        )
    return RunRead(case.relative(folder), run.created_at or when, run, requests)


def _requests(path: Path) -> RequestTally | None:
    """The request records of a run, counted per rung, read up to a cap; a line that is not a
    record is counted, not fatal (the file is a log the run appended to)."""
    if not os.path.lexists(path) or os.path.islink(path):
        return None
    try:
        data = read_capped(path, display_name(path), MAX_REQUESTS_BYTES)
    except InputError:
        return RequestTally(unreadable=1)
    capped = len(data) > MAX_REQUESTS_BYTES
    lines = data[:MAX_REQUESTS_BYTES].split(b"\n")
    if capped:
        lines = lines[:-1]  # the last line was cut by the cap
    total = ok = unreadable = 0
    by_rung: dict[str, list[int]] = {}
    samples: list[str] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            record = RequestRecord.model_validate(
                parse_json(line, "a request record", max_bytes=MAX_RECORD_BYTES)
            )
        except (InputError, ValueError):
            unreadable += 1
            continue
        total += 1
        counts = by_rung.setdefault(record.rung, [0, 0])
        counts[0] += 1
        if record.ok:
            ok += 1
        else:
            counts[1] += 1
            error = record.error or (f"HTTP {record.status_code}" if record.status_code else "")
            if error and error not in samples and len(samples) < MAX_ERROR_SAMPLES:
                samples.append(error[:500])
    return RequestTally(
        total=total,
        ok=ok,
        by_rung={rung: (c[0], c[1]) for rung, c in by_rung.items()},
        error_samples=samples,
        unreadable=unreadable,
        capped=capped,
    )
