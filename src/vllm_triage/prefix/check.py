"""prefix-check: why a sample of real chat requests would not share vLLM's prefix cache.

vLLM reuses the KV cache of a prompt's prefix for the next request whose rendered prompt starts
with the same tokens. The rendered prompt is the chat template applied to the tools and the
messages in order, so anything that varies early (a timestamp in the system prompt, a request id
in the first message, the same tools in another order) turns everything after it into a miss.

Each request is rendered the way a chat template orders it (system prompt, tool definitions as
JSON in the given order, then the messages, images as placeholders in their place), or with the
model's own template and tokenizer when one is given. Each request is compared with the one before
it and with the first one; the first point of divergence of each pair is classified by what lies
there (the volatile-value shapes and the fix of each class are knowledge data, prefix_shapes.yaml).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib
import json
import os
import re
import string
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import IO, Any, Literal

from vllm_triage.errors import InputError
from vllm_triage.i18n import N_, Catalog
from vllm_triage.inputs import Fingerprint, open_input, read_errors
from vllm_triage.knowledge import KnowledgeBase, load_knowledge
from vllm_triage.knowledge.schema import PrefixShape, PrefixShapes, ShapeKind
from vllm_triage.launch import LaunchArgs, parse_launch_command
from vllm_triage.models import InputFile
from vllm_triage.prefix.models import (
    EXPECTED_CLASSES,
    ClassCount,
    Divergence,
    DivergenceClass,
    LaunchCheck,
    PrefixReport,
    RequestShare,
)
from vllm_triage.safejson import JsonError, parse_json

MAX_REQUESTS = 200
# Reading caps. A request body with long prompts and inline images fits in a line; a runaway
# line does not. Parsed JSON takes from about its size (long strings) to ~50 times it (empty
# arrays) in memory, so lines and the sample are also capped by an estimate of that (_weight).
# The comparison holds a sample's text several times over (bodies, renderings, masked copies):
# three requests of 15 MiB of prose peak at ~250 MB.
MAX_LINE_BYTES = 16 * 1024**2
MAX_SAMPLE_WEIGHT = 48 * 1024**2
MAX_LINE_WEIGHT = MAX_SAMPLE_WEIGHT // 2  # two of the heaviest lines still make a sample
MAX_READ_BYTES = 256 * 1024**2  # skipped lines and blank lines included
MAX_READ_LINES = 1_000_000
_VALUE_WEIGHT, _CONTAINER_WEIGHT = 64, 256
_SAMPLE_CAP = f"{MAX_SAMPLE_WEIGHT >> 20} MiB of parsed requests"
_SKIP_CHUNK = 1024**2
_SKIPPED_SHOWN = 5
PREFIX_CACHING_FLAG = "--enable-prefix-caching"
PREFIX_CACHING_OFF_FLAG = "--no-enable-prefix-caching"

# ---------------------------------------------------------------------------------------------
# Volatile-value shapes (knowledge data: prefix_shapes.yaml, with the fix of each class): what,
# found at a divergence point, explains it. First match wins.

SHAPE_WINDOW = 80  # characters searched on each side of a divergence for a shape
CONTINUATION = 32  # identical characters after the volatile value that make it a cache problem
MASKS: dict[ShapeKind, str] = {"timestamp": "<timestamp>", "random_id": "<id>"}
_FIXABLE: frozenset[DivergenceClass] = frozenset({"timestamp", "random_id", "tools_reordered"})

# ---------------------------------------------------------------------------------------------
# The report's sentences, as message templates. The report keeps them in English, filled in (the
# launch check's summary and fix, a class's first pair); a rendering in Korean or Japanese finds
# each one's template again and says it with the same values (launch_said, Catalog.composed for
# the first pair), the recipe's reason a launch sentence quotes (a knowledge text) through the
# catalog too. The unit is a word (UNITS, Catalog.word).

OFF_AS_PROFILE = N_(
    "The launch command turns prefix caching off, as the {recipe} recipe's {profile} profile "
    "does: {why}"
)
OFF = N_(
    "The launch command turns prefix caching off (--no-enable-prefix-caching): no request reuses "
    "another's prefix, whatever the requests look like (intended only on the decode side of a "
    "prefill/decode split)."
)
OFF_NOT_DECODE = N_(
    "The launch command turns prefix caching off (--no-enable-prefix-caching): no request reuses "
    "another's prefix, whatever the requests look like (intended only on the decode side of a "
    "prefill/decode split). If this is that server, check it under the {recipe} recipe's "
    "{profiles} profile, which turns it off too."
)
FIX_REPLACE_OFF = N_("Replace --no-enable-prefix-caching with {flags}.")
ON = N_("--enable-prefix-caching is given.")
ON_ALSO = N_("--enable-prefix-caching is given. The {recipe} recipe also advises {flags}: {why}")
ON_PROFILE_OFF = N_(
    "--enable-prefix-caching is given. The {recipe} recipe's {profile} profile turns it off "
    "(--no-enable-prefix-caching): no problem for prefix reuse, but the launch differs from the "
    "recipe."
)
ON_ALSO_PROFILE_OFF = N_(
    "--enable-prefix-caching is given. The {recipe} recipe also advises {flags}: {why} The "
    "{recipe} recipe's {profile} profile turns it off (--no-enable-prefix-caching): no problem "
    "for prefix reuse, but the launch differs from the recipe."
)
FIX_ADD = N_("Add {flags}.")
REQUIRED = N_(
    "{recipe_name} needs --enable-prefix-caching given explicitly in its {profile} profile "
    "({profile_name}), and the launch command does not give it: {why}"
)
FIX_ADD_TO_LAUNCH = N_("Add {flags} to the launch command.")
NOT_GIVEN_PROFILE_OFF = N_(
    "--enable-prefix-caching is not given, and the {recipe} recipe's {profile} profile turns "
    "prefix caching off explicitly: {why} The default of the vLLM version applies meanwhile (off "
    "for hybrid models)."
)
FIX_GIVE_OFF = N_("Give --no-enable-prefix-caching as the recipe does.")
NOT_GIVEN = N_(
    "--enable-prefix-caching is not given, so the vLLM version's default applies: on for "
    "standard-attention models in the V1 engine, off for hybrid models (Mamba-, KDA- or "
    "GDN-style layers). The engine's start-up line `Initializing a V1 LLM engine ... "
    "enable_prefix_caching=...` shows which took effect."
)
FIX_GIVE_ON = N_("Give --enable-prefix-caching explicitly to stop depending on the default.")
LAUNCH_TEXTS: tuple[str, ...] = (
    OFF_AS_PROFILE,
    OFF,
    OFF_NOT_DECODE,
    FIX_REPLACE_OFF,
    ON,
    ON_ALSO,
    ON_PROFILE_OFF,
    ON_ALSO_PROFILE_OFF,
    FIX_ADD,
    REQUIRED,
    FIX_ADD_TO_LAUNCH,
    NOT_GIVEN_PROFILE_OFF,
    FIX_GIVE_OFF,
    NOT_GIVEN,
    FIX_GIVE_ON,
)
"""Every sentence of a LaunchCheck's summary and fix."""
# a launch that turns prefix caching on: (the recipe advises more flags, its profile turns it off)
_ENABLED = {
    (False, False): ON,
    (True, False): ON_ALSO,
    (False, True): ON_PROFILE_OFF,
    (True, True): ON_ALSO_PROFILE_OFF,
}
FIRST_PAIR = N_("lines {a} and {b}")
UNITS: dict[str, str] = {"tokens": N_("tokens"), "characters": N_("characters")}
"""The report's unit (PrefixReport.unit) in words."""


