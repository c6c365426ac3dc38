"""The shapes of what an OpenAI-compatible server answers, as `validate` reads them: strict types
(a string is not a number, a number not a string), bounded values (a tool-call index beyond a
few dozen is a format error, not a list to grow), unknown fields ignored.

A body that does not fit its shape is a format error with a one-line reason (`WireError`), so
the rung fails honestly instead of the tool stopping on a TypeError.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vllm_triage.safejson import JsonError, parse_json

# More parallel tool calls than any model makes in one answer; a larger index is malformed.
MAX_TOOL_CALLS = 64
# The longest context any server offers today is ~10M tokens; beyond this a length is nonsense
# (and the target-context rung would build a prompt of that size).
MAX_CONTEXT_TOKENS = 1 << 24
# Token counts of one request (usage): generous, but far from what an int of 5,000 digits says.
_MAX_COUNT = 1 << 40
# The ladder asks for one choice (n=1); a few more are tolerated, thousands are malformed.
_MAX_CHOICES = 16

Count = Annotated[int, Field(ge=0, le=_MAX_COUNT)]


class _Wire(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class WireError(ValueError):
    """A body that is not JSON or not of the expected shape; the message is one line."""


class Function(_Wire):
    name: str | None = None
    arguments: str | None = None


class ToolCall(_Wire):
    index: Annotated[int, Field(ge=0, lt=MAX_TOOL_CALLS)] | None = None
    id: str | None = None
    function: Function | None = None


class Message(_Wire):
    """A non-streamed choice's message, or a streamed choice's delta."""

    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: Annotated[list[ToolCall], Field(max_length=MAX_TOOL_CALLS)] | None = None

    @property
    def thinking(self) -> str:
        return self.reasoning_content or self.reasoning or ""


class PromptTokensDetails(_Wire):
    cached_tokens: Count | None = None


class Usage(_Wire):
    prompt_tokens: Count | None = None
    completion_tokens: Count | None = None
    prompt_tokens_details: PromptTokensDetails | None = None


class Choice(_Wire):
    message: Message | None = None
    finish_reason: str | None = None


class ChatCompletion(_Wire):
    choices: Annotated[list[Choice], Field(min_length=1, max_length=_MAX_CHOICES)]
    usage: Usage | None = None


class StreamChoice(_Wire):
    delta: Message | None = None
    finish_reason: str | None = None


class ChatCompletionChunk(_Wire):
    """One SSE event: choices (empty in the final usage event), usage, or an error."""

    choices: Annotated[list[StreamChoice], Field(max_length=_MAX_CHOICES)] | None = None
    usage: Usage | None = None
    error: Any = None


class ServedModel(_Wire):
    id: Annotated[str, Field(min_length=1, max_length=4096)]  # a local path at most
    max_model_len: Annotated[int, Field(ge=1, le=MAX_CONTEXT_TOKENS)] | None = None


class ModelList(_Wire):
    data: Annotated[list[ServedModel], Field(max_length=10_000)]


class Version(_Wire):
    version: str | None = None


class TokenCount(_Wire):
    count: Count


Shape = TypeVar("Shape", bound=_Wire)


def parse(data: bytes | str, shape: type[Shape], what: str) -> Shape:
    """The body as `shape`; WireError naming `what` and the first misfit field otherwise."""
    try:
        document = parse_json(data, what)
    except JsonError as exc:
        raise WireError(str(exc)) from None
    return fit(document, shape, what)


def fit(document: Any, shape: type[Shape], what: str) -> Shape:
    """An already parsed document as `shape` (WireError otherwise)."""
    try:
        return shape.model_validate(document)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in problem["loc"]
        ).lstrip(".")
        expected = _EXPECTED.get(problem["type"])
        message = f"should be {expected}" if expected else problem["msg"]
        message = message[:1].lower() + message[1:]
        got = _sketch(problem.get("input"))
        raise WireError(f"{what}: {where + ': ' if where else ''}{message} (got {got})") from None


# pydantic's words for a wrong type name Python classes; these are the JSON ones.
_EXPECTED = {
    "model_type": "a JSON object",
    "model_attributes_type": "a JSON object",
    "dict_type": "a JSON object",
    "list_type": "a JSON array",
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
}


def _sketch(value: Any) -> str:
    """A short picture of a misfit value: a container by its type, a scalar by its start."""
    if isinstance(value, dict | list):
        return f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    text = repr(value[:40] if isinstance(value, str) else value)
    return text if len(text) <= 40 else text[:37] + "..."
