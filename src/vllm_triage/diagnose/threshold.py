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
from typing import Any

from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.knowledge.schema import CudaToolkit, Gpu, GpuLimit
from vllm_triage.models import CompatVerdict
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
_CONSTRAINT = re.compile(r"^(cuda|driver|brand|arch)(>=|<=|==|=|>|<)(.+)$")


def _release(cuda: CudaVersion | None) -> str:
    return f"{cuda.major}.{cuda.minor}" if cuda else "an unknown release"


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


def _native_row(kb: KnowledgeBase, cuda: CudaVersion) -> CudaToolkit | None:
    """The toolkit row of this build: the exact update when given, the release's first otherwise;
    rows whose minimum driver is not established are passed over (an update never needs less than
    the release before it, so the earlier row is a floor)."""
    same_minor = [
        r
        for r in kb.toolkits
        if r.cuda_version.minor_release == cuda.minor_release and r.min_linux_driver is not None
    ]
    if cuda.patch is not None:
        exact = [r for r in same_minor if r.cuda_version.patch == cuda.patch]
        if exact:
            return exact[0]
    return min(same_minor, key=lambda r: r.cuda_version) if same_minor else None


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
) -> list[str]:
    where = f" ({gpu})" if gpu else ""
    return [
        (
            f"ptx_jit: kernels shipped only as CUDA {cuda.major}.{cuda.minor} PTX cannot be "
            f"JIT-compiled by driver {driver} (CUDA {_release(ceiling)}); the build must carry native SASS "
            f"for the GPU's compute capability{where}, or it fails with "
            "cudaErrorUnsupportedPtxVersion"
        ),
        (
            "container_require: in legacy mode the NVIDIA container toolkit compares the image's "
            f"NVIDIA_REQUIRE_CUDA with the driver's CUDA {_release(ceiling)}; an image that requires "
            f"cuda>={cuda.major}.{cuda.minor} is refused unless NVIDIA_DISABLE_REQUIRE=1 or CDI "
            "mode is used"
        ),
    ]


def _gpu_words(gpu: str | None, row: Gpu) -> str:
    """`Tesla V100-SXM2-32GB (V100, compute capability 7.0, Volta)`."""
    details = [row.name, f"compute capability {row.compute_capability}"]
    if row.architecture:
        details.append(row.architecture)
    return f"{gpu or row.name} ({', '.join(details)})"


def _branch_limit(limits: list[GpuLimit]) -> GpuLimit | None:
    """The lowest last-branch limit among those that apply to the GPU."""
    capped = [limit for limit in limits if limit.last_branch_number is not None]
    return min(capped, key=lambda limit: limit.last_branch_number or 0) if capped else None


def _beyond(last: GpuLimit | None, min_driver: DriverVersion | None) -> bool:
    """Does the build need a driver branch past the GPU's last one?"""
    number = last.last_branch_number if last else None
    return number is not None and min_driver is not None and min_driver.major > number


def _upgrade_advice(
    cuda: CudaVersion, min_driver: DriverVersion | None, last: GpuLimit | None
) -> str:
    """Upgrade to the build's minimum driver, never past the GPU's last branch."""
    if min_driver is None:
        return (
            f"Upgrade the host driver to one that supports CUDA {cuda.major}.{cuda.minor} natively "
            f"(its minimum is not established in {_TOOLKITS})."
        )
    text = f"Upgrade the host driver to r{min_driver.major} or newer (>= {min_driver})"
    if last and last.last_driver_branch:
        text += (
            f", but not past {last.last_driver_branch}: the last branch for "
            f"{', '.join(last.architectures)} ({_LIMITS} {last.id}, {last.certainty})"
        )
    return text + "; one isolated node first, with a rollback ready."


