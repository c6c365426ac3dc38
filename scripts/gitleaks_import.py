"""Import gitleaks' published rule set and its true/false-positive examples as data.

Reads a gitleaks checkout's `config/gitleaks.toml` (the generated config) and the Go sources
under `cmd/generate/` (each rule's `tps` / `fps` slices) and writes:

- src/vllm_triage/knowledge/data/gitleaks_rules.yaml: every rule (id, description, RE2 regex,
  secret group, entropy, keywords, allowlists) and the global allowlist, with source and date;
- tests/data/gitleaks/examples.json: per rule, its true positives (with the secret gitleaks would
  report) and its false positives.

It never builds or runs gitleaks' Go code. The examples are obtained by interpreting the small
subset of Go that the rule files use (string literals, `+`, slices, maps, `append`, `fmt.Sprintf`,
range loops, calls into the generator's own `utils` helpers) with a few builtins standing in for
the libraries: `secrets.NewSecret(regex)` is emulated by a seeded generator of strings matching
the regex, and `utils.Validate` records the examples instead of checking them. Go map iteration
has no order; this interpreter iterates maps in sorted key order so the output is reproducible.

Usage: python scripts/gitleaks_import.py GITLEAKS_DIR COMMIT [--date 2026-12-01]
(GITLEAKS_DIR holds `config/gitleaks.toml` and `cmd/generate/`, e.g. from `git archive`.)
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import random
import re
import string
import sys
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import re2
import yaml

REPO_URL = "https://github.com/gitleaks/gitleaks"
CONFIG_PATH = "config/gitleaks.toml"
RULES_DIR = "cmd/generate/config/rules"
UTILS_DIR = "cmd/generate/config/utils"
LICENCE = "MIT License, Copyright (c) 2019 Zachary Rice (gitleaks)"
ROOT = Path(__file__).resolve().parent.parent
RULES_OUT = ROOT / "src/vllm_triage/knowledge/data/gitleaks_rules.yaml"
EXAMPLES_OUT = ROOT / "tests/data/gitleaks/examples.json"
# reggen (the Go library behind secrets.NewSecret) is called with limit 1; unbounded repeats
# here add up to this many items so generated secrets stay plausible in length.
UNBOUNDED_EXTRA = 8
MAX_LOOP_ITERATIONS = 10_000


class GoError(Exception):
    """A construct this interpreter does not support, or Go source it cannot read."""


# What evaluating an unsupported or ill-typed piece can raise; caught per statement or element.
EVAL_ERRORS = (GoError, TypeError, KeyError, AttributeError, ValueError, IndexError)


# --- lexer --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tok:
    kind: str  # ident, str, int, float, rune, op, ';', eof
    value: Any
    line: int


GO_OPERATORS = (
    "... &^= <<= >>= := == != <= >= && || <- ++ -- += -= *= /= %= &= |= ^= << >> &^"
    " + - * / % & | ^ < > = ! ( ) [ ] { } , ; . : ~"
)
# Longest first, so that `:=` wins over `:`.
OPERATORS = sorted(GO_OPERATORS.split(), key=len, reverse=True)
SIMPLE_ESCAPES = {
    "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
    "\\": "\\", "'": "'", '"': '"',
}  # fmt: skip


def _decode_escapes(body: str, quote: str, line: int) -> str:
    """Interpret a Go interpreted string or rune body (the text between the quotes)."""
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += ch.encode()
            i += 1
            continue
        esc = body[i + 1]
        if esc in SIMPLE_ESCAPES and (esc != "'" or quote == "'") and (esc != '"' or quote == '"'):
            out += SIMPLE_ESCAPES[esc].encode()
            i += 2
        elif esc in "01234567":
            out.append(int(body[i + 1 : i + 4], 8))
            i += 4
        elif esc == "x":
            out.append(int(body[i + 2 : i + 4], 16))
            i += 4
        elif esc in "uU":
            width = 4 if esc == "u" else 8
            out += chr(int(body[i + 2 : i + 2 + width], 16)).encode()
            i += 2 + width
        else:
            raise GoError(f"line {line}: unknown escape \\{esc}")
    return out.decode("utf-8")


def tokenize(src: str) -> list[Tok]:
    """Go tokens with automatic semicolons (the language's rule: after a line's last token if
    that is an identifier, a literal, one of the keywords above, `++ -- ) ] }`)."""
    toks: list[Tok] = []
    i, line = 0, 1

    def needs_semi() -> bool:
        if not toks:
            return False
        last = toks[-1]
        if last.kind in ("str", "int", "float", "rune"):
            return True
        if last.kind == "ident":
            return True
        return last.kind == "op" and last.value in (")", "]", "}", "++", "--")

    while i < len(src):
        ch = src[i]
        if ch == "\n":
            if needs_semi():
                toks.append(Tok(";", ";", line))
            line += 1
            i += 1
        elif ch in " \t\r":
            i += 1
        elif src.startswith("//", i):
            i = src.find("\n", i) if "\n" in src[i:] else len(src)
        elif src.startswith("/*", i):
            end = src.index("*/", i + 2)
            newlines = src.count("\n", i, end)
            if newlines and needs_semi():
                toks.append(Tok(";", ";", line))
            line += newlines
            i = end + 2
        elif ch == "`":
            end = src.index("`", i + 1)
            text = src[i + 1 : end]
            toks.append(Tok("str", text.replace("\r", ""), line))
            line += text.count("\n")
            i = end + 1
        elif ch in "\"'":
            j = i + 1
            while src[j] != ch:
                if src[j] == "\n":
                    raise GoError(f"line {line}: newline in string")
                j += 2 if src[j] == "\\" else 1
            text = _decode_escapes(src[i + 1 : j], ch, line)
            toks.append(Tok("str", text, line) if ch == '"' else Tok("rune", ord(text), line))
            i = j + 1
        elif ch.isdigit() or (ch == "." and i + 1 < len(src) and src[i + 1].isdigit()):
            j = i
            while j < len(src) and (src[j].isalnum() or src[j] in "._"):
                j += 1
            text = src[i:j].replace("_", "")
            if text.startswith(("0x", "0X")):
                toks.append(Tok("int", int(text, 16), line))
            elif any(c in text for c in ".eE"):
                toks.append(Tok("float", float(text), line))
            else:
                toks.append(Tok("int", int(text, 0) if text != "0" else 0, line))
            i = j
        elif ch.isalpha() or ch == "_":
            j = i
            while j < len(src) and (src[j].isalnum() or src[j] == "_"):
                j += 1
            toks.append(Tok("ident", src[i:j], line))
            i = j
        else:
            op = next((o for o in OPERATORS if src.startswith(o, i)), None)
            if op is None:
                raise GoError(f"line {line}: unexpected character {ch!r}")
            toks.append(Tok(";", ";", line) if op == ";" else Tok("op", op, line))
            i += len(op)
    if needs_semi():
        toks.append(Tok(";", ";", line))
    toks.append(Tok("eof", None, line))
    return toks


# --- parser (to a small AST of tuples) ----------------------------------------------------------

Node = tuple[Any, ...]
BINARY_PRECEDENCE = {
    "||": 1, "&&": 2,
    "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3,
    "+": 4, "-": 4, "|": 4, "^": 4,
    "*": 5, "/": 5, "%": 5, "<<": 5, ">>": 5, "&": 5, "&^": 5,
}  # fmt: skip
STATEMENT_KEYWORDS = {"var", "const", "return", "for", "if", "switch", "go", "defer", "type"}


class Parser:
    """Recursive descent over the tokens of one Go file."""

    def __init__(self, toks: list[Tok]) -> None:
        self.toks = toks
        self.pos = 0

    # token helpers
    def peek(self, offset: int = 0) -> Tok:
        return self.toks[min(self.pos + offset, len(self.toks) - 1)]

    def at(self, value: str, offset: int = 0) -> bool:
        tok = self.peek(offset)
        return tok.kind in ("op", ";", "ident") and tok.value == value

    def next(self) -> Tok:
        tok = self.peek()
        self.pos += 1
        return tok

    def expect(self, value: str) -> Tok:
        tok = self.next()
        if tok.value != value or tok.kind not in ("op", ";", "ident"):
            raise GoError(f"line {tok.line}: expected {value!r}, found {tok.value!r}")
        return tok

    def ident(self) -> str:
        tok = self.next()
        if tok.kind != "ident":
            raise GoError(f"line {tok.line}: expected a name, found {tok.value!r}")
        return str(tok.value)

    def skip_semis(self) -> None:
        while self.peek().kind == ";":
            self.pos += 1

    def skip_balanced(self) -> None:
        """Skip one bracketed group starting at the current `(`, `[` or `{`."""
        pairs = {"(": ")", "[": "]", "{": "}"}
        stack = [pairs[self.next().value]]
        while stack:
            tok = self.next()
            if tok.kind == "eof":
                raise GoError("unbalanced brackets")
            if tok.kind == "op" and tok.value in pairs:
                stack.append(pairs[tok.value])
            elif tok.kind == "op" and tok.value == stack[-1]:
                stack.pop()

    # file level
    def parse_file(self) -> tuple[dict[str, str], list[Node], dict[str, Node]]:
        """(import aliases, package-level var/const specs, functions)."""
        imports: dict[str, str] = {}
        decls: list[Node] = []
        funcs: dict[str, Node] = {}
        self.skip_semis()
        self.expect("package")
        self.ident()
        while self.peek().kind != "eof":
            self.skip_semis()
            if self.peek().kind == "eof":
                break
            word = self.ident()
            if word == "import":
                for alias, path in self._import_specs():
                    imports[alias] = path
            elif word in ("var", "const"):
                decls.extend(self.parse_var_specs())
            elif word == "func":
                if self.at("("):  # a method: not used by the rule files
                    self.skip_balanced()
                name = self.ident()
                params = self.parse_params()
                while not self.at("{"):
                    if self.at("(") or self.at("["):
                        self.skip_balanced()
                    else:
                        self.next()
                funcs[name] = ("func", params, self.parse_block())
            elif word == "type":
                while not self.at(";"):
                    if self.at("{") or self.at("("):
                        self.skip_balanced()
                    else:
                        self.next()
            else:
                raise GoError(f"line {self.peek().line}: unexpected {word!r} at top level")
        return imports, decls, funcs

    def _import_specs(self) -> Iterator[tuple[str, str]]:
        def one() -> tuple[str, str]:
            alias = self.ident() if self.peek().kind == "ident" else None
            path = str(self.next().value)
            return alias or path.rsplit("/", 1)[-1], path

        if self.at("("):
            self.next()
            self.skip_semis()
            while not self.at(")"):
                yield one()
                self.skip_semis()
            self.next()
        else:
            yield one()

    def parse_params(self) -> list[str]:
        """Parameter names of a func signature (types skipped; `a, b string` gives a, b)."""
        self.expect("(")
        names: list[str] = []
        group: list[str] = []
        while not self.at(")"):
            if self.peek().kind == "ident" and (self.at(",", 1) or self.at(")", 1)):
                group.append(self.ident())  # a name still waiting for its type
            else:
                group.append(self.ident())
                if self.at("..."):  # variadic
                    self.next()
                self.parse_type()
                names.extend(group)
                group = []
            if self.at(","):
                self.next()
        self.next()
        return names

    def parse_var_specs(self) -> list[Node]:
        specs: list[Node] = []

        def one() -> None:
            names = [self.ident()]
            while self.at(","):
                self.next()
                names.append(self.ident())
            vtype = None if self.at("=") or self.at(";") else self.parse_type()
            values: list[Node] = []
            if self.at("="):
                self.next()
                values = self.parse_expr_list()
            specs.append(("var", names, vtype, values))

        if self.at("("):
            self.next()
            self.skip_semis()
            while not self.at(")"):
                one()
                self.skip_semis()
            self.next()
        else:
            one()
        return specs

    # types
    def parse_type(self) -> Node:
        if self.at("["):
            self.next()
            if self.at("]"):
                self.next()
                return ("slice", self.parse_type())
            if self.at("..."):
                self.next()
            else:
                self.parse_expr()
            self.expect("]")
            return ("slice", self.parse_type())
        if self.at("map"):
            self.next()
            self.expect("[")
            key = self.parse_type()
            self.expect("]")
            return ("map", key, self.parse_type())
        if self.at("*"):
            self.next()
            return self.parse_type()
        if self.at("func"):
            self.next()
            self.skip_balanced()
            if self.peek().kind == "ident" or self.at("[") or self.at("*"):
                self.parse_type()
            elif self.at("("):
                self.skip_balanced()
            return ("named", "func")
        if self.at("struct") or self.at("interface"):
            self.next()
            self.skip_balanced()
            return ("named", "struct")
        name = self.ident()
        while self.at("."):
            self.next()
            name += "." + self.ident()
        return ("named", name)

    # blocks and statements
    def parse_block(self) -> list[Node]:
        self.expect("{")
        stmts: list[Node] = []
        self.skip_semis()
        while not self.at("}"):
            stmts.append(self.parse_statement())
            self.skip_semis()
        self.next()
        return stmts

    def parse_statement(self) -> Node:
        line = self.peek().line
        if self.at("var") or self.at("const"):
            self.next()
            return ("decl", line, self.parse_var_specs())
        if self.at("return"):
            self.next()
            values = [] if self.at(";") or self.at("}") else self.parse_expr_list()
            return ("return", line, values)
        if self.at("continue") or self.at("break"):
            return (self.next().value, line)
        if self.at("for"):
            return self.parse_for(line)
        if self.at("if"):
            return self.parse_if(line)
        if self.at("{"):
            return ("block", line, self.parse_block())
        if self.peek().kind == "ident" and self.peek().value in STATEMENT_KEYWORDS:
            raise GoError(f"line {line}: unsupported statement {self.peek().value!r}")
        lhs = self.parse_expr_list()
        if self.at(":=") or self.at("=") or self.at("+="):
            op = self.next().value
            return ("assign", line, op, lhs, self.parse_expr_list())
        if self.at("++") or self.at("--"):
            op = self.next().value
            return ("assign", line, "+=", lhs, [("int", 1 if op == "++" else -1)])
        return ("expr", line, lhs)

    def parse_for(self, line: int) -> Node:
        self.expect("for")
        if self.at("{"):
            return ("forever", line, self.parse_block())
        start = self.pos
        names: list[str] = []
        while self.peek().kind == "ident" and (self.at(",", 1) or self.at(":=", 1)):
            names.append(self.ident())
            if self.at(","):
                self.next()
        if names and self.at(":="):
            self.next()
            if self.at("range"):
                self.next()
                source = self.parse_expr(composite=False)
                return ("range", line, names, source, self.parse_block())
        self.pos = start
        while not self.at("{"):
            self.next()
        self.parse_block()
        return ("unsupported", line, "three-clause for loop")

    def parse_if(self, line: int) -> Node:
        self.expect("if")
        start = self.pos
        cond = self.parse_expr(composite=False)
        if not self.at("{"):  # `if init; cond {`: skipped, the rule files only use it in loops
            self.pos = start
            while not self.at("{"):
                if self.at("(") or self.at("["):
                    self.skip_balanced()
                else:
                    self.next()
            self.parse_block()
            return ("unsupported", line, "if with an init statement")
        body = self.parse_block()
        orelse: list[Node] = []
        if self.at("else"):
            self.next()
            orelse = [self.parse_if(self.peek().line)] if self.at("if") else self.parse_block()
        return ("if", line, cond, body, orelse)

    # expressions
    def parse_expr_list(self) -> list[Node]:
        exprs = [self.parse_expr()]
        while self.at(","):
            self.next()
            exprs.append(self.parse_expr())
        return exprs

    def parse_expr(self, precedence: int = 1, composite: bool = True) -> Node:
        left = self.parse_unary(composite)
        while True:
            tok = self.peek()
            prec = BINARY_PRECEDENCE.get(tok.value) if tok.kind == "op" else None
            if prec is None or prec < precedence:
                return left
            self.next()
            right = self.parse_expr(prec + 1, composite)
            left = ("bin", tok.value, left, right)

    def parse_unary(self, composite: bool) -> Node:
        if self.peek().kind == "op" and self.peek().value in ("-", "+", "!", "^", "&", "*", "<-"):
            op = self.next().value
            return ("unary", op, self.parse_unary(composite))
        return self.parse_primary(composite)

    def parse_primary(self, composite: bool) -> Node:
        tok = self.peek()
        node: Node
        if tok.kind in ("str", "int", "float", "rune"):
            self.next()
            node = ("lit", tok.value)
        elif self.at("("):
            self.next()
            node = self.parse_expr()
            self.expect(")")
        elif self.at("[") or self.at("map"):
            vtype = self.parse_type()
            if self.at("("):  # conversion such as []byte(x)
                self.next()
                arg = self.parse_expr()
                self.expect(")")
                node = ("convert", vtype, arg)
            elif self.at("{"):
                node = ("composite", vtype, self.parse_composite_body())
            else:  # a type as an argument: make([]string, 0)
                node = ("type", vtype)
        elif self.at("func"):
            raise GoError(f"line {tok.line}: function literals are not supported")
        elif tok.kind == "ident":
            self.next()
            node = ("name", tok.value)
        else:
            raise GoError(f"line {tok.line}: unexpected {tok.value!r}")
        while True:
            if self.at("."):
                self.next()
                node = ("sel", node, self.ident())
            elif self.at("("):
                self.next()
                args: list[Node] = []
                spread = False
                while not self.at(")"):
                    args.append(self.parse_expr())
                    if self.at("..."):
                        self.next()
                        spread = True
                    if self.at(","):
                        self.next()
                    self.skip_semis()
                self.next()
                node = ("call", node, args, spread)
            elif self.at("["):
                self.next()
                index = self.parse_expr()
                self.expect("]")
                node = ("index", node, index)
            elif composite and self.at("{") and _is_type_name(node):
                node = ("composite", ("named", _dotted(node)), self.parse_composite_body())
            else:
                return node

    def parse_composite_body(self) -> list[tuple[Node | None, Node]]:
        """Elements of a composite literal; an element may be an elided `{...}` literal."""
        self.expect("{")
        elems: list[tuple[Node | None, Node]] = []
        self.skip_semis()
        while not self.at("}"):
            first = self.parse_element()
            if self.at(":"):
                self.next()
                elems.append((first, self.parse_element()))
            else:
                elems.append((None, first))
            if self.at(","):
                self.next()
            self.skip_semis()
        self.next()
        return elems

    def parse_element(self) -> Node:
        if self.at("{"):
            return ("composite", None, self.parse_composite_body())
        return self.parse_expr()


def _is_type_name(node: Node) -> bool:
    """A composite literal may follow a (qualified) type name only; Go writes locals lowercase
    and the rule files name struct types in upper case (config.Rule, config.Allowlist)."""
    if node[0] == "name":
        return str(node[1])[:1].isupper()
    return node[0] == "sel" and node[1][0] == "name" and str(node[2])[:1].isupper()


def _dotted(node: Node) -> str:
    if node[0] == "name":
        return str(node[1])
    if node[0] == "sel":
        return _dotted(node[1]) + "." + str(node[2])
    raise GoError("not a name")


# --- regex-driven generator (emulates reggen behind secrets.NewSecret) ---------------------------

PRINTABLE = [chr(c) for c in range(0x20, 0x7F)]
QUANTIFIER = re.compile(r"\{\d+(?:,\d*)?\}")
CLASS_ESCAPES = {
    "d": string.digits,
    "w": string.ascii_letters + string.digits + "_",
    "s": " \t\n\r\f\v",
}


class RegexGenerator:
    """A random string matching a Go RE2 pattern of the kinds NewSecret is given: literals,
    classes, groups, alternation and repetition. Anchors and \\b generate nothing."""

    def __init__(self, pattern: str, rng: random.Random) -> None:
        self.src = pattern
        self.pos = 0
        self.rng = rng

    def generate(self) -> str:
        out = self._alternation()
        if self.pos != len(self.src):
            raise GoError(f"regex {self.src!r}: unexpected {self.src[self.pos]!r}")
        return out

    def _alternation(self) -> str:
        branches = [self._sequence_start()]
        while self.pos < len(self.src) and self.src[self.pos] == "|":
            self.pos += 1
            branches.append(self._sequence_start())
        return self.rng.choice(branches)()

    def _sequence_start(self) -> Callable[[], str]:
        items: list[Callable[[], str]] = []
        while self.pos < len(self.src) and self.src[self.pos] not in "|)":
            atom = self._atom()
            items.append(self._quantified(atom))
        return lambda: "".join(item() for item in items)

    def _quantified(self, atom: Callable[[], str]) -> Callable[[], str]:
        src = self.src
        if self.pos >= len(src) or src[self.pos] not in "*+?{":
            return atom
        ch = src[self.pos]
        if ch == "{" and not QUANTIFIER.match(src, self.pos):
            return atom
        if ch == "{":
            end = src.index("}", self.pos)
            low_s, _, high_s = src[self.pos + 1 : end].partition(",")
            low = int(low_s)
            high = low if "," not in src[self.pos : end] else (int(high_s) if high_s else -1)
            self.pos = end + 1
        else:
            low, high = {"*": (0, -1), "+": (1, -1), "?": (0, 1)}[ch]
            self.pos += 1
        if self.pos < len(src) and src[self.pos] == "?":
            self.pos += 1  # lazy: same strings
        upper = low + UNBOUNDED_EXTRA if high == -1 else high
        return lambda: "".join(atom() for _ in range(self.rng.randint(low, upper)))

    def _atom(self) -> Callable[[], str]:
        src = self.src
        ch = src[self.pos]
        if ch == "{" and not QUANTIFIER.match(src, self.pos):
            self.pos += 1
            return lambda: "{"
        if ch == "(":
            self.pos += 1
            if src.startswith("?:", self.pos):
                self.pos += 2
            elif src.startswith("?P<", self.pos):
                self.pos = src.index(">", self.pos) + 1
            elif src.startswith("?", self.pos):  # flags such as (?i): case is kept as written
                end = src.index(")", self.pos)
                flags_only = ":" not in src[self.pos : end]
                self.pos = end + 1 if flags_only else src.index(":", self.pos) + 1
                if flags_only:
                    return lambda: ""
            start = self.pos
            self._alternation_probe()
            inner_src = src[start : self.pos]
            self.pos += 1  # ')'
            return lambda: RegexGenerator(inner_src, self.rng).generate()
        if ch == "[":
            chars = self._class()
            return lambda: self.rng.choice(chars)
        if ch == ".":
            self.pos += 1
            return lambda: self.rng.choice(PRINTABLE)
        if ch in "^$":
            self.pos += 1
            return lambda: ""
        if ch == "\\":
            esc = src[self.pos + 1]
            self.pos += 2
            if esc in "bBAz":
                return lambda: ""
            if esc in CLASS_ESCAPES:
                return lambda: self.rng.choice(CLASS_ESCAPES[esc])
            literal = self._escaped_literal(esc)
            return lambda: literal
        self.pos += 1
        return lambda: ch

    def _alternation_probe(self) -> None:
        """Advance to the `)` closing the group that starts here (skipping nested groups and
        classes) without generating."""
        depth = 0
        src = self.src
        while self.pos < len(src):
            ch = src[self.pos]
            if ch == "\\":
                self.pos += 2
                continue
            if ch == "[":
                self._class()
                continue
            if ch == "(":
                depth += 1
            elif ch == ")":
                if depth == 0:
                    return
                depth -= 1
            self.pos += 1
        raise GoError(f"regex {src!r}: unclosed group")

    def _class(self) -> list[str]:
        src = self.src
        self.pos += 1
        negate = src[self.pos] == "^"
        if negate:
            self.pos += 1
        chosen: set[str] = set()
        first = True
        while first or src[self.pos] != "]":
            first = False
            low = self._class_char()
            if isinstance(low, str) and len(low) > 1:  # \w, \d, \s
                chosen.update(low)
                continue
            if src[self.pos] == "-" and src[self.pos + 1] != "]":
                self.pos += 1
                high = self._class_char()
                if len(high) != 1:
                    raise GoError(f"regex {src!r}: bad range")
                chosen.update(chr(c) for c in range(ord(low), ord(high) + 1))
            else:
                chosen.add(low)
        self.pos += 1
        if negate:
            return [c for c in PRINTABLE if c not in chosen]
        return sorted(chosen)

    def _class_char(self) -> str:
        src = self.src
        ch = src[self.pos]
        if ch != "\\":
            self.pos += 1
            return ch
        esc = src[self.pos + 1]
        self.pos += 2
        if esc in CLASS_ESCAPES:
            return CLASS_ESCAPES[esc]
        return self._escaped_literal(esc)

    def _escaped_literal(self, esc: str) -> str:
        """The character of an escape whose letter was just read: \\n, \\x41, \\. ..."""
        if esc == "x":
            src = self.src
            if src[self.pos] == "{":
                end = src.index("}", self.pos)
                value = int(src[self.pos + 1 : end], 16)
                self.pos = end + 1
            else:
                value = int(src[self.pos : self.pos + 2], 16)
                self.pos += 2
            return chr(value)
        return {"n": "\n", "r": "\r", "t": "\t", "f": "\f", "v": "\v"}.get(esc, esc)


# --- interpreter --------------------------------------------------------------------------------


class Builder:
    """strings.Builder."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def WriteString(self, text: str) -> None:
        self.parts.append(text)

    def String(self) -> str:
        return "".join(self.parts)


