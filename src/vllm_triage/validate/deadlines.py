"""Each rung's total deadline: the defaults and `--deadline RUNG=SECONDS` (a module of its own, so
the command line can show the defaults without importing the ladder)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from vllm_triage.errors import InputError

if TYPE_CHECKING:
    from vllm_triage.validate.models import RungName

DEFAULT_DEADLINES: dict[RungName, float] = {
    "health": 30.0,
    "short_text": 120.0,
    "target_context": 600.0,
    "same_prefix": 300.0,
    "concurrency": 900.0,
    "image": 120.0,
    "tool_calls": 300.0,
    "structured_output": 300.0,
    "multi_node": 600.0,
}
_MAX_DEADLINE = 24 * 3600.0


def parse_deadlines(values: Sequence[str]) -> dict[RungName, float]:
    """Rung deadlines from RUNG=SECONDS settings (RUNG `all` sets every rung) over the defaults."""
    deadlines = dict(DEFAULT_DEADLINES)
    for value in values:
        name, _, seconds = value.partition("=")
        name = name.strip()
        if name != "all" and name not in deadlines:
            raise InputError(
                f"--deadline {value!r}: give RUNG=SECONDS, RUNG one of all, {', '.join(deadlines)}"
            )
        try:
            number = float(seconds)
        except ValueError:
            number = 0.0  # refused below, with the same message
        if not 0 < number <= _MAX_DEADLINE:
            raise InputError(
                f"--deadline {value!r}: SECONDS must be a number above 0 and at most {_MAX_DEADLINE:g}"
            )
        for rung in deadlines if name == "all" else [name]:
            deadlines[cast("RungName", rung)] = number
    return deadlines
