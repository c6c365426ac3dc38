"""The library behind the `compat` and `diagnose` commands; usable without the CLI."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from vllm_triage.diagnose.analyzer import analyze
from vllm_triage.diagnose.compat import check_compat
from vllm_triage.diagnose.image import (
    ImageCuda,
    image_cuda_from_config,
    image_cuda_from_reference,
)
from vllm_triage.diagnose.scan import FileScan, scan_log
from vllm_triage.errors import InputError
from vllm_triage.knowledge import KnowledgeBase, load_knowledge
from vllm_triage.knowledge.schema import Recipe
from vllm_triage.models import CompatVerdict, Diagnosis
from vllm_triage.versions import CudaVersion, DriverVersion

STDIN = "-"


def resolve_recipe(kb: KnowledgeBase, name: str | None) -> Recipe | None:
    if name is None:
        return None
    recipe = kb.recipes.get(name)
    if recipe is None:
        known = ", ".join(sorted(kb.recipes)) or "none"
        raise InputError(f"unknown recipe {name!r} (known: {known})")
    return recipe


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
    if path == STDIN:
        return scan_log(sys.stdin.buffer, "<stdin>", kb)
    try:
        with Path(path).open("rb") as stream:
            return scan_log(stream, path, kb)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a log file") from None


def diagnose(
    logs: Sequence[str],
    driver: str | None = None,
    image_cuda: str | None = None,
    gpu: str | None = None,
    recipe: str | None = None,
    image_config: Path | None = None,
    image: str | None = None,
    kb: KnowledgeBase | None = None,
) -> Diagnosis:
    """Read the logs of one failed start (paths, or "-" for stdin) and say what went wrong."""
    kb = kb or load_knowledge()
    if not logs:
        raise InputError("give at least one log file (or - for standard input)")
    chosen = resolve_recipe(kb, recipe)
    driver_version = DriverVersion.parse(driver) if driver is not None else None
    cuda = resolve_image_cuda(kb, image_cuda, image_config, image, chosen)
    scans = [_scan_path(path, kb) for path in logs]
    verdict = (
        check_compat(kb, driver_version, cuda.cuda, gpu, cuda.require)
        if driver_version is not None and cuda is not None
        else None
    )
    return analyze(kb, scans, verdict, chosen)
