"""Redaction of everything a bundle writes: text, environments, command lines and JSON documents.

The rules are data (knowledge/data/redaction.yaml). A secret becomes MARKER, whose digest (the first
8 hex of sha256 of the secret) lets two bundles be compared without either holding the secret.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import re2

from vllm_triage.knowledge import KnowledgeBase, load_knowledge
from vllm_triage.knowledge.schema import RedactionRule, re2_superset

MARKER = "[REDACTED:{rule}:{digest}]"
OMITTED = "[OMITTED]"

# A value that is already a marker is never redacted again (redaction is idempotent).
_NOT_MARKER = r"(?!\[REDACTED:[a-z0-9_]+:[0-9a-f]{8}\]|\[OMITTED\])"
# ... nor a value that starts, after quotes, brackets or blanks, with a marker.
_NOT_MARKER_VALUE = r"""(?![\["' \t]*(?:\[REDACTED:[a-z0-9_]+:[0-9a-f]{8}\]|\[OMITTED\]))"""
_MARKER_RE = re.compile(r"\[REDACTED:[a-z0-9_]+:[0-9a-f]{8}\]|\[OMITTED\]")
# Values that stand for no secret: unset, booleans, a masked value, a tokenizer special token.
_PLACEHOLDERS = frozenset({"", "None", "null", "nil", "True", "False", "true", "false"})
_PLACEHOLDER_RE = re.compile(r"<[^<>\r\n]*>|\*+")

# Value forms after a secret name, option or header: the group holds the secret only, so quotes,
# brackets and JSON escapes stay and the document keeps its shape.
_DQ = r'"(?P<{g}>' + _NOT_MARKER + r'(?:[^"\\\r\n]|\\.)*)"'
_ESC_DQ = r'\\"(?P<{g}>' + _NOT_MARKER + r'(?:(?!\\")[^\r\n])*)\\"'
_SQ = r"'(?P<{g}>" + _NOT_MARKER + r"(?:[^'\\\r\n]|\\.)*)'"
_LIST = r"\[(?P<{g}>[^\[\]\r\n]*)\]"
_BARE = r"(?P<{g}>[^\s\"'\\]*[^\s\"'\\,;)\]}])"
_REST = r"""(?P<{g}>[^\s"'](?:[^\r\n]*[^\s,])?)"""
_TO_QUOTE = r"""(?P<{g}>[^\s"'\\](?:[^"'\\\r\n]*[^\s"'\\])?)"""

_WORD_BEFORE = r"(?<![A-Za-z0-9_])"
_NOT_IN_MARKER = r"(?<!\[REDACTED:)"
_AFTER_NAME = r"(?![A-Za-z0-9_])"
# Not `argument --api-key: expected one argument` (argparse's error, evidence to keep).
_HEADER_BEFORE = r"(?<![-_])"
_AFTER_OPTION = r"(?![A-Za-z0-9_-])"
_Q = r"""\\?["']?"""

_PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY = re.compile(
    r"[ \t]*(?:[A-Za-z0-9+/=]+|(?:Proc-Type|DEK-Info|Comment):[^\r\n]*"
    r"|\[REDACTED:private_key:[0-9a-f]{8}\])?[ \t]*"
)
_NEGATIVE_NUMBER = re.compile(r"-[0-9]*\.?[0-9]+")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_COMMAND_KEYS = frozenset({"Cmd", "Entrypoint", "Args", "args", "command", "Command", "argv"})


@dataclass(frozen=True)
class RedactedEnv:
    """An environment ready for a bundle: kept variables (secrets as markers), omitted names."""

    kept: dict[str, str] = field(default_factory=dict)
    omitted: list[str] = field(default_factory=list)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def _placeholder(value: str) -> bool:
    return value in _PLACEHOLDERS or _PLACEHOLDER_RE.fullmatch(value) is not None


class _Builder:
    """Assembles the one alternation; every capturing group in it is a secret of a known rule."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.rules: dict[str, RedactionRule] = {}

    def _group(self, template: str, rule: RedactionRule) -> str:
        name = f"g{len(self.rules)}"
        self.rules[name] = rule
        return template.replace("{g}", name)

    def _values(self, rule: RedactionRule, *templates: str) -> str:
        return "(?:" + "|".join(self._group(t, rule) for t in templates) + ")"

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
            template = rule.match.replace("(?P<secret>", "(?P<{g}>" + _NOT_MARKER, 1)
            self.parts.append(self._group(template, rule))
        else:
            self.parts.append(self._group("(?P<{g}>" + rule.match + ")", rule))

    def _add_name(self, rule: RedactionRule) -> None:
        name = _name_pattern(rule) + _AFTER_NAME
        # At the start of a line (env dumps, .env files, YAML) an unquoted value runs to its end.
        line_start = r"^[ \t]*(?:(?:export|ENV|ARG|-)[ \t]+)?" + name + r"[ \t]*[=:][ \t]*+"
        inline = _WORD_BEFORE + _NOT_IN_MARKER + name + _Q + r"\]?[ \t]*[=:][ \t]*+"
        self.parts += [
            line_start + _NOT_MARKER_VALUE + self._values(rule, _DQ, _SQ, _REST),
            inline + _NOT_MARKER_VALUE + self._values(rule, _DQ, _ESC_DQ, _SQ, _LIST, _BARE),
        ]

    def _add_argument(self, rule: RedactionRule) -> None:
        option = "(?i:" + rule.match + ")" + _AFTER_OPTION
        value = (
            r"(?:=|[ \t\x00]++(?!-[^0-9.]))"
            + _NOT_MARKER_VALUE
            + self._values(rule, _DQ, _ESC_DQ, _SQ, _BARE)
        )
        listed = (
            r"""\\?["'],[ \t]*+\\?["'](?!-[^0-9.])"""
            + _NOT_MARKER_VALUE
            + self._values(rule, _TO_QUOTE)
        )
        self.parts.append(f"{option}(?:{value}|{listed})")

    def _add_header(self, rule: RedactionRule) -> None:
        header = (
            _HEADER_BEFORE + "(?i:" + rule.match + ")" + _AFTER_OPTION + _Q + r"[ \t]*:[ \t]*+" + _Q
        )
        prefix = f"(?:{rule.keep_prefix})?+" if rule.keep_prefix else ""
        self.parts.append(header + prefix + _NOT_MARKER_VALUE + self._values(rule, _TO_QUOTE))

    def compile(self) -> tuple[re.Pattern[str], list[RedactionRule | None]]:
        """The alternation, and the rule of each group index (None for index 0)."""
        pattern = re.compile("|".join(self.parts), re.MULTILINE | re.ASCII)
        if pattern.groups != len(self.rules):
            raise ValueError("a redaction pattern defines a capturing group of its own")
        rules: list[RedactionRule | None] = [None] * (pattern.groups + 1)
        for name, index in pattern.groupindex.items():
            rules[index] = self.rules[name]
        return pattern, rules


class _Offsets:
    """Converts offsets between a str and its UTF-8 bytes, moving forward only (linear)."""

    def __init__(self, text: str, data: bytes) -> None:
        self._text, self._data = text, data
        self._ascii = len(text) == len(data)
        self._char = self._byte = 0

    def char(self, byte: int) -> int:
        if self._ascii:
            return byte
        self._char += len(self._data[self._byte : byte].decode("utf-8"))
        self._byte = byte
        return self._char

    def byte(self, char: int) -> int:
        if self._ascii:
            return char
        self._byte += len(self._text[self._char : char].encode("utf-8"))
        self._char = char
        return self._byte


def _option_like(token: str) -> bool:
    """Whether argparse reads the token as an option (not as a value like -1 or -0.5)."""
    return token.startswith("-") and not _NEGATIVE_NUMBER.fullmatch(token)


def _name_pattern(rule: RedactionRule) -> str:
    """The case-insensitive pattern of a name rule's names, its exceptions excluded."""
    exceptions = "|".join(re.escape(name) for name in rule.exceptions)
    excluded = f"(?!(?:{exceptions}){_AFTER_NAME})" if exceptions else ""
    return f"(?i:{excluded}(?:{rule.match}))"


class Redactor:
    """Replaces every secret the knowledge base's redaction rules know; counts per rule, no values.

    Not thread-safe; one per bundle. text() follows a PEM key split over consecutive calls.
    """

    def __init__(self, kb: KnowledgeBase | None = None) -> None:
        self._redaction = (kb or load_knowledge()).redaction
        rules = self._redaction.rules
        builder = _Builder()
        for rule in rules:
            builder.add(rule)
        self._pattern, self._group_rules = builder.compile()
        shapes = _Builder()
        for rule in rules:
            if rule.kind == "value":
                shapes.add(rule)
        # The parts of a match kept in clear are searched for shapes only (they have no context).
        self._shapes, self._shape_rules = shapes.compile()
        # The cheap pre-check: one RE2 pass (a DFA) that matches wherever the pattern can start.
        options = re2.Options()
        options.max_mem = 64 << 20
        self._prefilter = re2.compile("(?m)" + re2_superset(self._pattern.pattern), options)
        self._names = [
            (rule.id, re.compile(_name_pattern(rule), re.ASCII))
            for rule in rules
            if rule.kind == "name"
        ]
        self._options = [
            (rule.id, re.compile(f"(?i:{rule.match})", re.ASCII))
            for rule in rules
            if rule.kind == "argument"
        ]
        self._counts = dict.fromkeys((rule.id for rule in rules), 0)
        self._counts["omitted"] = 0
        self._pem_open = False
        self._pem_opened = False

    # -- public API -------------------------------------------------------------------------

    def text(self, text: str) -> str:
        """Every text rule over text; call it line by line or with whole documents."""
        head = ""
        if self._pem_open:
            head, text = self._pem_continuation(text)
        if not text:
            return head
        self._pem_opened = False
        result = self._scan(text)
        self._pem_open = self._pem_opened
        return head + result

    def end_of_file(self) -> None:
        """Forget a PEM key left open at the end of a file: the next text() is another file."""
        self._pem_open = False

    def env(self, env: Mapping[str, str]) -> RedactedEnv:
        """Keep allow-listed and secret-named variables (secrets as markers); omit the rest."""
        result = RedactedEnv()
        for name, value in env.items():
            kept = self._env_value(name, value)
            if kept is None:
                self._counts["omitted"] += 1
                result.omitted.append(name)
            else:
                result.kept[name] = kept
        return result

    def env_items(self, items: Sequence[str]) -> list[str]:
        """Docker's ["K=V", ...] form: kept entries redacted, others as K=[OMITTED]."""
        return [self._env_item(item) for item in items]

    def argv(self, argv: Sequence[str]) -> list[str]:
        """A parsed command line: secret options, -e/--env and leading NAME=V, text rules on all."""
        return self._argv(argv, command=True)

    def json(self, document: Any) -> Any:
        """A parsed JSON document: secret keys, k8s env pairs, "Env" lists, argv lists, strings."""
        return self._json(document, None)

    def report(self) -> dict[str, int]:
        """Replacements per rule id, and `omitted` for values dropped by the allow-list."""
        return dict(self._counts)

    # -- the pieces -------------------------------------------------------------------------

    def _marker(self, rule_id: str, secret: str) -> str:
        if _placeholder(secret) or _MARKER_RE.fullmatch(secret):
            return secret
        self._counts[rule_id] += 1
        return MARKER.format(rule=rule_id, digest=_digest(secret))

    def _scan(self, text: str) -> str:
        """The pattern's replacements (as re.sub would make them), tried only where RE2 says."""
        if not text:
            return text
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: RE2 cannot read it, Python re alone can
            return self._pattern.sub(lambda m: self._replace(m, self._group_rules), text)
        found = self._prefilter.search(data)
        if found is None:
            return text
        # No Python match starts before the leftmost RE2 match (RE2 matches a superset), so trying
        # re.match at each RE2 start, left to right, finds exactly the matches re.sub would.
        offsets = _Offsets(text, data)
        pieces: list[str] = []
        done = 0
        while found is not None:
            start = offsets.char(found.start())
            match = self._pattern.match(text, start)
            if match is None or match.end() == start:
                resume = start + 1
            else:
                pieces += [text[done:start], self._replace(match, self._group_rules)]
                done = resume = match.end()
            if resume >= len(text):
                break
            found = self._prefilter.search(data, offsets.byte(resume))
        pieces.append(text[done:])
        return "".join(pieces)

    def _replace(self, match: re.Match[str], rules: list[RedactionRule | None]) -> str:
        index = match.lastindex
        rule = rules[index] if index is not None else None
        whole = match.group(0)
        if rule is None or index is None:
            return whole
        secret = match.group(index)
        if rule.id == "private_key":
            # Without its END line the block runs to the end of this text: later lines follow.
            self._pem_opened = _PEM_END.search(whole) is None
        if not secret:
            return whole
        start, end = match.start(index) - match.start(), match.end(index) - match.start()
        # What the match keeps (a name, a URL's user) may hold a secret of another shape.
        pem_opened = self._pem_opened
        kept_before, kept_after = self._kept(whole[:start]), self._kept(whole[end:])
        self._pem_opened = pem_opened
        return kept_before + self._marker(rule.id, secret) + kept_after

    def _kept(self, text: str) -> str:
        if not text:
            return text
        return self._shapes.sub(lambda m: self._replace(m, self._shape_rules), text)

    def _pem_continuation(self, text: str) -> tuple[str, str]:
        """Redact the body lines of a PEM key whose BEGIN line came in an earlier call."""
        done: list[str] = []
        lines = text.splitlines(keepends=True)
        for number, line in enumerate(lines):
            content = line.rstrip("\r\n")
            ending = line[len(content) :]
            end = _PEM_END.search(content)
            if end:
                before = content[: end.start()]
                secret = self._marker("private_key", before) if before.strip() else before
                done.append(secret + content[end.start() :] + ending)
                self._pem_open = False
                return "".join(done), "".join(lines[number + 1 :])
            if not _PEM_BODY.fullmatch(content):
                self._pem_open = False
                return "".join(done), "".join(lines[number:])
            body = content.strip()
            done.append(self._marker("private_key", content) + ending if body else line)
        return "".join(done), ""

    def _secret_name(self, name: str) -> str | None:
        return next((rule_id for rule_id, rx in self._names if rx.fullmatch(name)), None)

    def _secret_option(self, option: str) -> str | None:
        return next((rule_id for rule_id, rx in self._options if rx.fullmatch(option)), None)

    def _env_value(self, name: str, value: str) -> str | None:
        rule_id = self._secret_name(name)
        if rule_id is not None:
            return self._marker(rule_id, value)
        if self._redaction.allowed(name):
            return self._scan(value)
        return None

    def _env_item(self, item: str) -> str:
        name, sep, value = item.partition("=")
        if not sep:
            return self._scan(item)
        kept = self._env_value(name, value)
        if kept is not None:
            return f"{name}={kept}"
        if value != OMITTED:
            self._counts["omitted"] += 1
        return f"{name}={OMITTED}"

    def _argv(self, argv: Sequence[str], command: bool) -> list[str]:
        out: list[str] = []
        secret_rule: str | None = None  # the option before took a value (argparse nargs="+")
        env_next = False
        leading = command
        for token in argv:
            if secret_rule is not None and not _option_like(token):
                out.append(self._marker(secret_rule, token))
                continue
            secret_rule = None
            if env_next:
                out.append(self._env_item(token))
                env_next = False
                continue
            if leading and (_ASSIGNMENT.match(token) or token in ("env", "/usr/bin/env")):
                out.append(self._env_item(token))
                continue
            leading = False
            option, sep, value = token.partition("=")
            if command and token in ("-e", "--env"):
                env_next = True
                out.append(token)
            elif command and option == "--env" and sep:
                out.append(f"--env={self._env_item(value)}")
            elif option.startswith("-") and (rule_id := self._secret_option(option)):
                if sep:
                    out.append(f"{option}={self._marker(rule_id, value)}")
                else:
                    secret_rule = rule_id
                    out.append(token)
            else:
                out.append(self._scan(token))
        return out

    def _json(self, value: Any, key: str | None) -> Any:
        if isinstance(value, str):
            return self._scan(value)
        if isinstance(value, Mapping):
            if isinstance(value.get("name"), str) and "value" in value:
                return self._env_pair(value)
            return {
                (self._scan(k) if isinstance(k, str) else k): self._json_member(k, v)
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            if value and all(isinstance(item, str) for item in value):
                return self._argv(value, command=key in _COMMAND_KEYS)
            return [self._json(item, key) for item in value]
        return value

    def _json_member(self, key: Any, value: Any) -> Any:
        if not isinstance(key, str):
            return self._json(value, None)
        rule_id = self._secret_name(key)
        if rule_id is not None:
            return self._secret_values(rule_id, value, lambda v: self._json(v, key))
        if key == "Env" and isinstance(value, list) and all(isinstance(i, str) for i in value):
            return self.env_items(value)
        return self._json(value, key)

    def _secret_values(self, rule_id: str, value: Any, otherwise: Callable[[Any], Any]) -> Any:
        """A value under a secret name: strings, numbers and lists of them become markers."""
        if isinstance(value, str):
            return self._marker(rule_id, value)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return self._marker(rule_id, str(value))
        if isinstance(value, list) and all(isinstance(i, str | int | float) for i in value):
            return [self._secret_values(rule_id, item, otherwise) for item in value]
        return otherwise(value)

    def _env_pair(self, pair: Mapping[str, Any]) -> dict[str, Any]:
        """A Kubernetes-style {"name": N, "value": V}: the env rules decide V."""
        out = {k: self._json(v, k) for k, v in pair.items() if k not in ("name", "value")}
        name, value = pair["name"], pair["value"]
        rule_id = self._secret_name(name)
        if rule_id is not None:
            kept: Any = self._secret_values(rule_id, value, lambda v: self._json(v, "value"))
        elif self._redaction.allowed(name):
            kept = self._json(value, "value")
        elif value is None or value == OMITTED:
            kept = value
        else:
            self._counts["omitted"] += 1
            kept = OMITTED
        return {"name": name, "value": kept, **out}
