"""Read and validate the knowledge files; a malformed file is one clear error naming file and row."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from vllm_triage.errors import InputError, KnowledgeError
from vllm_triage.knowledge.schema import (
    CudaFamily,
    CudaToolkit,
    DriverBranch,
    EnvAllow,
    FactCheck,
    ForwardCompat,
    Gpu,
    ImageMap,
    MetricAliases,
    Phases,
    Recipe,
    Redaction,
    RedactionRule,
    Signature,
    VllmArgs,
)

DATA_DIR = Path(__file__).parent / "data"

ModelT = TypeVar("ModelT", bound=BaseModel)


@dataclass(frozen=True)
class KnowledgeBase:
    """Every fact the tool reasons with, validated."""

    data_dir: Path
    toolkits: list[CudaToolkit]
    families: list[CudaFamily]
    branches: list[DriverBranch]
    gpus: list[Gpu]
    forward_compat: ForwardCompat
    images: ImageMap
    phases: Phases
    recipes: dict[str, Recipe]
    signatures: list[Signature]
    redaction: Redaction
    vllm_args: VllmArgs
    vllm_metrics: MetricAliases
    fact_checks: list[FactCheck]
    files: list[str] = field(default_factory=list)

    def recipe(self, name: str) -> Recipe:
        """The recipe of that id; InputError (one line, the known ids) for any other name."""
        recipe = self.recipes.get(name)
        if recipe is None:
            known = ", ".join(sorted(self.recipes)) or "none"
            raise InputError(f"unknown recipe {name!r} (known: {known})")
        return recipe

    def recipe_for_model(self, model: str | None) -> Recipe | None:
        """The recipe whose model id the launch's model names (a hub id or a local folder of it)."""
        if not model:
            return None
        name = model.rstrip("/").lower()
        for recipe in self.recipes.values():
            for model_id in recipe.model_ids:
                wanted = model_id.lower()
                if name == wanted or name.endswith("/" + wanted.split("/")[-1]):
                    return recipe
        return None

    def signature(self, rule_id: str) -> Signature | None:
        return next((s for s in self.signatures if rule_id in (s.id, s.name)), None)

    def gpu(self, product_name: str) -> Gpu | None:
        """The GPU row whose nvidia-smi name pattern matches product_name."""
        return next((g for g in self.gpus if g.matches(product_name)), None)

    def family(self, major: int) -> CudaFamily | None:
        return next((f for f in self.families if f.major == major), None)

    def branch(self, number: int) -> DriverBranch | None:
        return next((b for b in self.branches if b.number == number), None)


def _format_error(where: str, exc: ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'row'}: {err['msg']}" for err in exc.errors()
    )
    return f"{where}: {problems}"


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root.parent))
    except ValueError:
        return str(path)


def _validate(model: type[ModelT], data: Any, where: str) -> ModelT:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise KnowledgeError(_format_error(where, exc)) from None
    except ValueError as exc:
        raise KnowledgeError(f"{where}: {exc}") from None


def _read_csv(path: Path, model: type[ModelT], root: Path) -> list[ModelT]:
    name = _relative(path, root)
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            rows = []
            # Row numbers count the header as row 1, as a spreadsheet shows them.
            for number, raw in enumerate(reader, start=2):
                if None in raw or None in raw.values():
                    raise KnowledgeError(f"{name} row {number}: wrong number of columns")
                rows.append(_validate(model, raw, f"{name} row {number}"))
    except OSError as exc:
        raise KnowledgeError(f"{name}: cannot read: {exc.strerror}") from None
    if not rows:
        raise KnowledgeError(f"{name}: no rows")
    return rows


