"""Measure a redactor against gitleaks' true/false-positive examples placed in a vLLM log.

`measure(redact)` puts every distinct TP value of tests/data/gitleaks/examples.json into a log:
bare in a line of text, behind an environment name (the value's own name from its TP line, and a
neutral one), inside a JSON args dump (under its own name, and under a neutral key), and reports,
per placement, the share of values no longer present after `redact`, and for the FP examples the
share that `redact` changed anyway. A value whose TP line gives it no name goes under the neutral
name in the "own name" JSON placement too. A helper for tests and scripts, not a test.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

EXAMPLES = Path(__file__).parent / "data" / "gitleaks" / "examples.json"
LOG_PREFIX = "(APIServer pid=1) INFO 12-01 10:00:00 [api_server.py:1] "
NEUTRAL_NAME = "UPSTREAM_SETTING_3"
# The name an assignment in a TP line gives its value: `fooToken = "<v>"`, `FOO_TOKEN: <v>`,
# `"foo_token": "<v>"`, `$fooToken .= "<v>"`, Go's `var fooToken string = "<v>"`.
NATURAL_NAME = re.compile(
    r"([A-Za-z_][A-Za-z0-9_.-]{0,80})[\"']?(?:\s+string)?\s*"
    r"(?:=|:=|::=|:::=|\?=|\.=|=>|:)\s*[\"'`]?$"
)
# XML's key/value idiom names a value in the attribute before it: key="ClearTextPassword" value=.
XML_KEY = re.compile(
    r"""\bkey\s*=\s*["']([A-Za-z_][A-Za-z0-9_.-]{0,80})["']\s+value\s*=\s*["']?$"""
)
PLACEMENTS = ("bare", "env_neutral", "env_natural", "json_natural", "json_neutral")


@dataclass(frozen=True)
class Value:
    rule: str
    value: str
    natural_name: str | None
    # The TP line that holds the value (its own context: a curl command, a header).
    line: str = ""


@dataclass
class Placement:
    """One placement's result: how many values were put, how many are gone after redaction."""

    name: str
    total: int = 0
    redacted: int = 0
    missed_rules: set[str] = field(default_factory=set)

    @property
    def share(self) -> float:
        return self.redacted / self.total if self.total else 1.0


@dataclass
class Report:
    placements: dict[str, Placement]
    fp_total: int
    fp_changed: int
    fp_changed_rules: set[str]

    @property
    def fp_share(self) -> float:
        """Share of false-positive examples the redactor changed anyway."""
        return self.fp_changed / self.fp_total if self.fp_total else 0.0

    def summary(self) -> str:
        lines = [
            f"{p.name}: {p.redacted}/{p.total} redacted ({p.share:.1%}), "
            f"{len(p.missed_rules)} rules miss"
            for p in self.placements.values()
        ]
        lines.append(f"fp changed: {self.fp_changed}/{self.fp_total} ({self.fp_share:.1%})")
        return "\n".join(lines)


def natural_name(text: str, value: str) -> str | None:
    """The assignment name right before the value in its TP line, when there is one."""
    start = text.find(value)
    if start <= 0:
        return None
    line_start = text.rfind("\n", 0, start) + 1
    before = text[line_start:start]
    match = XML_KEY.search(before) or NATURAL_NAME.search(before)
    return match.group(1) if match else None


def own_line(text: str, value: str) -> str:
    """The line of the TP text that holds the value."""
    start = max(text.find(value), 0)
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", start + len(value))
    return text[line_start : len(text) if line_end < 0 else line_end]


def load_values(path: Path = EXAMPLES) -> tuple[list[Value], list[tuple[str, str]]]:
    """Distinct (rule, value) TPs with a natural name when a TP line gives one, and the FPs."""
    document = json.loads(path.read_text(encoding="utf-8"))
    values: dict[tuple[str, str], Value] = {}
    fps: list[tuple[str, str]] = []
    for rule, examples in sorted(document["rules"].items()):
        for tp in examples["tp"]:
            value = tp.get("value", tp["secret"])
            name = natural_name(tp["text"], value)
            known = values.get((rule, value))
            if known is None or (known.natural_name is None and name is not None):
                values[(rule, value)] = Value(rule, value, name, own_line(tp["text"], value))
        fps.extend((rule, fp) for fp in examples["fp"])
    return list(values.values()), fps


def placed(value: Value) -> dict[str, tuple[str, str]]:
    """Each placement's log text and the form the value takes in it (JSON escapes it). In JSON
    under its own name, a value its TP line names by no assignment (an option's value such as
    curl's `-u user:password`, a header's) is the command or line that holds it, as a container's
    args dump shows a command."""
    quoted = json.dumps(value.value)[1:-1]
    own = {value.natural_name: value.value} if value.natural_name else {"command": value.line}
    texts = {
        "bare": (f"{LOG_PREFIX}loaded credential {value.value} for upstream\n", value.value),
        "env_neutral": (f"{NEUTRAL_NAME}={value.value}\n", value.value),
        "json_natural": (f"{LOG_PREFIX}non-default args: {json.dumps(own)}\n", quoted),
        "json_neutral": (
            f"{LOG_PREFIX}non-default args: {json.dumps({'x': value.value})}\n",
            quoted,
        ),
    }
    if value.natural_name:
        texts["env_natural"] = (f"{value.natural_name}={value.value}\n", value.value)
    return texts


def measure(redact: Callable[[str], str], path: Path = EXAMPLES) -> Report:
    """Run `redact` over every placement of every TP value and every FP example."""
    values, fps = load_values(path)
    placements = {name: Placement(name) for name in PLACEMENTS}
    for value in values:
        for name, (text, form) in placed(value).items():
            result = placements[name]
            result.total += 1
            if form in redact(text):
                result.missed_rules.add(value.rule)
            else:
                result.redacted += 1
    changed_rules: set[str] = set()
    changed = 0
    for rule, fp in fps:
        text = f"{LOG_PREFIX}{fp}\n"
        if redact(text) != text:
            changed += 1
            changed_rules.add(rule)
    return Report(placements, len(fps), changed, changed_rules)
