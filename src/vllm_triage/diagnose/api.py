"""The library behind the `compat` and `diagnose` commands; usable without the CLI: one options
object in, one artifact out. What only a diagnosis needs (the log scanner, the analyzer) or only
a bundle (its reading, the case, the fact checks) is imported where it is used, so `compat` and
a diagnosis of logs start without the rest."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Literal, TypeVar

from vllm_triage.diagnose.threshold import check_compat
from vllm_triage.errors import InputError
from vllm_triage.i18n import N_
from vllm_triage.image.config import (
    ImageCuda,
    ImageError,
    image_cuda_from_config,
    image_cuda_from_reference,
)
from vllm_triage.inputs import Fingerprint, display_name, open_input, read_errors
from vllm_triage.knowledge import KnowledgeBase, load_knowledge
from vllm_triage.knowledge.schema import Recipe
from vllm_triage.models import CompatVerdict, Diagnosis, Fact, Finding, InputFile, Said, said
from vllm_triage.versions import CudaVersion, DriverVersion, VersionError

if TYPE_CHECKING:
    from vllm_triage.bundle.read import Bundle
    from vllm_triage.diagnose.scan import FileScan

_Version = TypeVar("_Version", CudaVersion, DriverVersion)


@dataclass(frozen=True)
class CompatOptions:
    """A host driver and where to read the image's CUDA from (explicit, image config, tag)."""

    driver: str
    cuda: str | None = None
    gpu: str | None = None
    image_config: Path | None = None
    image: str | None = None


@dataclass(frozen=True)
class DiagnoseOptions:
    """What to diagnose: logs (paths, "-" for standard input), a bundle, or (with neither) the
    newest bundle of `case`; the host facts given explicitly win over the bundle's."""

    logs: Sequence[str] = ()
    driver: str | None = None
    image_cuda: str | None = None
    gpu: str | None = None
    recipe: str | None = None
    image_config: Path | None = None
    image: str | None = None
    bundle: Path | None = None
    case: Path | None = None


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


def compat(options: CompatOptions, *, kb: KnowledgeBase | None = None) -> CompatVerdict:
    """The version-threshold verdict for a host driver and an image's CUDA."""
    kb = kb or load_knowledge()
    driver_version = DriverVersion.parse(options.driver)
    image_cuda = resolve_image_cuda(kb, options.cuda, options.image_config, options.image)
    if image_cuda is None:
        raise InputError("say which CUDA to check: --cuda, --image-config or --image")
    return check_compat(kb, driver_version, image_cuda.cuda, options.gpu, image_cuda.require)


def _scan_path(path: str, kb: KnowledgeBase, made_from: list[InputFile]) -> FileScan:
    """One log, hashed as it is read (for the diagnosis' made_from); a large one is hashed ahead
    on another core until the scan's own read-ahead keeps both cores busy."""
    from vllm_triage.diagnose.logreader import LogError
    from vllm_triage.diagnose.scan import scan_log

    with open_input(path, "a log file") as (stream, name), read_errors(name):
        reader = Fingerprint(stream, ahead=True, name=name)
        try:
            scan = scan_log(reader, name, kb, reading_ahead=reader.stop_hashing_ahead)
        except LogError as exc:
            raise LogError(f"{name}: {exc}") from None
        finally:
            reader.close()
        made_from.append(InputFile(name=name, sha256=reader.sha256, size=reader.size))
    return scan


def _scan_given(
    paths: Sequence[str],
    kb: KnowledgeBase,
    notes: list[Said],
    made_from: list[InputFile],
    *,
    alone: bool,
) -> list[FileScan]:
    """Scan the logs named on the command line. One that is not text (a core dump among the
    logs) is named in a note and passed over; when they are the only input (`alone`: no bundle)
    and every one is refused, that is an error."""
    from vllm_triage.diagnose.logreader import LogError

    scans, refused = [], []
    for path in paths:
        try:
            scans.append(_scan_path(path, kb, made_from))
        except LogError as exc:
            refused.append(str(exc))
    if refused and not scans and alone:
        more = (
            f" (and {len(refused) - 1} more log(s) that are not text)" if len(refused) > 1 else ""
        )
        raise LogError(refused[0] + more)
    notes.extend(
        said(N_("{reason}: passed over; the other inputs were diagnosed"), reason=reason)
        for reason in refused
    )
    return scans


