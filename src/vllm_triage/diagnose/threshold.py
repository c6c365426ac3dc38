"""The version-threshold verdict: can a CUDA build run on a driver, by NVIDIA's own rules?

First the GPU: a build whose CUDA major no longer carries kernels for the GPU's compute capability
(CUDA 13 on a V100) cannot run whatever the driver (`unsupported_gpu_arch`). Then the driver:
native support when the driver's CUDA ceiling covers the build; minor-version compatibility within
one CUDA major (with its documented limits); forward compatibility across majors only on GPUs
NVIDIA supports it on (data-center GPUs, Jetson) with a supported base branch; otherwise
incompatible. Advice never names a driver branch beyond the GPU's last one (r580 for Volta).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from datetime import date
from typing import Any

from vllm_triage.i18n import N_
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.knowledge.drivers import driver_requirement, toolkit_row
from vllm_triage.knowledge.schema import CudaToolkit, Gpu, GpuLimit
from vllm_triage.models import CompatVerdict, CompatWording, Said, join_sentences, said
from vllm_triage.versions import CudaVersion, DriverVersion, VersionError

_TOOLKITS = "cuda_toolkits.csv"
_FAMILIES = "cuda_families.csv"
_FORWARD = "forward_compat.yaml"
_GPUS = "gpus.csv"
_LIMITS = "gpu_limits.yaml"
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "=": operator.eq,
    "==": operator.eq,
}
# No driver runs the build on this GPU: none of the three driver figures applies.
_NO_DRIVER: dict[str, None] = {
    "min_driver": None,
    "min_branch": None,
    "toolkit_driver": None,
    "recommended_driver": None,
    "recommended_branch": None,
}
_CONSTRAINT = re.compile(r"^(cuda|driver|brand|arch)(>=|<=|==|=|>|<)(.+)$")


def _release(cuda: CudaVersion | None) -> str | Said:
    """A release for a sentence: `13.0`, or words for none."""
    return f"{cuda.major}.{cuda.minor}" if cuda else Said(text=N_("an unknown release"))


def _verdict(
    *,
    explanation: list[Said],
    table_rows: list[Said],
    conditions: list[Said] | None = None,
    advice: list[Said] | None = None,
    **fields: Any,
) -> CompatVerdict:
    """A verdict whose texts are its wording said in English (the wording keeps them for the
    other languages)."""
    conditions, advice = conditions or [], advice or []
    return CompatVerdict(
        explanation=join_sentences([sentence.say() for sentence in explanation]),
        conditions=[condition.say() for condition in conditions],
        advice=[piece.say() for piece in advice],
        table_rows=[row.say() for row in table_rows],
        wording=CompatWording(
            explanation=explanation, conditions=conditions, advice=advice, table_rows=table_rows
        ),
        **fields,
    )


def _reworded(
    verdict: CompatVerdict,
    *,
    explanation: list[Said] | None = None,
    conditions: list[Said] | None = None,
    advice: list[Said] | None = None,
    **updates: Any,
) -> CompatVerdict:
    """The verdict with some of its worded texts (and other fields) replaced."""
    wording = verdict.wording or CompatWording()
    kept = verdict.model_dump(
        exclude={"explanation", "conditions", "advice", "table_rows", "wording"}
    )
    return _verdict(
        explanation=wording.explanation if explanation is None else explanation,
        conditions=wording.conditions if conditions is None else conditions,
        advice=wording.advice if advice is None else advice,
        table_rows=wording.table_rows,
        **{**kept, **updates},
    )


def _needs_row(table: str, release: str, driver: DriverVersion | None) -> Said:
    """A table row cited: the driver a CUDA release (or family) needs."""
    return said(
        N_("{table}: CUDA {release} needs >= {driver}"),
        table=table,
        release=release,
        driver=str(driver),
    )


def _limit_words(limit: GpuLimit) -> dict[str, str | Said]:
    """A GPU limit as a sentence cites it: its architectures, table, id and certainty."""
    return {
        "architectures": ", ".join(limit.architectures),
        "table": _LIMITS,
        "limit": limit.id,
        "certainty": limit.certainty,
    }


def driver_cuda_ceiling(kb: KnowledgeBase, driver: DriverVersion) -> CudaToolkit | None:
    """The newest toolkit release whose (known) minimum driver this driver meets."""
    met = [
        row
        for row in kb.toolkits
        if row.min_linux_driver is not None and row.min_linux_driver <= driver
    ]
    return max(met, key=lambda row: row.cuda_version) if met else None


def _ceiling_version(kb: KnowledgeBase, driver: DriverVersion) -> CudaVersion | None:
    row = driver_cuda_ceiling(kb, driver)
    ceiling = row.cuda_version if row else None
    branch = kb.branch(driver.major)
    # A branch newer than the toolkit table (r615 for CUDA 13.4) still names what it pairs with.
    if branch and branch.cuda_ceiling and (ceiling is None or branch.cuda_ceiling > ceiling):
        return branch.cuda_ceiling
    return ceiling


def _unestablished_row(kb: KnowledgeBase, cuda: CudaVersion) -> CudaToolkit | None:
    """The table's row of this release (this update, when given) whose minimum driver is not
    established."""
    return next(
        (
            r
            for r in kb.toolkits
            if r.min_linux_driver is None
            and r.cuda_version.minor_release == cuda.minor_release
            and (cuda.patch is None or r.cuda_version.patch == cuda.patch)
        ),
        None,
    )


def _satisfied(
    constraint: str, driver: DriverVersion, ceiling: CudaVersion | None, brand: str | None
) -> bool | None:
    """One NVIDIA_REQUIRE_* constraint; None when it cannot be decided (unknown brand)."""
    match = _CONSTRAINT.match(constraint.strip())
    if not match:
        return None
    key, op, value = match.groups()
    compare = _OPS[op]
    try:
        if key == "cuda":
            return ceiling is not None and compare(ceiling, CudaVersion.parse(value))
        if key == "driver":
            return compare(driver, DriverVersion.parse(value))
    except VersionError:
        return None
    if key == "brand":
        return None if brand is None else compare(brand.lower(), value.lower())
    return None


def require_satisfied(
    require: str, driver: DriverVersion, ceiling: CudaVersion | None, brand: str | None = None
) -> bool | None:
    """Evaluate NVIDIA_REQUIRE_CUDA as nvidia-container-cli does: spaces OR, commas AND."""
    undecided = False
    for clause in require.split():
        results = [_satisfied(c, driver, ceiling, brand) for c in clause.split(",")]
        if all(r is True for r in results):
            return True
        if not any(r is False for r in results):
            undecided = True
    return None if undecided else False


def _conditions_minor(
    cuda: CudaVersion, driver: DriverVersion, ceiling: CudaVersion, gpu: str | None
) -> list[Said]:
    release, driven = f"{cuda.major}.{cuda.minor}", str(driver)
    ptx = (
        said(
            N_(
                "ptx_jit: kernels shipped only as CUDA {cuda} PTX cannot be JIT-compiled by "
                "driver {driver} (CUDA {ceiling}); the build must carry native SASS for the GPU's "
                "compute capability ({gpu}), or it fails with cudaErrorUnsupportedPtxVersion"
            ),
            cuda=release,
            driver=driven,
            ceiling=_release(ceiling),
            gpu=gpu,
        )
        if gpu
        else said(
            N_(
                "ptx_jit: kernels shipped only as CUDA {cuda} PTX cannot be JIT-compiled by "
                "driver {driver} (CUDA {ceiling}); the build must carry native SASS for the GPU's "
                "compute capability, or it fails with cudaErrorUnsupportedPtxVersion"
            ),
            cuda=release,
            driver=driven,
            ceiling=_release(ceiling),
        )
    )
    legacy = said(
        N_(
            "container_require: in legacy mode the NVIDIA container toolkit compares the image's "
            "NVIDIA_REQUIRE_CUDA with the driver's CUDA {ceiling}; an image that requires "
            "cuda>={cuda} is refused unless NVIDIA_DISABLE_REQUIRE=1 or CDI mode is used"
        ),
        ceiling=_release(ceiling),
        cuda=release,
    )
    return [ptx, legacy]


def _gpu_words(gpu: str | None, row: Gpu) -> Said:
    """`Tesla V100-SXM2-32GB (V100, compute capability 7.0, Volta)`."""
    if row.architecture:
        return said(
            N_("{gpu} ({model}, compute capability {capability}, {architecture})"),
            gpu=gpu or row.name,
            model=row.name,
            capability=row.compute_capability,
            architecture=row.architecture,
        )
    return said(
        N_("{gpu} ({model}, compute capability {capability})"),
        gpu=gpu or row.name,
        model=row.name,
        capability=row.compute_capability,
    )


def _branch_limit(limits: list[GpuLimit]) -> GpuLimit | None:
    """The lowest last-branch limit among those that apply to the GPU."""
    capped = [limit for limit in limits if limit.last_branch_number is not None]
    return min(capped, key=lambda limit: limit.last_branch_number or 0) if capped else None


def _beyond(last: GpuLimit | None, min_driver: DriverVersion | None) -> bool:
    """Does the build need a driver branch past the GPU's last one?"""
    number = last.last_branch_number if last else None
    return number is not None and min_driver is not None and min_driver.major > number


