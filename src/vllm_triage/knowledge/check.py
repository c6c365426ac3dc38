"""Consistency checks across knowledge files, beyond what each file's schema can see. Each
problem is one line that starts with the file to open."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vllm_triage.knowledge.loader import KnowledgeBase
    from vllm_triage.knowledge.schema import Examples


def _example_problems(where: str, regex: re.Pattern[str], examples: Examples) -> Iterable[str]:
    for example in examples.positive:
        if not regex.search(example):
            yield f"{where}: positive example not matched: {example!r}"
    for example in examples.negative:
        if regex.search(example):
            yield f"{where}: negative example matched: {example!r}"


def _signature_problems(kb: KnowledgeBase) -> list[str]:
    problems: list[str] = []
    ids = {sig.id for sig in kb.signatures}
    for sig in kb.signatures:
        where = f"{kb.signature_file(sig)} {sig.id} {sig.name}"
        regex = re.compile("|".join(f"(?:{p})" for p in sig.patterns))
        problems += _example_problems(where, regex, sig.examples)
        if sig.driver_change_advised and sig.cause != "driver_too_old":
            problems.append(f"{where}: only driver_too_old may advise a driver change")
        for other in [*sig.outranks, *sig.requires]:
            if other not in ids:
                problems.append(f"{where}: names {other}, which is no signature")
    return problems


def _prefix_problems(kb: KnowledgeBase) -> list[str]:
    problems: list[str] = []
    name = kb.file("prefix_shapes.yaml")
    for shape in kb.prefix.shapes:
        where = f"{name} {shape.id} {shape.name}"
        problems += _example_problems(where, shape.regex, shape.examples)
        if kb.prefix.fix(shape.kind) is None:
            problems.append(f"{where}: no fix for its kind {shape.kind}")
    return problems


def _table_problems(kb: KnowledgeBase) -> list[str]:
    problems: list[str] = []
    family_majors = {family.major for family in kb.families}
    for row in kb.toolkits:
        if row.cuda_version.major not in family_majors:
            problems.append(
                f"{kb.file('cuda_toolkits.csv')} {row.cuda_version}: no family row for its major"
            )
    known_branches = {branch.branch for branch in kb.branches}
    for package, bases in kb.forward_compat.packages.items():
        for base in bases:
            if base not in known_branches:
                problems.append(
                    f"{kb.file('forward_compat.yaml')} {package}: unknown branch {base}"
                )
    for recipe in kb.recipes.values():
        if recipe.min_driver_branch not in known_branches:
            where = kb.file(f"recipes/{recipe.id}.yaml")
            problems.append(f"{where}: unknown branch {recipe.min_driver_branch}")
    return problems


def _gpu_problems(kb: KnowledgeBase) -> list[str]:
    """Every example name resolves to its own row (the first match wins: a pattern that also
    catches another model's names, as ^NVIDIA H20 caught every H200, fails here), and every limit
    names a known branch."""
    problems: list[str] = []
    for row in kb.gpus:
        for example in row.examples:
            found = kb.gpu(example)
            if found is not row:
                got = found.name if found else "no row"
                problems.append(f"{kb.file('gpus.csv')} {row.name}: {example!r} resolves to {got}")
    known_branches = {branch.branch for branch in kb.branches}
    for limit in kb.gpu_limits:
        if limit.last_driver_branch and limit.last_driver_branch not in known_branches:
            problems.append(
                f"{kb.file('gpu_limits.yaml')} {limit.id}: unknown branch {limit.last_driver_branch}"
            )
    return problems


def _record_problems(kb: KnowledgeBase) -> list[str]:
    """Every widening condition of the change plan has the check that judges it in the decision
    record, and record.yaml names no condition the plan does not write."""
    plan_texts = kb.recovery.change_plan.widen_when
    where = kb.file("record.yaml")
    problems = [
        f"{where}: no widening rule for recovery.yaml's condition {text!r}"
        for text in plan_texts
        if kb.record.widening_rule(text) is None
    ]
    problems += [
        f"{where}: widening rule {rule.check}: recovery.yaml has no condition {rule.condition!r}"
        for rule in kb.record.widening
        if rule.condition not in plan_texts
    ]
    return problems


def data_problems(kb: KnowledgeBase) -> list[str]:
    """Problems the data shows on its own: tables that disagree, signatures and prefix shapes
    against their examples. The ties between the data and the code that reads it are checked in
    vllm_triage.ties."""
    return (
        _table_problems(kb)
        + _gpu_problems(kb)
        + _signature_problems(kb)
        + _prefix_problems(kb)
        + _record_problems(kb)
    )
