"""Integrity of the imported gitleaks rule set and its examples (independent of the redactor)."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import re2
import yaml
from gitleaks_harness import EXAMPLES, PLACEMENTS, load_values, measure, natural_name

RULES_FILE = Path(__file__).parent.parent / "src/vllm_triage/knowledge/data/gitleaks_rules.yaml"


@cache
def rules_document() -> dict[str, Any]:
    document = yaml.safe_load(RULES_FILE.read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


@cache
def examples_document() -> dict[str, Any]:
    document = json.loads(EXAMPLES.read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def rules_by_id() -> dict[str, dict[str, Any]]:
    return {rule["id"]: rule for rule in rules_document()["rules"]}


@cache
def compiled(pattern: str) -> Any:
    return re2.compile(pattern)


def captures(rule: dict[str, Any], text: str) -> set[str]:
    """Every match of the rule's regex in text, and each match's capture groups (the secret is
    one of them, or the whole match)."""
    regex = compiled(rule["regex"])
    found: set[str] = set()
    for m in regex.finditer(text):
        match = m.group(0).strip("\n")
        found.add(match)
        again = regex.search(match)
        if again is not None:
            found.update(g for g in again.groups() if g)
    return found


def test_rules_file_names_its_source_commit_date_and_licence() -> None:
    document = rules_document()
    assert document["source"]["repository"] == "https://github.com/gitleaks/gitleaks"
    assert document["source"]["path"] == "config/gitleaks.toml"
    assert re.fullmatch(r"[0-9a-f]{40}", document["commit"])
    assert document["as_of"] == "2026-12-01"
    assert "MIT" in document["licence"] and "Zachary Rice" in document["licence"]


def test_rule_ids_are_unique_and_every_rule_has_a_regex_or_a_path() -> None:
    rules = rules_document()["rules"]
    ids = [rule["id"] for rule in rules]
    assert len(ids) == len(set(ids))
    assert len(rules) >= 200
    for rule in rules:
        assert rule["regex"] or rule.get("path"), rule["id"]
        assert isinstance(rule["secret_group"], int)
        assert rule["entropy"] is None or isinstance(rule["entropy"], float)
        assert isinstance(rule["keywords"], list)


def test_regexes_compile_with_re2_except_those_recorded() -> None:
    document = rules_document()
    recorded = {entry["id"] for entry in document["regexes_re2_cannot_compile"]}
    failing = set()
    for rule in document["rules"]:
        patterns = [rule["regex"]] if rule["regex"] else []
        patterns += [p for allow in rule["allowlists"] for p in allow.get("regexes", [])]
        for pattern in patterns:
            try:
                re2.compile(pattern)
            except re2.error:
                failing.add(rule["id"])
    assert failing == recorded
    for pattern in document["global_allowlist"]["regexes"]:
        re2.compile(pattern)


def test_examples_come_from_the_same_commit_and_known_rules() -> None:
    examples = examples_document()
    assert examples["commit"] == rules_document()["commit"]
    assert examples["source"]["repository"] == "https://github.com/gitleaks/gitleaks"
    assert set(examples["rules"]) <= set(rules_by_id())


@pytest.mark.slow
def test_every_tp_value_is_captured_by_its_own_rules_regex() -> None:
    rules = rules_by_id()
    with_examples = 0
    for rule_id, examples in examples_document()["rules"].items():
        with_examples += bool(examples["tp"])
        for tp in examples["tp"]:
            value = tp.get("value", tp["secret"])
            assert value and value in tp["text"], (rule_id, tp)
            assert value in captures(rules[rule_id], tp["text"]), (rule_id, tp["text"])
    assert with_examples >= 200


def test_tp_values_are_many_and_distinct_per_rule() -> None:
    values, fps = load_values()
    assert len(values) >= 600
    assert len({(v.rule, v.value) for v in values}) == len(values)
    assert fps and all(isinstance(text, str) for _, text in fps)


def test_natural_name_is_the_assignment_name_before_the_value() -> None:
    assert natural_name('var openaiApiKeyToken string = "sk-abc"', "sk-abc") == "openaiApiKeyToken"
    assert natural_name('  "githubToken" => "ghp_x"', "ghp_x") == "githubToken"
    assert natural_name('github_TOKEN ::= "ghp_x"', "ghp_x") == "github_TOKEN"
    assert natural_name("loaded ghp_x today", "ghp_x") is None


def test_measure_tells_a_redactor_that_keeps_everything_from_one_that_masks_everything() -> None:
    kept = measure(lambda text: text)
    assert set(kept.placements) == set(PLACEMENTS)
    assert all(p.total and p.redacted == 0 for p in kept.placements.values())
    assert kept.fp_changed == 0 and kept.fp_total > 0
    masked = measure(lambda text: re.sub(r"\S", "*", text))
    assert all(p.share == 1.0 and not p.missed_rules for p in masked.placements.values())
    assert masked.fp_share == 1.0