def _upgrade_advice(
    cuda: CudaVersion,
    min_driver: DriverVersion | None,
    last: GpuLimit | None,
    recommended: tuple[str, str] | None,
) -> Said:
    """Upgrade to the recommended target (the build's floor when none is known), never past the
    GPU's last branch."""
    cap = last.last_branch_number if last else None
    if recommended is not None and cap is not None and int(recommended[1][1:]) <= cap:
        assert last is not None
        return said(
            N_(
                "Upgrade the host driver to {driver}, the current release of the long-term "
                "branch {branch} (the build starts from {floor}), but not past {last_branch}: the "
                "last branch for {architectures} ({table} {limit}, {certainty}); one isolated "
                "node first, with a rollback ready."
            ),
            driver=recommended[0],
            branch=recommended[1],
            floor=str(min_driver),
            last_branch=str(last.last_driver_branch),
            **_limit_words(last),
        )
    if recommended is not None and cap is None:
        return said(
            N_(
                "Upgrade the host driver to {driver}, the current release of the long-term "
                "branch {branch} (the build starts from {floor}); one isolated node first, with a "
                "rollback ready."
            ),
            driver=recommended[0],
            branch=recommended[1],
            floor=str(min_driver),
        )
    if min_driver is None:
        return said(
            N_(
                "Upgrade the host driver to one that supports CUDA {cuda} natively (its minimum "
                "is not established in {table})."
            ),
            cuda=f"{cuda.major}.{cuda.minor}",
            table=_TOOLKITS,
        )
    if last and last.last_driver_branch:
        return said(
            N_(
                "Upgrade the host driver to {branch} or newer (>= {driver}), but not past "
                "{last_branch}: the last branch for {architectures} ({table} {limit}, "
                "{certainty}); one isolated node first, with a rollback ready."
            ),
            branch=f"r{min_driver.major}",
            driver=str(min_driver),
            last_branch=last.last_driver_branch,
            **_limit_words(last),
        )
    return said(
        N_(
            "Upgrade the host driver to {branch} or newer (>= {driver}); one isolated node "
            "first, with a rollback ready."
        ),
        branch=f"r{min_driver.major}",
        driver=str(min_driver),
    )


