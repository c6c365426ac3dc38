"""The corpus rules a machine can check (tests/data/corpus/README.md), on the corpus and on the
incoming cases (tests/data/corpus-incoming/, gathered for issue 21 and not yet measured by
tests/test_corpus.py's bars): one row per log, a label of the taxonomy, the file named for its
label and its source thread, a phase, a `why` that says who established the cause, no source
thread twice across both, and log text that is real text (no empty file, no placeholder)."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import get_args

import pytest

from vllm_triage.models import FailureClass

DATA = Path(__file__).parent / "data"
CORPORA = [DATA / "corpus", DATA / "corpus-incoming"]
PHASES = {"before_weights", "during_load", "after_start", "unknown"}
WHO = ("maintainer", "merged fix", "reporter's fix", "reporter's diagnosis", "thread")
THREAD = re.compile(r"^https://github\.com/([^/]+)/([^/]+)/(?:issues|pull|discussions)/(\d+)")


def _rows(corpus: Path) -> list[dict[str, str]]:
    labels = corpus / "labels.csv"
    if not labels.exists():
        return []
    with labels.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize("corpus", CORPORA, ids=lambda p: p.name)
def test_every_row_follows_the_rules(corpus: Path) -> None:
    rows = _rows(corpus)
    if corpus.name == "corpus":
        assert len(rows) >= 92
    classes = set(get_args(FailureClass)) - {"unknown"}
    files = {path.name for path in (corpus / "logs").glob("*")} if rows else set()
    assert {row["file"] for row in rows} == files, "a log without a row, or a row without a log"
    for row in rows:
        name, label, url = row["file"], row["label"], row["source_url"]
        assert label in classes, (name, label)
        assert row["phase"] in PHASES, (name, row["phase"])
        # the seed's `why` names who in its own words; the incoming cases follow the README's form
        if corpus.name != "corpus":
            assert row["why"].lower().startswith(WHO), (name, row["why"][:40])
        assert len(row["why"]) >= 30, name
        match = THREAD.match(url)
        assert match, (name, url)
        owner, repo, number = match.groups()
        assert name == f"{label}__{owner}_{repo}_{number}.log", (name, url)
        text = (corpus / "logs" / name).read_text(encoding="utf-8", errors="surrogateescape")
        assert text.strip(), name


def test_no_source_thread_twice_across_the_corpus_and_the_incoming_cases() -> None:
    urls = [
        THREAD.match(row["source_url"]).group(0)  # type: ignore[union-attr]
        for corpus in CORPORA
        for row in _rows(corpus)
    ]
    twice = sorted({url for url in urls if urls.count(url) > 1})
    assert not twice, twice
