"""`knowledge check`: the data on its own, and every tie between the data and the code that reads
it, so that a data edit that passes the check cannot break a command. A tie fails both ways: the
data names something the code does not implement (a fact check without a condition), or the code
names something the data lacks (a signature the analyzer refers to, a recipe field a command
reads). Each problem is one line naming the file to open."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from vllm_triage.diagnose.analyzer import NAMED_MILESTONES, NAMED_RULES
from vllm_triage.diagnose.facts import known_check_ids
from vllm_triage.diagnose.logreader import normalize
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.knowledge.check import data_problems
from vllm_triage.knowledge.translations import translation_problems
from vllm_triage.launch import LaunchArgs
from vllm_triage.prefix.models import EXPECTED_CLASSES, DivergenceClass
from vllm_triage.redact.examples import example_problems
from vllm_triage.validate.starts import READY_MILESTONE

# The recipe fields each module reads, dotted for nested ones (tests/test_ties.py holds the code
# to this table: a module that reads a recipe field not listed here fails the test).
RECIPE_READERS: dict[str, tuple[str, ...]] = {
    "vllm_triage.diagnose.analyzer": ("driver_note",),
    "vllm_triage.diagnose.api": ("id", "image", "image_cuda"),
    "vllm_triage.knowledge.check": ("id", "min_driver_branch"),
    "vllm_triage.knowledge.loader": (
        "id",
        "model_ids",
        "required_flags",
        "profiles",
        "default_profile",
    ),
    "vllm_triage.prefix.check": ("id", "name", "profiles"),
    "vllm_triage.preflight.api": ("id",),
    "vllm_triage.preflight.checks": (
        "id",
        "image",
        "min_vllm_version",
        "all2all_backends.rdma",
        "all2all_backends.nvlink",
        "all2all_backends.note",
    ),
    "vllm_triage.record.api": ("id", "review_triggers"),
    "vllm_triage.validate.rungs.multi_node": (
        "name",
        "all2all_backends.rdma",
        "all2all_backends.nvlink",
    ),
    "vllm_triage.validate.rungs.same_prefix": ("name",),
    "vllm_triage.validate.rungs.tool_calls": ("tool_calls.flags",),
}
# The start-up milestones (phases.yaml) each module names by id (tests/test_ties.py holds the code
# to this table: a module constant *_MILESTONE not named here fails the test).
MILESTONE_READERS: dict[str, frozenset[str]] = {
    "vllm_triage.diagnose.analyzer": NAMED_MILESTONES,
    "vllm_triage.validate.starts": frozenset({READY_MILESTONE}),
}
_MISSING = object()


def _module_file(module: str) -> str:
    return module.replace(".", "/") + ".py"


def _fact_check_ties(kb: KnowledgeBase) -> list[str]:
    where, code = kb.file("fact_checks.yaml"), _module_file("vllm_triage.diagnose.facts")
    implemented = known_check_ids()
    named = {check.id for check in kb.fact_checks}
    problems = [
        f"{where} {check.id} {check.name}: no condition for it in {code}"
        for check in kb.fact_checks
        if check.id not in implemented
    ]
    problems += [f"{code} implements {i}, which {where} lacks" for i in sorted(implemented - named)]
    return problems


def _signature_ties(kb: KnowledgeBase) -> list[str]:
    code = _module_file("vllm_triage.diagnose.analyzer")
    return [
        f"{kb.file('signatures')}: no signature {rule_id}, which {code} refers to by id"
        for rule_id in sorted(NAMED_RULES)
        if kb.signature(rule_id) is None
    ]


def _milestone_ties(kb: KnowledgeBase) -> list[str]:
    known = {milestone.id for milestone in kb.phases.milestones}
    return [
        f"{kb.file('phases.yaml')}: no milestone {milestone}, which {_module_file(module)} "
        "refers to by id"
        for module, named in MILESTONE_READERS.items()
        for milestone in sorted(named - known)
    ]


def _field(value: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        value = getattr(value, part, _MISSING)
        if value is _MISSING:
            break
    return value


def _recipe_ties(kb: KnowledgeBase) -> list[str]:
    readers: dict[str, list[str]] = {}
    for module, fields in RECIPE_READERS.items():
        for dotted in fields:
            readers.setdefault(dotted, []).append(_module_file(module))
    problems = []
    for recipe in kb.recipes.values():
        for dotted, modules in sorted(readers.items()):
            value = _field(recipe, dotted)
            state = (
                "missing" if value is _MISSING else "empty" if value in (None, "", [], {}) else ""
            )
            if state:
                problems.append(
                    f"{kb.file(f'recipes/{recipe.id}.yaml')}: {dotted} is {state}, and "
                    f"{', '.join(modules)} read(s) it"
                )
    return problems


def _prefix_ties(kb: KnowledgeBase) -> list[str]:
    where, code = kb.file("prefix_shapes.yaml"), _module_file("vllm_triage.prefix.models")
    problems_classes = set(get_args(DivergenceClass)) - EXPECTED_CLASSES
    fixed = {fix.id for fix in kb.prefix.fixes}
    problems = [
        f"{where} fix {kind}: prefix-check reports no such problem class ({code})"
        for kind in sorted(fixed - problems_classes)
    ]
    problems += [
        f"{where}: no fix for {kind}, a problem class prefix-check reports ({code})"
        for kind in sorted(problems_classes - fixed)
    ]
    return problems


def _launch_ties(kb: KnowledgeBase) -> list[str]:
    where, code = kb.file("vllm_args.yaml"), _module_file("vllm_triage.launch")
    fields = {(a.flag, a.field) for a in kb.vllm_args.arguments}
    fields |= set(kb.vllm_args.environment.items())
    return [
        f"{where} {name}: field {field!r} is not a field of LaunchArgs ({code})"
        for name, field in sorted(fields)
        if field not in LaunchArgs.model_fields
    ]


def check_knowledge(kb: KnowledgeBase) -> list[str]:
    """Every problem found, one line each naming the file (empty when the knowledge is sound)."""
    return (
        data_problems(kb)
        + example_problems(kb)
        + _fact_check_ties(kb)
        + _signature_ties(kb)
        + _milestone_ties(kb)
        + _recipe_ties(kb)
        + _prefix_ties(kb)
        + _launch_ties(kb)
        + translation_problems(kb)
    )


# A corpus log longer than this is read up to it (the labelled logs are far shorter).
_MAX_CORPUS_LOG_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class CatalogueReport:
    """What `knowledge check` says of the message catalogue: the coverage table, and the
    signature patterns that match no catalogued message (nor a line of the corpus logs given)."""

    table: list[str]
    unmatched: list[str]


def _as_scanned(line: str) -> str:
    """A line as the scanner reads it (prefixes, levels and colour codes off)."""
    return normalize(line.encode(), 1).message


def corpus_lines(folders: Sequence[Path]) -> list[str]:
    """Every line of the `*.log` files in the folders, normalised as the scanner normalises a
    line."""
    lines = []
    for folder in folders:
        for log in sorted(folder.glob("*.log")):
            with log.open("rb") as stream:
                data = stream.read(_MAX_CORPUS_LOG_BYTES)
            for number, raw in enumerate(data.split(b"\n"), start=1):
                if message := normalize(raw, number).message:
                    lines.append(message)
    return lines


def catalogue_check(kb: KnowledgeBase, corpus_dirs: Sequence[Path] = ()) -> CatalogueReport:
    """The message catalogue's coverage by the signatures, and the signature patterns that match
    no catalogued message of any producer and no line of the logs in corpus_dirs
    (vllm_triage.knowledge.messages)."""
    from vllm_triage.knowledge.messages import (
        MESSAGES_FOLDER,
        coverage,
        coverage_table,
        load_catalogues,
        signature_patterns,
        unmatched_anywhere,
    )

    catalogues = load_catalogues(kb.data_dir)
    if not catalogues:
        return CatalogueReport([], [])
    result = coverage(signature_patterns(kb, _as_scanned), catalogues)
    unmatched = unmatched_anywhere(result.unmatched, corpus_lines(corpus_dirs))
    where = "no catalogued message of any producer" + (
        " and no corpus log line" if corpus_dirs else ""
    )
    return CatalogueReport(
        coverage_table(result, kb.file(MESSAGES_FOLDER)),
        [
            f"{ref.file} {ref.signature} {ref.name}: pattern {ref.pattern!r} matches {where}"
            for ref in unmatched
        ],
    )


# Entries listed per pattern by signature_coverage; the rest are counted.
_COVERED_SHOWN = 8


def signature_coverage(kb: KnowledgeBase, rule: str) -> list[str]:
    """What one signature (id or name) covers of the message catalogue, pattern by pattern: the
    catalogued messages each pattern matches, with producer, file and versions (the first
    _COVERED_SHOWN, then a count), or that it matches none."""
    from vllm_triage.errors import InputError
    from vllm_triage.knowledge.messages import (
        covered_entries,
        load_catalogues,
        signature_patterns,
    )

    signature = kb.signature(rule)
    if signature is None:
        raise InputError(f"no signature {rule!r} (see `vllm-triage knowledge show signatures`)")
    refs = [ref for ref in signature_patterns(kb, _as_scanned) if ref.signature == signature.id]
    lines = [f"{signature.id} {signature.name}: the catalogued messages each pattern matches"]
    for covered in covered_entries(refs, load_catalogues(kb.data_dir)):
        lines.append(f"  pattern {covered.ref.pattern!r}: {len(covered.entries)} message(s)")
        for producer, entry in covered.entries[:_COVERED_SHOWN]:
            text = entry.message.replace("\n", " ")
            lines.append(f"    {producer} {entry.file} ({', '.join(entry.versions)}): {text[:160]}")
        if len(covered.entries) > _COVERED_SHOWN:
            lines.append(f"    ... and {len(covered.entries) - _COVERED_SHOWN} more")
    return lines