def launch_said(tr: Catalog, text: str) -> str:
    """A LaunchCheck's summary or fix in the catalog's language: its template found again and
    said with the same values, the recipe's reason it quotes ({why}, a knowledge text) through the
    catalog too. Matched whole: the reason may hold "; ", where Catalog.composed would cut the
    sentence in two. A text made from none of the templates is said as Catalog.composed says it."""
    if tr.language == "en" or not text:
        return text
    for template in _LAUNCH_BY_FIXED_WORDS:
        found = _launch_pattern(template).fullmatch(text)
        if found is not None:
            values = found.groupdict()
            if "why" in values:
                values["why"] = tr(values["why"])
            return tr(template, **values)
    return tr.composed(text, LAUNCH_TEXTS)


def _fixed_words(template: str) -> int:
    return sum(len(literal) for literal, _, _, _ in string.Formatter().parse(template))


# the templates with more fixed words first, so that "Add {flags}." is tried after the others
_LAUNCH_BY_FIXED_WORDS = sorted(LAUNCH_TEXTS, key=_fixed_words, reverse=True)


@cache
def _launch_pattern(template: str) -> re.Pattern[str]:
    """A template's fixed words as they are, each {field} the shortest text that fits, a field
    named twice the same text both times."""
    pattern, named = "", set()
    for literal, name, _, _ in string.Formatter().parse(template):
        pattern += re.escape(literal)
        if name is not None:
            pattern += f"(?P={name})" if name in named else f"(?P<{name}>.+?)"
            named.add(name)
    return re.compile(pattern, re.DOTALL)


# ---------------------------------------------------------------------------------------------
# Input


@dataclass(frozen=True)
class ChatRequest:
    """One OpenAI chat request body and the input line it came from."""

    line: int
    body: Mapping[str, Any]


@dataclass(frozen=True)
class RequestSample:
    requests: list[ChatRequest]
    total: int
    source: str
    skipped: list[str] = field(default_factory=list)  # lines passed over, and why
    unread: str | None = None  # why reading stopped before the end of the input
    made_from: list[InputFile] = field(default_factory=list)  # the file, hashed as it was read


def _chat_body(value: Any, where: str) -> Mapping[str, Any]:
    """The request body, checked for what the comparison reads; an OpenAI Batch line's body too."""
    if not isinstance(value, dict):
        raise InputError(f"{where}: not a JSON object (expected an OpenAI chat request body)")
    if "messages" not in value and isinstance(value.get("body"), dict):
        value = value["body"]
    messages = value.get("messages")
    if messages is None:
        raise InputError(f"{where}: no `messages` (expected an OpenAI chat request body per line)")
    if not isinstance(messages, list) or not messages:
        raise InputError(f"{where}: `messages` must be a non-empty list")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise InputError(f"{where}: messages[{index}] is not an object with a `role`")
        content = message.get("content")
        if not (content is None or isinstance(content, str | list)):
            raise InputError(f"{where}: messages[{index}].content must be a string or a list")
        if isinstance(content, list) and not all(isinstance(p, dict) for p in content):
            raise InputError(f"{where}: messages[{index}].content has a part that is not an object")
        calls = message.get("tool_calls")
        if calls is not None and not _list_of_objects(calls):
            raise InputError(f"{where}: messages[{index}].tool_calls must be a list of objects")
    if value.get("tools") is not None and not _list_of_objects(value["tools"]):
        raise InputError(f"{where}: `tools` must be a list of objects")
    kwargs = value.get("chat_template_kwargs")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise InputError(f"{where}: `chat_template_kwargs` must be an object")
    body: Mapping[str, Any] = value
    return body


