"""The longest run of plain characters that every match of a pattern contains.

A group whose patterns each have one can be looked for with `bytes.rfind` (C speed, no regex)
and every line it proposes confirmed with RE2: that is how the scanner finds the last line of a
group it stopped proposing (see `Prefilter.track`). The reading is conservative: what it does not
understand ends a run, and a pattern with an alternative at its top level has no required run.
"""

from __future__ import annotations

from vllm_triage.knowledge.schema import class_end, group_end

# A run shorter than this proposes too many lines to be worth searching for.
MIN_LITERAL = 4
_BREAKS = frozenset(".^$")
_OPTIONAL_AFTER = frozenset("?*{")


def required_literal(pattern: str) -> str | None:
    """The longest literal every match of `pattern` contains (at least MIN_LITERAL characters, no
    double quote: a json-file log escapes it), or None when there is none or the pattern has an
    alternative at its top level."""
    runs: list[str] = []
    run: list[str] = []

    def end_run() -> None:
        if run:
            runs.append("".join(run))
            run.clear()

    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "|":
            return None
        if c == "\\" and i + 1 < len(pattern):
            escaped = pattern[i + 1]
            if escaped.isalnum():
                end_run()  # \d, \s, \b ...: a class or an anchor
            else:
                run.append(escaped)
            i += 2
        elif c == "[":
            end_run()
            i = class_end(pattern, i)
        elif c == "(":
            end_run()
            i = group_end(pattern, i)
        elif c in _OPTIONAL_AFTER:
            if run:
                run.pop()  # the atom before may be absent
            end_run()
            close = pattern.find("}", i) if c == "{" else i
            i = len(pattern) if close < 0 else close + 1
        elif c == "+":
            end_run()  # the atom before is there once, more may follow
            i += 1
        elif c in _BREAKS or c == '"' or c == ")":
            end_run()
            i += 1
        else:
            run.append(c)
            i += 1
    end_run()
    best = max(runs, key=len, default="")
    return best if len(best) >= MIN_LITERAL else None


def group_literals(patterns: list[str]) -> tuple[bytes, ...] | None:
    """One required literal per pattern (UTF-8), or None when a pattern has none."""
    found = []
    for pattern in patterns:
        literal = required_literal(pattern)
        if literal is None:
            return None
        found.append(literal.encode())
    return tuple(found)