def check_compat(
    kb: KnowledgeBase,
    driver: DriverVersion,
    cuda: CudaVersion,
    gpu: str | None = None,
    require: str | None = None,
    today: date | None = None,
) -> CompatVerdict:
    """Decide whether a CUDA build runs on a driver (and GPU); name the rule and the table rows.
    `min_driver` is the floor that decides it; the toolkit's driver and the recommended target
    come with it (knowledge/drivers.py)."""
    ceiling_row = driver_cuda_ceiling(kb, driver)
    ceiling = _ceiling_version(kb, driver)
    native = toolkit_row(kb, cuda)
    family = kb.family(cuda.major)
    gpu_row = kb.gpu(gpu) if gpu else None
    limits = kb.gpu_limits_for(gpu_row) if gpu_row else []
    requirement = driver_requirement(kb, cuda, today)
    min_driver = DriverVersion.parse(requirement.min_driver) if requirement.min_driver else None
    rows: list[Said] = []
    if ceiling_row:
        rows.append(
            said(
                N_(
                    "{table}: CUDA {release} needs >= {driver} (newest release driver {host} meets)"
                ),
                table=_TOOLKITS,
                release=ceiling_row.release,
                driver=str(ceiling_row.min_linux_driver),
                host=str(driver),
            )
        )
    if native:
        rows.append(_needs_row(_TOOLKITS, native.release, native.min_linux_driver))
    if (cuda.patch is not None or native is None) and (unknown := _unestablished_row(kb, cuda)):
        rows.append(
            said(
                N_("{table}: CUDA {release}: minimum driver not established"),
                table=_TOOLKITS,
                release=unknown.release,
            )
        )
    if gpu_row:
        rows.append(
            said(
                N_("{table}: {gpu} is {model}, compute capability {capability}"),
                table=_GPUS,
                gpu=str(gpu),
                model=gpu_row.name,
                capability=gpu_row.compute_capability,
            )
        )
    cited = native or ceiling_row
    source = cited.source if cited else kb.toolkits[0].source
    common: dict[str, Any] = dict(
        driver=str(driver),
        driver_branch=driver.branch,
        driver_cuda_ceiling=f"{ceiling.major}.{ceiling.minor}" if ceiling else None,
        cuda=str(cuda),
        gpu=gpu,
        min_driver=requirement.min_driver,
        min_branch=requirement.min_branch,
        toolkit_driver=requirement.toolkit_driver,
        recommended_driver=requirement.recommended_driver,
        recommended_branch=requirement.recommended_branch,
        gpu_model=gpu_row.name if gpu_row else None,
        compute_capability=gpu_row.compute_capability if gpu_row else None,
    )

    arch_limit = next(
        (
            limit
            for limit in limits
            if limit.last_cuda_major is not None and cuda.major > limit.last_cuda_major
        ),
        None,
    )
    if gpu_row and arch_limit:
        return _unsupported_arch(kb, cuda, gpu, gpu_row, arch_limit, limits, rows, common)
    last = _branch_limit(limits)

    require_ok = require_satisfied(require, driver, ceiling) if require else None
    require_condition = (
        said(
            N_(
                "container_require: the image's NVIDIA_REQUIRE_CUDA ({require}) is not met by "
                "driver {driver} (CUDA {ceiling}); nvidia-container-cli in legacy mode refuses to "
                "start it unless NVIDIA_DISABLE_REQUIRE=1 or CDI mode is used"
            ),
            require=str(require),
            driver=str(driver),
            ceiling=_release(ceiling),
        )
        if require_ok is False
        else None
    )

    if ceiling and cuda.minor_release <= ceiling.minor_release:
        conditions = [require_condition] if require_condition else []
        toolkit = native.min_linux_driver if native else None
        older = (
            [
                said(
                    N_(
                        "Its toolkit ({release}) shipped with driver {toolkit}; an older driver of "
                        "the same CUDA release runs it, without that driver's fixes."
                    ),
                    release=native.release,
                    toolkit=str(toolkit),
                )
            ]
            if native and toolkit and driver < toolkit
            else []
        )
        return _verdict(
            verdict="conditional" if conditions else "compatible",
            rule="native_support",
            conditions=conditions,
            source=source,
            table_rows=rows,
            explanation=[
                said(
                    N_(
                        "Driver {driver} ({branch}) supports CUDA up to {ceiling}; a CUDA {cuda} "
                        "build runs natively."
                    ),
                    driver=str(driver),
                    branch=driver.branch,
                    ceiling=_release(ceiling),
                    cuda=str(cuda),
                ),
                *older,
            ],
            **common,
        )

    if ceiling and family and cuda.major == ceiling.major and driver >= family.min_linux_driver:
        rows.append(_needs_row(_FAMILIES, f"{family.major}.x", family.min_linux_driver))
        conditions = _conditions_minor(cuda, driver, ceiling, gpu)
        if require_ok is not None:
            conditions[1] = require_condition or said(
                N_("container_require: the image's NVIDIA_REQUIRE_CUDA ({require}) is met"),
                require=str(require),
            )
        if last and _beyond(last, min_driver):
            target = said(
                N_(
                    "No driver removes them on this GPU: {last_branch} is the last branch for "
                    "{architectures}."
                ),
                last_branch=str(last.last_driver_branch),
                architectures=", ".join(last.architectures),
            )
        elif native and native.min_linux_driver:
            target = said(
                N_("Target {driver} (its toolkit's driver) or newer to remove them."),
                driver=str(native.min_linux_driver),
            )
        else:
            target = Said(text=N_("Target a newer driver to remove them."))
        return _verdict(
            verdict="conditional",
            rule="minor_version_compatibility",
            conditions=conditions,
            source=family.source,
            table_rows=rows,
            explanation=[
                said(
                    N_(
                        "CUDA {cuda} is newer than what driver {driver} supports natively (CUDA "
                        "{ceiling}), but both are CUDA {major}.x and the driver meets the family "
                        "minimum {family_minimum}: it runs through minor-version compatibility, "
                        "within its limits."
                    ),
                    cuda=str(cuda),
                    driver=str(driver),
                    ceiling=_release(ceiling),
                    major=cuda.major,
                    family_minimum=str(family.min_linux_driver),
                ),
                target,
            ],
            **common,
        )

    verdict = _across_majors(kb, driver, cuda, ceiling, gpu_row, gpu, rows, common)
    if verdict.verdict == "incompatible" and last and _beyond(last, min_driver):
        return _past_last_branch(verdict, gpu, gpu_row, last)
    recommended = (
        (requirement.recommended_driver, str(requirement.recommended_branch))
        if requirement.recommended_driver
        else None
    )
    advice = [_upgrade_advice(cuda, min_driver, last, recommended)]
    if verdict.verdict == "forward_compat_only" and _beyond(last, min_driver):
        advice = []  # the compat package is the only way on this GPU
    package = f"cuda-compat-{cuda.major}-{cuda.minor}"
    if verdict.verdict == "forward_compat_only":
        advice.append(
            said(
                N_(
                    "Or, without a driver change: install {package} on the host and put "
                    "/usr/local/cuda-{release}/compat first on LD_LIBRARY_PATH; verify with "
                    "deviceQuery."
                ),
                package=package,
                release=f"{cuda.major}.{cuda.minor}",
            )
        )
    elif (
        gpu_row
        and gpu_row.forward_compat_support == "uncertain"
        and driver.branch in (kb.forward_compat.packages.get(f"{cuda.major}.{cuda.minor}", []))
    ):
        advice.append(
            said(
                N_(
                    "Or try {package} on one node first: forward compatibility on {model} is not "
                    "established (error 804 means it is not supported)."
                ),
                package=package,
                model=gpu_row.name,
            )
        )
    return _reworded(verdict, advice=advice, cause="driver_too_old")