class Replacer:
    """strings.NewReplacer: replaces the pairs' old strings in one left-to-right pass, the first
    pair listed winning where several match at one position (as Go's generic replacer does)."""

    def __init__(self, *pairs: str) -> None:
        self.pairs = list(zip(pairs[::2], pairs[1::2], strict=True))

    def Replace(self, text: str) -> str:
        out: list[str] = []
        i = 0
        while i < len(text):
            for old, new in self.pairs:
                if old and text.startswith(old, i):
                    out.append(new)
                    i += len(old)
                    break
            else:
                out.append(text[i])
                i += 1
        return "".join(out)


class Encoding:
    """encoding/base64's four encodings."""

    def __init__(self, url: bool, padded: bool) -> None:
        self.url, self.padded = url, padded

    def EncodeToString(self, data: bytes | str) -> str:
        raw = data.encode() if isinstance(data, str) else data
        text = (base64.urlsafe_b64encode if self.url else base64.b64encode)(raw).decode()
        return text if self.padded else text.rstrip("=")


class Opaque:
    """A value the examples never need (a compiled regexp, a logger): any use gives another."""

    def __getattr__(self, name: str) -> Opaque:
        return Opaque()

    def __call__(self, *args: Any) -> Opaque:
        return Opaque()


@dataclass
class Recorded:
    rule_id: str
    tps: list[str]
    fps: list[str]


class Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


class LoopControl(Exception):
    def __init__(self, kind: str) -> None:
        self.kind = kind


def go_sprintf(fmt: str, *args: Any) -> str:
    out: list[str] = []
    args_left = list(args)
    i = 0
    while i < len(fmt):
        if fmt[i] != "%":
            out.append(fmt[i])
            i += 1
            continue
        verb = fmt[i + 1]
        i += 2
        if verb == "%":
            out.append("%")
        elif verb in "sdv":
            out.append(str(args_left.pop(0)))
        else:
            raise GoError(f"fmt verb %{verb} not supported")
    return "".join(out)


@dataclass
class Package:
    name: str
    imports: dict[str, str] = field(default_factory=dict)
    globals: dict[str, Any] = field(default_factory=dict)
    pending: dict[str, tuple[Node | None, Node | None]] = field(default_factory=dict)
    funcs: dict[str, Node] = field(default_factory=dict)


class Interpreter:
    """Runs the rule functions of the `rules` package, with `utils` interpreted from source and
    the libraries replaced by the builtins below."""

    def __init__(self, stopwords: list[str]) -> None:
        self.packages: dict[str, Package] = {}
        self.recorded: list[Recorded] = []
        self.skipped: list[str] = []
        self.rng = random.Random(0)
        self.stopwords = [w.lower() for w in stopwords]
        self.current = ""

    def load(self, name: str, files: list[tuple[str, str]]) -> None:
        pkg = self.packages.setdefault(name, Package(name))
        for filename, src in files:
            imports, decls, funcs = Parser(tokenize(src)).parse_file()
            pkg.imports.update(imports)
            pkg.funcs.update(funcs)
            for _, names, vtype, values in decls:
                for index, var in enumerate(names):
                    value = values[index] if index < len(values) else None
                    pkg.pending[var] = (vtype, value)
            del filename

    # builtins by package path tail and name
    def builtin(self, qualified: str) -> Any:
        table: dict[str, Any] = {
            "secrets.NewSecret": self.new_secret,
            "utils.Validate": self.validate,
            "utils.ValidateWithPaths": self.validate_paths,
            "fmt.Sprintf": go_sprintf,
            "strings.ToUpper": str.upper,
            "strings.ToLower": str.lower,
            "strings.Join": lambda items, sep: sep.join(items),
            "strings.Repeat": lambda text, count: text * count,
            "strings.NewReplacer": Replacer,
            "strings.Builder": Builder,
            "base64.StdEncoding": Encoding(url=False, padded=True),
            "base64.RawStdEncoding": Encoding(url=False, padded=False),
            "base64.URLEncoding": Encoding(url=True, padded=True),
            "base64.RawURLEncoding": Encoding(url=True, padded=False),
            "rules.newPlausibleSecret": self.plausible_secret,
        }
        if qualified in table:
            return table[qualified]
        if qualified.startswith(("regexp.", "logging.", "config.", "base.", "detect.")):
            return Opaque()
        raise GoError(f"unknown name {qualified}")

    def new_secret(self, pattern: str) -> str:
        return RegexGenerator(pattern, self.rng).generate()

    def plausible_secret(self, pattern: str) -> str:
        """rules.newPlausibleSecret: NewSecret retried until the value has a digit 1-9 and
        holds none of the generic rule's stop words (its loop, in Python)."""
        for _ in range(MAX_LOOP_ITERATIONS):
            secret = self.new_secret(pattern)
            lowered = secret.lower()
            if any(c in "123456789" for c in secret) and not any(
                w in lowered for w in self.stopwords
            ):
                return secret
        raise GoError(f"no plausible secret for {pattern!r}")

    def validate(self, rule: Any, tps: Any, fps: Any) -> Any:
        self.recorded.append(Recorded(str(rule["RuleID"]), list(tps or []), list(fps or [])))
        return rule

    def validate_paths(self, rule: Any, tps: Any, fps: Any) -> Any:
        return self.validate(rule, list((tps or {}).values()), list((fps or {}).values()))

    # running
    def run_rules(self) -> None:
        pkg = self.packages["rules"]
        for name in sorted(pkg.funcs):
            params = pkg.funcs[name][1]
            if not name[:1].isupper() or params:
                continue
            # One seeded stream per rule function, so a change elsewhere leaves it unchanged.
            self.rng = random.Random(f"gitleaks:{name}")
            self.current = name
            try:
                self.call_func(pkg, name, [])
            except GoError as error:
                self.skipped.append(f"{name}: {error}")

    def call_func(self, pkg: Package, name: str, args: list[Any]) -> Any:
        _, params, body = pkg.funcs[name]
        scope: dict[str, Any] = dict(zip(params, args, strict=True))
        try:
            self.exec_block(pkg, body, [scope])
        except Return as ret:
            return ret.value
        return None

    def global_value(self, pkg: Package, name: str) -> Any:
        if name in pkg.globals:
            return pkg.globals[name]
        if name in pkg.pending:
            vtype, value = pkg.pending.pop(name)
            result = self.eval(pkg, value, [{}]) if value is not None else self.zero(pkg, vtype)
            pkg.globals[name] = result
            return result
        raise KeyError(name)

    def zero(self, pkg: Package, vtype: Node | None) -> Any:
        if vtype is None:
            return None
        if vtype[0] == "slice":
            return []
        if vtype[0] == "map":
            return {}
        name = str(vtype[1])
        if name == "string":
            return ""
        if name in ("int", "float64", "float32", "int64"):
            return 0
        if "." in name:
            return self.qualified(pkg, name)()
        return None

    def exec_block(self, pkg: Package, stmts: list[Node], scopes: list[dict[str, Any]]) -> None:
        inner = [*scopes, {}]
        for stmt in stmts:
            try:
                self.exec_stmt(pkg, stmt, inner)
            except EVAL_ERRORS as error:
                # One statement we cannot run: the rest of the function still gives its examples.
                self.skipped.append(f"{self.current} line {stmt[1]}: {error}")

    def exec_stmt(self, pkg: Package, stmt: Node, scopes: list[dict[str, Any]]) -> None:
        kind = stmt[0]
        if kind == "decl":
            for _, names, vtype, values in stmt[2]:
                evaluated = [self.eval(pkg, v, scopes) for v in values]
                for index, var in enumerate(names):
                    scopes[-1][var] = evaluated[index] if evaluated else self.zero(pkg, vtype)
        elif kind == "assign":
            _, _, op, lhs, rhs = stmt
            values = [self.eval(pkg, v, scopes) for v in rhs]
            for target, value in zip(lhs, values, strict=True):
                self.assign(pkg, target, value, scopes, op)
        elif kind == "expr":
            for expr in stmt[2]:
                self.eval(pkg, expr, scopes)
        elif kind == "return":
            values = [self.eval(pkg, v, scopes) for v in stmt[2]]
            raise Return(values[0] if len(values) == 1 else values)
        elif kind == "block":
            self.exec_block(pkg, stmt[2], scopes)
        elif kind == "range":
            _, _, names, source, body = stmt
            self.exec_range(pkg, names, self.eval(pkg, source, scopes), body, scopes)
        elif kind == "if":
            _, _, cond, body, orelse = stmt
            self.exec_block(pkg, body if self.eval(pkg, cond, scopes) else orelse, scopes)
        elif kind in ("continue", "break"):
            raise LoopControl(kind)
        else:
            raise GoError(f"unsupported {stmt[2] if kind == 'unsupported' else kind}")

    def exec_range(
        self,
        pkg: Package,
        names: list[str],
        source: Any,
        body: list[Node],
        scopes: list[dict[str, Any]],
    ) -> None:
        pairs = sorted(source.items()) if isinstance(source, dict) else list(enumerate(source))
        for key, value in pairs[:MAX_LOOP_ITERATIONS]:
            scope: dict[str, Any] = {}
            for var, item in zip(names, (key, value), strict=False):
                if var != "_":
                    scope[var] = item
            try:
                self.exec_block(pkg, body, [*scopes, scope])
            except LoopControl as control:
                if control.kind == "break":
                    break

    def assign(
        self, pkg: Package, target: Node, value: Any, scopes: list[dict[str, Any]], op: str
    ) -> None:
        if target[0] == "name":
            name = str(target[1])
            if name == "_":
                return
            if op == ":=":
                scopes[-1][name] = value
                return
            for scope in reversed(scopes):
                if name in scope:
                    scope[name] = scope[name] + value if op == "+=" else value
                    return
            raise GoError(f"assignment to unknown {name}")
        if target[0] == "sel":
            holder = self.eval(pkg, target[1], scopes)
            if isinstance(holder, dict):
                holder[str(target[2])] = value
                return
        if target[0] == "index":
            holder = self.eval(pkg, target[1], scopes)
            holder[self.eval(pkg, target[2], scopes)] = value
            return
        raise GoError("unsupported assignment target")

    def lookup(self, pkg: Package, name: str, scopes: list[dict[str, Any]]) -> Any:
        for scope in reversed(scopes):
            if name in scope:
                return scope[name]
        if name in ("nil",):
            return None
        if name in ("true", "false"):
            return name == "true"
        try:
            return self.global_value(pkg, name)
        except KeyError:
            pass
        try:  # a helper replaced by a builtin (its Go loops are not interpreted)
            return self.builtin(f"{pkg.name}.{name}")
        except GoError:
            pass
        if name in pkg.funcs:
            return lambda *args: self.call_func(pkg, name, list(args))
        if name == "append":
            return lambda items, *more: [*(items or []), *more]
        if name == "len":
            return len
        if name == "string":
            return lambda value: value.decode() if isinstance(value, bytes) else str(value)
        raise GoError(f"unknown name {name}")

    def qualified(self, pkg: Package, dotted: str) -> Any:
        """A name such as utils.AlphaNumeric or b64.StdEncoding, through the file's imports."""
        alias, _, rest = dotted.partition(".")
        path = pkg.imports.get(alias, alias)
        tail = path.rsplit("/", 1)[-1]
        try:
            return self.builtin(f"{tail}.{rest}")
        except GoError:
            if tail in self.packages:
                other = self.packages[tail]
                if rest in other.funcs:
                    return lambda *args: self.call_func(other, rest, list(args))
                return self.global_value(other, rest)
            raise

    def eval(self, pkg: Package, node: Node, scopes: list[dict[str, Any]]) -> Any:
        kind = node[0]
        if kind == "lit":
            return node[1]
        if kind == "name":
            return self.lookup(pkg, str(node[1]), scopes)
        if kind == "sel":
            base = node[1]
            if (
                base[0] == "name"
                and not any(base[1] in s for s in scopes)
                and (base[1] in pkg.imports)
            ):
                return self.qualified(pkg, _dotted(node))
            if base[0] == "sel" and base[1][0] == "name" and base[1][1] in pkg.imports:
                holder = self.qualified(pkg, _dotted(base))
            else:
                holder = self.eval(pkg, base, scopes)
            if isinstance(holder, dict):
                return holder.get(str(node[2]))
            return getattr(holder, str(node[2]))
        if kind == "call":
            _, fn_node, arg_nodes, spread = node
            if fn_node == ("name", "append"):
                return self.eval_append(pkg, arg_nodes, spread, scopes)
            if fn_node == ("name", "make"):
                return [] if arg_nodes[0][1][0] == "slice" else {}
            fn = self.eval(pkg, fn_node, scopes)
            args = [self.eval(pkg, a, scopes) for a in arg_nodes]
            if spread:
                args = [*args[:-1], *args[-1]]
            return fn(*args)
        if kind == "bin":
            _, op, left_node, right_node = node
            left = self.eval(pkg, left_node, scopes)
            if op == "&&":
                return left and self.eval(pkg, right_node, scopes)
            if op == "||":
                return left or self.eval(pkg, right_node, scopes)
            right = self.eval(pkg, right_node, scopes)
            ops: dict[str, Callable[[Any, Any], Any]] = {
                "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
                "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
                ">": lambda a, b: a > b, "<=": lambda a, b: a <= b, ">=": lambda a, b: a >= b,
            }  # fmt: skip
            if op not in ops:
                raise GoError(f"operator {op} not supported")
            return ops[op](left, right)
        if kind == "unary":
            _, op, operand = node
            value = self.eval(pkg, operand, scopes)
            if op == "&" or op == "*":
                return value
            if op == "!":
                return not value
            if op == "-":
                return -value
            raise GoError(f"unary {op} not supported")
        if kind == "convert":
            _, vtype, arg = node
            value = self.eval(pkg, arg, scopes)
            if vtype == ("slice", ("named", "byte")):
                return value.encode() if isinstance(value, str) else bytes(value)
            raise GoError("unsupported conversion")
        if kind == "composite":
            return self.eval_composite(pkg, node[1], node[2], scopes)
        if kind == "index":
            return self.eval(pkg, node[1], scopes)[self.eval(pkg, node[2], scopes)]
        raise GoError(f"unsupported expression {kind}")

    def eval_append(
        self, pkg: Package, arg_nodes: list[Node], spread: bool, scopes: list[dict[str, Any]]
    ) -> list[Any]:
        items = list(self.eval(pkg, arg_nodes[0], scopes) or [])
        rest = arg_nodes[1:]
        for index, arg in enumerate(rest):
            try:
                value = self.eval(pkg, arg, scopes)
            except EVAL_ERRORS as error:
                # A single example we cannot build is dropped; the others are kept.
                self.skipped.append(f"{self.current}: append argument: {error}")
                continue
            if spread and index == len(rest) - 1:
                items.extend(value or [])
            else:
                items.append(value)
        return items

    def eval_composite(
        self,
        pkg: Package,
        vtype: Node | None,
        elems: list[tuple[Node | None, Node]],
        scopes: list[dict[str, Any]],
    ) -> Any:
        is_map = vtype is not None and vtype[0] == "map"
        # A struct literal, named or elided inside a slice of structs, has bare field names.
        is_struct = (vtype is not None and vtype[0] == "named") or (
            vtype is None and bool(elems) and elems[0][0] is not None and elems[0][0][0] == "name"
        )
        keyed = is_map or is_struct or (vtype is None and elems and elems[0][0] is not None)
        if not keyed:
            values: list[Any] = []
            for _, value_node in elems:
                try:
                    values.append(self.eval(pkg, value_node, scopes))
                except EVAL_ERRORS as error:
                    self.skipped.append(f"{self.current}: slice element: {error}")
            return values
        result: dict[Any, Any] = {}
        for key_node, value_node in elems:
            if key_node is None:
                raise GoError("positional struct literal not supported")
            key = str(key_node[1]) if is_struct else self.eval(pkg, key_node, scopes)
            try:
                result[key] = self.eval(pkg, value_node, scopes)
            except EVAL_ERRORS:
                if not is_struct:
                    raise
                result[key] = Opaque()  # a rule field the examples do not need
        return result


