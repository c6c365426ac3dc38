"""Inside the image, only with --probe-image: a throwaway container without GPUs and without a
network prints torch.version.cuda, the torch and vLLM versions and the vLLM commit. It starts a
new container on a possibly shared node, so it is never done unasked.
"""

from __future__ import annotations

import json

from vllm_triage.bundle.models import ImageProbeFacts
from vllm_triage.collect import reasons
from vllm_triage.collect.captured import CapturedFile
from vllm_triage.collect.probes.base import (
    NotAvailable,
    Probe,
    ProbeContext,
    ProbeFailed,
    ProbeOutput,
)
from vllm_triage.collect.probes.container import container_for


def parse_image_probe(text: str) -> ImageProbeFacts:
    """The facts of the probe script's one JSON line (the last line that parses)."""
    for line in reversed(text.splitlines()):
        try:
            document = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(document, dict):
            return ImageProbeFacts(
                torch_version=document.get("torch_version"),
                torch_cuda=document.get("torch_cuda"),
                vllm_version=document.get("vllm"),
                vllm_commit=document.get("vllm_commit"),
                nccl_package=document.get("nvidia-nccl-cu13") or document.get("nvidia-nccl-cu12"),
            )
    raise ProbeFailed(reasons.IMAGE_NO_JSON)


def collect(ctx: ProbeContext) -> ProbeOutput:
    if not ctx.options.probe_image:
        raise NotAvailable(reasons.IMAGE_NOT_ASKED)
    image = ctx.options.image
    notes: list[str] = []
    if image is None:
        container = container_for(ctx, notes)
        image = container.image if container else None
    if not image:
        raise NotAvailable(
            reasons.IMAGE_NEEDS_NOTES.format(notes="; ".join(notes))
            if notes
            else reasons.IMAGE_NEEDS
        )
    result = ctx.run(f"{ctx.engine()}_image_probe", image=image)
    if result.missing:
        raise NotAvailable(result.failure())
    if not result.ok:
        raise ProbeFailed.of(result)
    text = result.text()
    return ProbeOutput(
        files=[CapturedFile("image/probe.json", text=text)], facts=parse_image_probe(text)
    )


PROBE = Probe("image", collect, "torch/vLLM versions from inside the image (--probe-image only)")
