"""The message catalogue (data/messages/*.yaml): the failure messages the producers of a failing
server's log print (vLLM, PyTorch, NCCL, the CUDA runtime, transformers...), read from their
released code by scripts/message_catalogue.py, and how much of it the signatures recognise.

It is no part of the knowledge base that commands load (nor of its cache): a few megabytes that
only `knowledge check` and the tests read, through load_catalogues. The coverage it gives is the
share of each producer's catalogued error messages (not a warning, not advice) that at least one
pattern of a signature naming a cause matches (the catch-alls of cause `unknown` match any
`SomeError: ...` line), the patterns compiled as the scanner compiles them (one RE2 set, see
vllm_triage.diagnose.logreader) and matched on each line of a message: as catalogued (runtime
values as `{}`), with each `{}` read as `0` and as `x`, and a raise's first line after its class
(`ValueError: ...`) as a traceback ends. A pattern that matches no catalogued message of any
producer and no line of the corpus logs is reported by `knowledge check` (vllm_triage.ties).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_triage.errors import KnowledgeError
from vllm_triage.knowledge.loader import KnowledgeBase, _read_yaml, _relative, _validate
from vllm_triage.knowledge.schema import CatalogueMessage, MessageCatalogue

MESSAGES_FOLDER = "messages"
_FILLERS = ("0", "x")


def load_catalogues(data_dir: Path) -> list[MessageCatalogue]:
    """The catalogues under data_dir/messages, validated, by producer (none without the folder);
    KnowledgeError naming the file for a malformed one."""
    folder = data_dir / MESSAGES_FOLDER
    catalogues = []
    for path in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
        name = _relative(path, data_dir)
        catalogue = _validate(MessageCatalogue, _read_yaml(path, data_dir), name)
        if catalogue.producer != path.stem:
            raise KnowledgeError(
                f"{name}: producer {catalogue.producer!r} must match the file name"
            )
        catalogues.append(catalogue)
    return catalogues


def message_lines(entry: CatalogueMessage) -> list[str]:
    """The lines a log may show of the message (see the module docstring), each once."""
    lines = [line.strip() for line in entry.message.splitlines() if line.strip()]
    if entry.kind == "raise" and lines and entry.exception.isidentifier():
        lines.append(f"{entry.exception}: {lines[0]}")
    shown = list(lines)
    for line in lines:
        if "{}" in line:
            shown += [line.replace("{}", filler) for filler in _FILLERS]
    return list(dict.fromkeys(shown))


class PatternSet:
    """Patterns compiled into one RE2 set, as the scanner compiles them: one pass over a line
    names every pattern it matches."""

    def __init__(self, patterns: Sequence[str]) -> None:
        import re2

        options = re2.Options()
        options.max_mem = 256 << 20
        options.never_capture = True
        options.never_nl = True
        self.patterns = list(patterns)
        self._set: Any = re2.Set.SearchSet(options)
        for pattern in self.patterns:
            self._set.Add(pattern.encode())
        if self.patterns:
            self._set.Compile()

    def matches(self, line: str) -> set[int]:
        """The indexes of the patterns that match the line."""
        if not self.patterns:
            return set()
        return set(self._set.Match(line.encode("utf-8", "surrogatepass")) or ())

    def matches_any(self, lines: Iterable[str]) -> set[int]:
        found: set[int] = set()
        for line in lines:
            found |= self.matches(line)
        return found


@dataclass(frozen=True)
class PatternRef:
    """A signature pattern: the signature's id and name, the file it is in, the pattern, and
    whether its signature names a cause (the catch-alls of cause `unknown`, which match any
    `SomeError: ...` line, do not count in the coverage)."""

    signature: str
    name: str
    file: str
    pattern: str
    names_cause: bool = True
    # the signature's positive examples this pattern matches (normalised as the scanner reads a
    # line): one that is an instance of a catalogued message (its `{}` filled with any text)
    # shows the pattern's wording as that producer prints it, runtime values and all
    examples: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProducerCoverage:
    """How many of a producer's catalogued error messages a signature pattern matches."""

    producer: str
    versions: tuple[str, ...]
    messages: int
    errors: int
    matched: int

    @property
    def share(self) -> float:
        return self.matched / self.errors if self.errors else 0.0


@dataclass(frozen=True)
class Coverage:
    """The coverage of each producer, and the patterns no catalogued message matches."""

    producers: list[ProducerCoverage]
    patterns: list[PatternRef]
    unmatched: list[PatternRef]  # by no catalogued message of any producer (errors or not)

    @property
    def errors(self) -> int:
        return sum(row.errors for row in self.producers)

    @property
    def matched(self) -> int:
        return sum(row.matched for row in self.producers)


def signature_patterns(
    kb: KnowledgeBase, read: Callable[[str], str] = lambda line: line
) -> list[PatternRef]:
    """Every pattern of every signature, in the knowledge base's order, with the positive
    examples of its signature that it matches (each example as `read` gives it: the scanner's
    reading of a line, which lives above this layer)."""
    import re

    refs = []
    for sig in kb.signatures:
        examples = [read(example) for example in sig.examples.positive]
        for pattern in sig.patterns:
            regex = re.compile(pattern)
            refs.append(
                PatternRef(
                    sig.id,
                    sig.name,
                    kb.signature_file(sig),
                    pattern,
                    sig.cause != "unknown",
                    tuple(e for e in examples if regex.search(e)),
                )
            )
    return refs