def _list_of_objects(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


class _Lines:
    """The lines of a stream, each at most MAX_LINE_BYTES, up to MAX_READ_BYTES or
    MAX_READ_LINES in all.

    A longer line is yielded as None and its rest skipped in chunks (never held) only if the
    reader asks for the next line; reading stops at the caps, so neither a runaway line nor an
    endless stream of blank lines is read forever."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.read = 0
        self.number = 0

    @property
    def exhausted(self) -> bool:
        return self.read >= MAX_READ_BYTES or self.number >= MAX_READ_LINES

    def __iter__(self) -> Iterator[tuple[int, bytes | None]]:
        while not self.exhausted and (raw := self.stream.readline(MAX_LINE_BYTES + 1)):
            self.number += 1
            self.read += len(raw)
            if len(raw) <= MAX_LINE_BYTES or raw.endswith(b"\n"):
                yield self.number, raw
                continue
            yield self.number, None
            while self.read < MAX_READ_BYTES and raw and not raw.endswith(b"\n"):
                raw = self.stream.readline(_SKIP_CHUNK)
                self.read += len(raw)


def _weight(raw: bytes) -> int:
    """An upper estimate of a JSON line's memory once parsed: its bytes, a Python object for each
    value (at most one per comma, plus one) and more for each object or array."""
    containers = raw.count(b"{") + raw.count(b"[")
    return len(raw) + _VALUE_WEIGHT * (raw.count(b",") + 1) + _CONTAINER_WEIGHT * containers


def _read_lines(stream: IO[bytes], source: str, limit: int) -> RequestSample:
    """Parse up to `limit` requests, then stop reading: the caps bound time and memory whatever
    the input (a line too long or too dense to parse within the caps is skipped, and named)."""
    requests: list[ChatRequest] = []
    skipped: list[str] = []
    total = load = 0
    cap: str | None = None
    lines = _Lines(stream)
    for number, raw in lines:
        if raw is not None and not raw.strip():
            continue
        weight = _weight(raw) if raw is not None else 0
        if len(requests) >= limit or (requests and load + weight > MAX_SAMPLE_WEIGHT):
            cap = f"{limit} requests" if len(requests) >= limit else _SAMPLE_CAP
            break
        total += 1
        if raw is None:
            skipped.append(f"line {number}: longer than {MAX_LINE_BYTES >> 20} MiB; skipped unread")
            continue
        if weight > MAX_LINE_WEIGHT:
            skipped.append(
                f"line {number}: too dense to compare within the memory cap (about "
                f"{weight >> 20} MiB once parsed); skipped unparsed"
            )
            continue
        where = f"{source}:{number}"
        try:
            text = raw.decode("utf-8").lstrip("\ufeff")  # a byte-order mark on line 1
        except UnicodeDecodeError:
            raise InputError(f"{where}: not UTF-8 text") from None
        requests.append(ChatRequest(number, _chat_body(parse_json(text, where), where)))
        load += weight
    else:
        if lines.exhausted:
            cap = f"{MAX_READ_BYTES >> 20} MiB or {MAX_READ_LINES:,} lines read"
    unread = f"reading stopped at the cap ({cap}); the rest was not read" if cap else None
    if not requests:
        why = f"; {skipped[0]}" if skipped else f"; {unread}" if unread else ""
        raise InputError(
            f"{source}: no requests (expected one OpenAI chat request body per line){why}"
        )
    return RequestSample(requests, total, source, skipped, unread)


def load_requests(path: str | Path, limit: int = MAX_REQUESTS) -> RequestSample:
    """Read a JSONL file of chat request bodies ("-" for stdin); the first `limit` are parsed."""
    with open_input(path, "a JSONL file of requests") as (stream, name), read_errors(name):
        reader = Fingerprint(stream)
        sample = _read_lines(reader, name, limit)
    made_from = InputFile(name=name, sha256=reader.sha256, size=reader.size)
    return replace(sample, made_from=[made_from])


def _sample(requests: str | Path | Sequence[Mapping[str, Any]], limit: int) -> RequestSample:
    if isinstance(requests, str | Path):
        return load_requests(requests, limit)
    bodies = list(requests)
    if not bodies:
        raise InputError("no requests given")
    chosen = [
        ChatRequest(i + 1, _chat_body(body, f"request {i + 1}"))
        for i, body in enumerate(bodies[:limit])
    ]
    return RequestSample(chosen, len(bodies), "<requests>")


# ---------------------------------------------------------------------------------------------
# Rendering: the canonical text (characters) and, with a tokenizer, the template's token ids

_SYSTEM_ROLES = ("system", "developer")
SpanKind = Literal["system", "tools", "message", "media"]


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    kind: SpanKind
    index: int  # message index (system, message, media) or tool index (tools; -1: the block)
    label: str


@dataclass(frozen=True)
class Rendered:
    text: str
    spans: list[Span]  # top-level spans in order: system messages, the tools block, messages
    tool_spans: list[Span]
    media: list[Span]
    last_message: int
    first_conversation_message: int


def _digest(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:8]


def _media_id(part: Mapping[str, Any]) -> tuple[str, str]:
    """("image", digest) for an image part; the digest stands for the image's bytes."""
    kind = str(part.get("type", "part"))
    payload = part.get(kind, part)
    if isinstance(payload, Mapping) and "url" in payload:
        payload = payload["url"]
    return kind.removesuffix("_url"), _digest(payload)


def _is_text(part: Mapping[str, Any]) -> bool:
    return bool(part.get("type", "text") == "text")


def _tool_name(tool: Mapping[str, Any]) -> str:
    function = tool.get("function")
    if isinstance(function, Mapping) and "name" in function:
        return str(function["name"])
    return str(tool.get("name", "?"))


def render_canonical(body: Mapping[str, Any]) -> Rendered:
    """The request as a chat template lays it out: system, tools (given order), messages."""
    chunks: list[str] = []
    spans: list[Span] = []
    tool_spans: list[Span] = []
    media: list[Span] = []
    position = 0

    def add(text: str) -> None:
        nonlocal position
        chunks.append(text)
        position += len(text)

    messages: list[Mapping[str, Any]] = body["messages"]
    lead = 0
    while lead < len(messages) and messages[lead].get("role") in _SYSTEM_ROLES:
        lead += 1

    def message(index: int, kind: SpanKind) -> None:
        item = messages[index]
        role = str(item.get("role"))
        start = position
        header = f"<|{role}|>"
        for key in ("name", "tool_call_id"):
            if item.get(key) is not None:
                header += f" {key}={item[key]}"
        add(header + "\n")
        content = item.get("content")
        if isinstance(content, str):
            add(content)
        elif isinstance(content, list):
            for part in content:
                if _is_text(part):
                    add(str(part.get("text", "")))
                else:
                    kind_name, digest = _media_id(part)
                    media_start = position
                    add(f"<{kind_name}:{digest}>")
                    media.append(
                        Span(media_start, position, "media", index, f"{kind_name}:{digest}")
                    )
        for call in item.get("tool_calls") or ():
            add("\n<|tool_call|>" + json.dumps(call, ensure_ascii=False))
        add("\n<|end|>\n")
        spans.append(Span(start, position, kind, index, role))

    for index in range(lead):
        message(index, "system")
    tools: list[Mapping[str, Any]] = body.get("tools") or []
    if tools:
        block_start = position
        add("<|tools|>\n")
        for number, tool in enumerate(tools):
            start = position
            add(json.dumps(tool, ensure_ascii=False) + "\n")
            tool_spans.append(Span(start, position, "tools", number, _tool_name(tool)))
        add("<|end|>\n")
        spans.append(Span(block_start, position, "tools", -1, "tools"))
    for index in range(lead, len(messages)):
        message(index, "message")
    return Rendered("".join(chunks), spans, tool_spans, media, len(messages) - 1, lead)


def _hf_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI message the way vLLM hands it to a Hugging Face chat template."""
    result = dict(message)
    content = message.get("content")
    if isinstance(content, list):
        if all(_is_text(p) for p in content):
            result["content"] = "".join(str(p.get("text", "")) for p in content)
        else:
            result["content"] = [
                {"type": "text", "text": str(p.get("text", ""))}
                if _is_text(p)
                else {"type": _media_id(p)[0]}
                for p in content
            ]
    calls = []
    for call in message.get("tool_calls") or ():
        call = copy.deepcopy(call)
        function = call.get("function")
        if isinstance(function, dict) and isinstance(function.get("arguments"), str):
            with contextlib.suppress(JsonError):
                function["arguments"] = parse_json(function["arguments"], "tool-call arguments")
        calls.append(call)
    if calls:
        result["tool_calls"] = calls
    return result


def _one_line(exc: Exception, limit: int = 240) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


_RESERVED_TEMPLATE_ARGS = frozenset(
    {"conversation", "tools", "tokenize", "add_generation_prompt", "return_dict", "documents"}
)


class TokenRenderer:
    """The model's own chat template and tokenizer, from a local folder (needs transformers)."""

    def __init__(self, path: str | Path, trust_remote_code: bool = False) -> None:
        folder = Path(path)
        if not folder.is_dir():
            raise InputError(f"--tokenizer {path}: not a folder (give a local tokenizer folder)")
        # transformers advises on stderr at import (no PyTorch, ...): errors stay one line
        os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
        try:
            transformers = importlib.import_module("transformers")
        except ImportError:
            raise InputError(
                "--tokenizer needs the transformers package: pip install transformers"
            ) from None
        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(
                str(folder), local_files_only=True, trust_remote_code=trust_remote_code
            )
        except Exception as exc:  # transformers raises many kinds; the message says which
            message = _one_line(exc)
            if not trust_remote_code and "remote" in message.lower():
                message += " (the folder ships its own code: --trust-remote-code)"
            raise InputError(f"--tokenizer {path}: cannot load it: {message}") from None

    def ids(self, request: ChatRequest) -> list[int]:
        return self._apply(request, [_hf_message(m) for m in request.body["messages"]])

    def media_start(self, request: ChatRequest, ordinal: int, ids: Sequence[int]) -> int:
        """The first token the request's `ordinal`-th image (or other media) part affects.

        The template renders an image as placeholder tokens that are the same for every image,
        but vLLM keys cached blocks by the image's content too: a different image there is a miss
        from this token on, although the token ids agree. Found by rendering the request again
        with that part replaced by text and seeing where the tokens first change."""
        messages = [_hf_message(m) for m in request.body["messages"]]
        seen = 0
        for message in messages:
            content = message.get("content")
            if not isinstance(content, list):
                continue
            for index, part in enumerate(content):
                if part.get("type") != "text":
                    if seen == ordinal:
                        content[index] = {"type": "text", "text": "(media)"}
                        return common_prefix(ids, self._apply(request, messages))
                    seen += 1
        return len(ids)

    def _apply(self, request: ChatRequest, messages: list[dict[str, Any]]) -> list[int]:
        body = request.body
        kwargs = {
            key: value
            for key, value in (body.get("chat_template_kwargs") or {}).items()
            if key not in _RESERVED_TEMPLATE_ARGS
        }
        try:
            result = self.tokenizer.apply_chat_template(
                messages,
                tools=body.get("tools") or None,
                tokenize=True,
                add_generation_prompt=True,
                **kwargs,
            )
        except Exception as exc:  # a template error is the request's or the template's problem
            message = _one_line(exc)
            raise InputError(f"line {request.line}: the chat template failed: {message}") from None
        if isinstance(result, Mapping):
            result = result["input_ids"]
        if len(result) and isinstance(result[0], list | tuple):
            result = result[0]
        return [int(token) for token in result]


# ---------------------------------------------------------------------------------------------
# Comparison

_CHUNK = 4096


def common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Length of the common prefix of two strings or token lists (slices compare in C)."""
    limit = min(len(a), len(b))
    low = 0
    while low < limit:
        high = min(low + _CHUNK, limit)
        if a[low:high] == b[low:high]:
            low = high
            continue
        while high - low > 1:  # a[low:high] differs somewhere; halve until one element is left
            middle = (low + high) // 2
            if a[low:middle] == b[low:middle]:
                low = middle
            else:
                high = middle
        return low if a[low] != b[low] else low + 1
    return limit


def _pairs(count: int) -> list[tuple[int, int]]:
    """Each request against the one before it and against the first one."""
    pairs = {(i - 1, i) for i in range(1, count)} | {(0, i) for i in range(2, count)}
    return sorted(pairs, key=lambda pair: (pair[1], pair[0]))


@dataclass(frozen=True)
class _Shares:
    common: dict[tuple[int, int], int]
    best: list[int]
    partner: list[int | None]
    lengths: list[int]

    @property
    def share(self) -> float:
        total = sum(self.lengths)
        return sum(self.best) / total if total else 0.0


def _shares(common: dict[tuple[int, int], int], lengths: list[int]) -> _Shares:
    best = [0] * len(lengths)
    partner: list[int | None] = [None] * len(lengths)
    for (a, b), shared in common.items():
        for mine, other in ((a, b), (b, a)):
            if partner[mine] is None or shared > best[mine]:
                best[mine], partner[mine] = shared, other
    return _Shares(common, best, partner, lengths)


def _measure(
    chosen: Sequence[ChatRequest],
    rendered: Sequence[Rendered],
    pairs: Sequence[tuple[int, int]],
    tokens: TokenRenderer | None,
) -> _Shares:
    """Shared prefix of each pair and each request's best, in characters or in tokens."""
    if tokens is None:
        texts = [r.text for r in rendered]
        common = {(i, j): common_prefix(texts[i], texts[j]) for i, j in pairs}
        return _shares(common, [len(t) for t in texts])
    ids = [tokens.ids(r) for r in chosen]
    common = {}
    for i, j in pairs:
        shared = common_prefix(ids[i], ids[j])
        offset = common_prefix(rendered[i].text, rendered[j].text)
        for side in (i, j):
            media = _span_at(rendered[side].media, offset)
            if media is not None:  # the same placeholder tokens, a different image
                ordinal = rendered[side].media.index(media)
                shared = min(shared, tokens.media_start(chosen[side], ordinal, ids[side]))
                break
        common[(i, j)] = shared
    return _shares(common, [len(t) for t in ids])


# ---------------------------------------------------------------------------------------------
# Classification of one divergence


@dataclass(frozen=True)
class _Verdict:
    kind: DivergenceClass
    where: str
    detail: str
    shape: str | None = None


def _span_at(spans: Sequence[Span], offset: int) -> Span | None:
    index = bisect_right([s.start for s in spans], offset) - 1
    if index >= 0 and spans[index].start <= offset < spans[index].end:
        return spans[index]
    return None


def _where(rendered: Rendered, span: Span | None, offset: int) -> str:
    if span is None:
        return "end of prompt"
    if span.kind == "system":
        return f"system prompt (messages[{span.index}])"
    if span.kind == "tools":
        tool = _span_at(rendered.tool_spans, offset)
        return f"tools[{tool.index}] ({tool.label})" if tool else "tools"
    media = _span_at(rendered.media, offset)
    if media is not None:
        return f"{media.label.split(':')[0]} in messages[{span.index}] ({span.label})"
    return f"messages[{span.index}] ({span.label})"


def _shape_at(text: str, offset: int, known: PrefixShapes) -> tuple[PrefixShape, int] | None:
    """The first shape whose match covers the offset, and where that match ends."""
    start = max(0, offset - SHAPE_WINDOW)
    window = text[start : offset + SHAPE_WINDOW]
    for shape in known.shapes:
        for match in shape.regex.finditer(window):
            if match.start() + start <= offset < match.end() + start:
                return shape, match.end() + start
            if match.start() + start > offset:
                break
    return None


def _volatile(a: str, b: str, offset: int, known: PrefixShapes) -> tuple[PrefixShape, int] | None:
    """The shape at the divergence, and how many identical characters follow it on both sides."""
    found_a, found_b = _shape_at(a, offset, known), _shape_at(b, offset, known)
    shape = found_a[0] if found_a else found_b[0] if found_b else None
    if shape is None:
        return None
    end_a = found_a[1] if found_a and found_a[0] is shape else offset
    end_b = found_b[1] if found_b and found_b[0] is shape else offset
    return shape, common_prefix(
        a[end_a : end_a + 4 * CONTINUATION], b[end_b : end_b + 4 * CONTINUATION]
    )


def _tools_verdict(a: Mapping[str, Any], b: Mapping[str, Any], where: str) -> _Verdict:
    tools_a: list[Mapping[str, Any]] = a.get("tools") or []
    tools_b: list[Mapping[str, Any]] = b.get("tools") or []
    names_a, names_b = [_tool_name(t) for t in tools_a], [_tool_name(t) for t in tools_b]
    canonical_a = {_tool_name(t): json.dumps(t, sort_keys=True) for t in tools_a}
    canonical_b = {_tool_name(t): json.dumps(t, sort_keys=True) for t in tools_b}
    if names_a != names_b and sorted(names_a) == sorted(names_b) and canonical_a == canonical_b:
        shown = ", ".join(names_a[:6]), ", ".join(names_b[:6])
        return _Verdict(
            "tools_reordered",
            where,
            f"the same {len(names_a)} tools in another order: [{shown[0]}] vs [{shown[1]}]",
        )
    added = [n for n in names_b if n not in canonical_a]
    removed = [n for n in names_a if n not in canonical_b]
    changed = [n for n in names_a if n in canonical_b and canonical_a[n] != canonical_b[n]]
    parts = []
    if removed:
        parts.append("only in a: " + ", ".join(removed))
    if added:
        parts.append("only in b: " + ", ".join(added))
    if changed:
        parts.append("schema differs: " + ", ".join(changed))
    if not parts:
        parts.append("same tools and schemas, different JSON key order or order")
    return _Verdict("tools_changed", where, "; ".join(parts))


def _shape_verdict(shape: PrefixShape, where: str) -> _Verdict:
    label = "timestamp or date" if shape.kind == "timestamp" else "random id"
    return _Verdict(
        shape.kind,
        where,
        f"a {label} ({shape.name}) differs in {where}; everything after it is a miss",
        shape.name,
    )


def classify(
    a: ChatRequest, b: ChatRequest, ra: Rendered, rb: Rendered, offset: int, known: PrefixShapes
) -> _Verdict:
    """Why two rendered prompts first differ at `offset` (a character of the canonical text)."""
    if ra.text == rb.text:
        return _Verdict("identical", "whole prompt", "identical prompts: all of it is shared")
    if offset >= min(len(ra.text), len(rb.text)):
        first, second = (a, b) if len(ra.text) < len(rb.text) else (b, a)
        return _Verdict(
            "conversation_continued",
            "end of prompt",
            f"line {second.line} continues line {first.line}'s conversation: "
            f"all of line {first.line} is shared",
        )
    span_a, span_b = _span_at(ra.spans, offset), _span_at(rb.spans, offset)
    sides = ((span_a, ra), (span_b, rb))
    where = _where(ra, span_a, offset)
    volatile = _volatile(ra.text, rb.text, offset, known)
    in_tools = next(((s, r) for s, r in sides if s is not None and s.kind == "tools"), None)
    if in_tools is not None:
        where = _where(in_tools[1], in_tools[0], offset)
        verdict = _tools_verdict(a.body, b.body, where)
        if verdict.kind == "tools_changed" and volatile is not None:  # e.g. a date in a description
            return _shape_verdict(volatile[0], where)
        return verdict

    def on_either(test: Callable[[Span, Rendered], bool]) -> Span | None:
        return next((span for span, r in sides if span is not None and test(span, r)), None)

    system = on_either(lambda span, r: span.kind == "system")
    in_last = on_either(lambda span, r: span.kind == "message" and span.index == r.last_message)
    in_first = system is None and on_either(
        lambda span, r: span.kind == "message" and span.index == r.first_conversation_message
    )
    if volatile is not None:
        shape, continued = volatile
        if continued >= CONTINUATION or not (in_last or in_first):
            return _shape_verdict(shape, where)
    if system is not None:
        return _Verdict(
            "system_prompt_changed",
            where,
            f"the system prompt differs at character {offset - system.start} of it; the tools "
            "and the whole conversation after it are a miss",
        )
    if in_last:
        return _Verdict(
            "last_message_differs",
            where,
            "only the last message differs: everything before it is shared (expected)",
        )
    media_a, media_b = _span_at(ra.media, offset), _span_at(rb.media, offset)
    if media_a and media_b:
        same_set = sorted(m.label for m in ra.media) == sorted(m.label for m in rb.media)
        if same_set:
            kind = media_a.label.split(":")[0]
            return _Verdict(
                "image_order_changed", where, f"the same {kind}s in another order, from {where}"
            )
        return _Verdict(
            "history_changed", where, f"a different {media_a.label.split(':')[0]} in {where}"
        )
    if in_first:
        return _Verdict(
            "other_conversation",
            where,
            "different conversations: the system prompt and tools are shared, the first "
            "message differs (expected)",
        )
    roles = (span_a.label if span_a else None, span_b.label if span_b else None)
    detail = (
        f"{where} is {roles[0]} in one request and {roles[1]} in the other"
        if roles[0] != roles[1]
        else f"{where} differs: an earlier turn was edited, truncated or re-serialised"
    )
    return _Verdict("history_changed", where, detail)


_BEFORE, _AFTER = 24, 56


def excerpt(text: str, offset: int) -> str:
    """At most 80 characters around the offset, newlines shown as ⏎."""
    start, end = max(0, offset - _BEFORE), min(len(text), offset + _AFTER)
    space = text.find(" ", start, max(start, offset - 8))
    if start and space >= 0:  # begin at a word when one starts close by
        start = space + 1
    body = text[start:end].replace("\r", "").replace("\n", "⏎").replace("\t", " ")
    return ("…" if start else "") + body + ("…" if end < len(text) else "")


# ---------------------------------------------------------------------------------------------
# Fixing what can be fixed, to estimate the share afterwards


def _mask(
    text: str,
    kinds: frozenset[str],
    cache: dict[tuple[str, frozenset[str]], str],
    known: PrefixShapes,
) -> str:
    """The text with every volatile value of those kinds replaced by a fixed mask (memoised:
    the requests of a sample repeat the same system prompt and history)."""
    key = (text, kinds)
    if key not in cache:
        masked = text
        for shape in known.shapes:
            if shape.kind in kinds:
                masked = shape.regex.sub(MASKS[shape.kind], masked)
        cache[key] = masked
    return cache[key]


def neutralised(
    body: Mapping[str, Any],
    classes: Iterable[DivergenceClass],
    known: PrefixShapes,
    cache: dict[tuple[str, frozenset[str]], str] | None = None,
) -> dict[str, Any]:
    """The request as it would be after the fixes for timestamps, ids and tool order."""
    cache = {} if cache is None else cache
    wanted = set(classes)
    kinds = frozenset(k for k in ("timestamp", "random_id") if k in wanted)
    result = copy.deepcopy(dict(body))
    messages = result["messages"]
    for message in messages[:-1] if kinds else ():  # the last message is where they belong
        content = message.get("content")
        if isinstance(content, str):
            message["content"] = _mask(content, kinds, cache, known)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part.get("text"), str):
                    part["text"] = _mask(part["text"], kinds, cache, known)
    if "tools_reordered" in wanted and result.get("tools"):
        result["tools"] = sorted(result["tools"], key=_tool_name)
    return result