def _unsupported_arch(
    kb: KnowledgeBase,
    cuda: CudaVersion,
    gpu: str | None,
    gpu_row: Gpu,
    limit: GpuLimit,
    limits: list[GpuLimit],
    rows: list[Said],
    common: dict[str, Any],
) -> CompatVerdict:
    """A CUDA major that carries no kernels for the GPU: no driver changes that."""
    assert limit.last_cuda_major is not None
    rows.append(
        said(
            N_("{table}: {limit}: {architectures} end at CUDA {major}.x"),
            table=_LIMITS,
            limit=limit.id,
            architectures=", ".join(limit.architectures),
            major=limit.last_cuda_major,
        )
    )
    releases = [
        r
        for r in kb.toolkits
        if r.cuda_version.major == limit.last_cuda_major and r.min_linux_driver
    ]
    newest = max(releases, key=lambda r: r.cuda_version) if releases else None
    capability = gpu_row.compute_capability
    advice = []
    if newest is not None:
        release = CudaVersion(newest.cuda_version.major, newest.cuda_version.minor)
        floor = toolkit_row(kb, release)
        build: dict[str, str | int] = {
            "major": limit.last_cuda_major,
            "capability": capability,
            "release": f"{release.major}.{release.minor}",
            "tag": f"{release.major}{release.minor}",
        }
        advice.append(
            said(
                N_(
                    "Run a CUDA {major}.x build that still carries kernels for compute "
                    "capability {capability}: for vLLM a CUDA {release} image or wheel (-cu{tag} "
                    "tags), natively on driver >= {driver}. Whether a given build includes "
                    "{capability} is not established here: check torch.cuda.get_arch_list() in it."
                ),
                driver=str(floor.min_linux_driver),
                **build,
            )
            if floor
            else said(
                N_(
                    "Run a CUDA {major}.x build that still carries kernels for compute "
                    "capability {capability}: for vLLM a CUDA {release} image or wheel (-cu{tag} "
                    "tags). Whether a given build includes {capability} is not established here: "
                    "check torch.cuda.get_arch_list() in it."
                ),
                **build,
            )
        )
    last = _branch_limit(limits)
    if last is not None:
        advice.append(
            said(
                N_(
                    "Keep these hosts at {last_branch} at most: {summary} ({table} {limit}, {certainty})"
                ),
                last_branch=str(last.last_driver_branch),
                summary=Said(text=last.summary),
                **_limit_words(last),
            )
        )
    advice.append(
        said(
            N_("Or move the workload to GPUs of compute capability {capability} or newer."),
            capability=limit.below_compute_capability,
        )
    )
    advice.append(
        said(
            N_(
                "Do not upgrade the driver for this: no driver runs a CUDA {major}+ build on "
                "{model}."
            ),
            major=limit.last_cuda_major + 1,
            model=gpu_row.name,
        )
    )
    return _verdict(
        verdict="incompatible",
        rule="unsupported_gpu_arch",
        conditions=[
            said(
                N_("gpu_arch: {summary} ({table} {limit}, {certainty})"),
                summary=Said(text=limit.summary),
                **_limit_words(limit),
            )
        ],
        source=limit.source,
        table_rows=rows,
        explanation=[
            said(
                N_("{gpu} cannot run a CUDA {cuda} build, whatever the driver."),
                gpu=_gpu_words(gpu, gpu_row),
                cuda=str(cuda),
            ),
            Said(text=limit.summary),
        ],
        cause="unsupported_gpu_arch",
        advice=advice,
        **{**common, **_NO_DRIVER},
    )


