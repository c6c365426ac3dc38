"""The version-threshold verdict: can a CUDA build run on a driver, by NVIDIA's own rules?

Native support when the driver's CUDA ceiling covers the build; minor-version compatibility within
one CUDA major (with its documented limits); forward compatibility across majors only on data-center
GPUs with a supported base branch; otherwise incompatible.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from typing import Any

from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.knowledge.schema import CudaToolkit, Gpu
from vllm_triage.models import CompatVerdict
from vllm_triage.versions import CudaVersion, DriverVersion, VersionError

_TOOLKITS = "cuda_toolkits.csv"
_FAMILIES = "cuda_families.csv"
_FORWARD = "forward_compat.yaml"
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
    """The newest toolkit release whose minimum driver this driver meets."""
    met = [row for row in kb.toolkits if row.min_linux_driver <= driver]
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
    """The toolkit row of this build: the exact update when given, the release's first otherwise."""
    same_minor = [r for r in kb.toolkits if r.cuda_version.minor_release == cuda.minor_release]
    if cuda.patch is not None:
        exact = [r for r in same_minor if r.cuda_version.patch == cuda.patch]
        if exact:
            return exact[0]
    return min(same_minor, key=lambda r: r.cuda_version) if same_minor else None


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


def check_compat(
    kb: KnowledgeBase,
    driver: DriverVersion,
    cuda: CudaVersion,
    gpu: str | None = None,
    require: str | None = None,
) -> CompatVerdict:
    """Decide whether a CUDA build runs on a driver; name the rule and the table rows used."""
    ceiling_row = driver_cuda_ceiling(kb, driver)
    ceiling = _ceiling_version(kb, driver)
    native = _native_row(kb, cuda)
    family = kb.family(cuda.major)
    gpu_row = kb.gpu(gpu) if gpu else None
    min_driver = (
        native.min_linux_driver if native else (family.min_linux_driver if family else None)
    )
    rows = []
    if ceiling_row:
        rows.append(
            f"{_TOOLKITS}: CUDA {ceiling_row.release} needs >= {ceiling_row.min_linux_driver} "
            f"(newest release driver {driver} meets)"
        )
    if native:
        rows.append(f"{_TOOLKITS}: CUDA {native.release} needs >= {native.min_linux_driver}")
    cited = native or ceiling_row
    source = cited.source if cited else kb.toolkits[0].source
    common = dict(
        driver=str(driver),
        driver_branch=driver.branch,
        driver_cuda_ceiling=_release(ceiling) if ceiling else None,
        cuda=str(cuda),
        gpu=gpu,
        min_driver=str(min_driver) if min_driver else None,
        min_branch=f"r{min_driver.major}" if min_driver else None,
    )

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
                f"within its limits. Target {min_driver or 'a newer driver'} to remove them."
            ),
            **common,
        )

    return _across_majors(kb, driver, cuda, ceiling, gpu_row, gpu, rows, common)


def _across_majors(
    kb: KnowledgeBase,
    driver: DriverVersion,
    cuda: CudaVersion,
    ceiling: CudaVersion | None,
    gpu_row: Gpu | None,
    gpu: str | None,
    rows: list[str],
    common: dict[str, str | None],
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
        datacenter = gpu_row.datacenter if gpu_row else None
        if datacenter:
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
                    f"{native_text}. {gpu} is a data-center GPU and {driver.branch} is a supported "
                    f"base branch for {package_name}, so it runs only with the forward-compatibility "
                    "package, or after a driver upgrade."
                ),
                **common,
            )
        why = (
            f"{gpu} is not a data-center GPU: forward compatibility fails there with error 804"
            if datacenter is False
            else "if the GPUs are data-center parts, "
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
    elif branch and branch.type == "new_feature":
        reason = (
            f"{driver.branch} is a New Feature Branch, and those are not supported bases for "
            f"{package_name} (supported: {', '.join(bases)})"
        )
    else:
        reason = (
            f"{driver.branch} is not a supported base branch for {package_name} "
            f"(supported: {', '.join(bases)})"
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
