"""`knowledge check`: the data on its own, and every tie between the data and the code that reads
it, so that a data edit that passes the check cannot break a command."""

from __future__ import annotations

from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.knowledge.check import data_problems
from vllm_triage.redact.examples import example_problems


def check_knowledge(kb: KnowledgeBase) -> list[str]:
    """Every problem found, one line each naming the file (empty when the knowledge is sound)."""
    return data_problems(kb) + example_problems(kb)
