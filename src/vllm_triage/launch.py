"""Read a vLLM launch command (`vllm serve ...`, `python -m vllm.entrypoints.openai.api_server`,
`docker run ... vllm/vllm-openai ...`, a pod's command and args) into typed fields.

The flags and their fields are data (knowledge/data/vllm_args.yaml); unknown flags are kept.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from pydantic import Field

from vllm_triage.errors import InputError
from vllm_triage.knowledge import KnowledgeBase, load_knowledge
from vllm_triage.knowledge.schema import VllmArgument
from vllm_triage.models import Artifact

_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_SIZE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([kKmMgG]?)$")
_SIZE_FACTORS = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3}
_ENV_OPTIONS = ("-e", "--env")


class LaunchArgs(Artifact):
    """The vLLM launch command parsed into the fields triage cares about."""

    model: str | None = None
    served_model_name: str | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    enable_prefix_caching: bool | None = None
    enable_auto_tool_choice: bool | None = None
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    chat_template: str | None = None
    all2all_backend: str | None = None
    kv_cache_dtype: str | None = None
    trust_remote_code: bool | None = None
    download_dir: str | None = None
    other: dict[str, str] = Field(default_factory=dict, description="flags not mapped to a field")
    env: dict[str, str] = Field(default_factory=dict, description="variables the command sets")


def split_command(text: str) -> list[str]:
    """Shell words of a command text: continuation lines joined, comments dropped."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    try:
        return shlex.split(" ".join(lines).replace("\\ ", " "), comments=True)
    except ValueError as exc:
        raise InputError(f"launch command: cannot split it into words ({exc})") from None


def _entry(tokens: Sequence[str], kb: KnowledgeBase) -> int | None:
    """The index of the first vLLM argument, after the entry point (or after a vllm image)."""
    for start in range(len(tokens)):
        for entry in kb.vllm_args.entrypoints:
            window = tokens[start : start + len(entry)]
            if len(window) == len(entry) and all(
                token == part or token.endswith("/" + part)
                for token, part in zip(window, entry, strict=True)
            ):
                return start + len(entry)
    for index, token in enumerate(tokens):
        if "vllm" in token and ":" in token and "/" in token and not token.startswith("-"):
            return index + 1
    return None


def _several_values(kb: KnowledgeBase) -> list[re.Pattern[str]]:
    """Options that take one or more values (vLLM's --api-key k1 k2), from the redaction rules:
    their further values are theirs, never the positional model."""
    return [
        re.compile(f"(?i:{rule.match})")
        for rule in kb.redaction.rules
        if rule.kind == "argument" and rule.multiple
    ]


def _option_like(token: str) -> bool:
    return token.startswith("-") and len(token) > 1


def _convert(argument: VllmArgument, value: str) -> object:
    if argument.type == "int":
        return int(value)
    if argument.type == "float":
        return float(value)
    if argument.type == "size":
        match = _SIZE.match(value.strip())
        if not match:
            raise ValueError(value)
        return int(float(match.group(1)) * _SIZE_FACTORS[match.group(2).lower()])
    return value


def _environment(tokens: Sequence[str], end: int) -> dict[str, str]:
    """Variables set before the entry point: `A=1 vllm serve`, `export A=1`, `docker run -e A=1`."""
    env = {}
    leading = True
    previous = None
    for token in tokens[:end]:
        candidate = None
        if leading or previous in (*_ENV_OPTIONS, "export"):
            candidate = token
        elif token.startswith("--env="):
            candidate = token.removeprefix("--env=")
        match = _ASSIGNMENT.match(candidate) if candidate is not None else None
        if match:
            env[match.group(1)] = match.group(2)
        else:
            leading = False
        previous = token
    return env


def parse_launch_command(
    text_or_argv: str | Sequence[str], kb: KnowledgeBase | None = None
) -> LaunchArgs:
    """The fields of a vLLM launch command; InputError when no vLLM entry point is found."""
    kb = kb or load_knowledge()
    tokens = split_command(text_or_argv) if isinstance(text_or_argv, str) else list(text_or_argv)
    start = _entry(tokens, kb)
    if start is None:
        raise InputError(
            "launch command: no `vllm serve`, vLLM api_server module or vllm image in it"
        )
    table = kb.vllm_args
    by_flag = {name: arg for arg in table.arguments for name in (arg.flag, *arg.aliases)}
    switches = set(table.switches)
    several = _several_values(kb)
    fields: dict[str, object] = {}
    other: dict[str, str] = {}
    args = tokens[start:]
    index = 0
    while index < len(args):
        token = args[index]
        index += 1
        if not token.startswith("-"):
            fields.setdefault("model", token)
            continue
        flag, has_value, value = token.partition("=")
        negated = flag.startswith("--no-") and "--" + flag.removeprefix("--no-") in by_flag
        argument = by_flag.get("--" + flag.removeprefix("--no-") if negated else flag)
        is_switch = (argument is not None and argument.type == "bool") or flag in switches
        if is_switch or flag.startswith("--no-"):
            value = value if has_value else "true"
        elif not has_value:
            values = []
            while index < len(args) and not _option_like(args[index]):
                values.append(args[index])
                index += 1
                if not any(pattern.fullmatch(flag) for pattern in several):
                    break
            value = " ".join(values)
        if argument is None:
            other[flag] = value
            continue
        if argument.type == "bool":
            fields[argument.field] = (value.lower() not in ("false", "0", "no")) != negated
            continue
        try:
            fields[argument.field] = _convert(argument, value)
        except ValueError:
            raise InputError(
                f"launch command: {flag} {value!r} is not a valid {argument.type}"
            ) from None
    env = _environment(tokens, start)
    for variable, field in table.environment.items():
        if variable in env and field not in fields:
            fields[field] = env[variable]
    return LaunchArgs.model_validate({**fields, "other": other, "env": env})