# --- gitleaks' detection, as far as a finding's secret goes -----------------------------------


def shannon_entropy(text: str) -> float:
    """gitleaks' entropy: counts per character over the length in bytes."""
    if not text:
        return 0.0
    counts: dict[str, int] = {}
    for ch in text:
        counts[ch] = counts.get(ch, 0) + 1
    length = len(text.encode())
    return -sum((c / length) * math.log2(c / length) for c in counts.values())


@dataclass
class CompiledAllowlist:
    target: str
    condition: str
    regex: Any
    stopwords: list[str]
    has_paths: bool


def compile_allowlist(raw: dict[str, Any]) -> CompiledAllowlist:
    regexes = raw.get("regexes") or []
    return CompiledAllowlist(
        target=raw.get("regexTarget", "secret"),
        condition=raw.get("condition", "OR"),
        regex=re2.compile("|".join(f"(?:{r})" for r in regexes)) if regexes else None,
        stopwords=[w.lower() for w in raw.get("stopwords") or []],
        has_paths=bool(raw.get("paths")),
    )


def allowed(lists: list[CompiledAllowlist], secret: str, match: str, line: str) -> bool:
    """detect.checkFindingAllowed for a fragment without a path or commit."""
    for allow in lists:
        target = {"match": match, "line": line}.get(allow.target, secret)
        regex_hit = bool(allow.regex and target and allow.regex.search(target))
        stop_hit = bool(secret) and any(w in secret.lower() for w in allow.stopwords)
        if allow.condition == "AND":
            checks = []
            if allow.has_paths:
                checks.append(False)
            if allow.regex is not None:
                checks.append(regex_hit)
            if allow.stopwords:
                checks.append(stop_hit)
            if checks and all(checks):
                return True
        elif regex_hit or stop_hit:
            return True
    return False