# ---------------------------------------------------------------------------------------------
# The launch command


def _mentioned_flags(text: str, exclude: str) -> list[str]:
    return [
        f
        for f in re.findall(r"--[a-z][a-z0-9-]+(?:[ =][0-9]+)?", text)
        if not f.startswith(exclude)
    ]


def _flag_given(launch: LaunchArgs, flag: str, kb: KnowledgeBase) -> bool:
    name = flag.split()[0].split("=")[0]
    if name in launch.other:
        return True
    for argument in kb.vllm_args.arguments:
        if name in (argument.flag, *argument.aliases):
            return getattr(launch, argument.field, None) is not None
    return False


def check_launch(
    launch: LaunchArgs, kb: KnowledgeBase | None = None, profile: str | None = None
) -> LaunchCheck:
    """Does the launch command turn prefix caching on (explicitly, where the recipe's profile
    asks for it)? `profile` names the model recipe's serving profile (its default when None): the
    flag is asked for only where that profile sets it, and a profile that turns prefix caching
    off (the decode side of a prefill/decode split) makes a launch that does the same no problem."""
    kb = kb or load_knowledge()
    recipe = kb.recipe_for_model(launch.model)
    chosen = kb.recipe_profile(recipe, profile) if recipe else None
    flags = kb.recipe_flags(recipe, profile) if recipe else []
    required = next((f for f in flags if f.flag == PREFIX_CACHING_FLAG), None)
    turned_off = next((f for f in flags if f.flag == PREFIX_CACHING_OFF_FLAG), None)
    also = (
        [
            f
            for f in _mentioned_flags(required.why, PREFIX_CACHING_FLAG)
            if not _flag_given(launch, f, kb)
        ]
        if required
        else []
    )
    base = {
        "model": launch.model,
        "recipe": recipe.id if recipe else None,
        "profile": chosen.id if chosen else None,
    }
    # the recipe and profile a sentence names (a flag of the recipe implies both)
    names = {"recipe": recipe.id, "profile": chosen.id} if recipe and chosen else {}
    if launch.enable_prefix_caching is False:
        if turned_off:
            return LaunchCheck(
                status="disabled",
                problem=False,
                summary=OFF_AS_PROFILE.format(**names, why=turned_off.why),
                **base,
            )
        summary = OFF
        if recipe and profile is None:
            decode = [p.id for p in recipe.profiles if p.mode == "decode"]
            if decode:
                summary = OFF_NOT_DECODE.format(recipe=recipe.id, profiles=", ".join(decode))
        return LaunchCheck(
            status="disabled",
            problem=True,
            summary=summary,
            fix=FIX_REPLACE_OFF.format(flags=" ".join([PREFIX_CACHING_FLAG, *also])),
            **base,
        )
    if launch.enable_prefix_caching:
        advice = {"flags": ", ".join(also), "why": required.why} if required and also else {}
        summary = _ENABLED[bool(advice), bool(turned_off)].format(**names, **advice)
        fix = FIX_ADD.format(flags=" ".join(also)) if advice else None
        return LaunchCheck(status="enabled", problem=False, summary=summary, fix=fix, **base)
    if required and recipe and chosen:
        return LaunchCheck(
            status="required_not_given",
            problem=True,
            summary=REQUIRED.format(
                recipe_name=recipe.name,
                profile=chosen.id,
                profile_name=chosen.name,
                why=required.why,
            ),
            fix=FIX_ADD_TO_LAUNCH.format(flags=" ".join([PREFIX_CACHING_FLAG, *also])),
            **base,
        )
    if turned_off:
        return LaunchCheck(
            status="not_given",
            problem=False,
            summary=NOT_GIVEN_PROFILE_OFF.format(**names, why=turned_off.why),
            fix=FIX_GIVE_OFF,
            **base,
        )
    return LaunchCheck(
        status="not_given", problem=False, summary=NOT_GIVEN, fix=FIX_GIVE_ON, **base
    )


