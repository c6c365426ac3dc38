"""The library behind the `compat` and `diagnose` commands; usable without the CLI."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from vllm_triage.bundle.read import Bundle, open_bundle
from vllm_triage.diagnose.analyzer import analyze
from vllm_triage.diagnose.facts import fact_findings
from vllm_triage.diagnose.logreader import LogError
from vllm_triage.diagnose.scan import FileScan, scan_log
from vllm_triage.diagnose.threshold import check_compat
from vllm_triage.errors import InputError
from vllm_triage.image.config import (
    ImageCuda,
    ImageError,
    image_cuda_from_config,
    image_cuda_from_reference,
)
from vllm_triage.inputs import display_name, open_input, read_errors
from vllm_triage.knowledge import KnowledgeBase, load_knowledge
from vllm_triage.knowledge.schema import Recipe
from vllm_triage.models import CompatVerdict, Diagnosis, Finding
from vllm_triage.versions import CudaVersion, DriverVersion, VersionError

_Version = TypeVar("_Version", CudaVersion, DriverVersion)


def resolve_image_cuda(
    kb: KnowledgeBase,
    cuda: str | None = None,
    image_config: Path | None = None,
    image: str | None = None,
    recipe: Recipe | None = None,
) -> ImageCuda | None:
    """The image's CUDA from the most authoritative input given: explicit, config, tag, recipe."""
    if cuda is not None:
        return ImageCuda(CudaVersion.parse(cuda), None, "given")
    if image_config is not None:
        return image_cuda_from_config(image_config)
    if image is not None:
        return image_cuda_from_reference(kb, image)
    if recipe is not None:
        return ImageCuda(recipe.image_cuda, None, f"recipe {recipe.id} ({recipe.image})")
    return None


def compat(
    driver: str,
    cuda: str | None = None,
    gpu: str | None = None,
    image_config: Path | None = None,
    image: str | None = None,
    kb: KnowledgeBase | None = None,
) -> CompatVerdict:
    """The version-threshold verdict for a host driver and an image's CUDA."""
    kb = kb or load_knowledge()
    driver_version = DriverVersion.parse(driver)
    image_cuda = resolve_image_cuda(kb, cuda, image_config, image)
    if image_cuda is None:
        raise InputError("say which CUDA to check: --cuda, --image-config or --image")
    return check_compat(kb, driver_version, image_cuda.cuda, gpu, image_cuda.require)


def _scan_path(path: str, kb: KnowledgeBase) -> FileScan:
    with open_input(path, "a log file") as (stream, name), read_errors(name):
        try:
            return scan_log(stream, name, kb)
        except LogError as exc:
            raise LogError(f"{name}: {exc}") from None


def _scan_given(
    paths: Sequence[str], kb: KnowledgeBase, notes: list[str], *, alone: bool
) -> list[FileScan]:
    """Scan the logs named on the command line. One that is not text (a core dump among the
    logs) is named in a note and passed over; when they are the only input (`alone`: no bundle)
    and every one is refused, that is an error."""
    scans, refused = [], []
    for path in paths:
        try:
            scans.append(_scan_path(path, kb))
        except LogError as exc:
            refused.append(str(exc))
    if refused and not scans and alone:
        more = (
            f" (and {len(refused) - 1} more log(s) that are not text)" if len(refused) > 1 else ""
        )
        raise LogError(refused[0] + more)
    notes.extend(f"{reason}: passed over; the other inputs were diagnosed" for reason in refused)
    return scans


def _scan_bundle_logs(bundle: Bundle, kb: KnowledgeBase, notes: list[str]) -> list[FileScan]:
    """Scan the bundle's logs; one that cannot be read as text is a note, not the end."""
    scans = []
    for relative in bundle.logs:
        name = bundle.show(relative)
        try:
            with bundle.open(relative) as stream:
                scans.append(scan_log(stream, name, kb))
        except LogError as exc:
            notes.append(f"{name}: {exc}: passed over")
        except InputError as exc:
            notes.append(str(exc))
        except OSError as exc:
            notes.append(f"{name}: cannot read ({exc.strerror or exc}): passed over")
    return scans


