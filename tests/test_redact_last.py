"""The rules that run last find, on the lines RE2 proposes, exactly what their Python patterns
find on the whole text, and the ASCII stand-in keeps every offset."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_triage.knowledge import load_knowledge
from vllm_triage.redact.last import LastRule, LastRules
from vllm_triage.redact.scanner import Found, ascii_bytes, random_token

_RULES = [rule for rule in load_knowledge().redaction.rules if rule.last]

# Pieces that make tokens the rules care about, glued with the separators logs have.
_PIECES = st.sampled_from(
    [
        "credential", "token", "password", "api key", "secret", " is ", ": ", "=", " ", "\n",
        "'", '"', "/", "-", "_", ".", "@", ":", "sha256 ", "é", "\udcff", "█",
        "4u3kpya2u5fntukbq5vnclrh2btg8r68", "HXe8DGg1iJd2AopzyxkFB7F2", "0123456789abcdef",
        "3fa85f64-5717-4562-b3fc-2c963f66afa6", "Qwen2ForSequenceClassification", "x9", "ab",
        "robot:qTzXvLmPwRsN", "12345678901234567890", "/models/tiny-llama-d0e61c83",
    ]
)  # fmt: skip


def _order(found: Found) -> tuple[int, int, str]:
    return found.start, found.end, found.rule_id


def _plain(rule: LastRule, text: str) -> list[Found]:
    """What the rule finds with its Python pattern over the whole text, checks included."""
    found = []
    kept_after = tuple(word.lower() for word in rule.rule.exceptions)
    for match in rule.pattern.finditer(text):
        start, end = match.span("secret")
        entropy = rule.rule.entropy
        if entropy is not None and not random_token(match.group("secret"), entropy, rule.bigrams):
            continue
        line_start = text.rfind("\n", 0, start) + 1
        before = text[max(line_start, start - 24) : start].lower()
        if any(word in before for word in kept_after):
            continue
        found.append(Found(start, end, rule.rule.id))
    return found


@settings(max_examples=300)
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_last_rules_find_on_their_lines_what_they_find_on_the_whole_text(text: str) -> None:
    found = LastRules(_RULES).find(text, ascii_bytes(text))
    plain = [item for rule in map(LastRule.of, _RULES) for item in _plain(rule, text)]
    assert sorted(found, key=_order) == sorted(plain, key=_order)


@given(st.text())
def test_the_ascii_stand_in_keeps_every_offset(text: str) -> None:
    data = ascii_bytes(text)
    assert len(data) == len(text)
    assert data.decode("ascii") == re.sub("[^\x00-\x7f]", "\x1a", text)


def test_a_long_line_with_one_token_is_read_once() -> None:
    """A token on a long line: the line is the unit, the token found wherever it is on it."""
    text = "a " * 50_000 + "forwarding HXe8DGg1iJd2AopzyxkFB7F2 upstream" + " b" * 50_000 + "\n"
    (found,) = LastRules(_RULES).find(text, ascii_bytes(text))
    assert text[found.start : found.end] == "HXe8DGg1iJd2AopzyxkFB7F2"
