"""Reading vLLM's /metrics with prometheus_client's text parser, by logical name through the alias
table (knowledge/data/vllm_metrics.yaml), so one ladder works across vLLM versions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from vllm_triage.knowledge import KnowledgeBase


class MetricsError(ValueError):
    """A /metrics page that is not Prometheus text."""


@dataclass
class MetricsSnapshot:
    """Every sample of one scrape: sample name -> [(labels, value)]."""

    samples: dict[str, list[tuple[dict[str, str], float]]] = field(default_factory=dict)

    def _first(
        self, kb: KnowledgeBase, logical: str
    ) -> tuple[str, list[tuple[dict[str, str], float]]] | None:
        for name in kb.vllm_metrics.metrics.get(logical, []):
            if name in self.samples:
                return name, self.samples[name]
        return None

    def value(self, kb: KnowledgeBase, logical: str) -> float | None:
        """The sum over label sets (engines, models) of the first alias present; None if absent."""
        found = self._first(kb, logical)
        return sum(value for _, value in found[1]) if found else None

    def name(self, kb: KnowledgeBase, logical: str) -> str | None:
        """Which alias this server exposes."""
        found = self._first(kb, logical)
        return found[0] if found else None

    def labels(self, kb: KnowledgeBase, logical: str) -> dict[str, str] | None:
        """The labels of an info metric (e.g. vllm:cache_config_info)."""
        found = self._first(kb, logical)
        return dict(found[1][0][0]) if found and found[1] else None


def parse_metrics(text: str) -> MetricsSnapshot:
    """Parse a Prometheus text page; MetricsError when it is not one. Samples whose value is not
    a finite number (NaN, +Inf) are left out: no count or ratio can be made of them."""
    snapshot = MetricsSnapshot()
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                value = float(sample.value)
                if math.isfinite(value):
                    snapshot.samples.setdefault(sample.name, []).append(
                        (dict(sample.labels), value)
                    )
    # The page comes from the server under test: whatever the third-party parser raises on it
    # means "not Prometheus text", never a stop of the tool.
    except Exception as exc:
        message = " ".join(str(exc).split())[:120]
        raise MetricsError(f"/metrics is not Prometheus text ({message})") from None
    return snapshot


def positive_int(labels: dict[str, str] | None, key: str) -> int | None:
    """An integer label of an info metric (e.g. block_size="16"), None when absent or not one."""
    text = (labels or {}).get(key, "").strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 9):
        return None
    return int(text) or None


def flag(labels: dict[str, str] | None, key: str) -> bool | None:
    """A boolean label of an info metric ("True"/"False"/"1"/"0"), None when absent."""
    if not labels or key not in labels:
        return None
    return labels[key].strip().lower() in ("true", "1", "yes")
