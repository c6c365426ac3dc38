"""The cleaner: every byte the tool writes about a host passes through it first (as sos keeps its
cleaner apart from its plugins). Rules are knowledge data (knowledge/data/redaction.yaml)."""

from vllm_triage.redact.redactor import MARKER, OMITTED, STREAM_BLOCK, RedactedEnv, Redactor

__all__ = ["MARKER", "OMITTED", "STREAM_BLOCK", "RedactedEnv", "Redactor"]
