"""The redaction rules' own examples, run through the real redactor: a positive example must be
redacted by its rule (and stay the same when redacted again), a negative one must stay as it is."""

from __future__ import annotations

from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.redact.redactor import Redactor


def example_problems(kb: KnowledgeBase) -> list[str]:
    """Run every redaction example through the real redactor (a fresh one per example)."""
    problems = []
    for rule in kb.redaction.rules:
        where = f"redaction.yaml {rule.id}"
        for example in rule.examples.positive:
            redactor = Redactor(kb)
            redacted = redactor.text(example)
            if not redactor.report()[rule.id]:
                problems.append(f"{where}: positive example not redacted by it: {example!r}")
            elif Redactor(kb).text(redacted) != redacted:
                problems.append(f"{where}: redacting twice changes {example!r}")
        for example in rule.examples.negative:
            redactor = Redactor(kb)
            if redactor.text(example) != example:
                fired = ", ".join(k for k, v in redactor.report().items() if v)
                problems.append(f"{where}: negative example redacted (by {fired}): {example!r}")
    for entry in kb.redaction.env_allow:
        for name in entry.names:
            if Redactor(kb).env({name: "x"}).kept.get(name) != "x":
                problems.append(f"redaction.yaml env_allow {name}: a secret name; secrets win")
    return problems