def _past_last_branch(
    verdict: CompatVerdict, gpu: str | None, gpu_row: Gpu | None, last: GpuLimit
) -> CompatVerdict:
    """The build needs a branch the GPU never gets: the driver path is closed."""
    assert gpu_row is not None
    last_branch = str(last.last_driver_branch)
    why = said(
        N_(
            "it needs {branch} or newer, and {last_branch} is the last branch for "
            "{architectures} ({table} {limit}, {certainty})"
        ),
        branch=str(verdict.min_branch),
        last_branch=last_branch,
        **_limit_words(last),
    )
    conditions = (verdict.wording or CompatWording()).conditions
    return _reworded(
        verdict,
        conditions=[*conditions, said(N_("gpu_arch: {why}"), why=why)],
        explanation=[
            said(
                N_("{gpu} cannot get a driver that runs a CUDA {cuda} build natively: {why}."),
                gpu=_gpu_words(gpu, gpu_row),
                cuda=verdict.cuda,
                why=why,
            )
        ],
        advice=[
            said(
                N_(
                    "Use a build whose CUDA runs on {last_branch} (see `vllm-triage compat "
                    "--driver <an {last_branch} driver>`), or move the workload to a newer GPU."
                ),
                last_branch=last_branch,
            ),
            said(
                N_("Do not plan a driver upgrade past {last_branch} on these hosts."),
                last_branch=last_branch,
            ),
        ],
        rule="unsupported_gpu_arch",
        cause="unsupported_gpu_arch",
        **_NO_DRIVER,
    )