# A template's literal text, placeholders removed, from this many characters (a shorter one would
# fit almost any line).
_MIN_TEMPLATE_LITERAL = 12


def _template(line: str) -> str | None:
    """A catalogued message line as a pattern: its text literally, each `{}` any text."""
    import re

    parts = line.split("{}")
    if len("".join(parts).strip()) < _MIN_TEMPLATE_LITERAL:
        return None
    return ".+".join(re.escape(part) for part in parts)


def _instances(
    patterns: Sequence[PatternRef], catalogues: Sequence[MessageCatalogue]
) -> dict[tuple[int, int], set[int]]:
    """For each catalogue entry ((catalogue, entry) indexes), the patterns one of whose examples
    is an instance of it."""
    entries: list[tuple[int, int]] = []
    templates: list[str] = []
    for c, catalogue in enumerate(catalogues):
        for e, entry in enumerate(catalogue.messages):
            for line in entry.message.splitlines():
                if (template := _template(line.strip())) is not None:
                    entries.append((c, e))
                    templates.append(template)
    compiled = PatternSet(templates)
    found: dict[tuple[int, int], set[int]] = {}
    for index, ref in enumerate(patterns):
        for example in ref.examples:
            for matched in compiled.matches(example):
                found.setdefault(entries[matched], set()).add(index)
    return found


def coverage(patterns: Sequence[PatternRef], catalogues: Iterable[MessageCatalogue]) -> Coverage:
    """Each producer's coverage by the patterns, and the patterns matching no message. A pattern
    matches a message when it matches one of the message's lines, or when one of its examples is
    an instance of the message."""
    catalogues = list(catalogues)
    compiled = PatternSet([ref.pattern for ref in patterns])
    instances = _instances(patterns, catalogues)
    decisive = {index for index, ref in enumerate(patterns) if ref.names_cause}
    used: set[int] = set()
    rows = []
    for c, catalogue in enumerate(catalogues):
        errors = matched = 0
        for e, entry in enumerate(catalogue.messages):
            hits = compiled.matches_any(message_lines(entry)) | instances.get((c, e), set())
            used |= hits
            if entry.is_error:
                errors += 1
                matched += bool(hits & decisive)
        rows.append(
            ProducerCoverage(
                catalogue.producer,
                tuple(catalogue.versions),
                len(catalogue.messages),
                errors,
                matched,
            )
        )
    unmatched = [ref for index, ref in enumerate(patterns) if index not in used]
    return Coverage(rows, list(patterns), unmatched)


@dataclass(frozen=True)
class Covered:
    """The catalogued messages one signature pattern matches, with their producers."""

    ref: PatternRef
    entries: list[tuple[str, CatalogueMessage]]


def covered_entries(
    refs: Sequence[PatternRef], catalogues: Iterable[MessageCatalogue]
) -> list[Covered]:
    """For each pattern of refs, the catalogue entries (producer, entry) it matches, in the
    catalogues' order: what a signature covers of the producers' messages."""
    catalogues = list(catalogues)
    compiled = PatternSet([ref.pattern for ref in refs])
    instances = _instances(refs, catalogues)
    found: dict[int, list[tuple[str, CatalogueMessage]]] = {i: [] for i in range(len(refs))}
    for c, catalogue in enumerate(catalogues):
        for e, entry in enumerate(catalogue.messages):
            hits = compiled.matches_any(message_lines(entry)) | instances.get((c, e), set())
            for index in sorted(hits):
                found[index].append((catalogue.producer, entry))
    return [Covered(ref, found[index]) for index, ref in enumerate(refs)]


def unmatched_anywhere(refs: Sequence[PatternRef], lines: Iterable[str]) -> list[PatternRef]:
    """The patterns of refs that match none of the lines (a corpus's normalised log lines)."""
    compiled = PatternSet([ref.pattern for ref in refs])
    left = set(range(len(refs)))
    for line in lines:
        if not left:
            break
        left -= compiled.matches(line)
    return [ref for index, ref in enumerate(refs) if index in left]


def coverage_table(result: Coverage, where: str) -> list[str]:
    """The coverage as a short table: one row per producer and a total."""
    lines = [
        f"message catalogue ({where}): share of each producer's error messages a signature matches",
        f"  {'producer':<26} {'versions':>8} {'messages':>9} {'errors':>7} {'matched':>8} {'share':>6}",
    ]
    for row in result.producers:
        lines.append(
            f"  {row.producer:<26} {len(row.versions):>8} {row.messages:>9} {row.errors:>7} "
            f"{row.matched:>8} {row.share:>6.1%}"
        )
    total = result.matched / result.errors if result.errors else 0.0
    messages = sum(row.messages for row in result.producers)
    lines.append(
        f"  {'all':<26} {'':>8} {messages:>9} {result.errors:>7} {result.matched:>8} {total:>6.1%}"
    )
    return lines