def check_compat(
    kb: KnowledgeBase,
    driver: DriverVersion,
    cuda: CudaVersion,
    gpu: str | None = None,
    require: str | None = None,
) -> CompatVerdict:
    """Decide whether a CUDA build runs on a driver (and GPU); name the rule and the table rows."""
    ceiling_row = driver_cuda_ceiling(kb, driver)
    ceiling = _ceiling_version(kb, driver)
    native = _native_row(kb, cuda)
    family = kb.family(cuda.major)
    gpu_row = kb.gpu(gpu) if gpu else None
    limits = kb.gpu_limits_for(gpu_row) if gpu_row else []
    min_driver = native.min_linux_driver if native else None
    if min_driver is None and family:
        min_driver = family.min_linux_driver
    rows = []
    if ceiling_row:
        rows.append(
            f"{_TOOLKITS}: CUDA {ceiling_row.release} needs >= {ceiling_row.min_linux_driver} "
            f"(newest release driver {driver} meets)"
        )
    if native:
        rows.append(f"{_TOOLKITS}: CUDA {native.release} needs >= {native.min_linux_driver}")
    if (cuda.patch is not None or native is None) and (unknown := _unestablished_row(kb, cuda)):
        rows.append(f"{_TOOLKITS}: CUDA {unknown.release}: minimum driver not established")
    if gpu_row:
        rows.append(
            f"{_GPUS}: {gpu} is {gpu_row.name}, compute capability {gpu_row.compute_capability}"
        )
    cited = native or ceiling_row
    source = cited.source if cited else kb.toolkits[0].source
    common: dict[str, Any] = dict(
        driver=str(driver),
        driver_branch=driver.branch,
        driver_cuda_ceiling=_release(ceiling) if ceiling else None,
        cuda=str(cuda),
        gpu=gpu,
        min_driver=str(min_driver) if min_driver else None,
        min_branch=f"r{min_driver.major}" if min_driver else None,
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
        f"container_require: the image's NVIDIA_REQUIRE_CUDA ({require}) is not met by driver "
        f"{driver} (CUDA {_release(ceiling)}); nvidia-container-cli in legacy mode refuses to start it "
        "unless NVIDIA_DISABLE_REQUIRE=1 or CDI mode is used"
        if require_ok is False
        else None
    )

    if ceiling and cuda.minor_release <= ceiling.minor_release:
        conditions = [require_condition] if require_condition else []
        return CompatVerdict(
            verdict="conditional" if conditions else "compatible",
            rule="native_support",
            conditions=conditions,
            source=source,
            table_rows=rows,
            explanation=(
                f"Driver {driver} ({driver.branch}) supports CUDA up to {_release(ceiling)}; a CUDA {cuda} "
                "build runs natively."
            ),
            **common,
        )

    if ceiling and family and cuda.major == ceiling.major and driver >= family.min_linux_driver:
        rows.append(f"{_FAMILIES}: CUDA {family.major}.x needs >= {family.min_linux_driver}")
        conditions = _conditions_minor(cuda, driver, ceiling, gpu)
        if require_ok is not None:
            conditions[1] = require_condition or (
                f"container_require: the image's NVIDIA_REQUIRE_CUDA ({require}) is met"
            )
        target = f"Target {min_driver or 'a newer driver'} to remove them."
        if last and _beyond(last, min_driver):
            target = (
                f"No driver removes them on this GPU: {last.last_driver_branch} is the last "
                f"branch for {', '.join(last.architectures)}."
            )
        return CompatVerdict(
            verdict="conditional",
            rule="minor_version_compatibility",
            conditions=conditions,
            source=family.source,
            table_rows=rows,
            explanation=(
                f"CUDA {cuda} is newer than what driver {driver} supports natively (CUDA "
                f"{_release(ceiling)}), but both are CUDA {cuda.major}.x and the driver meets the family "
                f"minimum {family.min_linux_driver}: it runs through minor-version compatibility, "
                f"within its limits. {target}"
            ),
            **common,
        )

    verdict = _across_majors(kb, driver, cuda, ceiling, gpu_row, gpu, rows, common)
    if verdict.verdict == "incompatible" and last and _beyond(last, min_driver):
        return _past_last_branch(verdict, gpu, gpu_row, last)
    advice = [_upgrade_advice(cuda, min_driver, last)]
    if verdict.verdict == "forward_compat_only" and _beyond(last, min_driver):
        advice = []  # the compat package is the only way on this GPU
    package = f"cuda-compat-{cuda.major}-{cuda.minor}"
    if verdict.verdict == "forward_compat_only":
        advice.append(
            f"Or, without a driver change: install {package} on the host and put "
            f"/usr/local/cuda-{cuda.major}.{cuda.minor}/compat first on LD_LIBRARY_PATH; verify "
            "with deviceQuery."
        )
    elif (
        gpu_row
        and gpu_row.forward_compat_support == "uncertain"
        and driver.branch in (kb.forward_compat.packages.get(f"{cuda.major}.{cuda.minor}", []))
    ):
        advice.append(
            f"Or try {package} on one node first: forward compatibility on {gpu_row.name} is not "
            "established (error 804 means it is not supported)."
        )
    return verdict.model_copy(update={"cause": "driver_too_old", "advice": advice})