def _forward_compat_doubt(gpu: str | None, gpu_row: Gpu | None, package: str) -> tuple[Said, Said]:
    """Why forward compatibility is not decided on this GPU: (the condition's words, the
    explanation's sentence)."""
    if gpu_row and gpu_row.forward_compat_support == "no":
        return (
            said(
                N_(
                    "{gpu} is not a data-center GPU: forward compatibility fails there with "
                    "error 804"
                ),
                gpu=str(gpu),
            ),
            said(
                N_(
                    "{gpu} is not a data-center GPU: forward compatibility fails there with "
                    "error 804."
                ),
                gpu=str(gpu),
            ),
        )
    if gpu_row:
        fields = {"gpu": str(gpu), "model": gpu_row.name, "package": package}
        return (
            said(
                N_(
                    "whether {gpu} ({model}) supports forward compatibility is not established "
                    "(NVIDIA names only select NGC Server Ready SKUs of RTX cards, without a "
                    "list): {package} may make it run; error 804 means it does not"
                ),
                **fields,
            ),
            said(
                N_(
                    "Whether {gpu} ({model}) supports forward compatibility is not established "
                    "(NVIDIA names only select NGC Server Ready SKUs of RTX cards, without a "
                    "list): {package} may make it run; error 804 means it does not."
                ),
                **fields,
            ),
        )
    if gpu:
        fields = {"gpu": gpu, "table": _GPUS, "package": package}
        return (
            said(
                N_(
                    "{gpu} is not in the GPU table ({table}): if it is a data-center GPU, "
                    "{package} would make it run (verdict forward_compat_only)"
                ),
                **fields,
            ),
            said(
                N_(
                    "{gpu} is not in the GPU table ({table}): if it is a data-center GPU, "
                    "{package} would make it run (verdict forward_compat_only)."
                ),
                **fields,
            ),
        )
    return (
        said(
            N_(
                "if the GPUs are data-center parts, {package} would make it run (verdict "
                "forward_compat_only); pass --gpu to decide"
            ),
            package=package,
        ),
        said(
            N_(
                "If the GPUs are data-center parts, {package} would make it run (verdict "
                "forward_compat_only); pass --gpu to decide."
            ),
            package=package,
        ),
    )