def _scan_bundle_logs(bundle: Bundle, kb: KnowledgeBase, notes: list[Said]) -> list[FileScan]:
    """Scan the bundle's logs; one that cannot be read as text is a note, not the end."""
    from vllm_triage.diagnose.logreader import LogError
    from vllm_triage.diagnose.scan import scan_log

    scans = []
    for relative in bundle.logs:
        name = bundle.show(relative)
        try:
            with bundle.open(relative) as stream:
                scans.append(scan_log(stream, name, kb))
        except LogError as exc:
            notes.append(said(N_("{name}: {error}: passed over"), name=name, error=str(exc)))
        except InputError as exc:
            notes.append(Said(text=str(exc)))
        except OSError as exc:
            error = str(exc.strerror or exc)
            notes.append(
                said(N_("{name}: cannot read ({error}): passed over"), name=name, error=error)
            )
    return scans


def _bundle_inputs(
    kb: KnowledgeBase, bundle: Bundle
) -> tuple[str | None, ImageCuda | None, str | None, Recipe | None, list[Said]]:
    """Driver, image CUDA, GPU, recipe and notes from what collect found."""
    facts, notes = bundle.facts, [Said(text=problem) for problem in bundle.problems]
    driver = _usable(DriverVersion.parse, facts.gpu.driver_version if facts.gpu else None, notes)
    if driver is None and facts.kubernetes and facts.kubernetes.gfd_driver_version:
        driver = _usable(DriverVersion.parse, facts.kubernetes.gfd_driver_version, notes)
        if driver is not None:
            notes.append(
                said(
                    N_("driver {driver} from the node's GPU Feature Discovery labels"),
                    driver=str(driver),
                )
            )
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
            notes.append(Said(text=str(exc)))
    gpu = None
    if facts.gpu and facts.gpu.gpus:
        gpu = facts.gpu.gpus[0].name
    elif facts.kubernetes and facts.kubernetes.gpu_product:
        gpu = facts.kubernetes.gpu_product
    launch = facts.vllm.launch if facts.vllm else None
    found = str(driver) if driver is not None else None
    return found, cuda, gpu, kb.recipe_for_model(launch.model if launch else None), notes


def _usable(
    parse: Callable[[str], _Version], value: str | None, notes: list[Said]
) -> _Version | None:
    """A version the bundle states, parsed; one that does not parse is a note, not the end."""
    if value is None:
        return None
    try:
        return parse(value)
    except VersionError as exc:
        notes.append(said(N_("the bundle's facts: {error}; not used"), error=str(exc)))
        return None


def diagnose(options: DiagnoseOptions, *, kb: KnowledgeBase | None = None) -> Diagnosis:
    """Read the logs of one failed start (paths, "-" for stdin, a collect bundle, or the newest
    bundle of the case) and say what went wrong; the diagnosis names its inputs (made_from)."""
    kb = kb or load_knowledge()
    bundle, notes = options.bundle, list[Said]()
    if not options.logs and bundle is None:
        bundle = _case_bundle(options.case)
        notes.append(
            said(
                N_("no log and no --bundle given: diagnosed the case's newest bundle, {bundle}"),
                bundle=bundle.name,
            )
        )
    chosen = kb.recipe(options.recipe) if options.recipe is not None else None
    given_cuda = (options.image_cuda, options.image_config, options.image)
    made_from: list[InputFile] = []
    if bundle is None:
        from vllm_triage.diagnose.host import host_view

        cuda = resolve_image_cuda(kb, *given_cuda, chosen)
        scans = _scan_given(options.logs, kb, notes, made_from, alone=True)
        stated = _given(options.driver, cuda, options.gpu, "flag")
        result = _diagnose(kb, scans, options.driver, cuda, options.gpu, chosen, given=stated)
        result = result.model_copy(update={"host": host_view(result.facts)})
        return _noted(result, notes).stamped(made_from)
    from vllm_triage.bundle.read import open_bundle
    from vllm_triage.diagnose.facts import fact_findings
    from vllm_triage.diagnose.host import host_view

    with open_bundle(bundle) as opened:
        found_driver, found_cuda, found_gpu, found_recipe, found_notes = _bundle_inputs(kb, opened)
        notes += found_notes
        made_from.append(_bundle_fingerprint(opened, options.case))
        chosen = chosen or found_recipe
        given = resolve_image_cuda(kb, *given_cuda)
        cuda = given or found_cuda or resolve_image_cuda(kb, recipe=chosen)
        scans = _scan_given(options.logs, kb, notes, made_from, alone=False)
        scans += _scan_bundle_logs(opened, kb, notes)
        stated = [
            *_given(options.driver, given, options.gpu, "flag"),
            *_given(
                None if options.driver else found_driver,
                None if given else cuda,
                None if options.gpu else found_gpu,
                "bundle",
            ),
        ]
        result = _diagnose(
            kb, scans, options.driver or found_driver, cuda, options.gpu or found_gpu, chosen,
            fact_findings(kb, opened.facts), stated,
        )  # fmt: skip
        host = host_view(result.facts, opened.facts, _bundle_name(opened, options.case))
        result = result.model_copy(update={"host": host})
    if not scans:
        notes.append(
            said(N_("no log could be read: the diagnosis rests on the bundle's facts alone"))
        )
    return (
        _noted(result, notes)
        .model_copy(update={"inputs": [display_name(bundle), *result.inputs]})
        .stamped(made_from)
    )