def _read_yaml(path: Path, root: Path) -> Any:
    name = _relative(path, root)
    try:
        with path.open(encoding="utf-8") as handle:
            return yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except OSError as exc:
        raise KnowledgeError(f"{name}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise KnowledgeError(f"{name}{where}: not valid YAML: {problem}") from None


def _yaml_model(path: Path, model: type[ModelT], root: Path) -> ModelT:
    return _validate(model, _read_yaml(path, root), _relative(path, root))


def _signatures(folder: Path, root: Path) -> list[Signature]:
    found: list[Signature] = []
    for path in sorted(folder.glob("*.yaml")):
        name = _relative(path, root)
        document = _read_yaml(path, root)
        if not isinstance(document, dict) or not isinstance(document.get("rules"), list):
            raise KnowledgeError(f"{name}: expected a mapping with a 'rules' list")
        for index, rule in enumerate(document["rules"], start=1):
            if not isinstance(rule, dict):
                raise KnowledgeError(f"{name} rule {index}: expected a mapping")
            where = f"{name} rule {index} ({rule.get('id', '?')})"
            found.append(_validate(Signature, {"as_of": document.get("as_of"), **rule}, where))
    seen: dict[str, str] = {}
    for signature in found:
        for key in (signature.id, signature.name):
            if key in seen:
                raise KnowledgeError(f"signature {key} is defined twice")
            seen[key] = signature.id
    return sorted(found, key=lambda signature: signature.id)


def _recipes(folder: Path, root: Path) -> dict[str, Recipe]:
    recipes = {}
    for path in sorted(folder.glob("*.yaml")):
        recipe = _yaml_model(path, Recipe, root)
        if recipe.id != path.stem:
            raise KnowledgeError(
                f"{_relative(path, root)}: id {recipe.id!r} must match the file name"
            )
        recipes[recipe.id] = recipe
    return recipes


def _fact_checks(path: Path, root: Path) -> list[FactCheck]:
    name = _relative(path, root)
    document = _read_yaml(path, root)
    if not isinstance(document, dict) or not isinstance(document.get("checks"), list):
        raise KnowledgeError(f"{name}: expected a mapping with a 'checks' list")
    checks = []
    for index, check in enumerate(document["checks"], start=1):
        if not isinstance(check, dict):
            raise KnowledgeError(f"{name} check {index}: expected a mapping")
        checks.append(_validate(FactCheck, check, f"{name} check {index} ({check.get('id', '?')})"))
    ids = [c.id for c in checks]
    if len(set(ids)) != len(ids):
        raise KnowledgeError(f"{name}: a check id is defined twice")
    return checks


def _rows(
    document: dict[str, Any], key: str, model: type[ModelT], name: str, label: str
) -> list[ModelT]:
    rows = document.get(key)
    if not isinstance(rows, list):
        raise KnowledgeError(f"{name}: expected a '{key}' list")
    found = []
    for index, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise KnowledgeError(f"{name} {label} {index}: expected a mapping")
        where = f"{name} {label} {index}" + (f" ({row['id']})" if "id" in row else "")
        found.append(_validate(model, {"as_of": document.get("as_of"), **row}, where))
    return found


def _redaction(path: Path, root: Path) -> Redaction:
    name = _relative(path, root)
    document = _read_yaml(path, root)
    if not isinstance(document, dict):
        raise KnowledgeError(f"{name}: expected a mapping with 'rules' and 'env_allow'")
    rules = _rows(document, "rules", RedactionRule, name, "rule")
    seen: set[str] = set()
    for rule in rules:
        if rule.id in seen:
            raise KnowledgeError(f"{name}: redaction rule {rule.id} is defined twice")
        seen.add(rule.id)
    allow = _rows(document, "env_allow", EnvAllow, name, "env_allow")
    extra = set(document) - {"as_of", "rules", "env_allow"}
    if extra:
        raise KnowledgeError(f"{name}: unknown key(s) {', '.join(sorted(extra))}")
    return _validate(
        Redaction, {"as_of": document.get("as_of"), "rules": rules, "env_allow": allow}, name
    )


def load_knowledge(data_dir: Path | None = None) -> KnowledgeBase:
    """Load and validate every knowledge file under data_dir (the packaged data by default)."""
    return _load_packaged() if data_dir is None else _load(data_dir)


@cache
def _load_packaged() -> KnowledgeBase:
    return _load(DATA_DIR)


def _load(root: Path) -> KnowledgeBase:
    if not root.is_dir():
        raise KnowledgeError(f"{root}: knowledge folder not found")
    base = KnowledgeBase(
        data_dir=root,
        toolkits=_read_csv(root / "cuda_toolkits.csv", CudaToolkit, root),
        families=_read_csv(root / "cuda_families.csv", CudaFamily, root),
        branches=_read_csv(root / "driver_branches.csv", DriverBranch, root),
        gpus=_read_csv(root / "gpus.csv", Gpu, root),
        forward_compat=_yaml_model(root / "forward_compat.yaml", ForwardCompat, root),
        images=_yaml_model(root / "vllm_images.yaml", ImageMap, root),
        phases=_yaml_model(root / "phases.yaml", Phases, root),
        recipes=_recipes(root / "recipes", root),
        signatures=_signatures(root / "signatures", root),
        redaction=_redaction(root / "redaction.yaml", root),
        vllm_args=_yaml_model(root / "vllm_args.yaml", VllmArgs, root),
        vllm_metrics=_yaml_model(root / "vllm_metrics.yaml", MetricAliases, root),
        fact_checks=_fact_checks(root / "fact_checks.yaml", root),
        files=sorted(_relative(p, root) for p in root.rglob("*") if p.suffix in {".csv", ".yaml"}),
    )
    base.toolkits.sort(key=lambda row: row.cuda_version)
    return base
