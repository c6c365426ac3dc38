"""The library behind `vllm-triage plan`: one options object in, one Plan out.

It reads the case's current diagnosis (or the diagnosis file given) and, for the case, the newest
bundle's facts (driver, GPUs, the image's CUDA, what the baseline should record); it asks for
the constraints nobody gave only through the `ask` the caller passes (the CLI's short prompt on
a terminal) and only when the diagnosis is a driver threshold; then vllm_triage.plan.decide
chooses the path and the knowledge base (recovery.yaml) gives the reasons and the checklists."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Protocol, TypeVar

from vllm_triage.case import Case, case_folder, fingerprint, read_artifact
from vllm_triage.errors import InputError
from vllm_triage.inputs import display_name
from vllm_triage.knowledge import KnowledgeBase, load_knowledge
from vllm_triage.knowledge.schema import Recovery
from vllm_triage.models import Diagnosis, HostFact, HostView, InputFile
from vllm_triage.plan import messages as m
from vllm_triage.plan.decide import (
    Situation,
    driver_target,
    forward_compat_check,
    is_threshold,
    sequence,
    weigh,
)
from vllm_triage.plan.models import (
    BaselineEntry,
    ChangePlan,
    Constraints,
    DiagnosisRef,
    Flow,
    ForwardCompatCheck,
    HostFacts,
    PathRisks,
    Plan,
    Reproducibility,
    SequenceStep,
)
from vllm_triage.versions import CudaVersion, DriverVersion, VersionError

_Version = TypeVar("_Version", CudaVersion, DriverVersion)

# A node name as Kubernetes and hosts write it; a list of them is a few dozen at most.
_MAX_NODES = 1000
_MAX_NODE_NAME = 253


class Ask(Protocol):
    """Asks the team for a constraint (the CLI's short prompt on a terminal). `question` is the
    English message id of vllm_triage.plan.messages; the asker shows it in the reader's language."""

    def confirm(self, question: str) -> bool:
        """A yes/no answer."""
        ...

    def hours(self, question: str) -> float | None:
        """A number of hours, or None for none."""
        ...


@dataclass(frozen=True)
class PlanOptions:
    """Which diagnosis to plan for (the case's current one, or a file), and the team's
    constraints; None means not given (asked through `ask` when there is one, else planned
    conservatively and said so in the plan's assumptions)."""

    case: Path = field(default_factory=case_folder)
    diagnosis: Path | None = None
    maintenance_window: bool | None = None
    cluster_can_change: bool | None = None
    deadline_hours: float | None = None
    can_maintain_build: bool | None = None
    gpu: str | None = None
    driver: str | None = None
    nodes: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    ask: Ask | None = None
    today: date | None = None
    """The day end-of-life dates are compared with (today when None)."""


@dataclass
class _Evidence:
    """The host as the diagnosis, the bundle and the options describe it."""

    driver: DriverVersion | None = None
    driver_from: str | None = None
    gpu: str | None = None
    gpu_from: str | None = None
    cuda: CudaVersion | None = None
    cuda_from: str | None = None
    gpu_count: int | None = None
    node: str | None = None
    bundle: str | None = None
    host: HostView = field(default_factory=HostView)
    notes: list[str] = field(default_factory=list)


def plan(options: PlanOptions, *, kb: KnowledgeBase | None = None) -> Plan:
    """Choose the recovery path for a diagnosis under the team's constraints and write out the
    change plan. InputError (one line) for a case without a diagnosis, a corrupt or newer
    artifact, or a constraint that makes no sense; nothing is written here."""
    kb = kb or load_knowledge()
    nodes, exclude = _node_lists(options.nodes, options.exclude)
    deadline = _deadline(options.deadline_hours)
    diagnosis, source, made_from = _read_diagnosis(options)
    evidence = _evidence(options, diagnosis)
    recovery = kb.recovery
    threshold = is_threshold(recovery, diagnosis.primary.cause)
    # a driver threshold beside the cause (a GPU the build cannot run on is none: no driver helps)
    threshold_finding = not threshold and any(
        f.role == "threshold" and is_threshold(recovery, f.cause) for f in diagnosis.findings
    )

    window, cluster = options.maintenance_window, options.cluster_can_change
    build, asked = options.can_maintain_build, list[str]()
    if threshold and options.ask is not None:  # only a threshold makes the constraints matter
        window, cluster, deadline, build, asked = _ask(
            options.ask, window, cluster, deadline, build
        )

    fc = forward_compat_check(kb, evidence.driver, evidence.cuda, evidence.gpu)
    situation = Situation(
        threshold=threshold,
        maintenance_window=window,
        cluster_can_change=cluster,
        deadline_hours=deadline,
        can_maintain_build=build,
        forward_compat=fc,
        image_cuda_known=evidence.cuda is not None,
        threshold_finding=threshold_finding,
    )
    recommended, alternatives = weigh(situation, recovery)
    target = (
        driver_target(kb, evidence.cuda, evidence.driver, options.today)
        if threshold or threshold_finding
        else None
    )
    change = ChangePlan(
        steps=list(recovery.path(recommended.path).steps),
        sequence=sequence(situation, recommended.path, recovery),
        target=target,
    )
    if threshold:
        change = _driver_change(kb, change, evidence, fc)
    else:
        change.flow = _flow(kb, diagnosis)

    constraints = Constraints(
        maintenance_window=window,
        cluster_can_change=cluster,
        deadline_hours=deadline,
        can_maintain_build=build,
        gpu=evidence.gpu,
        gpu_datacenter=fc.datacenter,
        driver=str(evidence.driver) if evidence.driver is not None else None,
        nodes=nodes,
        exclude=exclude,
        asked=asked,
    )
    notes = list(evidence.notes)
    if not threshold:
        notes.append(m.NOTE_NOT_THRESHOLD)
    if threshold_finding:
        notes.append(m.NOTE_THRESHOLD_NEXT)
    if threshold and target is not None and target.meets_min:
        notes.append(m.NOTE_ALREADY_MET)
    return Plan(
        recommended=recommended,
        alternatives=alternatives,
        plan=change,
        constraints=constraints,
        assumptions=_assumptions(kb, situation, evidence) if threshold else [],
        diagnosis=DiagnosisRef(
            source=source,
            cause=diagnosis.primary.cause,
            phase=diagnosis.primary.phase,
            confidence=diagnosis.primary.confidence,
            driver_change_advised=diagnosis.primary.driver_change_advised,
            threshold=threshold,
            threshold_finding=threshold_finding,
            created_at=diagnosis.created_at,
        ),
        host=HostFacts(
            driver=constraints.driver,
            driver_from=evidence.driver_from,
            gpu=evidence.gpu,
            gpu_from=evidence.gpu_from,
            gpu_count=evidence.gpu_count,
            image_cuda=str(evidence.cuda) if evidence.cuda is not None else None,
            image_cuda_from=evidence.cuda_from,
            node=evidence.node,
            bundle=evidence.bundle,
        ),
        notes=notes,
        knowledge_as_of=recovery.as_of.isoformat(),
    ).stamped(made_from)


def _ask(
    ask: Ask,
    window: bool | None,
    cluster: bool | None,
    deadline: float | None,
    build: bool | None,
) -> tuple[bool | None, bool | None, float | None, bool | None, list[str]]:
    """The constraints nobody gave, asked in the runbook's order; and which were asked."""
    asked: list[str] = []
    if window is None:
        window = ask.confirm(m.ASK_WINDOW)
        asked.append("maintenance_window")
    if cluster is None:
        cluster = ask.confirm(m.ASK_CLUSTER)
        asked.append("cluster_can_change")
    if deadline is None:
        deadline = _deadline(ask.hours(m.ASK_DEADLINE))
        asked.append("deadline")
    if build is None:
        build = ask.confirm(m.ASK_BUILD)
        asked.append("can_maintain_build")
    return window, cluster, deadline, build, asked


# --- inputs ------------------------------------------------------------------------------------


def _read_diagnosis(options: PlanOptions) -> tuple[Diagnosis, str, list[InputFile]]:
    """The diagnosis to plan for, how it is named, and it as an input of the plan."""
    if options.diagnosis is not None:
        path = options.diagnosis
        return read_artifact(path, Diagnosis), display_name(path), [fingerprint(path)]
    case = Case(options.case)
    diagnosis = case.diagnosis()
    if diagnosis is None:
        shown = display_name(options.case)
        raise InputError(
            f"the case {shown} holds no diagnosis: run `vllm-triage diagnose --case {shown}` "
            "first, or give --diagnosis FILE (what `diagnose --format json` writes)"
        )
    name = case.relative(case.diagnosis_path)
    return diagnosis, name, [fingerprint(case.diagnosis_path, name)]


def _evidence(options: PlanOptions, diagnosis: Diagnosis) -> _Evidence:
    """Driver, GPU and image CUDA: given on the command line, else the diagnosis' host view (the
    facts diagnose resolved once from its flags, the bundle, the recipe and the log)."""
    host = diagnosis.host
    compat = diagnosis.compat
    found = _Evidence(host=host, bundle=host.bundle)
    known_driver = _first_version(
        DriverVersion.parse,
        [("diagnosis", compat.driver if compat else None), _said(host.driver)],
    )
    if options.driver is not None:
        found.driver, found.driver_from = DriverVersion.parse(options.driver), "given"
        if known_driver is not None and known_driver[0] != found.driver:
            found.notes.append(m.NOTE_GIVEN_OVER_CASE)
    elif known_driver is not None:
        found.driver, found.driver_from = known_driver
        if host.driver is not None and host.driver.others.get("bundle"):
            found.notes.append(m.NOTE_BUNDLE_DRIVER_DIFFERS)
    known_gpu = (compat.gpu if compat else None) or (host.gpu.value if host.gpu else None)
    if options.gpu is not None:
        found.gpu, found.gpu_from = options.gpu.strip() or None, "given"
        if known_gpu and known_gpu != found.gpu and options.driver is None:
            found.notes.append(m.NOTE_GIVEN_OVER_CASE)
    elif known_gpu:
        found.gpu, found.gpu_from = known_gpu, _source(host.gpu)
    cuda = _first_version(
        CudaVersion.parse, [("diagnosis", compat.cuda if compat else None), _said(host.image_cuda)]
    )
    if cuda is not None:
        found.cuda, found.cuda_from = cuda
    if host.gpu_count is not None:
        found.gpu_count = int(host.gpu_count.value)
    found.node = host.node.value if host.node else None
    return found


def _said(fact: HostFact | None) -> tuple[str, str | None]:
    """A host-view fact as a candidate: (where it came from, its value)."""
    return (_source(fact), fact.value if fact else None)


def _source(fact: HostFact | None) -> str:
    """Where the plan says a fact of the diagnosis' host view came from."""
    if fact is None or fact.source in ("flag", "log"):
        return "diagnosis"
    return fact.source


def _first_version(
    parse: Callable[[str], _Version], candidates: Iterable[tuple[str, str | None]]
) -> tuple[_Version, str] | None:
    """The first candidate that parses as a version, with where it came from."""
    for where, text in candidates:
        if not text:
            continue
        try:
            return parse(text), where
        except VersionError:
            continue
    return None


def _node_lists(nodes: Iterable[str], exclude: Iterable[str]) -> tuple[list[str], list[str]]:
    """--nodes and --exclude as lists (each option repeatable, commas allowed); a node in both
    is an error."""
    target, left_out = _names(nodes, "--nodes"), _names(exclude, "--exclude")
    both = sorted(set(target) & set(left_out))
    if both:
        raise InputError(f"node {both[0]} is both a target (--nodes) and excluded (--exclude)")
    return target, left_out


def _names(values: Iterable[str], option: str) -> list[str]:
    names: list[str] = []
    for value in values:
        for name in value.split(","):
            name = name.strip()
            if not name:
                continue
            if len(name) > _MAX_NODE_NAME or not name.isprintable():
                raise InputError(f"{option}: {name[:40]!r} is not a node name")
            if name not in names:
                names.append(name)
    if len(names) > _MAX_NODES:
        raise InputError(f"{option}: {len(names)} nodes; at most {_MAX_NODES}")
    return names


def _deadline(hours: float | None) -> float | None:
    if hours is None:
        return None
    if not math.isfinite(hours) or hours < 0:
        raise InputError(f"--deadline-hours must be a number of hours, 0 or more, not {hours}")
    return hours


# --- the change plan ---------------------------------------------------------------------------


def _driver_change(
    kb: KnowledgeBase, change: ChangePlan, evidence: _Evidence, fc: ForwardCompatCheck
) -> ChangePlan:
    """The checklists of a driver change (recovery.yaml), the baseline filled in from the bundle."""
    recovery = kb.recovery
    plan = recovery.change_plan
    now = _baseline_now(evidence)
    return change.model_copy(
        update={
            "forward_compat": fc,
            "baseline": [
                BaselineEntry(id=item.id, item=item.item, now=now.get(item.id))
                for item in plan.baseline
            ],
            "staged_order": list(plan.staged_order),
            "rollback": list(plan.rollback),
            **_risks(recovery, change.sequence),
            "widen_when": list(plan.widen_when),
            "change_record": list(plan.change_record),
            "reproducibility": Reproducibility(
                pin=list(recovery.custom_build.pin), check=list(recovery.custom_build.check)
            ),
            "recheck": list(plan.recheck),
        }
    )


def _risks(recovery: Recovery, sequence: list[SequenceStep]) -> dict[str, object]:
    """The risks of each path of the sequence, from recovery.yaml, in the sequence's order."""
    by_path = [
        PathRisks(path=step.path, risks=list(recovery.path(step.path).risks))
        for step in sequence
        if recovery.path(step.path).risks
    ]
    flat = [risk for entry in by_path for risk in entry.risks]
    return {"risks": list(dict.fromkeys(flat)), "risks_by_path": by_path}


def _baseline_now(evidence: _Evidence) -> dict[str, str]:
    """What the case already shows of each baseline item (versions and names only), from the
    diagnosis' host view."""
    host = evidence.host
    now: dict[str, str] = {}
    driver = f"{evidence.driver} ({evidence.driver.branch})" if evidence.driver else None
    gpus = (
        f"{evidence.gpu_count}x {evidence.gpu}"
        if evidence.gpu_count and evidence.gpu
        else evidence.gpu
    )
    ecc = f"ECC {host.ecc_uncorrected.value}" if host.ecc_uncorrected else None
    state = [part for part in (driver, gpus, ecc) if part]
    if state:
        now["gpu_state"] = " · ".join(state)
    for item, fact in (
        ("container_runtime", host.container_runtime),
        ("nccl", host.nccl),
        ("rdma", host.rdma),
    ):
        if fact is not None:
            now[item] = fact.value
    kernel = host.kernel.value if host.kernel else None
    rollback = [
        part for part in (str(evidence.driver) if evidence.driver else None, kernel) if part
    ]
    if rollback:
        now["rollback_package"] = " · ".join(rollback)
    if evidence.node:
        now["nodes"] = evidence.node
    return now


def _flow(kb: KnowledgeBase, diagnosis: Diagnosis) -> Flow | None:
    """The flow of the diagnosis' failure class (the `unknown` flow for a class without one)."""
    recovery = kb.recovery
    cause = diagnosis.primary.cause
    flow = recovery.flow(cause) or recovery.flow("unknown")
    if flow is None:
        return None
    return Flow(
        id=flow.id,
        name=flow.name,
        failure_class=cause,
        steps=list(flow.steps),
        avoid=list(flow.avoid),
        rungs=list(flow.rungs),
    )


def _assumptions(kb: KnowledgeBase, situation: Situation, evidence: _Evidence) -> list[str]:
    """The constraints and facts nobody gave, and how the plan treated them."""
    found = []
    if situation.maintenance_window is None:
        found.append(m.ASSUME_NO_WINDOW)
    if situation.cluster_can_change is None:
        found.append(m.ASSUME_CLUSTER_FIXED)
    if situation.deadline_hours is None:
        found.append(m.ASSUME_NO_DEADLINE)
    if situation.can_maintain_build is None:
        found.append(m.ASSUME_NO_BUILD)
    if evidence.gpu is None:
        found.append(m.ASSUME_GPU_UNKNOWN)
    elif kb.gpu(evidence.gpu) is None:
        found.append(m.ASSUME_GPU_NOT_IN_TABLE)
    if evidence.driver is None:
        found.append(m.ASSUME_DRIVER_UNKNOWN)
    if evidence.cuda is None:
        found.append(m.ASSUME_CUDA_UNKNOWN)
    return found
