"""Shared fixtures: the knowledge base, the real test data, and a helper to diagnose text."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_triage.diagnose import diagnose
from vllm_triage.knowledge import KnowledgeBase, load_knowledge
from vllm_triage.models import Diagnosis

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).parent.parent


@pytest.fixture(scope="session")
def kb() -> KnowledgeBase:
    return load_knowledge()


@pytest.fixture
def diagnose_text(tmp_path: Path):
    """Write text to a log file and diagnose it (extra keyword arguments go to diagnose)."""

    def run(text: str, **kwargs: str) -> Diagnosis:
        log = tmp_path / "case.log"
        log.write_text(text, encoding="utf-8")
        return diagnose([str(log)], **kwargs)

    return run
