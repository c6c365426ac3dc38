"""The tools the ladder declares, and the check of what a server returns for them: tool_calls
present (not leaked into content as raw text), arguments that parse as JSON and validate against
the declared JSON Schema (jsonschema).

The tools are declared `strict` (the schema enforced while decoding, as agents that need
well-formed calls ask for); `loose_tools()` gives the same without it."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator

from vllm_triage.validate.client import Answer

# The tools live in agent_tools.json: the tiny test model (tests/servers) is trained on the same.
TOOLS: list[dict[str, Any]] = json.loads(
    resources.files("vllm_triage.validate").joinpath("agent_tools.json").read_text(encoding="utf-8")
)


def loose_tools() -> list[dict[str, Any]]:
    """The same tools without `strict`: what many agents send; the model alone keeps the format."""
    return [
        {**tool, "function": {k: v for k, v in tool["function"].items() if k != "strict"}}
        for tool in TOOLS
    ]


_VALIDATORS = {
    t["function"]["name"]: Draft202012Validator(t["function"]["parameters"]) for t in TOOLS
}
# Raw markers of tool-call formats that a parser should have turned into tool_calls.
LEAK_MARKERS = (
    "<tool_call>",
    "<|tool_call",
    "<|tool_calls_section_begin|>",
    "[TOOL_CALLS]",
    "<function=",
)


def check_answer(answer: Answer, required: bool, name: str | None = None) -> list[str]:
    """Format errors of one answer; [] when every tool call is well formed (or none was due)."""
    errors = []
    if not answer.tool_calls:
        if any(marker in answer.content for marker in LEAK_MARKERS):
            errors.append("tool call leaked into content as raw text")
        elif required:
            errors.append("no tool_calls although the tool choice required one")
        return errors
    for call in answer.tool_calls:
        if call.name not in _VALIDATORS:
            errors.append(f"call to an undeclared tool {call.name!r}")
            continue
        if name is not None and call.name != name:
            errors.append(f"named tool {name!r} asked, {call.name!r} called")
        try:
            arguments = json.loads(call.arguments or "")
        except json.JSONDecodeError as exc:
            errors.append(
                f"{call.name}: arguments are not JSON ({exc.msg} at {exc.pos}): {call.arguments[:60]!r}"
            )
            continue
        for problem in _VALIDATORS[call.name].iter_errors(arguments):
            where = "/".join(str(p) for p in problem.absolute_path) or "arguments"
            errors.append(f"{call.name}: {where}: {problem.message[:120]}")
    return errors
