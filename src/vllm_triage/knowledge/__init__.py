"""The knowledge base: compatibility tables, recipes and log signatures, as validated data."""

from vllm_triage.errors import KnowledgeError
from vllm_triage.knowledge.export import grep_patterns
from vllm_triage.knowledge.loader import DATA_DIR, KnowledgeBase, load_knowledge

__all__ = [
    "DATA_DIR",
    "KnowledgeBase",
    "KnowledgeError",
    "grep_patterns",
    "load_knowledge",
]