def _noted(result: Diagnosis, notes: Sequence[Said]) -> Diagnosis:
    """The diagnosis with these notes before its own, each note's wording kept beside it."""
    if not notes:
        return result
    own = result.notes_wording
    if len(own) != len(result.notes):
        own = [Said(text=note) for note in result.notes]
    wording = [*notes, *own]
    return result.model_copy(
        update={"notes": [note.say() for note in wording], "notes_wording": wording}
    )


def _case_bundle(case: Path | None) -> Path:
    """The newest bundle of the case, for a diagnose given neither logs nor --bundle."""
    from vllm_triage.case import Case

    if case is None:
        raise InputError("give at least one log file (or - for standard input), or --bundle")
    newest = Case(case).newest_bundle()
    if newest is None:
        shown = display_name(case)
        raise InputError(
            f"no log given and the case {shown} holds no bundle: run `vllm-triage collect "
            f"--case {shown}` first, or give log files (or -) or --bundle"
        )
    return newest


def _bundle_name(bundle: Bundle, case: Path | None) -> str:
    """The bundle's name, relative to the case when it is in the case."""
    from vllm_triage.case import Case

    source = bundle.source
    return Case(case).relative(source) if case is not None else display_name(source)


def _bundle_fingerprint(bundle: Bundle, case: Path | None) -> InputFile:
    """The bundle as an input: its archive, or for a folder its manifest (which holds the sha256
    of every file in it); named relative to the case when it is in the case."""
    from vllm_triage.bundle.layout import MANIFEST
    from vllm_triage.case import fingerprint

    source = bundle.source
    shown = _bundle_name(bundle, case)
    if source.is_dir():
        with bundle.open(PurePosixPath(MANIFEST)) as stream:
            reader = Fingerprint(stream)
            while reader.read(1024**2):
                pass
        return InputFile(name=f"{shown}/{MANIFEST}", sha256=reader.sha256, size=reader.size)
    return fingerprint(source, shown)


def _given(
    driver: str | None, cuda: ImageCuda | None, gpu: str | None, source: Literal["flag", "bundle"]
) -> list[Fact]:
    """The facts a flag or a bundle gives, to be cited beside the log's own (an image CUDA that
    a recipe gave is the recipe's)."""
    from vllm_triage.diagnose.logfacts import given_facts

    from_recipe = cuda is not None and cuda.how.startswith("recipe ")
    cuda_source: Literal["recipe"] | None = "recipe" if from_recipe else None
    return list(given_facts(driver, str(cuda.cuda) if cuda else None, gpu, source, cuda_source))


def _diagnose(
    kb: KnowledgeBase,
    scans: list[FileScan],
    driver: str | None,
    cuda: ImageCuda | None,
    gpu: str | None,
    recipe: Recipe | None,
    facts: Sequence[Finding] = (),
    given: Sequence[Fact] = (),
) -> Diagnosis:
    """Compat on the driver and CUDA given, or else on what the logs state (a pasted nvidia-smi,
    PyTorch's build CUDA, an image's CUDA_VERSION), then the analysis."""
    from vllm_triage.diagnose.analyzer import analyze
    from vllm_triage.diagnose.logfacts import FactSet, where, where_said

    log_facts = FactSet(f for s in scans for f in s.facts)
    notes: list[Said] = []
    if driver is None and (found := log_facts.driver()) is not None:
        driver = str(found[0])
        notes.append(
            said(N_("driver {driver} from the log ({at})"), driver=driver, at=where_said(found[1]))
        )
    if cuda is None and (need := log_facts.need(kb)) is not None:
        cuda = ImageCuda(need[0], None, f"the log ({where(need[1])})")
        notes.append(
            said(N_("CUDA {cuda} from the log ({at})"), cuda=str(need[0]), at=where_said(need[1]))
        )
    if gpu is None and (named := log_facts.first("gpu")) is not None:
        gpu = named.value
    driver_version = DriverVersion.parse(driver) if driver is not None else None
    verdict = (
        check_compat(kb, driver_version, cuda.cuda, gpu, cuda.require)
        if driver_version is not None and cuda is not None
        else None
    )
    result = analyze(kb, scans, verdict, recipe, facts, given)
    if verdict is None or not notes:
        return result
    return _noted(result, [said(N_("compat ran on facts read from the log: {facts}"), facts=notes)])