def _unsupported_arch(
    kb: KnowledgeBase,
    cuda: CudaVersion,
    gpu: str | None,
    gpu_row: Gpu,
    limit: GpuLimit,
    limits: list[GpuLimit],
    rows: list[str],
    common: dict[str, Any],
) -> CompatVerdict:
    """A CUDA major that carries no kernels for the GPU: no driver changes that."""
    assert limit.last_cuda_major is not None
    words = _gpu_words(gpu, gpu_row)
    rows.append(
        f"{_LIMITS}: {limit.id}: {', '.join(limit.architectures)} end at CUDA {limit.last_cuda_major}.x"
    )
    releases = [
        r
        for r in kb.toolkits
        if r.cuda_version.major == limit.last_cuda_major and r.min_linux_driver
    ]
    newest = max(releases, key=lambda r: r.cuda_version) if releases else None
    advice = []
    if newest is not None:
        release = CudaVersion(newest.cuda_version.major, newest.cuda_version.minor)
        floor = _native_row(kb, release)
        needs = f", natively on driver >= {floor.min_linux_driver}" if floor else ""
        advice.append(
            f"Run a CUDA {limit.last_cuda_major}.x build that still carries kernels for compute "
            f"capability {gpu_row.compute_capability}: for vLLM a CUDA {_release(release)} image or "
            f"wheel (-cu{release.major}{release.minor} tags){needs}. Whether a given build includes "
            f"{gpu_row.compute_capability} is not established here: check "
            "torch.cuda.get_arch_list() in it."
        )
    last = _branch_limit(limits)
    if last is not None:
        advice.append(
            f"Keep these hosts at {last.last_driver_branch} at most: {last.summary} "
            f"({_LIMITS} {last.id}, {last.certainty})"
        )
    advice.append(
        "Or move the workload to GPUs of compute capability "
        f"{limit.below_compute_capability} or newer."
    )
    advice.append(
        f"Do not upgrade the driver for this: no driver runs a CUDA {limit.last_cuda_major + 1}+ "
        f"build on {gpu_row.name}."
    )
    return CompatVerdict(
        verdict="incompatible",
        rule="unsupported_gpu_arch",
        conditions=[f"gpu_arch: {limit.summary} ({_LIMITS} {limit.id}, {limit.certainty})"],
        source=limit.source,
        table_rows=rows,
        explanation=(
            f"{words} cannot run a CUDA {cuda} build, whatever the driver. {limit.summary}"
        ),
        cause="unsupported_gpu_arch",
        advice=advice,
        **{**common, "min_driver": None, "min_branch": None},
    )


def _past_last_branch(
    verdict: CompatVerdict, gpu: str | None, gpu_row: Gpu | None, last: GpuLimit
) -> CompatVerdict:
    """The build needs a branch the GPU never gets: the driver path is closed."""
    assert gpu_row is not None
    why = (
        f"it needs {verdict.min_branch} or newer, and {last.last_driver_branch} is the last "
        f"branch for {', '.join(last.architectures)} ({_LIMITS} {last.id}, {last.certainty})"
    )
    return verdict.model_copy(
        update={
            "rule": "unsupported_gpu_arch",
            "cause": "unsupported_gpu_arch",
            "conditions": [*verdict.conditions, f"gpu_arch: {why}"],
            "explanation": (
                f"{_gpu_words(gpu, gpu_row)} cannot get a driver that runs a CUDA {verdict.cuda} "
                f"build natively: {why}."
            ),
            "min_driver": None,
            "min_branch": None,
            "advice": [
                f"Use a build whose CUDA runs on {last.last_driver_branch} (see `vllm-triage "
                f"compat --driver <an {last.last_driver_branch} driver>`), or move the workload "
                "to a newer GPU.",
                f"Do not plan a driver upgrade past {last.last_driver_branch} on these hosts.",
            ],
        }
    )