@dataclass(frozen=True)
class Finding:
    secret: str  # what gitleaks reports as the finding's secret
    value: str  # the credential itself, to be redacted


@dataclass
class Detector:
    """One rule's detection (keywords, regex, secret group, entropy, allowlists), as in
    gitleaks' detect.detectRule, for text without a file path."""

    rule: dict[str, Any]
    global_allow: list[CompiledAllowlist]
    regex: Any = None
    allow: list[CompiledAllowlist] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.regex = re2.compile(self.rule["regex"])
        self.allow = [compile_allowlist(a) for a in self.rule.get("allowlists") or []]

    def findings(self, text: str) -> list[Finding]:
        keywords = [k.lower() for k in self.rule.get("keywords") or []]
        if keywords and not any(k in text.lower() for k in keywords):
            return []
        found: list[Finding] = []
        named = set(self.regex.groupindex.values())
        for m in self.regex.finditer(text):
            match = m.group(0).strip("\n")
            secret, used = match, 0
            groups = self.regex.search(match)
            if groups is not None and self.regex.groups >= 1:
                values = [g or "" for g in groups.groups()]
                group = int(self.rule.get("secretGroup") or 0)
                if group > 0:
                    if len(values) < group:
                        continue
                    secret, used = values[group - 1], group
                else:
                    used = next((i + 1 for i, v in enumerate(values) if v), 0)
                    secret = values[used - 1] if used else match
            entropy = self.rule.get("entropy")
            if entropy and shannon_entropy(secret) <= float(entropy):
                continue
            start = text.rfind("\n", 0, m.start()) + 1
            end = text.find("\n", m.start() + len(match))
            line = text[start : end if end != -1 else len(text)]
            if allowed(self.global_allow + self.allow, secret, match, line):
                continue
            # A named group tags a part of the token (jwt-base64 names the JWT header field it
            # starts with), so gitleaks' "secret" is then a fragment: the credential is the match.
            found.append(Finding(secret, match if used in named else secret))
        return found


