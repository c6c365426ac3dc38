"""What a log line carries around its content, and the shapes of a value continued on a new line.

Logs reach a bundle with envelopes: `docker logs --timestamps` and `kubectl logs --timestamps` put
an RFC 3339 time before every line, Docker's json-file driver wraps each line in
{"log":"...\\n","stream":...}, vLLM prefixes `(APIServer pid=1) INFO 11-28 09:14:02 [file.py:12]`.
A secret that spans lines (a PEM key body, a value on the line after its name) is found in the
content whatever envelope each line has.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TIMESTAMP = (
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:[.,][0-9]+)?)?"
    r"(?:Z|[+-][0-9]{2}:?[0-9]{2})?"
)
_LOGGER = (
    r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)(?::|[ \t]+[0-9]{2}-[0-9]{2}[ \t]+"
    r"[0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?)"
)
# (APIServer pid=1), (EngineCore_DP0 pid=406), (RayWorkerWrapper pid=12, ip=10.0.0.1)
_PROCESS = r"\([A-Za-z_][A-Za-z0-9_.-]*(?:,?[ \t]+[A-Za-z_]+=[^()\s,]*)*\)"
# [api_server.py:123], [pod/vllm-0/vllm]: no quotes or blanks inside, a blank after.
_TAG = r"\[[^\[\]\s\"']{1,200}\](?=[ \t])"
# docker compose: `vllm-1  | `
_SERVICE = r"[A-Za-z0-9_.-]{1,64}[ \t]*\|(?=[ \t])"
_JSON_FILE = r'\{[ \t]*"log"[ \t]*:[ \t]*"'
_JSON_FILE_LINE = re.compile(_JSON_FILE)
_LEAD = re.compile(
    rf"(?:{_JSON_FILE})?(?:[ \t]*(?:"
    + "|".join((_TIMESTAMP, _LOGGER, _PROCESS, _TAG, _SERVICE))
    + "))*"
)
_JSON_STRING = re.compile(r'(?:[^"\\\r\n]|\\.)*')

# PEM: the END label, and what a body line holds (base64, RFC 1421 headers, an earlier marker).
PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
PEM_BODY = re.compile(
    r"[ \t]*(?:(?:[A-Za-z0-9+=]|\\?/)+|(?:Proc-Type|DEK-Info|Comment):[^\r\n]*"
    r"|\[REDACTED:private_key:[0-9a-f]{8}\])?[ \t]*"
)
# Inside an open PEM block, a line of unknown shape: base64 runs long enough to be key material.
LONG_RUN = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{16,}={0,2}")
# Blanks and escaped line breaks around a secret stay outside its marker.
_BLANK_OR_ESCAPE = r"(?:[ \t]|\\[rnt])*"
_LEADING = re.compile(_BLANK_OR_ESCAPE)
_TRAILING = re.compile(_BLANK_OR_ESCAPE + r"\Z")

# A value at the start of a continuation line: quoted (also JSON-escaped), or a bare scalar that is
# all the line holds (`"password":` then `  "x"`, `  x,`).
QUOTED = re.compile(
    r"""\\"(?P<e>(?:(?!\\")[^\r\n])*)\\"|"(?P<d>(?:[^"\\\r\n]|\\.)*)"|'(?P<s>(?:[^'\\\r\n]|\\.)*)\'"""
)
BARE_TO_END = re.compile(r"""(?P<b>[^\s"'\\,\[\]{}][^\s"'\\]*?)[ \t]*,?[ \t]*""")
# A line of list items (the rest of the line after the closing bracket is anything).
LIST_LINE = re.compile(
    r"""(?:[ \t,]*(?:\\"(?:(?!\\")[^\r\n])*\\"|"(?:[^"\\\r\n]|\\.)*"|'(?:[^'\\\r\n]|\\.)*'"""
    r"""|[^\s,\]"'\\\[{}:]+))*[ \t,]*(?:\].*)?"""
)
# A list item: quoted, or a bare scalar up to a comma or the closing bracket.
LIST_ITEM = re.compile(
    r'''[ \t,]*(?:\\"(?P<e>(?:(?!\\")[^\r\n])*)\\"|"(?P<d>(?:[^"\\\r\n]|\\.)*)"'''
    r"""|'(?P<s>(?:[^'\\\r\n]|\\.)*)'|(?P<b>[^\s,\]"'\\]+)|(?P<close>\]))"""
)
BARE_ARGUMENT = re.compile(r"""(?P<b>[^\s"'\\]*[^\s"'\\,;)\]}])""")
PAIR_VALUE = re.compile(r"""\\?["']?value\\?["']?[ \t]*:[ \t]*""")
# One more value of an option that takes several (`--api-key k1 k2`), spaced or in a list.
MORE_SPACED = re.compile(
    r"""[ \t\x00]++(?![-\\#|;&<>])(?:"(?P<d>(?:[^"\\\r\n]|\\.)*)"|'(?P<s>[^'\r\n]*)'"""
    r"""|(?P<b>[^\s"'\\]*[^\s"'\\,;)\]}]))"""
)
MORE_LISTED = re.compile(r"""(?P<q>\\?["']),[ \t]*+(?P=q)(?![-\[])(?P<l>[^"'\\\r\n]+)(?=(?P=q))""")
CONTINUED = re.compile(r"[ \t]+\\\\?[ \t]*(?:\r?\n|\r?\Z|(?:\\r)?\\n(?=\"))")


def envelope(line: str) -> tuple[int, int]:
    """Where the content of a line starts and ends, its envelope and line break left out."""
    start = _LEAD.match(line).end()  # type: ignore[union-attr]  # matches the empty string
    end = len(line)
    if line.endswith("\n"):
        end -= 2 if line.endswith("\r\n") else 1
    if _JSON_FILE_LINE.match(line):
        end = _JSON_STRING.match(line, start, end).end()  # type: ignore[union-attr]
        for escape in ("\\n", "\\r"):
            if line.endswith(escape, start, end):
                end -= 2
    return start, end


def trim(line: str, start: int, end: int) -> tuple[int, int]:
    """The span without the blanks and escaped line breaks at either end."""
    start = _LEADING.match(line, start, end).end()  # type: ignore[union-attr]
    trailing = _TRAILING.search(line, start, end)
    return start, trailing.start() if trailing else end


def indentation(line: str, start: int) -> int:
    """The blanks at `start` (after the envelope): how deep a YAML line is."""
    end = start
    while end < len(line) and line[end] in " \t":
        end += 1
    return end - start


@dataclass
class PemBlock:
    """Inside a PEM private key whose END has not come: body lines are key material."""

    misses: int = 0


@dataclass
class PendingValue:
    """The next line holds the value of a secret name or option seen at the end of this one."""

    rule_id: str
    role: str
    indent: int = 0
    block_indent: int = -1
    lines: int = 0


LineState = PemBlock | PendingValue