def _across_majors(
    kb: KnowledgeBase,
    driver: DriverVersion,
    cuda: CudaVersion,
    ceiling: CudaVersion | None,
    gpu_row: Gpu | None,
    gpu: str | None,
    rows: list[str],
    common: dict[str, Any],
) -> CompatVerdict:
    fc = kb.forward_compat
    package = f"{cuda.major}.{cuda.minor}"
    bases = fc.packages.get(package, [])
    package_name = f"cuda-compat-{cuda.major}-{cuda.minor}"
    native_text = (
        f"Driver {driver} ({driver.branch}) supports CUDA up to {_release(ceiling)}; "
        f"a CUDA {cuda} build needs {common['min_driver'] or 'a newer driver'} or newer"
    )
    branch_supported = driver.branch in bases
    if bases:
        rows.append(f"{_FORWARD}: {package_name} supported on {', '.join(bases)}")
    if branch_supported:
        support = gpu_row.forward_compat_support if gpu_row else None
        if gpu_row and support == "yes":
            kind = (
                "a data-center GPU"
                if gpu_row.datacenter
                else f"a GPU NVIDIA supports forward compatibility on ({gpu_row.name})"
            )
            return CompatVerdict(
                verdict="forward_compat_only",
                rule="forward_compatibility",
                conditions=[
                    f"forward_compat: install {package_name} and put /usr/local/cuda-{package}/compat "
                    "first on LD_LIBRARY_PATH (in the container or on the host); verify with deviceQuery",
                    *(f"forward_compat_limit: {limit}" for limit in fc.limits),
                ],
                source=fc.source,
                table_rows=rows,
                explanation=(
                    f"{native_text}. {gpu} is {kind} and {driver.branch} is a supported "
                    f"base branch for {package_name}, so it runs only with the forward-compatibility "
                    "package, or after a driver upgrade."
                ),
                **common,
            )
        if gpu_row and support == "no":
            why = (
                f"{gpu} is not a data-center GPU: forward compatibility fails there with error 804"
            )
        elif gpu_row:
            why = (
                f"whether {gpu} ({gpu_row.name}) supports forward compatibility is not "
                "established (NVIDIA names only select NGC Server Ready SKUs of RTX cards, without "
                f"a list): {package_name} may make it run; error 804 means it does not"
            )
        elif gpu:
            why = (
                f"{gpu} is not in the GPU table ({_GPUS}): if it is a data-center GPU, "
                f"{package_name} would make it run (verdict forward_compat_only)"
            )
        else:
            why = (
                "if the GPUs are data-center parts, "
                f"{package_name} would make it run (verdict forward_compat_only); pass --gpu to decide"
            )
        return CompatVerdict(
            verdict="incompatible",
            rule="newer_cuda_major",
            conditions=[f"forward_compat: {why}"],
            source=fc.source,
            table_rows=rows,
            explanation=f"{native_text}. {why[0].upper()}{why[1:]}.",
            **common,
        )
    branch = kb.branch(driver.major)
    if not bases:
        reason = f"NVIDIA publishes no {package_name} package"
    else:
        reason = (
            f"{driver.branch} is not a supported base branch for {package_name} "
            f"(supported: {', '.join(bases)})"
        )
        if branch and branch.type == "new_feature":
            certainty = branch.type_certainty_or_row
            per = "" if certainty == "primary" else f" (per a {certainty} source)"
            reason += (
                f"; it is a New Feature Branch{per}, and those are not supported targets either"
            )
    return CompatVerdict(
        verdict="incompatible",
        rule="newer_cuda_major",
        conditions=[f"forward_compat: not possible: {reason}"],
        source=fc.source if bases else (kb.toolkits[-1].source),
        table_rows=rows,
        explanation=f"{native_text}. Forward compatibility is not possible either: {reason}.",
        **common,
    )
