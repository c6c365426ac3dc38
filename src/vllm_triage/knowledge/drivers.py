"""The three driver figures of one CUDA build, each named for what it decides.

`min_driver` is the floor that decides whether the build starts at all: for a CUDA major with a
minor-version-compatibility floor (cuda_families.csv; r580 for 13.x) that floor, otherwise the
toolkit's own. `toolkit_driver` is the driver the build's toolkit update shipped with
(cuda_toolkits.csv): below it the build still starts within its major, but PTX that only a newer
driver can JIT and the newest features are out of reach. `recommended_driver` is the change's
target: the current release of the lowest long-term branch that covers the build, meets the
toolkit's driver and is not past its end of life (recovery.yaml's long_term_releases).
Every command that prints a verdict takes its figures from here, so they never disagree.
"""

from __future__ import annotations

from datetime import date

from vllm_triage.knowledge.loader import KnowledgeBase
from vllm_triage.knowledge.schema import CudaToolkit
from vllm_triage.models import DriverRequirement
from vllm_triage.versions import CudaVersion, DriverVersion


def toolkit_row(kb: KnowledgeBase, cuda: CudaVersion) -> CudaToolkit | None:
    """The toolkit row of this build: its update when the table gives that update's driver; else
    the nearest earlier update of the same release (an update never needs less than the one
    before, so that row is a lower bound); a build naming no update takes the release's first."""
    same = sorted(
        (
            row
            for row in kb.toolkits
            if row.cuda_version.minor_release == cuda.minor_release
            and row.min_linux_driver is not None
        ),
        key=lambda row: row.cuda_version,
    )
    if not same:
        return None
    if cuda.patch is None:
        return same[0]
    exact = [row for row in same if row.cuda_version.patch == cuda.patch]
    if exact:
        return exact[0]
    earlier = [row for row in same if (row.cuda_version.patch or 0) < cuda.patch]
    return earlier[-1] if earlier else same[0]


def floor(kb: KnowledgeBase, cuda: CudaVersion) -> tuple[DriverVersion, str, str] | None:
    """The driver a build needs to start, with its rule and source: the CUDA family's
    minor-version-compatibility floor, else the toolkit row's own driver."""
    family = kb.family(cuda.major)
    if family is not None:
        return family.min_linux_driver, "minor_version_compatibility", family.source
    row = toolkit_row(kb, cuda)
    if row is None or row.min_linux_driver is None:
        return None
    return row.min_linux_driver, "toolkit", row.source


def driver_requirement(
    kb: KnowledgeBase, cuda: CudaVersion, today: date | None = None
) -> DriverRequirement:
    """The floor, the toolkit's driver and the recommended target of one CUDA build."""
    found = floor(kb, cuda)
    row = toolkit_row(kb, cuda)
    toolkit = row.min_linux_driver if row is not None else None
    figures: dict[str, object] = {"cuda": str(cuda)}
    if found is not None:
        minimum, rule, source = found
        figures |= {
            "min_driver": str(minimum),
            "min_branch": minimum.branch,
            "min_rule": rule,
            "min_source": source,
        }
    if row is not None and toolkit is not None:
        figures |= {
            "toolkit_driver": str(toolkit),
            "toolkit_release": row.release,
            "toolkit_lower_bound": cuda.patch is not None and row.cuda_version != cuda,
            "toolkit_source": row.source,
        }
    needed = toolkit or (found[0] if found else None)
    if needed is not None:
        figures |= _recommended(kb, cuda, needed, today or date.today())
    return DriverRequirement.model_validate(figures)


def _recommended(
    kb: KnowledgeBase, cuda: CudaVersion, needed: DriverVersion, today: date
) -> dict[str, object]:
    """The lowest long-term branch that covers the build, with its current release when that
    release meets what the build needs and the branch is not past its end of life."""
    month = today.strftime("%Y-%m")
    releases = {release.branch: release for release in kb.recovery.long_term_releases}
    candidates = sorted(
        (
            branch
            for branch in kb.branches
            if branch.type == "ltsb"
            and branch.number >= needed.major
            and (
                branch.cuda_ceiling is None
                or branch.cuda_ceiling.minor_release >= cuda.minor_release
            )
        ),
        key=lambda branch: branch.number,
    )
    for branch in candidates:
        release = releases.get(branch.branch)
        if release is not None and release.release >= needed and release.eol >= month:
            return {
                "recommended_driver": str(release.release),
                "recommended_branch": branch.branch,
                "recommended_branch_type": branch.type,
                "recommended_as_of": release.as_of.isoformat(),
                "recommended_certainty": release.certainty,
                "recommended_source": release.source,
                "recommended_note": release.note or None,
                "recommended_eol": release.eol,
            }
    if candidates:
        return {
            "recommended_branch": candidates[0].branch,
            "recommended_branch_type": candidates[0].type,
        }
    return {}