def _bundle_inputs(
    kb: KnowledgeBase, bundle: Bundle
) -> tuple[str | None, ImageCuda | None, str | None, Recipe | None, list[str]]:
    """Driver, image CUDA, GPU, recipe and notes from what collect found."""
    facts, notes = bundle.facts, list(bundle.problems)
    driver = _usable(DriverVersion.parse, facts.gpu.driver_version if facts.gpu else None, notes)
    if driver is None and facts.kubernetes and facts.kubernetes.gfd_driver_version:
        driver = _usable(DriverVersion.parse, facts.kubernetes.gfd_driver_version, notes)
        if driver is not None:
            notes.append(f"driver {driver} from the node's GPU Feature Discovery labels")
    cuda = None
    image_cuda = facts.container.image_cuda if facts.container else None
    torch_cuda = facts.image.torch_cuda if facts.image else None
    if image_cuda and (version := _usable(CudaVersion.parse, image_cuda, notes)):
        require = facts.container.image_require_cuda if facts.container else None
        cuda = ImageCuda(version, require, "image config")
    elif torch_cuda and (version := _usable(CudaVersion.parse, torch_cuda, notes)):
        cuda = ImageCuda(version, None, "torch.version.cuda")
    elif facts.container and facts.container.image:
        try:
            cuda = image_cuda_from_reference(kb, facts.container.image)
        except ImageError as exc:
            notes.append(str(exc))
    gpu = None
    if facts.gpu and facts.gpu.gpus:
        gpu = facts.gpu.gpus[0].name
    elif facts.kubernetes and facts.kubernetes.gpu_product:
        gpu = facts.kubernetes.gpu_product
    launch = facts.vllm.launch if facts.vllm else None
    found = str(driver) if driver is not None else None
    return found, cuda, gpu, kb.recipe_for_model(launch.model if launch else None), notes


def _usable(
    parse: Callable[[str], _Version], value: str | None, notes: list[str]
) -> _Version | None:
    """A version the bundle states, parsed; one that does not parse is a note, not the end."""
    if value is None:
        return None
    try:
        return parse(value)
    except VersionError as exc:
        notes.append(f"the bundle's facts: {exc}; not used")
        return None


def diagnose(
    logs: Sequence[str] = (),
    driver: str | None = None,
    image_cuda: str | None = None,
    gpu: str | None = None,
    recipe: str | None = None,
    image_config: Path | None = None,
    image: str | None = None,
    bundle: Path | None = None,
    kb: KnowledgeBase | None = None,
) -> Diagnosis:
    """Read the logs of one failed start (paths, "-" for stdin, or a collect bundle) and say
    what went wrong. Options given explicitly win over what the bundle says."""
    kb = kb or load_knowledge()
    if not logs and bundle is None:
        raise InputError("give at least one log file (or - for standard input), or --bundle")
    chosen = kb.recipe(recipe) if recipe is not None else None
    if bundle is None:
        cuda = resolve_image_cuda(kb, image_cuda, image_config, image, chosen)
        notes: list[str] = []
        scans = _scan_given(logs, kb, notes, alone=True)
        result = _diagnose(kb, scans, driver, cuda, gpu, chosen)
        return result.model_copy(update={"notes": [*notes, *result.notes]})
    with open_bundle(bundle) as opened:
        found_driver, found_cuda, found_gpu, found_recipe, notes = _bundle_inputs(kb, opened)
        chosen = chosen or found_recipe
        given = resolve_image_cuda(kb, image_cuda, image_config, image)
        cuda = given or found_cuda or resolve_image_cuda(kb, recipe=chosen)
        scans = _scan_given(logs, kb, notes, alone=False) + _scan_bundle_logs(opened, kb, notes)
        result = _diagnose(
            kb, scans, driver or found_driver, cuda, gpu or found_gpu, chosen,
            fact_findings(kb, opened.facts),
        )  # fmt: skip
    if not scans:
        notes.append("no log could be read: the diagnosis rests on the bundle's facts alone")
    return result.model_copy(
        update={
            "inputs": [display_name(bundle), *result.inputs],
            "notes": [*notes, *result.notes],
        }
    )


def _diagnose(
    kb: KnowledgeBase,
    scans: list[FileScan],
    driver: str | None,
    cuda: ImageCuda | None,
    gpu: str | None,
    recipe: Recipe | None,
    facts: Sequence[Finding] = (),
) -> Diagnosis:
    driver_version = DriverVersion.parse(driver) if driver is not None else None
    verdict = (
        check_compat(kb, driver_version, cuda.cuda, gpu, cuda.require)
        if driver_version is not None and cuda is not None
        else None
    )
    return analyze(kb, scans, verdict, recipe, facts)