# --- outputs --------------------------------------------------------------------------------------


def rules_document(config: dict[str, Any], commit: str, date: str) -> dict[str, Any]:
    def allowlist(raw: dict[str, Any]) -> dict[str, Any]:
        keys = ("description", "condition", "regexTarget", "regexes", "stopwords", "paths")
        return {k: raw[k] for k in keys if k in raw}

    rules: list[dict[str, Any]] = []
    for raw in config["rules"]:
        rule: dict[str, Any] = {
            "id": raw["id"],
            "description": raw.get("description", ""),
            "regex": raw.get("regex"),
            "secret_group": int(raw.get("secretGroup", 0)),
            "entropy": float(raw["entropy"]) if "entropy" in raw else None,
            "keywords": list(raw.get("keywords") or []),
        }
        if "path" in raw:
            rule["path"] = raw["path"]
        rule["allowlists"] = [allowlist(a) for a in raw.get("allowlists") or []]
        rules.append(rule)
    not_compiled = []
    for rule in rules:
        if rule["regex"] is None:
            continue
        try:
            re2.compile(rule["regex"])
        except re2.error as error:
            not_compiled.append({"id": rule["id"], "error": str(error)})
    return {
        "source": {"repository": REPO_URL, "path": CONFIG_PATH},
        "commit": commit,
        "as_of": date,
        "licence": LICENCE,
        "min_gitleaks_version": config.get("minVersion"),
        "note": (
            "Imported by scripts/gitleaks_import.py, unedited. Regexes are Go RE2 syntax, "
            "verbatim; secret_group 0 means the first non-empty capture group (or the whole "
            "match when the regex has none); an allowlist's regexTarget defaults to the secret "
            "and its condition to OR. A rule without a regex matches file paths only."
        ),
        "regexes_re2_cannot_compile": not_compiled,
        "global_allowlist": allowlist(config.get("allowlist") or {}),
        "rules": rules,
    }