def _across_majors(
    kb: KnowledgeBase,
    driver: DriverVersion,
    cuda: CudaVersion,
    ceiling: CudaVersion | None,
    gpu_row: Gpu | None,
    gpu: str | None,
    rows: list[Said],
    common: dict[str, Any],
) -> CompatVerdict:
    fc = kb.forward_compat
    package = f"{cuda.major}.{cuda.minor}"
    bases = fc.packages.get(package, [])
    package_name = f"cuda-compat-{cuda.major}-{cuda.minor}"
    native = said(
        N_(
            "Driver {driver} ({branch}) supports CUDA up to {ceiling}; a CUDA {cuda} build needs "
            "{min_driver} or newer."
        ),
        driver=str(driver),
        branch=driver.branch,
        ceiling=_release(ceiling),
        cuda=str(cuda),
        min_driver=common["min_driver"] or Said(text=N_("a newer driver")),
    )
    branch_supported = driver.branch in bases
    if bases:
        rows.append(
            said(
                N_("{table}: {package} supported on {bases}"),
                table=_FORWARD,
                package=package_name,
                bases=", ".join(bases),
            )
        )
    if branch_supported:
        support = gpu_row.forward_compat_support if gpu_row else None
        if gpu_row and support == "yes":
            kind = (
                Said(text=N_("a data-center GPU"))
                if gpu_row.datacenter
                else said(
                    N_("a GPU NVIDIA supports forward compatibility on ({model})"),
                    model=gpu_row.name,
                )
            )
            return _verdict(
                verdict="forward_compat_only",
                rule="forward_compatibility",
                conditions=[
                    said(
                        N_(
                            "forward_compat: install {package} and put "
                            "/usr/local/cuda-{release}/compat first on LD_LIBRARY_PATH (in the "
                            "container or on the host); verify with deviceQuery"
                        ),
                        package=package_name,
                        release=package,
                    ),
                    *(
                        said(N_("forward_compat_limit: {limit}"), limit=Said(text=limit))
                        for limit in fc.limits
                    ),
                ],
                source=fc.source,
                table_rows=rows,
                explanation=[
                    native,
                    said(
                        N_(
                            "{gpu} is {kind} and {branch} is a supported base branch for "
                            "{package}, so it runs only with the forward-compatibility package, "
                            "or after a driver upgrade."
                        ),
                        gpu=str(gpu),
                        kind=kind,
                        branch=driver.branch,
                        package=package_name,
                    ),
                ],
                **common,
            )
        condition, sentence = _forward_compat_doubt(gpu, gpu_row, package_name)
        return _verdict(
            verdict="incompatible",
            rule="newer_cuda_major",
            conditions=[said(N_("forward_compat: {why}"), why=condition)],
            source=fc.source,
            table_rows=rows,
            explanation=[native, sentence],
            **common,
        )
    branch = kb.branch(driver.major)
    if not bases:
        reason = said(N_("NVIDIA publishes no {package} package"), package=package_name)
    else:
        fields = {"branch": driver.branch, "package": package_name, "bases": ", ".join(bases)}
        certainty = branch.type_certainty_or_row if branch else None
        if branch is None or branch.type != "new_feature":
            reason = said(
                N_("{branch} is not a supported base branch for {package} (supported: {bases})"),
                **fields,
            )
        elif certainty == "primary":
            reason = said(
                N_(
                    "{branch} is not a supported base branch for {package} (supported: "
                    "{bases}); it is a New Feature Branch, and those are not supported targets "
                    "either"
                ),
                **fields,
            )
        else:
            reason = said(
                N_(
                    "{branch} is not a supported base branch for {package} (supported: "
                    "{bases}); it is a New Feature Branch (per a {certainty} source), and those "
                    "are not supported targets either"
                ),
                certainty=str(certainty),
                **fields,
            )
    return _verdict(
        verdict="incompatible",
        rule="newer_cuda_major",
        conditions=[said(N_("forward_compat: not possible: {reason}"), reason=reason)],
        source=fc.source if bases else (kb.toolkits[-1].source),
        table_rows=rows,
        explanation=[
            native,
            said(N_("Forward compatibility is not possible either: {reason}."), reason=reason),
        ],
        **common,
    )
