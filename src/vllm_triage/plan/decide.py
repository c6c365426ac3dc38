"""Which recovery path under which constraints: the runbook's order as code, over facts the
knowledge base gives (recovery.yaml's paths and reasons, the driver tables, forward_compat.yaml,
the GPU table). Pure functions: no files, no prompts.

The order, first that applies:
1. not a driver threshold: no driver change, the failure class's own flow;
2. a maintenance window, or a shared cluster that may change today: upgrade the driver;
3. forward compatibility where the installed branch is a supported base and the GPU a
   data-center part (never a New Feature Branch such as r575): run on the installed driver;
4. otherwise: validate in an isolated compatible environment first, the driver change later.
   A custom build for the host's CUDA is never the first step (both runbooks: when the shared
   cluster cannot change, the isolated environment comes first); with an urgent deadline it
   can still meet and a team that can keep it reproducible, it follows the isolated environment
   in the sequence as a temporary bypass with an end date.
A constraint nobody gave counts as the conservative answer (no window, no change today, no
urgent deadline, no custom build); the plan says so in its assumptions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.knowledge.drivers import driver_requirement
from vllm_triage.knowledge.schema import Recovery, RecoveryPath, RecoveryWhen
from vllm_triage.models import FailureClass
from vllm_triage.plan import messages as m
from vllm_triage.plan.models import (
    PATHS,
    Alternative,
    DriverTarget,
    ForwardCompatCheck,
    PathId,
    Recommended,
    SequenceStep,
)
from vllm_triage.versions import CudaVersion, DriverVersion


@dataclass(frozen=True)
class Situation:
    """What the choice rests on: the diagnosis, the team's constraints (None: not known), the
    forward-compatibility facts of the host."""

    threshold: bool
    maintenance_window: bool | None
    cluster_can_change: bool | None
    deadline_hours: float | None
    can_maintain_build: bool | None
    forward_compat: ForwardCompatCheck
    image_cuda_known: bool
    threshold_finding: bool = False


def is_threshold(recovery: Recovery, cause: FailureClass) -> bool:
    """Whether a failure class is a driver threshold (recovery.yaml's threshold_classes)."""
    return cause in recovery.threshold_classes


def holds(situation: Situation, path: RecoveryPath, recovery: Recovery) -> set[RecoveryWhen]:
    """The conditions of recovery.yaml that hold for this path in this situation."""
    s, fc = situation, situation.forward_compat
    window = s.maintenance_window is True
    change_today = s.cluster_can_change is True
    urgent = s.deadline_hours is not None and s.deadline_hours <= recovery.urgent_deadline_hours
    found: dict[RecoveryWhen, bool] = {
        "threshold": s.threshold,
        "not_threshold": not s.threshold,
        "window": window,
        "cluster_can_change": change_today,
        "no_window_cluster_fixed": not window and not change_today,
        "driver_change_possible": window or change_today,
        "deadline_urgent": urgent,
        "deadline_not_urgent": not urgent,
        "deadline_too_short": s.deadline_hours is not None
        and s.deadline_hours < path.lead_time_hours,
        "can_maintain_build": s.can_maintain_build is True,
        "cannot_maintain_build": s.can_maintain_build is not True,
        "forward_compat_possible": fc.possible,
        "new_feature_branch": fc.branch_type == "new_feature",
        "unsupported_base": fc.installed_branch is not None
        and fc.package is not None
        and bool(fc.supported_bases)
        and fc.installed_branch not in fc.supported_bases
        and fc.branch_type != "new_feature",
        "no_compat_package": fc.package is not None and not fc.supported_bases,
        "not_datacenter_gpu": fc.datacenter is False,
        "gpu_unknown": fc.datacenter is None,
        "driver_unknown": fc.installed_branch is None,
        "image_cuda_unknown": not s.image_cuda_known,
    }
    return {condition for condition, true in found.items() if true}


def choose(situation: Situation, recovery: Recovery) -> PathId:
    """The recommended path (the order in the module's docstring)."""
    s = situation
    if not s.threshold:
        return "no_driver_change"
    if s.maintenance_window is True or s.cluster_can_change is True:
        return "upgrade_driver"
    if s.forward_compat.possible:
        return "forward_compat"
    return "isolated_env"


def bridges(situation: Situation, recovery: Recovery) -> bool:
    """Whether a temporary custom build follows the isolated environment: the deadline is
    urgent, long enough to build twice and compare, and the team can keep the build
    reproducible."""
    build = holds(situation, recovery.path("custom_build"), recovery)
    return {"can_maintain_build", "deadline_urgent"} <= build and "deadline_too_short" not in build


def weigh(situation: Situation, recovery: Recovery) -> tuple[Recommended, list[Alternative]]:
    """The recommended path with its reasons and caveats, and every other path with why not."""
    chosen = choose(situation, recovery)
    alternatives = []
    recommended: Recommended | None = None
    for path_id in PATHS:
        path = recovery.path(path_id)
        true = holds(situation, path, recovery)
        if not situation.threshold:  # the one reason that counts; the constraints do not matter
            true &= {"not_threshold"}
        pro = [c.reason for c in path.conditions if c.effect == "for" and c.when in true]
        con = [c.reason for c in path.conditions if c.effect == "against" and c.when in true]
        if path_id == chosen:
            recommended = Recommended(
                path=path_id,
                name=path.name,
                reason=pro[0] if pro else path.summary,
                reasons=pro,
                caveats=con,
                summary=path.summary,
            )
        else:
            alternatives.append(
                Alternative(
                    path=path_id,
                    name=path.name,
                    why_not=con[0] if con else path.instead,
                    against=con,
                )
            )
    assert recommended is not None  # PATHS holds every path id, the chosen one among them
    return recommended, alternatives


def sequence(situation: Situation, chosen: PathId, recovery: Recovery) -> list[SequenceStep]:
    """The order the paths come in: what happens now, a temporary bypass where the deadline
    needs one, and the driver change that follows."""
    if chosen == "no_driver_change":
        steps = [SequenceStep(path="no_driver_change", when=m.WHEN_NOW)]
        if situation.threshold_finding:
            steps.append(SequenceStep(path="upgrade_driver", when=m.WHEN_AFTER_FIX))
        return steps
    if chosen == "upgrade_driver":
        if situation.cluster_can_change is True:
            return [SequenceStep(path="upgrade_driver", when=m.WHEN_TODAY_ONE_NODE)]
        return [
            SequenceStep(path="isolated_env", when=m.WHEN_UNTIL_WINDOW),
            SequenceStep(path="upgrade_driver", when=m.WHEN_IN_WINDOW),
        ]
    if chosen == "isolated_env" and bridges(situation, recovery):
        return [
            SequenceStep(path="isolated_env", when=m.WHEN_NOW),
            SequenceStep(path="custom_build", when=m.WHEN_AFTER_ISOLATED_TEMPORARY),
            SequenceStep(path="upgrade_driver", when=m.WHEN_NEXT_WINDOW_RETIRE_BUILD),
        ]
    later = {
        "isolated_env": (m.WHEN_NOW, m.WHEN_NEXT_WINDOW_EVIDENCE),
        "forward_compat": (m.WHEN_NOW, m.WHEN_NEXT_WINDOW_REMOVE_COMPAT),
    }
    now, then = later[chosen]
    return [
        SequenceStep(path=chosen, when=now),
        SequenceStep(path="upgrade_driver", when=then),
    ]


def forward_compat_check(
    kb: KnowledgeBase, driver: DriverVersion | None, cuda: CudaVersion | None, gpu: str | None
) -> ForwardCompatCheck:
    """Whether forward compatibility is open: forward_compat.yaml lists the installed branch as
    a supported base for the image's CUDA package, the branch is no New Feature Branch, and the
    GPU table says the GPU is a data-center part."""
    fc = kb.forward_compat
    package = f"{cuda.major}.{cuda.minor}" if cuda is not None else None
    bases = list(fc.packages.get(package, [])) if package is not None else []
    branch = kb.branch(driver.major) if driver is not None else None
    row = kb.gpu(gpu) if gpu else None
    datacenter = row.datacenter if row is not None else None
    installed = driver.branch if driver is not None else None
    possible = (
        installed is not None
        and installed in bases
        and (branch is None or branch.type != "new_feature")
        and datacenter is True
    )
    return ForwardCompatCheck(
        possible=possible,
        package=f"cuda-compat-{cuda.major}-{cuda.minor}" if cuda is not None else None,
        installed_branch=installed,
        branch_type=branch.type if branch is not None else None,
        supported_bases=bases,
        gpu=gpu,
        datacenter=datacenter,
        source=fc.source,
    )


def driver_target(
    kb: KnowledgeBase,
    cuda: CudaVersion | None,
    driver: DriverVersion | None,
    today: date | None = None,
) -> DriverTarget:
    """The image's three driver figures (the floor, the toolkit's driver, the recommended
    target) against the driver installed."""
    installed = {
        "installed": str(driver) if driver is not None else None,
        "installed_branch": driver.branch if driver is not None else None,
    }
    if cuda is None:
        return DriverTarget.model_validate(installed)
    figures = driver_requirement(kb, cuda, today).model_dump()
    met = {
        f"meets_{name}": driver is not None
        and figures[f"{name}_driver"] is not None
        and driver >= DriverVersion.parse(figures[f"{name}_driver"])
        for name in ("min", "toolkit")
    }
    return DriverTarget.model_validate(figures | installed | met)
