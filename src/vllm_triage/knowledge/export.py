"""Export the patterns the log scanner looks for, one per line, for `grep -E -f` comparisons."""

from __future__ import annotations

from vllm_triage.knowledge.loader import KnowledgeBase


def grep_patterns(kb: KnowledgeBase) -> list[str]:
    """Every pattern the log scanner looks for, in grep -E syntax (they are written portable)."""
    patterns = [p for s in kb.signatures for p in s.patterns]
    patterns += [p for m in kb.phases.milestones for p in m.patterns]
    patterns += [p for e in kb.phases.lifecycle for p in e.patterns]
    patterns += [p for r in kb.phases.requests for p in r.patterns]
    patterns += [p for f in kb.phases.facts for p in f.patterns]
    return list(dict.fromkeys(patterns))