# ---------------------------------------------------------------------------------------------
# The library function behind the command


def _classify_pairs(
    chosen: Sequence[ChatRequest],
    rendered: Sequence[Rendered],
    pairs: Sequence[tuple[int, int]],
    known: PrefixShapes,
) -> list[tuple[int, _Verdict]]:
    """The divergence offset (canonical characters) and its class, for each pair."""
    result = []
    for i, j in pairs:
        offset = common_prefix(rendered[i].text, rendered[j].text)
        verdict = classify(chosen[i], chosen[j], rendered[i], rendered[j], offset, known)
        result.append((offset, verdict))
    return result


def _divergence(
    a: ChatRequest, b: ChatRequest, ra: Rendered, rb: Rendered, offset: int, verdict: _Verdict,
    shared: int,
) -> Divergence:  # fmt: skip
    return Divergence(
        a_line=a.line,
        b_line=b.line,
        kind=verdict.kind,
        expected=verdict.kind in EXPECTED_CLASSES,
        shape=verdict.shape,
        where=verdict.where,
        common_prefix=shared,
        a_excerpt=excerpt(ra.text, offset),
        b_excerpt=excerpt(rb.text, offset),
        detail=verdict.detail,
    )


def _class_counts(divergences: Sequence[Divergence], known: PrefixShapes) -> list[ClassCount]:
    """Pairs per class, problems first, most frequent first."""
    counts = Counter(d.kind for d in divergences)
    first_of: dict[DivergenceClass, Divergence] = {}
    for divergence in divergences:
        first_of.setdefault(divergence.kind, divergence)
    return [
        ClassCount(
            kind=kind,
            pairs=count,
            expected=kind in EXPECTED_CLASSES,
            first_pair=FIRST_PAIR.format(a=first_of[kind].a_line, b=first_of[kind].b_line),
            fix=known.fix(kind),
        )
        for kind, count in sorted(
            counts.items(), key=lambda item: (item[0] in EXPECTED_CLASSES, -item[1], item[0])
        )
    ]