def examples_document(
    config: dict[str, Any], recorded: list[Recorded], commit: str
) -> tuple[dict[str, Any], dict[str, int]]:
    global_allow = [compile_allowlist(config.get("allowlist") or {})]
    by_id = {r["id"]: r for r in config["rules"]}
    rules: dict[str, dict[str, list[Any]]] = {}
    counts = {"tp_dropped": 0, "tp_kept": 0, "fp": 0, "unknown_rule": 0}
    for rec in recorded:
        raw = by_id.get(rec.rule_id)
        if raw is None or "regex" not in raw:
            counts["unknown_rule"] += raw is None
            continue
        detector = Detector(raw, global_allow)
        entry = rules.setdefault(rec.rule_id, {"tp": [], "fp": []})
        for text in rec.tps:
            found = detector.findings(text) if isinstance(text, str) else []
            if not found:
                counts["tp_dropped"] += 1
                continue
            tp = {"text": text, "secret": found[0].secret}
            if found[0].value != found[0].secret:
                tp["value"] = found[0].value
            entry["tp"].append(tp)
            counts["tp_kept"] += 1
        for text in rec.fps:
            if isinstance(text, str):
                entry["fp"].append(text)
                counts["fp"] += 1
    return {
        "source": {"repository": REPO_URL, "path": RULES_DIR},
        "commit": commit,
        "note": (
            "Each rule's tps/fps from gitleaks' Go rule files, as scripts/gitleaks_import.py "
            "interprets them; generated secrets are seeded per rule function. A TP is kept "
            "only when the rule (keywords, regex, secret group, entropy, allowlists) finds a "
            "secret in it; `secret` is the first one it finds, and `value`, where present, the "
            "credential to redact when that secret is only a named group's tag."
        ),
        "rules": rules,
    }, counts


