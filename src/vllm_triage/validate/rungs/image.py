"""Rung 6a, image: a request with a PNG made on the fly. A text-only model that answers "not a
multimodal model" is `not_supported`, not a failure."""

from __future__ import annotations

import base64
import struct
import zlib

from vllm_triage.validate import reasons
from vllm_triage.validate.context import LadderContext
from vllm_triage.validate.models import RungResult

_NOT_MULTIMODAL = (
    "not a multimodal model",
    "does not support image",
    "image input is not supported",
)


def png(width: int = 16, height: int = 16) -> bytes:
    """A small RGB PNG (a red-green gradient), built without an imaging library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    rows = b"".join(
        b"\x00" + b"".join(bytes((x * 255 // width, y * 255 // height, 96)) for x in range(width))
        for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def run(ctx: LadderContext) -> RungResult:
    deadline = ctx.deadline("image")
    data_url = "data:image/png;base64," + base64.b64encode(png()).decode()
    body = {
        "model": ctx.model,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What colours does this image show?"},
                    {"type": "image_url", "image_url": {"url": data_url}},
                ],
            }
        ],
        "max_tokens": ctx.options.output_tokens,
        "temperature": 0,
    }
    record, answer = ctx.client.chat(body, "image", "image", deadline)
    ctx.recorder.add(record)
    figures = {"e2e_s": record.e2e_s, "status_code": record.status_code}
    message = (answer.error_body or "").lower()
    if record.status_code == 400 and any(marker in message for marker in _NOT_MULTIMODAL):
        return ctx.result(
            "image", "not_supported", reasons.TEXT_ONLY.format(error=answer.error_body), **figures
        )
    if record.error:
        return ctx.result("image", "failed", record.error, **figures)
    if not (answer.content + answer.reasoning).strip():
        return ctx.result("image", "failed", reasons.IMAGE_EMPTY, **figures)
    return ctx.result("image", "passed", None, **figures)
