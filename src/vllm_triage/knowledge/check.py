"""Consistency checks across knowledge files, beyond what each file's schema can see."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vllm_triage.knowledge.loader import KnowledgeBase


def _signature_problems(kb: KnowledgeBase) -> list[str]:
    problems = []
    for sig in kb.signatures:
        compiled = [re.compile(p) for p in sig.patterns]
        for example in sig.examples.positive:
            if not any(rx.search(example) for rx in compiled):
                problems.append(f"{sig.id} {sig.name}: positive example not matched: {example!r}")
        for example in sig.examples.negative:
            if any(rx.search(example) for rx in compiled):
                problems.append(f"{sig.id} {sig.name}: negative example matched: {example!r}")
        if sig.driver_change_advised and sig.cause != "driver_too_old":
            problems.append(f"{sig.id} {sig.name}: only driver_too_old may advise a driver change")
    return problems


def _table_problems(kb: KnowledgeBase) -> list[str]:
    problems = []
    family_majors = {family.major for family in kb.families}
    for row in kb.toolkits:
        if row.cuda_version.major not in family_majors:
            problems.append(f"cuda_toolkits.csv {row.cuda_version}: no family row for its major")
    known_branches = {branch.branch for branch in kb.branches}
    for package, bases in kb.forward_compat.packages.items():
        for base in bases:
            if base not in known_branches:
                problems.append(f"forward_compat.yaml {package}: unknown branch {base}")
    for recipe in kb.recipes.values():
        if recipe.min_driver_branch not in known_branches:
            problems.append(f"recipes/{recipe.id}.yaml: unknown branch {recipe.min_driver_branch}")
    return problems


def data_problems(kb: KnowledgeBase) -> list[str]:
    """Problems the data shows on its own: tables that disagree, signatures against their examples.
    The ties between the data and the code that reads it are checked in vllm_triage.ties."""
    return _table_problems(kb) + _signature_problems(kb)