def _dump_yaml(document: dict[str, Any], path: Path) -> None:
    text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=4096)
    if yaml.safe_load(text) != document:
        raise SystemExit(f"{path}: YAML does not read back as written")
    header = (
        "# gitleaks' default rule set (config/gitleaks.toml), imported as data by\n"
        "# scripts/gitleaks_import.py: do not edit by hand, run the importer again.\n"
    )
    path.write_text(header + text, encoding="utf-8")


def go_files(folder: Path) -> list[tuple[str, str]]:
    return [
        (p.name, p.read_text(encoding="utf-8"))
        for p in sorted(folder.glob("*.go"))
        if not p.name.endswith("_test.go")
    ]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="a gitleaks source tree")
    parser.add_argument("commit", help="the commit the tree was taken from")
    parser.add_argument("--date", default="2026-12-01", help="as_of date of the import")
    args = parser.parse_args(argv)
    checkout: Path = args.checkout
    config = tomllib.loads((checkout / CONFIG_PATH).read_text(encoding="utf-8"))
    rules_doc = rules_document(config, args.commit, args.date)
    generic = next(r for r in config["rules"] if r["id"] == "generic-api-key")
    stopwords = [w for a in generic.get("allowlists", []) for w in a.get("stopwords", [])]

    interp = Interpreter(stopwords)
    interp.load("utils", go_files(checkout / UTILS_DIR))
    interp.load("rules", go_files(checkout / RULES_DIR))
    interp.run_rules()
    examples, counts = examples_document(config, interp.recorded, args.commit)

    RULES_OUT.parent.mkdir(parents=True, exist_ok=True)
    EXAMPLES_OUT.parent.mkdir(parents=True, exist_ok=True)
    _dump_yaml(rules_doc, RULES_OUT)
    EXAMPLES_OUT.write_text(
        json.dumps(examples, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )

    with_tp = [r for r in examples["rules"].values() if r["tp"]]
    values = {
        (rid, tp.get("value", tp["secret"]))
        for rid, r in examples["rules"].items()
        for tp in r["tp"]
    }
    print(f"rules: {len(rules_doc['rules'])}")
    print(f"regexes re2 cannot compile: {rules_doc['regexes_re2_cannot_compile']}")
    print(f"rule functions run: {len(interp.recorded)}; rules with TPs: {len(with_tp)}")
    print(f"TP examples kept: {counts['tp_kept']}, dropped: {counts['tp_dropped']}")
    print(f"distinct TP secret values: {len(values)}; FP examples: {counts['fp']}")
    print(f"examples for ids missing from the config: {counts['unknown_rule']}")
    no_examples = sorted({r["id"] for r in config["rules"]} - set(examples["rules"]))
    print(f"rules without recorded examples: {no_examples}")
    print(f"parts skipped ({len(interp.skipped)}):")
    for line in interp.skipped:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
