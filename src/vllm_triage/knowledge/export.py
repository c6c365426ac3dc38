"""Export the signature and milestone patterns one per line, for `grep -E -f` comparisons."""

from __future__ import annotations

from vllm_triage.knowledge.loader import KnowledgeBase


def grep_patterns(kb: KnowledgeBase) -> list[str]:
    """Every pattern the log scanner looks for, in grep -E syntax (they are written portable)."""
    patterns = [p for s in kb.signatures for p in s.patterns]
    patterns += [p for m in kb.phases.milestones for p in m.patterns]
    return list(dict.fromkeys(patterns))
