"""Every log signature against its own positive and negative examples (ruff-style rule tests),
through the same normalisation the scanner uses, and the same patterns under grep -E."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from vllm_triage.diagnose.logfacts import decode_fact
from vllm_triage.diagnose.logreader import LogLine, normalize
from vllm_triage.diagnose.signatures import CompiledSignature, compiled_knowledge, encoded
from vllm_triage.knowledge import grep_patterns, load_knowledge

SIGNATURES = load_knowledge().signatures


def _fires(compiled: CompiledSignature, text: str) -> bool:
    line = normalize(text.encode(), 1)
    return compiled.regex.search(line.message) is not None


@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: f"{s.id}-{s.name}")
def test_positive_examples_fire(sig):
    compiled = CompiledSignature.of(sig)
    for example in sig.examples.positive:
        assert _fires(compiled, example), example


@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: f"{s.id}-{s.name}")
def test_negative_examples_do_not_fire(sig):
    compiled = CompiledSignature.of(sig)
    for example in sig.examples.negative:
        assert not _fires(compiled, example), example


def test_only_driver_threshold_rules_advise_a_driver_change():
    advising = {s.cause for s in SIGNATURES if s.driver_change_advised}
    assert advising == {"driver_too_old"}


def test_info_lines_are_not_errors(kb):
    compiled = CompiledSignature.of(kb.signature("VT999"))
    line = normalize(b"(APIServer pid=1) INFO 11-30 18:55:19 [x.py:1] ValueError: just a word", 1)
    assert line.level == "INFO" and not compiled.counts_at(line)


@pytest.mark.skipif(shutil.which("grep") is None, reason="grep not installed")
@pytest.mark.slow
def test_grep_reads_the_patterns_as_python_does(tmp_path: Path, kb):
    """The benchmark compares against grep -E -f: the patterns must mean the same there."""
    patterns = tmp_path / "patterns.txt"
    patterns.write_text("\n".join(grep_patterns(kb)) + "\n")
    for sig in kb.signatures:
        for example in sig.examples.positive:
            sample = tmp_path / "sample.log"
            sample.write_text(example + "\n")
            done = subprocess.run(
                ["grep", "-c", "-E", "-f", str(patterns), str(sample)],
                capture_output=True,
                text=True,
                check=False,
            )
            assert done.stdout.strip() == "1", (sig.id, example, done.stderr)


def test_the_re2_gate_agrees_with_re_on_every_example(kb):
    """The scanner tries each rule with RE2 first and compiles re only for the rules RE2 finds:
    on every example, positive or negative, RE2 must say what re says (never hide a match)."""
    for sig in kb.signatures:
        compiled = CompiledSignature.of(sig)
        for example in [*sig.examples.positive, *sig.examples.negative]:
            line = normalize(example.encode(), 1)
            gate = compiled.matcher.gate.search(encoded(line)) is not None
            assert gate == (compiled.regex.search(line.message) is not None), (sig.id, example)


def test_a_lone_surrogate_does_not_stop_the_rules(kb):
    line = LogLine(1, "RuntimeError: No CUDA GPUs are available \ud800", "", None, "ERROR")
    compiled = CompiledSignature.of(kb.signature("VT203"))
    assert compiled.fires_on(line, encoded(line))


# --- the phases file: stop lines, access lines, facts -------------------------------------------


def _message(text: str) -> str:
    return normalize(text.encode(), 1).message


@pytest.mark.parametrize("event", load_knowledge().phases.lifecycle, ids=lambda e: e.id)
def test_lifecycle_examples(event):
    regex = re.compile("|".join(f"(?:{p})" for p in event.patterns))
    for example in event.examples.positive:
        assert regex.search(_message(example)), example
    for example in event.examples.negative:
        assert not regex.search(_message(example)), example


@pytest.mark.parametrize("access", load_knowledge().phases.requests, ids=lambda r: r.id)
def test_access_line_examples_read_their_status(access, kb):
    compiled = next(r for r in compiled_knowledge(kb).requests if r.rule.id == access.id)
    for example, status in access.examples.items():
        assert compiled.reader.value(normalize(example.encode(), 1)) == status, example


@pytest.mark.parametrize("fact", load_knowledge().phases.facts, ids=lambda f: f.id)
def test_fact_examples_read_their_value(fact, kb):
    compiled = next(f for f in compiled_knowledge(kb).facts if f.rule.id == fact.id)
    for example, value in fact.examples.items():
        raw = compiled.reader.value(normalize(example.encode(), 1))
        assert decode_fact(fact.decode, raw) == value, example


def test_the_rule_set_agrees_with_re_on_every_example(kb):
    """The scanner names the patterns a line matches with one RE2 set; Python re must agree on
    every example of every rule, stop line, access line and fact (positive and negative)."""
    compiled = compiled_knowledge(kb)
    owners = {("sig", i): r.signature.patterns for i, r in enumerate(compiled.rules)} | {
        ("life", i): e.patterns for i, e in enumerate(compiled.lifecycle)
    }
    owners |= {("req", i): r.rule.patterns for i, r in enumerate(compiled.requests)}
    owners |= {("fact", i): f.rule.patterns for i, f in enumerate(compiled.facts)}
    owners |= {("ms", i): m.milestone.patterns for i, m in enumerate(compiled.milestones)}
    examples = [e for s in kb.signatures for e in [*s.examples.positive, *s.examples.negative]]
    examples += [e for ev in kb.phases.lifecycle for e in ev.examples.positive]
    examples += [e for r in kb.phases.requests for e in r.examples]
    examples += [e for f in kb.phases.facts for e in f.examples]
    for example in examples:
        line = normalize(example.encode(), 1)
        found = set(compiled.matches(encoded(line)))
        wanted = {
            owner
            for owner, patterns in owners.items()
            if any(re.search(p, line.message) for p in patterns)
        }
        assert found == wanted, example


def test_outranks_names_existing_rules(kb):
    ids = {s.id for s in kb.signatures}
    for sig in kb.signatures:
        assert set(sig.outranks) <= ids - {sig.id}, sig.id
        assert sig.tier == "root" or not sig.outranks, sig.id


def test_a_message_alone_never_advises_a_driver_change(kb):
    """Only messages that are themselves a version comparison advise; the candidates do not."""
    for rule_id in ("VT104", "VT105", "VT106", "VT107"):
        assert kb.signature(rule_id).driver_change_advised is False
    advising = {s.id for s in kb.signatures if s.driver_change_advised}
    assert advising == {"VT101", "VT102", "VT103"}


def test_no_failure_is_named_only_by_request_rules(kb):
    """A rule that says nothing failed only ever describes a refused request or a second server,
    never a failed start; the request rules name what the clients met: the server's chat-template
    or tool-call setup, or a client library built for another version of the API."""
    met = ("no_failure", "chat_template", "tool_call_parser", "dependency_mismatch")
    for sig in kb.signatures:
        if sig.cause == "no_failure":
            assert sig.tier == "request", sig.id
        if sig.tier == "request":
            assert sig.cause in met, sig.id


def test_every_signature_carries_its_provenance(kb):
    for sig in kb.signatures:
        assert sig.name and sig.explanation.strip() and sig.summary.strip(), sig.id
        assert sig.source and sig.certainty and sig.as_of, sig.id
        assert sig.examples.positive and sig.examples.negative, sig.id