@dataclass(frozen=True)
class PrefixCheckOptions:
    """What to compare: `requests`, a JSONL file of OpenAI chat request bodies ("-" for stdin),
    or the bodies; `launch`, the launch command's text, or it parsed; `tokenizer`, a local
    tokenizer folder, to measure in the model's own tokens (needs transformers), characters
    otherwise; `max_requests`, how many of the requests are compared at most; `profile`, the
    model recipe's serving profile the launch follows (its default when None)."""

    requests: str | Path | Sequence[Mapping[str, Any]]
    launch: str | LaunchArgs | None = None
    tokenizer: str | Path | None = None
    trust_remote_code: bool = False
    max_requests: int = MAX_REQUESTS
    profile: str | None = None


def prefix_check(options: PrefixCheckOptions, *, kb: KnowledgeBase | None = None) -> PrefixReport:
    """Why a sample of chat requests would not share the prefix cache; the report names the
    requests file it read (made_from)."""
    if options.max_requests < 2:
        raise InputError("max_requests must be at least 2")
    launch, tokenizer = options.launch, options.tokenizer
    sample = _sample(options.requests, options.max_requests)
    chosen = sample.requests
    if len(chosen) < 2:
        stopped = f" ({sample.unread})" if sample.unread else ""
        raise InputError(
            f"{sample.source}: only one request{stopped}; prefix-check compares requests, give "
            "at least two"
        )
    tokens = TokenRenderer(tokenizer, options.trust_remote_code) if tokenizer is not None else None
    kb = kb or load_knowledge()
    known = kb.prefix
    launch_check = None
    if launch is not None:
        parsed = launch if isinstance(launch, LaunchArgs) else parse_launch_command(launch, kb)
        launch_check = check_launch(parsed, kb, options.profile)

    rendered = [render_canonical(r.body) for r in chosen]
    pairs = _pairs(len(chosen))
    shares = _measure(chosen, rendered, pairs, tokens)
    divergences = [
        _divergence(
            chosen[i], chosen[j], rendered[i], rendered[j], offset, verdict, shares.common[(i, j)]
        )
        for (i, j), (offset, verdict) in zip(
            pairs, _classify_pairs(chosen, rendered, pairs, known), strict=True
        )
    ]
    classes = _class_counts(divergences, known)

    # The first divergence hides the ones after it: fix what can be fixed, compare again, repeat.
    fixing = {c.kind for c in classes if c.kind in _FIXABLE}
    if_fixed: float | None = None
    after_fixes: list[ClassCount] = []
    seen = {c.kind for c in classes}
    masked: dict[tuple[str, frozenset[str]], str] = {}
    for _ in range(len(_FIXABLE)):
        if not fixing:
            break
        fixed = [ChatRequest(r.line, neutralised(r.body, fixing, known, masked)) for r in chosen]
        fixed_rendered = [render_canonical(r.body) for r in fixed]
        verdicts = _classify_pairs(fixed, fixed_rendered, pairs, known)
        counts = _class_counts(
            [
                _divergence(fixed[i], fixed[j], fixed_rendered[i], fixed_rendered[j], at, v, at)
                for (i, j), (at, v) in zip(pairs, verdicts, strict=True)
            ],
            known,
        )
        after_fixes += [c for c in counts if not c.expected and c.kind not in seen]
        seen |= {c.kind for c in counts}
        found = {c.kind for c in counts if c.kind in _FIXABLE} - fixing
        if not found:
            fixed_share = _measure(fixed, fixed_rendered, pairs, tokens).share
            if_fixed = max(shares.share, fixed_share)
            break
        fixing |= found

    unit = "tokens" if tokens is not None else "characters"
    return PrefixReport(
        source=sample.source,
        unit=unit,
        tokenizer=str(tokenizer) if tokenizer is not None else None,
        requests_read=sample.total,
        unread_input=sample.unread is not None,
        requests_compared=len(chosen),
        pairs_compared=len(pairs),
        prompt_length=sum(shares.lengths),
        reusable=sum(shares.best),
        reusable_share=round(shares.share, 4),
        reusable_share_if_fixed=round(if_fixed, 4) if if_fixed is not None else None,
        requests=[
            RequestShare(
                index=index,
                line=request.line,
                length=shares.lengths[index],
                reusable=shares.best[index],
                share=round(shares.best[index] / shares.lengths[index], 4)
                if shares.lengths[index]
                else 0.0,
                partner_line=chosen[p].line if (p := shares.partner[index]) is not None else None,
            )
            for index, request in enumerate(chosen)
        ],
        divergences=divergences,
        classes=classes,
        after_fixes=after_fixes,
        launch=launch_check,
        notes=_notes(sample, unit, launch_check),
    ).stamped(sample.made_from)


