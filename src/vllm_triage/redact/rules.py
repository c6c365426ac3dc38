"""The redaction rules compiled into one alternation, with the role of every capturing group.

A group either holds a secret of its rule, or marks (empty, at the end of a line) a secret that the
next line holds: a name whose value comes on the next line of pretty-printed JSON or YAML, an
option followed by a shell line continuation, a YAML block scalar, a list opened at the line end.
Compiled once per knowledge base; the redactor keeps the per-bundle state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import re2

from vllm_triage.knowledge.schema import Redaction, RedactionRule, re2_superset
from vllm_triage.redact.compiled import CompiledOnce
from vllm_triage.redact.last import LastRules

# What a group holds: the secret itself, or the kind of value the next line carries.
Role = Literal["secret", "value", "separator", "list", "block", "pair", "argument"]
PENDING_ROLES = frozenset({"value", "separator", "list", "block", "pair", "argument"})

# A value that is already a marker is never redacted again (redaction is idempotent).
NOT_MARKER = r"(?!\[REDACTED:[a-z0-9_]+:[0-9a-f]{8}\]|\[OMITTED\])"
# ... nor a value that starts, after quotes, brackets or blanks, with a marker.
_NOT_MARKER_VALUE = r"""(?![\["' \t]*(?:\[REDACTED:[a-z0-9_]+:[0-9a-f]{8}\]|\[OMITTED\]))"""

# Value forms after a secret name, option or header: the group holds the secret only, so quotes,
# brackets and JSON escapes stay and the document keeps its shape.
_DQ = r'"(?P<{g}>' + NOT_MARKER + r'(?:[^"\\\r\n]|\\.)*)"'
_ESC_DQ = r'\\"(?P<{g}>' + NOT_MARKER + r'(?:(?!\\")[^\r\n])*)\\"'
_SQ = r"'(?P<{g}>" + NOT_MARKER + r"(?:[^'\\\r\n]|\\.)*)'"
_LIST = r"\[(?P<{g}>[^\[\]\r\n]*)\]"
# A Python tuple: requests' auth=('user', 'password').
_TUPLE = r"\((?P<{g}>[^()\r\n]*)\)"
_BARE = r"(?P<{g}>[^\s\"'\\]*[^\s\"'\\,;)\]}])"
_REST = r"""(?P<{g}>[^\s"'](?:[^\r\n]*[^\s,])?)"""
_TO_QUOTE = r"""(?P<{g}>[^\s"'\\](?:[^"'\\\r\n]*[^\s"'\\])?)"""

# The end of a line, also inside a Docker json-file line (an escaped newline before the quote).
_EOL = r"""(?:\r?$|(?:\\r)?\\n(?="))"""
_WORD_BEFORE = r"(?<![A-Za-z0-9_])"
_NOT_IN_MARKER = r"(?<!\[REDACTED:)"
_AFTER_NAME = r"(?![A-Za-z0-9_])"
# Not `argument --api-key: expected one argument` (argparse's error, evidence to keep).
_HEADER_BEFORE = r"(?<![-_])"
_AFTER_OPTION = r"(?![A-Za-z0-9_-])"
_Q = r"""\\?["']?"""
# A value, not the next option nor a shell operator (`--add-to-git-credential <<< hf_...`).
_OPTION_VALUE_START = r"(?!-[^0-9.]|[|;&<>])"

# What may continue a secret cut at the end of a bounded piece of a very long line: by the form
# of its value, the rest of the token, of the quoted string, of the list, of the line.
_SPILL_TOKEN = r"""[^\s"'\\,;)\]}]*"""
_SPILLS = {
    _DQ: r'(?:[^"\\\r\n]|\\.)*',
    _ESC_DQ: r'(?:(?!\\")[^\r\n])*',
    _SQ: r"(?:[^'\\\r\n]|\\.)*",
    _LIST: r"[^\[\]\r\n]*",
    _TUPLE: r"[^()\r\n]*",
    _REST: r"[^\r\n]*",
    _TO_QUOTE: r"""[^"'\\\r\n]*""",
}


@dataclass(frozen=True)
class Group:
    """A capturing group of the alternation: its rule, its role, and how a cut secret continues."""

    rule: RedactionRule
    role: Role
    spill: str = _SPILL_TOKEN


@dataclass(frozen=True)
class OptionRule:
    """An argument rule as argv needs it: the option's pattern and the words it must follow."""

    rule: RedactionRule
    option: re.Pattern[str]
    context: re.Pattern[str] | None


class Alternation:
    """One alternation of rule parts and the group behind each group index, compiled with Python's
    re on first use: the RE2 prefilter looks first, so a text with no candidate (most logs a
    command reads at start-up) never pays the tens of milliseconds that compiling it costs."""

    def __init__(self, builder: _Builder) -> None:
        self.source = "|".join(builder.parts)
        self._groups = dict(builder.groups)

    @cached_property
    def compiled(self) -> tuple[re.Pattern[str], tuple[Group | None, ...]]:
        """The pattern, and the group of each group index (None for index 0)."""
        pattern = re.compile(self.source, re.MULTILINE | re.ASCII)
        if pattern.groups != len(self._groups):
            raise ValueError("a redaction pattern defines a capturing group of its own")
        groups: list[Group | None] = [None] * (pattern.groups + 1)
        for name, index in pattern.groupindex.items():
            groups[index] = self._groups[name]
        return pattern, tuple(groups)


@dataclass(frozen=True)
class CompiledRules:
    """Everything the redactor matches with, compiled once per knowledge base."""

    alternation: Alternation
    prefilter_source: str
    prefilter: Any  # RE2, shared: its matching is thread-safe and its DFA cache stays warm
    shape_alternation: Alternation
    names: tuple[tuple[str, re.Pattern[str]], ...]
    headers: tuple[tuple[RedactionRule, re.Pattern[str]], ...]
    options: tuple[OptionRule, ...]
    # Rules that run after the others, on what they left (Python re: lookarounds bound a token).
    last: LastRules

    @property
    def pattern(self) -> re.Pattern[str]:
        return self.alternation.compiled[0]

    @property
    def groups(self) -> tuple[Group | None, ...]:
        return self.alternation.compiled[1]

    @property
    def shapes(self) -> re.Pattern[str]:
        return self.shape_alternation.compiled[0]

    @property
    def shape_groups(self) -> tuple[Group | None, ...]:
        return self.shape_alternation.compiled[1]


def name_pattern(rule: RedactionRule) -> str:
    """The case-insensitive pattern of a name rule's names, its exceptions excluded."""
    exceptions = "|".join(re.escape(name) for name in rule.exceptions)
    excluded = f"(?!(?:{exceptions}){_AFTER_NAME})" if exceptions else ""
    return f"(?i:{excluded}(?:{rule.match}))"


class _Builder:
    """Assembles the one alternation; every capturing group in it has a rule and a role."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.groups: dict[str, Group] = {}

    def _group(self, template: str, rule: RedactionRule, role: Role = "secret") -> str:
        name = f"g{len(self.groups)}"
        self.groups[name] = Group(rule, role, _SPILLS.get(template, _SPILL_TOKEN))
        return template.replace("{g}", name)

    def _values(self, rule: RedactionRule, *templates: str) -> str:
        return "(?:" + "|".join(self._group(t, rule) for t in templates) + ")"

    def _pending(self, rule: RedactionRule, *forms: tuple[str, Role]) -> str:
        """Forms that end a line before the value: the role says what the next line holds."""
        return "|".join(
            before + self._group("(?P<{g}>)", rule, role) + _EOL for before, role in forms
        )

    def add(self, rule: RedactionRule) -> None:
        if rule.kind in ("value", "url"):
            self._add_shape(rule)
        elif rule.kind == "name":
            self._add_name(rule)
        elif rule.kind == "argument":
            self._add_argument(rule)
        else:
            self._add_header(rule)

    def _add_shape(self, rule: RedactionRule) -> None:
        if "(?P<secret>" in rule.match:
            template = rule.match.replace("(?P<secret>", "(?P<{g}>" + NOT_MARKER, 1)
            self.parts.append(self._group(template, rule))
        else:
            self.parts.append(self._group("(?P<{g}>" + rule.match + ")", rule))

    def _add_name(self, rule: RedactionRule) -> None:
        name = name_pattern(rule) + _AFTER_NAME
        # At the start of a line (env dumps, .env files, YAML) an unquoted value runs to its end.
        line_start = r"^[ \t]*(?:(?:export|ENV|ARG|-)[ \t]+)?" + name + r"[ \t]*[=:][ \t]*+"
        inline = _WORD_BEFORE + _NOT_IN_MARKER + name + _Q + r"\]?[ \t]*[=:][ \t]*+"
        next_line = self._pending(
            rule,
            (r"[|>][+-]?[0-9]?[ \t]*", "block"),
            (r"\[[ \t]*", "list"),
            ("", "value"),
        )
        inline_next_line = self._pending(
            rule,
            (r"[|>][+-]?[0-9]?[ \t]*", "block"),
            (r"\[[ \t]*", "list"),
            ("", "value"),
        )
        self.parts += [
            line_start
            + f"(?:{next_line}|"
            + _NOT_MARKER_VALUE
            + self._values(rule, _DQ, _SQ, _REST)
            + ")",
            inline
            + f"(?:{inline_next_line}|"
            + _NOT_MARKER_VALUE
            + self._values(rule, _DQ, _ESC_DQ, _SQ, _LIST, _TUPLE, _BARE)
            + ")",
            # "password"<newline>: "x", the separator on the next line.
            _WORD_BEFORE
            + _NOT_IN_MARKER
            + name
            + _Q
            + r"[ \t]*"
            + self._pending(rule, ("", "separator")),
            # Kubernetes-style pairs: {"name": "HF_TOKEN", "value": "x"}, `- name: HF_TOKEN`.
            r"""\\?["']?\bname\\?["']?[ \t]*:[ \t]*\\?["']?"""
            + name
            + r"""\\?["']?[ \t]*,?[ \t]*(?:"""
            + self._pending(rule, ("", "pair"))
            + r"""|\\?["']?value\\?["']?[ \t]*:[ \t]*+"""
            + _NOT_MARKER_VALUE
            + self._values(rule, _DQ, _ESC_DQ, _SQ, _BARE)
            + ")",
            # XML key/value attributes (.NET appSettings, nuget.config): key="ApiKey" value="x".
            _WORD_BEFORE
            + r"""key[ \t]*=[ \t]*\\?["']"""
            + name
            + r"""\\?["'][ \t]+value[ \t]*=[ \t]*"""
            + _NOT_MARKER_VALUE
            + self._values(rule, _DQ, _ESC_DQ, _SQ),
        ]

    def _add_argument(self, rule: RedactionRule) -> None:
        option = "(?i:" + rule.match + ")" + _AFTER_OPTION
        if rule.context:
            # The option counts only after its command (`docker login ... -p`).
            option = f"(?:{rule.context})(?:[ \t]+[^\\s|;&]+)*?[ \t]+{option}"
        value = (
            r"(?:=|[ \t\x00]++" + _OPTION_VALUE_START + ")"
            + _NOT_MARKER_VALUE
            + self._values(rule, _DQ, _ESC_DQ, _SQ, _BARE)
        )  # fmt: skip
        listed = (
            r"""\\?["'],[ \t]*+\\?["']""" + _OPTION_VALUE_START
            + _NOT_MARKER_VALUE
            + self._values(rule, _TO_QUOTE)
        )  # fmt: skip
        # `--api-key \` (the backslash escaped once more inside a json-file line).
        continued = self._pending(rule, (r"[ \t]+\\\\?[ \t]*", "argument"))
        self.parts.append(f"{option}(?:{value}|{listed}|{continued})")

    def _add_header(self, rule: RedactionRule) -> None:
        header = (
            _HEADER_BEFORE
            + "(?i:"
            + rule.match
            + ")"
            + _AFTER_OPTION
            + _Q
            + r"[ \t]*[:=][ \t]*+"
            + _Q
        )
        prefix = f"(?:{rule.keep_prefix})?+" if rule.keep_prefix else ""
        self.parts.append(header + prefix + _NOT_MARKER_VALUE + self._values(rule, _TO_QUOTE))


def _compile(redaction: Redaction) -> CompiledRules:
    builder = _Builder()
    for rule in redaction.rules:
        if not rule.last:
            builder.add(rule)
    shapes = _Builder()
    for rule in redaction.rules:
        # a decoded rule needs its check; a last rule runs on its own pass
        if rule.kind == "value" and rule.decoded is None and not rule.last:
            shapes.add(rule)
    alternation = Alternation(builder)
    source = "(?m)" + re2_superset(alternation.source)
    return CompiledRules(
        alternation=alternation,
        prefilter_source=source,
        prefilter=prefilter(source),
        # The parts of a match kept in clear are searched for shapes only (they have no context).
        shape_alternation=Alternation(shapes),
        last=LastRules([rule for rule in redaction.rules if rule.last]),
        names=tuple(
            (rule.id, re.compile(name_pattern(rule), re.ASCII))
            for rule in redaction.rules
            if rule.kind == "name"
        ),
        headers=tuple(
            (rule, re.compile(f"(?i:{rule.match})", re.ASCII))
            for rule in redaction.rules
            if rule.kind == "header"
        ),
        options=tuple(
            OptionRule(
                rule,
                re.compile(f"(?i:{rule.match})", re.ASCII),
                re.compile(rule.context, re.ASCII) if rule.context else None,
            )
            for rule in redaction.rules
            if rule.kind == "argument"
        ),
    )


compiled_rules = CompiledOnce(_compile)
"""The compiled rules of a knowledge base's redaction section (compiled once, then shared)."""


def prefilter(source: str) -> Any:
    """The RE2 prefilter: one DFA pass that matches wherever the Python pattern can start."""
    options = re2.Options()
    options.max_mem = 64 << 20
    return re2.compile(source, options)
