"""Redaction of everything a bundle writes: text (also streamed in bounded pieces), environments,
command lines and JSON documents.

The rules are data (knowledge/data/redaction.yaml). A secret becomes MARKER, whose digest is the
first 8 hex of HMAC-SHA256 under a random key made for this redactor (one per bundle) and never
stored: equal values inside one bundle share a tag, and a guessed password cannot be confirmed
from the bundle. Every secret found by its context (a name, an option, a header) is also redacted
wherever else its value appears later, so parsed data that lost the context stays clean.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import contextlib
import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, TypeVar

from pydantic import BaseModel

from vllm_triage.knowledge import KnowledgeBase, load_knowledge
from vllm_triage.knowledge.schema import RedactionRule
from vllm_triage.redact.lines import (
    BARE_ARGUMENT,
    BARE_TO_END,
    CONTINUED,
    LIST_ITEM,
    LIST_LINE,
    LONG_RUN,
    MORE_LISTED,
    MORE_SPACED,
    PAIR_VALUE,
    PEM_BODY,
    PEM_END,
    QUOTED,
    LineState,
    PemBlock,
    PendingValue,
    envelope,
    indentation,
    trim,
)
from vllm_triage.redact.rules import (
    PENDING_ROLES,
    CompiledRules,
    Group,
    compiled_rules,
    prefilter,
)
from vllm_triage.redact.scanner import (
    SecretScanner,
    ascii_bytes,
    line_end,
    secret_scanner,
)
from vllm_triage.safejson import JsonError, parse_json

Model = TypeVar("Model", bound=BaseModel)

MARKER = "[REDACTED:{rule}:{digest}]"
OMITTED = "[OMITTED]"

_MARKER_RE = re.compile(r"\[REDACTED:[a-z0-9_]+:[0-9a-f]{8}\]|\[OMITTED\]")
# Values that stand for no secret: unset, booleans, a masked value, a tokenizer special token.
_PLACEHOLDERS = frozenset({"", "None", "null", "nil", "True", "False", "true", "false"})
_PLACEHOLDER_RE = re.compile(r"<[^<>\r\n]*>|\*+")
# A value made only of references to a value kept elsewhere holds no secret and shows where the
# secret comes from: ${VAR}, ${{ ci.expression }}, {{ template }}, $(command), %VAR%, and $VAR
# in capitals (a lower-case `$word` may be a password that starts with a dollar sign).
_REFERENCE_RE = re.compile(
    r"\$\{\{[^{}\r\n]*\}\}|\$\{[^{}\r\n]*\}|\{\{[^{}\r\n]*\}\}|\$\([^()\r\n]*\)"
    r"|%[A-Za-z_][A-Za-z0-9_]*%|\$[A-Z_][A-Z0-9_]*(?![a-z])|\$[0-9]"
)
_BETWEEN_REFERENCES = re.compile(r"[\"':@/._ -]*")
_NEGATIVE_NUMBER = re.compile(r"-[0-9]*\.?[0-9]+")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_KEY_SEGMENTS = re.compile(r"[./:]")
_COMMAND_KEYS = frozenset({"Cmd", "Entrypoint", "Args", "args", "command", "Command", "argv"})
_PRIVATE_KEY = "private_key"

# Secrets remembered to be redacted wherever else they appear: long enough not to hit words.
_KNOWN_MIN, _KNOWN_MAX, _KNOWN_LIMIT = 6, 4096, 256
# JSON inside a string value (kubectl's last-applied-configuration) is parsed up to this size.
_EMBEDDED_JSON_MAX = 1024 * 1024
# Base64 runs are decoded (to find credentials inside) up to this size, and this many levels deep
# (a .dockerconfigjson holds base64 `auth` pairs).
_DECODED_MAX = 256 * 1024
_DECODED_DEPTH = 2
# What a decoded document is when it is a registry credential file, whatever the other rules say.
_CREDENTIAL_KEYS = frozenset({"auths", "auth", "password", "identitytoken", "registrytoken"})
# A decoded `user:password` pair (Basic credentials): a user without blanks, a password of 4+.
_BASIC_PAIR = re.compile(r"[A-Za-z0-9._@$+~-]{1,256}:[^\s]{4,}")
# How far before a token a last rule's exception words keep it (`sha256 base64 X`).
_KEPT_AFTER_WINDOW = 24
# A value that opens a PEM private key: its body follows on the next lines.
_PEM_OPENING = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")

# Streaming: pieces read at a time, and what a piece of a very long line keeps for the next one
# (a secret cut at the boundary is found whole there; the rules' contexts are far shorter).
STREAM_BLOCK = 1024 * 1024
OVERLAP = 64 * 1024
_PEM_MAX_MISSES = 8
_PENDING_MAX_LINES = 3
_LIST_MAX_LINES = 256


@dataclass(frozen=True)
class RedactedEnv:
    """An environment ready for a bundle: kept variables (secrets as markers), omitted names."""

    kept: dict[str, str] = field(default_factory=dict)
    omitted: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Streamed:
    """What a streamed copy did: bytes read from the source, and whether it reached the end."""

    read: int
    complete: bool


def _placeholder(value: str) -> bool:
    """Whether a value stands for a secret instead of being one: empty, None, <...>, ***, or
    nothing but references to where the secret is kept (`$PASSWORD`, `${{ secrets.TOKEN }}`)."""
    if value in _PLACEHOLDERS or _PLACEHOLDER_RE.fullmatch(value) is not None:
        return True
    rest, references = _REFERENCE_RE.subn("", value)
    return references > 0 and _BETWEEN_REFERENCES.fullmatch(rest) is not None


def _option_like(token: str) -> bool:
    """Whether argparse reads the token as an option (not as a value like -1 or -0.5)."""
    return token.startswith("-") and not _NEGATIVE_NUMBER.fullmatch(token)


def _value_span(match: re.Match[str]) -> tuple[int, int]:
    """The span of the value group that took part in a match of the continuation shapes."""
    for name in ("e", "d", "s", "b", "l"):
        if name in match.re.groupindex and match.group(name) is not None:
            return match.span(name)
    raise ValueError("no value group in the match")


def _inside_marker(text: str, start: int, end: int) -> bool:
    opening = text.rfind("[REDACTED:", max(0, start - 64), start + 1)
    return opening >= 0 and text.find("]", opening) >= end - 1


class _Offsets:
    """Converts offsets between a str and its UTF-8 bytes from a cursor that moves with the scan
    (forward over the text once; back a line at most), so the cost stays linear."""

    def __init__(self, text: str, data: bytes) -> None:
        self._text, self._data = text, data
        self._ascii = len(text) == len(data)
        self._char = self._byte = 0

    def char(self, byte: int) -> int:
        if self._ascii:
            return byte
        if byte >= self._byte:
            self._char += len(self._data[self._byte : byte].decode("utf-8"))
        else:
            self._char -= len(self._data[byte : self._byte].decode("utf-8"))
        self._byte = byte
        return self._char

    def byte(self, char: int) -> int:
        if self._ascii:
            return char
        if char >= self._char:
            self._byte += len(self._text[self._char : char].encode("utf-8"))
        else:
            self._byte -= len(self._text[char : self._char].encode("utf-8"))
        self._char = char
        return self._byte


class Redactor:
    """Replaces every secret the knowledge base's redaction rules know; counts per rule, no values.

    Not thread-safe; one per bundle. text() follows a secret over consecutive calls (a PEM key's
    body lines, a value on the line after its name) until end_of_file().
    """

    def __init__(self, kb: KnowledgeBase | None = None, *, key: bytes | None = None) -> None:
        kb = kb or load_knowledge()
        self._redaction = kb.redaction
        self._rules: CompiledRules = compiled_rules(self._redaction)
        self._scanner: SecretScanner = secret_scanner(kb.secret_rules)
        self._key = key if key is not None else secrets.token_bytes(32)
        self._counts = dict.fromkeys((rule.id for rule in self._redaction.rules), 0)
        self._counts["omitted"] = 0
        self._known: dict[str, str] = {}  # secret -> rule id, in memory only
        self._longest_first: list[str] = []
        self._known_changed = False
        self._learning = False
        self._filter = self._rules.prefilter
        self._state: LineState | None = None
        self._spill: Group | None = None
        self._decoding = 0

    # -- public API -------------------------------------------------------------------------

    def text(self, text: str) -> str:
        """Every text rule over text; call it line by line or with whole documents."""
        if self._state is None and not self._known_changed:  # the common case, first: no secret
            try:
                data = text.encode("utf-8")
            except UnicodeEncodeError:
                data = b""
            if data and not self._filter.search(data):
                return self._scanned(text)
        return self._redact(text, final=True)[0]

    def end_of_file(self) -> None:
        """Forget a secret left open at the end of a file: the next text() is another file."""
        self._state = None
        self._spill = None

    def stream(
        self, blocks: Iterable[bytes], sink: BinaryIO, deadline: float | None = None
    ) -> Streamed:
        """Write the blocks (at most STREAM_BLOCK bytes each) redacted to sink, in bounded pieces
        whatever the line lengths; stop at the deadline, and write only what was redacted.
        Undecodable bytes pass through unchanged."""
        decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
        carry = ""
        read = 0
        source = iter(blocks)
        try:
            while True:
                if deadline is not None and time.monotonic() >= deadline:
                    return Streamed(read, False)
                block = next(source, None)
                if block is None:
                    text = carry + decoder.decode(b"", final=True)
                    sink.write(self._encode(self._redact(text, final=True)[0]))
                    return Streamed(read, True)
                read += len(block)
                text = carry + decoder.decode(block)
                cut = text.rfind("\n") + 1
                if cut:
                    redacted = self._redact(text[:cut], final=True)[0]
                    carry = text[cut:]
                else:
                    redacted, consumed = self._redact(text, final=False)
                    carry = text[consumed:]
                sink.write(self._encode(redacted))
        finally:
            self.end_of_file()

    def env(self, env: Mapping[str, str]) -> RedactedEnv:
        """Keep allow-listed and secret-named variables (secrets as markers); omit the rest."""
        result = RedactedEnv()
        with self._parsed():
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
        with self._parsed():
            return [self._env_item(item) for item in items]

    def argv(self, argv: Sequence[str]) -> list[str]:
        """A parsed command line: secret options, -e/--env and leading NAME=V, text rules on all."""
        with self._parsed():
            return self._argv(argv, command=True)

    def json(self, document: Any) -> Any:
        """A parsed JSON document: secret keys, k8s env pairs, "Env" lists, argv lists, strings
        (JSON inside a string is parsed and redacted as a document)."""
        with self._parsed():
            return self._json(document, None)

    def model(self, artifact: Model) -> Model:
        """An artifact with every string in it redacted, as json() does: what a case holds."""
        return type(artifact).model_validate(self.json(artifact.model_dump(mode="json")))

    def report(self) -> dict[str, int]:
        """Replacements per rule id, and `omitted` for values dropped by the allow-list."""
        return dict(self._counts)

    # -- markers and remembered secrets ----------------------------------------------------

    def _digest(self, secret: str) -> str:
        data = secret.encode("utf-8", "surrogatepass")
        return hmac.new(self._key, data, hashlib.sha256).hexdigest()[:8]

    def _marker(self, rule_id: str, secret: str) -> str:
        if _placeholder(secret) or _MARKER_RE.fullmatch(secret):
            return secret
        self._counts[rule_id] = self._counts.get(rule_id, 0) + 1
        if self._learning:
            self._remember(rule_id, secret)
        return MARKER.format(rule=rule_id, digest=self._digest(secret))

    @contextlib.contextmanager
    def _parsed(self) -> Iterator[None]:
        """While redacting parsed data (exact contexts: keys, env names, options), the secrets
        found are remembered, to be redacted wherever they appear later without a context."""
        learning, self._learning = self._learning, True
        try:
            yield
        finally:
            self._learning = learning

    def _remember(self, rule_id: str, secret: str) -> None:
        if (
            rule_id == _PRIVATE_KEY  # key lines are found by their block, and are many
            or secret in self._known
            or len(self._known) >= _KNOWN_LIMIT
            or not _KNOWN_MIN <= len(secret) <= _KNOWN_MAX
            or secret.isdigit()
            or _MARKER_RE.search(secret)
        ):
            return
        self._known[secret] = rule_id
        self._known_changed = True

    def _refresh_literals(self) -> None:
        """One prefilter for the rules and the remembered secrets (parsed data is redacted
        before the logs, so it is rebuilt a few times per bundle, not per line)."""
        if not self._known_changed:
            return
        self._known_changed = False
        self._longest_first = sorted(self._known, key=len, reverse=True)
        encodable = []
        for secret in self._longest_first:
            try:
                secret.encode("utf-8")
            except UnicodeEncodeError:  # found by the Python path only
                continue
            encodable.append(re.escape(secret))
        source = "|".join([self._rules.prefilter_source, *encodable])
        self._filter = prefilter(source) if encodable else self._rules.prefilter

    # -- the text scan ------------------------------------------------------------------------

    def _redact(self, text: str, final: bool) -> tuple[str, int]:
        """The redacted text up to the returned offset. `final`: the text ends at a line end;
        otherwise it is a piece of a long line and the last OVERLAP characters wait for more."""
        size = len(text)
        if not size:
            return "", 0
        self._refresh_literals()
        out: list[str] = []
        done = self._continue_spill(text, out) if self._spill else 0
        limit = size if final else max(done, size - OVERLAP)
        candidates = _Candidates(text, self._filter, self._rules, self._longest_first)
        search = done
        # The normal scan's end: where a state takes over (this text starts with a line under a
        # state from the previous call, or the line where a match armed one ends).
        stop = done if self._state is not None else limit
        while done < size:
            if self._state is not None and done >= stop:
                newline = text.find("\n", done)
                if newline < 0 and not final and size - done <= OVERLAP:
                    break
                end = size if newline < 0 else newline + 1
                line_out, resume = self._continue_line(text[done:end])
                out.append(line_out)
                done = search = done + resume
                stop = limit if self._state is None else done
                continue
            start = candidates.next(search)
            if start < 0 or start >= stop:
                if done < stop:
                    out.append(text[done:stop])
                    done = search = stop
                if self._state is None or done >= size:
                    break
                stop = done
                continue
            replaced = self._at(text, start, final)
            if replaced is None:
                search = start + 1
                continue
            replacement, end = replaced
            out += [text[done:start], replacement]
            done = search = end
            if self._state is not None and stop == limit:
                # The state starts with the next line (a continuation may have reached it).
                newline = end - 1 if text.endswith("\n", 0, end) else text.find("\n", end)
                stop = size if newline < 0 else newline + 1
        consumed = done if not final else size
        if final and done < size:
            out.append(text[done:])
        return self._scanned("".join(out)), consumed

    def _scanned(self, text: str) -> str:
        """What the rules left in clear, through the published scanner's rules (redact/scanner)
        and the rules that run last (a random token with no name)."""
        data = ascii_bytes(text)
        found = self._scanner.find(text, data) + self._rules.last.find(text, data)
        if not found:
            return text
        found.sort(key=lambda f: (f.start, -f.end))
        pieces: list[str] = []
        position = 0
        for item in found:
            if (
                item.start < position
                or _inside_marker(text, item.start, item.end)
                or _MARKER_RE.search(text, item.start, item.end)
            ):
                continue  # a marker is never redacted again, nor swallowed by a larger match
            pieces += [
                text[position : item.start],
                self._marker(item.rule_id, text[item.start : item.end]),
            ]
            position = item.end
        pieces.append(text[position:])
        return "".join(pieces)

    def _at(self, text: str, start: int, final: bool) -> tuple[str, int] | None:
        """The replacement of the match at start and where it ends, or None for no match."""
        match = self._rules.pattern.match(text, start)
        if match is not None and match.end() > start:
            replaced = self._replace(match, text, final)
            if replaced is not None:
                return replaced
        for secret in self._longest_first:
            if text.startswith(secret, start) and not _inside_marker(
                text, start, start + len(secret)
            ):
                return self._marker(self._known[secret], secret), start + len(secret)
        return None

    def _replace(self, match: re.Match[str], text: str, final: bool) -> tuple[str, int] | None:
        """The match's replacement and where it ends; None for a decoded rule's match that holds
        no secret (the scan goes on inside it)."""
        index = match.lastindex
        group = self._rules.groups[index] if index is not None else None
        whole = match.group()
        if group is None or index is None:
            return whole, match.end()
        rule_id = group.rule.id
        if group.role in PENDING_ROLES:
            self._arm(group, match, text)
            return self._kept(whole), match.end()
        start, end = match.span(index)
        if rule_id == _PRIVATE_KEY:
            # Without its END label the key goes on in the next lines, whatever their envelope.
            if PEM_END.search(whole) is None:
                self._state = PemBlock()
            start, end = trim(text, start, end)
        elif group.rule.decoded is not None and not self._decodes_to_secret(text[start:end]):
            return None

        elif (
            _PEM_OPENING.match(text, start)
            and PEM_END.search(text, start, line_end(text, start)) is None
        ):
            self._state = PemBlock()  # PRIVATE_KEY=-----BEGIN ...: the body is on the next lines
        if start >= end:
            return whole, match.end()
        base = match.start()
        pieces = [
            self._kept(whole[: start - base]),
            self._marker(rule_id, text[start:end]),
            self._kept(whole[end - base :]),
        ]
        finish = match.end()
        if group.rule.multiple:
            more, finish = self._more_values(rule_id, text, finish)
            pieces.append(more)
        if not final and end == len(text):
            self._spill = group  # the secret may go on in the next piece of this line
        return "".join(pieces), finish

    def _decodes_to_secret(self, run: str) -> bool:
        """Whether a base64 run decodes to credentials: a registry credential document, a Basic
        `user:password` pair, or text in which the rules find a secret (learned, so that its plain
        occurrences are redacted too)."""
        if len(run) > _DECODED_MAX or self._decoding >= _DECODED_DEPTH:
            return False
        try:
            decoded = base64.b64decode(run + "=" * (-len(run) % 4), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return False
        if not decoded.isprintable() and not decoded.strip().isprintable():
            return False
        if _BASIC_PAIR.fullmatch(decoded.strip()):
            return True
        try:
            document = parse_json(decoded, "decoded base64", max_bytes=_DECODED_MAX)
        except JsonError:
            document = None
        if isinstance(document, dict) and _holds_credential_keys(document):
            return True
        state, spill, learning = self._state, self._spill, self._learning
        self._state, self._spill, self._learning = None, None, True
        self._decoding += 1
        try:
            return self._redact(decoded, final=True)[0] != decoded
        finally:
            self._decoding -= 1
            self._state, self._spill, self._learning = state, spill, learning

    def _more_values(self, rule_id: str, text: str, position: int) -> tuple[str, int]:
        """The further values of an option that takes several (`--api-key k1 k2`)."""
        pieces: list[str] = []
        while True:
            more = MORE_SPACED.match(text, position) or MORE_LISTED.match(text, position)
            if more is None:
                break
            start, end = _value_span(more)
            pieces += [
                text[position:start],
                self._marker(rule_id, text[start:end]),
                text[end : more.end()],
            ]
            position = more.end()
        continued = CONTINUED.match(text, position)
        if continued is not None:
            self._state = PendingValue(rule_id, "argument")
            pieces.append(continued.group())
            position = continued.end()
        return "".join(pieces), position

    def _arm(self, group: Group, match: re.Match[str], text: str) -> None:
        """A value announced at the end of this line: the next line holds it."""
        line_start = text.rfind("\n", 0, match.start()) + 1
        lead, _ = envelope(text[line_start : match.start()])
        indent = indentation(text, line_start + lead)
        self._state = PendingValue(group.rule.id, group.role, indent=indent)

    def _kept(self, text: str) -> str:
        """What a match keeps in clear (a name, a URL's user): shapes and remembered secrets."""
        if not text:
            return text
        rules = self._rules

        def shape(match: re.Match[str]) -> str:
            index = match.lastindex
            group = rules.shape_groups[index] if index is not None else None
            if group is None or index is None or not match.group(index):
                return match.group()
            start, end = match.span(index)
            whole, base = match.group(), match.start()
            secret = self._marker(group.rule.id, match.group(index))
            return whole[: start - base] + secret + whole[end - base :]

        text = rules.shapes.sub(shape, text)
        for secret in self._longest_first:
            if secret in text:
                text = text.replace(secret, self._marker(self._known[secret], secret))
        return text

    def _continue_spill(self, text: str, out: list[str]) -> int:
        """The rest of a secret cut at the end of the previous piece of the same line."""
        group, self._spill = self._spill, None
        assert group is not None
        run = re.compile(group.spill).match(text)
        end = run.end() if run else 0
        if end:
            out.append(self._marker(group.rule.id, text[:end]))
        return end

    # -- lines after a secret that spans lines --------------------------------------------------

    def _continue_line(self, line: str) -> tuple[str, int]:
        """One line under a multi-line state: its redacted head, and where normal scanning
        resumes in it (the state is cleared when the secret has ended)."""
        start, end = envelope(line)
        if isinstance(self._state, PemBlock):
            return self._pem_line(self._state, line, start, end)
        assert self._state is not None
        return self._pending_line(self._state, line, start, end)

    def _pem_line(self, state: PemBlock, line: str, start: int, end: int) -> tuple[str, int]:
        close = PEM_END.search(line, start, end)
        if close is not None:
            self._state = None
            body_start, body_end = trim(line, start, close.start())
            if body_start >= body_end:
                return line[: close.end()], close.end()
            secret = self._marker(_PRIVATE_KEY, line[body_start:body_end])
            return line[:body_start] + secret + line[body_end : close.end()], close.end()
        if PEM_BODY.fullmatch(line, start, end):
            body_start, body_end = trim(line, start, end)
            if body_start >= body_end:
                return line, len(line)
            state.misses = 0
            secret = self._marker(_PRIVATE_KEY, line[body_start:body_end])
            return line[:body_start] + secret + line[body_end:], len(line)
        state.misses += 1
        if state.misses > _PEM_MAX_MISSES:
            self._state = None
            return "", 0
        # An interleaved line, or a body line with an envelope not known here: the other rules,
        # then every run of base64 long enough to be key material.
        scanned = self._isolated(line)
        return LONG_RUN.sub(self._key_run, scanned), len(line)

    def _key_run(self, match: re.Match[str]) -> str:
        run = match.group()
        if any(c.isdigit() for c in run) and any(c.isalpha() for c in run):
            return self._marker(_PRIVATE_KEY, run)
        return run

    def _pending_line(
        self, state: PendingValue, line: str, start: int, end: int
    ) -> tuple[str, int]:
        at = start + indentation(line, start)
        if at >= end:  # a blank line: the value may still come
            state.lines += 1
            if state.lines > _PENDING_MAX_LINES and state.role != "block":
                self._state = None
            return line, len(line)
        handler: Callable[[PendingValue, str, int, int], tuple[str, int]] = {
            "separator": self._pending_separator,
            "value": self._pending_value,
            "argument": self._pending_argument,
            "list": self._pending_list,
            "pair": self._pending_pair,
            "block": self._pending_block,
        }[state.role]
        return handler(state, line, at, end)

    def _secret_at(self, rule_id: str, line: str, match: re.Match[str]) -> str:
        """The line up to the end of match, its value group replaced by a marker."""
        start, end = _value_span(match)
        return line[:start] + self._marker(rule_id, line[start:end]) + line[end : match.end()]

    def _pending_separator(
        self, state: PendingValue, line: str, at: int, end: int
    ) -> tuple[str, int]:
        if line[at] not in ":=":
            self._state = None
            return "", 0
        state.role = "value"
        after = at + 1
        if after + indentation(line, after) >= end:
            return line, len(line)
        return self._pending_value(state, line, after + indentation(line, after), end)

    def _pending_value(self, state: PendingValue, line: str, at: int, end: int) -> tuple[str, int]:
        self._state = None
        if line.startswith("[", at):
            self._state = PendingValue(state.rule_id, "list")
            return self._pending_list(self._state, line, at + 1, end)
        quoted = QUOTED.match(line, at, end)
        if quoted is not None:
            return self._secret_at(state.rule_id, line, quoted), quoted.end()
        bare = BARE_TO_END.fullmatch(line, at, end)
        if bare is not None:
            return self._secret_at(state.rule_id, line, bare), bare.end()
        return "", 0

    def _pending_argument(
        self, state: PendingValue, line: str, at: int, end: int
    ) -> tuple[str, int]:
        self._state = None
        if _option_like(line[at:end].split(maxsplit=1)[0]):
            return "", 0
        value = QUOTED.match(line, at, end) or BARE_ARGUMENT.match(line, at, end)
        if value is None:
            return "", 0
        head = self._secret_at(state.rule_id, line, value)
        more, position = self._more_values(state.rule_id, line, value.end())
        return head + more, position

    def _pending_list(self, state: PendingValue, line: str, at: int, end: int) -> tuple[str, int]:
        if not LIST_LINE.fullmatch(line, at, end):  # not list items: the list is over
            self._state = None
            return "", 0
        pieces, position = [line[:at]], at
        while position < end:
            item = LIST_ITEM.match(line, position, end)
            if item is None:
                break
            if item.group("close") is not None:
                self._state = None
                pieces.append(line[position : item.end()])
                return "".join(pieces), item.end()
            pieces.append(self._secret_at(state.rule_id, line, item)[position:])
            position = item.end()
        state.lines += 1
        if state.lines > _LIST_MAX_LINES:
            self._state = None
        pieces.append(line[position:])
        return "".join(pieces), len(line)

    def _pending_pair(self, state: PendingValue, line: str, at: int, end: int) -> tuple[str, int]:
        self._state = None
        key = PAIR_VALUE.match(line, at, end)
        if key is None:
            return "", 0
        head, resume = self._pending_value(state, line, key.end(), end)
        return (head, resume) if resume else ("", 0)

    def _pending_block(self, state: PendingValue, line: str, at: int, end: int) -> tuple[str, int]:
        depth = at - envelope(line)[0]
        if state.block_indent < 0 and depth > state.indent:
            state.block_indent = depth
        if state.block_indent < 0 or depth < state.block_indent:
            self._state = None
            return "", 0
        body_end = trim(line, at, end)[1]
        return line[:at] + self._marker(state.rule_id, line[at:body_end]) + line[body_end:], len(
            line
        )

    # -- values without a line around them ---------------------------------------------------

    def _isolated(self, text: str) -> str:
        """Text rules over one value (a JSON string, an argv token): no state in or out."""
        saved, self._state, spill, self._spill = self._state, None, self._spill, None
        try:
            return self._redact(text, final=True)[0]
        finally:
            self._state, self._spill = saved, spill

    @staticmethod
    def _encode(text: str) -> bytes:
        return text.encode("utf-8", errors="surrogateescape")

    def _secret_name(self, name: str) -> str | None:
        return next((rule_id for rule_id, rx in self._rules.names if rx.fullmatch(name)), None)

    def _secret_key(self, key: str) -> tuple[str, str | None] | None:
        """The rule of a JSON key that holds a secret (an env-style name, also as the last part of
        a dotted or slashed key, a header, an option) and the prefix its value keeps."""
        if key.startswith("-") and (rule := self._secret_option(key, ())):
            return rule.id, None
        for rule, header in self._rules.headers:
            if header.fullmatch(key):
                return rule.id, rule.keep_prefix
        last = _KEY_SEGMENTS.split(key)[-1]
        for candidate in (key, key.replace("-", "_"), last, last.replace("-", "_")):
            if rule_id := self._secret_name(candidate):
                return rule_id, None
        return None

    def _secret_option(self, option: str, before: Sequence[str]) -> RedactionRule | None:
        """The rule of a secret option, when the words before it give it its meaning."""
        for entry in self._rules.options:
            if not entry.option.fullmatch(option):
                continue
            if entry.context is None or entry.context.search(" ".join(before)):
                return entry.rule
        return None

    def _env_value(self, name: str, value: str) -> str | None:
        rule_id = self._secret_name(name)
        if rule_id is not None:
            return self._marker(rule_id, value)
        if self._redaction.allowed(name):
            return self._isolated(value)
        return None

    def _env_item(self, item: str) -> str:
        name, sep, value = item.partition("=")
        if not sep:
            return self._isolated(item)
        kept = self._env_value(name, value)
        if kept is not None:
            return f"{name}={kept}"
        if value != OMITTED:
            self._counts["omitted"] += 1
        return f"{name}={OMITTED}"

    def _argv(self, argv: Sequence[str], command: bool) -> list[str]:
        out: list[str] = []
        secret_rule: RedactionRule | None = None  # the option before takes this value
        env_next = False
        leading = command
        for index, token in enumerate(argv):
            if secret_rule is not None and not _option_like(token):
                out.append(self._marker(secret_rule.id, token))
                if not secret_rule.multiple:
                    secret_rule = None
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
            elif option.startswith("-") and (rule := self._secret_option(option, argv[:index])):
                if sep:
                    out.append(f"{option}={self._marker(rule.id, value)}")
                else:
                    secret_rule = rule
                    out.append(token)
            else:
                out.append(self._isolated(token))
        return out

    def _json(self, value: Any, key: str | None) -> Any:
        if isinstance(value, str):
            return self._json_string(value)
        if isinstance(value, Mapping):
            if isinstance(value.get("name"), str) and "value" in value:
                return self._env_pair(value)
            return {
                (self._isolated(k) if isinstance(k, str) else k): self._json_member(k, v)
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            if value and all(isinstance(item, str) for item in value):
                return self._argv(value, command=key in _COMMAND_KEYS)
            return [self._json(item, key) for item in value]
        return value

    def _json_string(self, value: str) -> str:
        """A string value; one that holds a JSON object or array is redacted as a document."""
        stripped = value.strip()
        if (
            len(stripped) > 1
            and len(stripped) <= _EMBEDDED_JSON_MAX
            and (stripped[0], stripped[-1]) in (("{", "}"), ("[", "]"))
        ):
            try:
                document = parse_json(stripped, "a JSON string inside JSON")
            except JsonError:
                pass
            else:
                inner = json.dumps(
                    self._json(document, None), ensure_ascii=False, separators=(",", ":")
                )
                start = value.index(stripped[0])
                return value[:start] + inner + value[start + len(stripped) :]
        return self._isolated(value)

    def _json_member(self, key: Any, value: Any) -> Any:
        if not isinstance(key, str):
            return self._json(value, None)
        secret = self._secret_key(key)
        if secret is not None:
            rule_id, keep = secret
            return self._secret_values(rule_id, value, lambda v: self._json(v, key), keep)
        if key == "Env" and isinstance(value, list) and all(isinstance(i, str) for i in value):
            return self.env_items(value)
        return self._json(value, key)

    def _secret_values(
        self,
        rule_id: str,
        value: Any,
        otherwise: Callable[[Any], Any],
        keep: str | None = None,
    ) -> Any:
        """A value under a secret name: strings, numbers and lists of them become markers."""
        if isinstance(value, str):
            kept = re.match(keep, value, re.IGNORECASE) if keep else None
            prefix = kept.group() if kept else ""
            return prefix + self._marker(rule_id, value[len(prefix) :])
        if isinstance(value, int | float) and not isinstance(value, bool):
            return self._marker(rule_id, str(value))
        if isinstance(value, list) and all(isinstance(i, str | int | float) for i in value):
            return [self._secret_values(rule_id, item, otherwise, keep) for item in value]
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
        return {"name": self._isolated(name), "value": kept, **out}


def _holds_credential_keys(document: dict[str, Any], depth: int = 0) -> bool:
    """A registry credential file's keys (auths, auth, password, ...) anywhere in a few levels."""
    if depth > 4:
        return False
    for key, value in document.items():
        if isinstance(key, str) and key.lower() in _CREDENTIAL_KEYS and value:
            return True
        if isinstance(value, dict) and _holds_credential_keys(value, depth + 1):
            return True
    return False


class _Candidates:
    """Where a match may start: the prefilter on the UTF-8 bytes (a hit is kept until the scan
    passes it), or Python alone for text RE2 cannot read (lone surrogates). The Python pattern
    is asked for only then: compiling it costs a start-up more than a diagnosis's whole scan."""

    def __init__(
        self, text: str, prefilter: Any, rules: CompiledRules, literals: Sequence[str]
    ) -> None:
        self._text, self._prefilter = text, prefilter
        self._rules, self._literals = rules, literals
        try:
            self._data: bytes | None = text.encode("utf-8")
        except UnicodeEncodeError:
            self._data = None
        self._offsets = _Offsets(text, self._data) if self._data is not None else None
        self._hit = -1  # byte offset of the last prefilter hit, or len(data) for none left

    def next(self, position: int) -> int:
        """The first possible start at or after position, or -1."""
        if self._data is None or self._offsets is None:
            found = self._rules.pattern.search(self._text, position)
            starts = [found.start()] if found is not None else []
            starts += [self._text.find(secret, position) for secret in self._literals]
            return min((start for start in starts if start >= 0), default=-1)
        byte = self._offsets.byte(position)
        if self._hit < byte:
            found = self._prefilter.search(self._data, byte)
            self._hit = len(self._data) if found is None else found.start()
        return -1 if self._hit == len(self._data) else self._offsets.char(self._hit)