def _notes(sample: RequestSample, unit: str, launch: LaunchCheck | None) -> list[str]:
    chosen = sample.requests
    notes = []
    if sample.total > len(chosen) + len(sample.skipped):
        notes.append(
            f"Compared the first {len(chosen)} of {sample.total} requests (the cap bounds the "
            "work); each request is compared with the one before it and with the first one."
        )
    else:
        notes.append("Each request is compared with the one before it and with the first one.")
    if sample.unread:
        notes.append(f"Compared the first {len(chosen)} requests: {sample.unread}.")
    if sample.skipped:
        shown = "; ".join(sample.skipped[:_SKIPPED_SHOWN])
        more = len(sample.skipped) - _SKIPPED_SHOWN
        notes.append(
            f"Skipped {len(sample.skipped)} line(s) too big to compare: {shown}"
            + (f"; and {more} more." if more > 0 else ".")
        )
    if unit == "characters":
        notes.append(
            "Lengths are characters of a canonical rendering (system prompt, tools as JSON in "
            "the given order, messages in order, images as placeholders); --tokenizer measures "
            "tokens with the model's own chat template."
        )
    else:
        notes.append(
            "Lengths are tokens of the model's chat template; the divergence classes and "
            "excerpts come from the canonical rendering of the same requests."
        )
    models = sorted({str(r.body["model"]) for r in chosen if r.body.get("model")})
    if len(models) > 1:
        notes.append(
            f"The requests name {len(models)} models ({', '.join(models[:5])}); only requests "
            "to the same model and server share a cache."
        )
    kwargs = {json.dumps(r.body.get("chat_template_kwargs"), sort_keys=True) for r in chosen}
    if len(kwargs) > 1:
        notes.append(
            "chat_template_kwargs differ between requests; templates can render them early in "
            "the prompt."
        )
    notes.append(
        "vLLM reuses whole KV-cache blocks, so a hit is the shared prefix rounded down to a "
        "block, and only while it is still cached: eviction under load lowers the real hit rate "
        "(the server's /metrics prefix-cache counters show it)."
    )
    if launch is None:
        notes.append("Give --launch-cmd to check that the server turns prefix caching on.")
    return notes
