"""The diagnosis for people, in their language (`diagnose --lang`, the case's diagnosis.md, the
report): every sentence of it said through the reader's catalog, the labels of its renderings
with it.

The diagnosis itself stays English (the JSON is a machine contract): a signature's advice is the
catalogs' message id as it is, and a sentence the analyzer composed carries its template and
values (`wording`, models.Said), so it is translated first and filled after. A text that is in
no catalog (an error message of a bundle, a log line) is shown as it is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vllm_triage.i18n import N_, Catalog, Language, catalog
from vllm_triage.models import (
    CompatVerdict,
    CompatWording,
    Diagnosis,
    Finding,
    RuleMatch,
    Said,
    Wording,
    join_sentences,
)

LABELS: dict[str, str] = {
    "title": N_("vllm-triage diagnosis"),
    "panel": N_("Diagnosis"),
    "cause": N_("Cause"),
    "phase": N_("Phase"),
    "confidence": N_("Confidence"),
    "driver_change": N_("Driver change advised"),
    "yes": N_("yes"),
    "no": N_("no"),
    "rule": N_("Rule"),
    "none": N_("none"),
    "logs": N_("Logs"),
    "logs_read": N_("{lines} lines, reached {phase}"),
    "evidence": N_("Evidence"),
    "next_steps": N_("Next steps"),
    "avoid": N_("Do not"),
    "threshold": N_("Driver / CUDA threshold"),
    "compat_title": N_("Driver / CUDA compatibility"),
    "verdict": N_("Verdict"),
    "driver": N_("Driver"),
    "driver_value": N_("{driver} ({branch}, CUDA up to {ceiling})"),
    "cuda_build": N_("CUDA build"),
    "gpu": N_("GPU"),
    "gpu_value": N_("{model}, compute capability {capability}"),
    "differential": N_(
        "Also possible ({primary} is {share} of the real reports with this evidence): {others}"
    ),
    "differential_cause": N_("{cause} {share}, to tell it apart: {check}"),
    "min_driver": N_("Minimum driver (to start)"),
    "toolkit_driver": N_("Toolkit's driver"),
    "recommended_driver": N_("Recommended driver"),
    "recommended_value": N_("{driver} (current release of long-term branch {branch})"),
    "not_established": N_("not established"),
    "unknown": N_("unknown"),
    "source": N_("Source"),
    "conditions": N_("Conditions"),
    "what_to_do": N_("What to do"),
    "table_rows": N_("Table rows used"),
    "compat_evidence": N_("compat verdict"),
    "server": N_("Server"),
    "started_at": N_("started at {where}"),
    "started": N_("Started"),
    "not_started": N_("Not started; last start-up milestone: {milestone}"),
    "last_milestone": N_("not started; last milestone {milestone}"),
    "requests_total": N_("requests {total} ({counts})"),
    "stop_how_signal": N_("stop signal"),
    "stop_how_shutdown": N_("shutdown"),
    "stop_at": N_("{how} at {where}"),
    "no_milestone": N_("no start-up milestone seen"),
    "requests": N_("Requests in the access log"),
    "at_least": N_("(at least)"),
    "requests_counts": N_("served {ok}, probes {probes}, 4xx {client}, 5xx {server}"),
    "stop_signal": N_("Stop signal"),
    "shutdown": N_("Shutdown"),
    "shutdown_complete": N_("shutdown complete"),
    "facts": N_("Facts read"),
    "fact": N_("Fact"),
    "value": N_("Value"),
    "from": N_("From"),
    "from_flag": N_("command-line flag"),
    "from_bundle": N_("bundle facts"),
    "from_recipe": N_("the recipe"),
    "refused": N_("Refused requests"),
    "refused_one": N_("refused request"),
    "what": N_("What"),
    "count": N_("Count"),
    "first_example": N_("First example"),
    "other_findings": N_("Other findings"),
    "role": N_("Role"),
    "first_evidence": N_("First evidence"),
    "decision": N_("Decision"),
    "decision_explain": N_("Decision (--explain)"),
    "tier": N_("Tier"),
    "line": N_("Line"),
    "outcome": N_("Outcome"),
    "why": N_("Why"),
    "no_rule": N_("no rule matched any line"),
    "note": N_("Note"),
}
"""The renderings' labels (terminal and markdown), in the core catalog; `{fields}` filled when
shown. Machine values (causes, phases, rule ids, outcomes, paths) are shown as they are, but for
the ones below, which are words."""

VERDICTS: dict[str, str] = {
    "compatible": N_("compatible"),
    "conditional": N_("conditional"),
    "forward_compat_only": N_("forward compat only"),
    "incompatible": N_("incompatible"),
}
ROLES: dict[str, str] = {
    "root": N_("root"),
    "cascade": N_("cascade"),
    "related": N_("related"),
    "threshold": N_("threshold"),
    "request": N_("request"),
    "teardown": N_("teardown"),
}
CERTAINTIES: dict[str, str] = {
    "primary": N_("primary"),
    "secondary": N_("secondary"),
    "inferred": N_("inferred"),
    "memory": N_("from memory"),
}
"""A compat verdict, a finding's role and a source's certainty (the knowledge base's): values
that are English words, said in the reader's (English shows the value itself)."""
# The fields of a composed sentence whose values are such words ("per a {certainty} source").
_WORD_FIELDS: dict[str, dict[str, str]] = {"certainty": CERTAINTIES}


class Words:
    """The labels and sentences of one language: `label(key, **fields)`, `say(text)`."""

    def __init__(self, language: Language) -> None:
        self.language = language
        self.tr: Catalog = catalog(language)

    def label(self, key: str, /, **fields: object) -> str:
        return self.tr(LABELS[key], **fields)

    def say(self, text: str) -> str:
        """A text that may be a message id as it is (a signature's advice); others unchanged."""
        return self.tr(text) if text else text

    def yes_no(self, value: bool) -> str:
        return self.label("yes" if value else "no")

    def shown(self, words: Mapping[str, str], value: str) -> str:
        """A machine value for markdown: its word (Catalog.word), or as code where it is shown
        as it is."""
        said = self.tr.word(words, value)
        return f"`{said}`" if said == value else said

    def fill(self, message: str, /, **fields: object) -> str:
        """A composed sentence translated, the values that are words said in words too."""
        return self.tr(
            message,
            **{
                name: self.tr.word(_WORD_FIELDS[name], value)
                if name in _WORD_FIELDS and isinstance(value, str)
                else value
                for name, value in fields.items()
            },
        )


def _composed(wording: Sequence[Said], texts: Sequence[str], words: Words) -> list[str]:
    """Each text through its wording when the wording covers them all, else by lookup."""
    if wording and len(wording) == len(texts):
        return [item.say(words.fill) for item in wording]
    return [words.say(text) for text in texts]


def _sentences(wording: Sequence[Said], text: str, words: Words) -> str:
    """A paragraph through its wording's sentences when it has them, else by lookup."""
    if wording:
        return join_sentences([item.say(words.fill) for item in wording])
    return words.say(text)


def localized_finding(finding: Finding, words: Words) -> Finding:
    """A finding with its summary, next steps and avoid in the reader's language."""
    if words.language == "en":
        return finding
    wording = finding.wording or Wording()
    return finding.model_copy(
        update={
            "summary": _sentences(wording.summary, finding.summary, words),
            "next_steps": _composed(wording.next_steps, finding.next_steps, words),
            "avoid": _composed(wording.avoid, finding.avoid, words),
        }
    )


def _localized_match(match: RuleMatch, words: Words) -> RuleMatch:
    why = match.why_wording.say(words.fill) if match.why_wording else words.say(match.why)
    return match.model_copy(update={"why": why})


def localized_compat(verdict: CompatVerdict, words: Words) -> CompatVerdict:
    """A compat verdict with its explanation, conditions and advice in the reader's language."""
    if words.language == "en":
        return verdict
    wording = verdict.wording or CompatWording()
    return verdict.model_copy(
        update={
            "explanation": _sentences(wording.explanation, verdict.explanation, words),
            "conditions": _composed(wording.conditions, verdict.conditions, words),
            "advice": _composed(wording.advice, verdict.advice, words),
            "table_rows": _composed(wording.table_rows, verdict.table_rows, words),
        }
    )


def _with_compat_evidence(finding: Finding, english: str, said: str) -> Finding:
    """The finding with the compat verdict's explanation, cited as its evidence, said too."""
    evidence = [
        item.model_copy(update={"text": said})
        if item.file == "compat" and item.line == 0 and item.text == english
        else item
        for item in finding.evidence
    ]
    return finding.model_copy(update={"evidence": evidence})


def localized(diagnosis: Diagnosis, language: Language) -> Diagnosis:
    """The diagnosis with every sentence for people in `language` (English: unchanged); what
    machines read (causes, phases, rules, evidence, facts) stays as it is. For rendering only:
    the JSON written and printed is the English diagnosis."""
    if language == "en":
        return diagnosis
    words = Words(language)
    primary = localized_finding(diagnosis.primary, words)
    findings = [localized_finding(f, words) for f in diagnosis.findings]
    compat = localized_compat(diagnosis.compat, words) if diagnosis.compat else None
    if diagnosis.compat and compat:
        english, said = diagnosis.compat.explanation, compat.explanation
        primary = _with_compat_evidence(primary, english, said)
        findings = [_with_compat_evidence(finding, english, said) for finding in findings]
    return diagnosis.model_copy(
        update={
            "primary": primary,
            "findings": findings,
            "compat": compat,
            "notes": _composed(diagnosis.notes_wording, diagnosis.notes, words),
            "decision": [_localized_match(m, words) for m in diagnosis.decision],
            "differential": [
                other.model_copy(update={"check": words.tr(other.check)})
                for other in diagnosis.differential
            ],
        }
    )


def differential_line(diagnosis: Diagnosis, words: Words) -> str | None:
    """The other causes the primary's evidence fits, in one line: each with its share of the
    real reports and the check that tells it apart."""
    if not diagnosis.differential:
        return None
    others = "; ".join(
        words.label(
            "differential_cause", cause=other.cause, share=f"{other.weight:.0%}", check=other.check
        )
        for other in diagnosis.differential
    )
    share = diagnosis.primary.weight
    return words.label(
        "differential",
        primary=diagnosis.primary.cause,
        share=f"{share:.0%}" if share is not None else "?",
        others=others,
    )
