"""Read and validate the knowledge files; a malformed file is one clear error naming file and row.

The schema's classes are msgspec Structs (vllm_triage.knowledge.schema, no pydantic): msgspec
checks each document against its class (types, constraints, unknown keys, the classes' own
checks), after a pass driven by the same field types that reads what msgspec cannot: the version
numbers (DriverVersion, CudaVersion: dataclasses, which msgspec would take for objects, so no
dec_hook sees them) and a CSV row's text cells (names separated by |, yes/no, empty for None;
msgspec reads the numbers). An error is one line: the file and row, the field's path, what is
wrong, worded as pydantic worded it where the tests and users know the words."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import msgspec
import msgspec.inspect as mi

from vllm_triage.errors import InputError, KnowledgeError
from vllm_triage.knowledge.schema import (
    CudaFamily,
    CudaToolkit,
    DriverBranch,
    EnvAllow,
    FactCheck,
    ForwardCompat,
    Gpu,
    GpuLimit,
    ImageMap,
    MetricAliases,
    Phases,
    PrefixFix,
    PrefixShape,
    PrefixShapes,
    RealmPairing,
    Recipe,
    RecipeFlag,
    RecipeProfile,
    RecordPolicy,
    Recovery,
    Redaction,
    RedactionRule,
    SecretRuleSet,
    Signature,
    VllmArgs,
)
from vllm_triage.versions import CudaVersion, DriverVersion

DATA_DIR = Path(__file__).parent / "data"

ModelT = TypeVar("ModelT", bound=msgspec.Struct)


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
    secret_rules: SecretRuleSet
    vllm_args: VllmArgs
    vllm_metrics: MetricAliases
    fact_checks: list[FactCheck]
    prefix: PrefixShapes
    gpu_limits: list[GpuLimit]
    recovery: Recovery
    record: RecordPolicy
    registry_realms: list[RealmPairing]
    files: list[str] = field(default_factory=list)
    signature_files: dict[str, str] = field(default_factory=dict)  # id -> file, data_dir-relative

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

    def file(self, relative: str) -> str:
        """A knowledge file as messages name it (as the loader's errors do: data/gpus.csv)."""
        return f"{self.data_dir.name}/{relative}"

    def signature_file(self, signature: Signature) -> str:
        return self.file(self.signature_files.get(signature.id, "signatures"))

    def recipe_profile(self, recipe: Recipe, name: str | None = None) -> RecipeProfile:
        """The recipe's profile of that id (InputError, one line, for another), its default when
        no name is given."""
        wanted = name or recipe.default_profile
        found = next((p for p in recipe.profiles if p.id == wanted), None)
        if found is None:
            known = ", ".join(p.id for p in recipe.profiles)
            raise InputError(f"recipe {recipe.id} has no profile {wanted!r} (known: {known})")
        return found

    def recipe_flags(self, recipe: Recipe, profile: str | None = None) -> list[RecipeFlag]:
        """The flags a launch under that profile (the default when None) is expected to give."""
        return [*recipe.required_flags, *self.recipe_profile(recipe, profile).flags]

    def gpu(self, product_name: str) -> Gpu | None:
        """The GPU row whose name pattern matches product_name, as nvidia-smi, torch or GPU
        Feature Discovery (nvidia.com/gpu.product, with -SHARED or -MIG-<profile>) write it."""
        return next((g for g in self.gpus if g.matches(product_name)), None)

    def gpu_limits_for(self, gpu: Gpu) -> list[GpuLimit]:
        """The limits no driver change lifts that apply to this GPU (data/gpu_limits.yaml)."""
        return [limit for limit in self.gpu_limits if limit.applies_to(gpu)]

    def family(self, major: int) -> CudaFamily | None:
        return next((f for f in self.families if f.major == major), None)

    def branch(self, number: int) -> DriverBranch | None:
        return next((b for b in self.branches if b.number == number), None)


class _Unreadable(ValueError):
    """A value the pass before msgspec cannot read (a version, a yes/no cell), and where it is."""

    def __init__(self, path: list[str | int], problem: str) -> None:
        super().__init__(problem)
        self.path = path
        self.problem = problem


_VERSIONS: tuple[type[DriverVersion | CudaVersion], ...] = (DriverVersion, CudaVersion)
# msgspec's error: "what - at `$.path`" or "what - at `key` in `$.path`" (a dict's key).
_MESSAGE = re.compile(
    r"^(?P<what>.*?)(?: - at `(?P<at>[^`]*)`(?: in `(?P<within>[^`]*)`)?)?$", re.S
)
_STEP = re.compile(r"\.([^.\[]+)|\[([0-9]+|\.\.\.)\]")
_MISSING = re.compile(r"^Object missing required field `(?P<name>[^`]+)`$")
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<name>[^`]+)`$")
_ENUM = re.compile(r"^Invalid enum value (?P<value>.+)$")


@cache
def _type_info(model: type[msgspec.Struct]) -> Any:
    """The class's type tree, as msgspec reads it (constraints folded into the types)."""
    return mi.type_info(model)


def _bare(info: Any, *, optional: bool = False) -> Any:
    """The type under its metadata (description, title); with `optional`, the one type of an
    `X | None`."""
    while isinstance(info, mi.Metadata):
        info = info.type
    if optional and isinstance(info, mi.UnionType):
        arms = [arm for arm in info.types if not isinstance(arm, mi.NoneType)]
        if len(arms) == 1:
            return _bare(arms[0])
    return info


def _prepare(value: Any, info: Any, path: list[str | int], csv: bool) -> Any:
    """The document with what msgspec cannot read made readable, by the declared types: version
    numbers parsed, and in a CSV row (all text) empty cells of optional fields made None, names
    separated by | made lists, yes/no made booleans. The rest is msgspec's to check."""
    info = _bare(info)
    if isinstance(info, mi.DataclassType) and info.cls in _VERSIONS:
        if isinstance(value, info.cls):
            return value
        try:
            return info.cls.parse(str(value))
        except ValueError as exc:
            raise _Unreadable(path, str(exc)) from None
    if isinstance(info, mi.UnionType):
        arms = [arm for arm in info.types if not isinstance(arm, mi.NoneType)]
        if len(arms) < len(info.types) and (value is None or (csv and value == "")):
            return None
        return _prepare(value, arms[0], path, csv) if len(arms) == 1 else value
    if isinstance(info, mi.StructType) and isinstance(value, dict):
        types = {field.encode_name: field.type for field in info.fields}
        return {
            key: _prepare(item, types[key], [*path, key], csv) if key in types else item
            for key, item in value.items()
        }
    if csv and isinstance(value, str):
        if isinstance(info, mi.ListType):
            return [name.strip() for name in value.split("|") if name.strip()]
        if isinstance(info, mi.BoolType):
            text = value.strip().lower()
            if text not in {"yes", "true", "no", "false"}:
                raise _Unreadable(path, f"expected yes or no, got {value!r}")
            return text in {"yes", "true"}
        return value
    if isinstance(info, mi.ListType) and isinstance(value, list):
        return [_prepare(item, info.item_type, [*path, i], csv) for i, item in enumerate(value)]
    if isinstance(info, mi.DictType) and isinstance(value, dict):
        return {
            key: _prepare(item, info.value_type, [*path, key], csv) for key, item in value.items()
        }
    return value


def _declared(annotation: Any) -> Any:
    """The type under Annotated (constraints, markers) and under `| None`."""
    while True:
        if get_origin(annotation) is Annotated:
            annotation = get_args(annotation)[0]
        elif isinstance(annotation, UnionType) or get_origin(annotation) is Union:
            arms = [arm for arm in get_args(annotation) if arm is not type(None)]
            if len(arms) != 1:
                return annotation
            annotation = arms[0]
        else:
            return annotation


def _choices(model: type[msgspec.Struct], steps: list[str], key: bool) -> str | None:
    """The values a Literal field at that path takes, in the schema's order, as pydantic words
    them ('a', 'b' or 'c'), read from the declared types (msgspec.inspect sorts them)."""
    annotation: Any = model
    for step in steps:
        annotation = _declared(annotation)
        if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
            types = {f.encode_name: f.type for f in msgspec.structs.fields(annotation)}
            annotation = types.get(step)
        elif get_origin(annotation) in (list, dict):
            annotation = get_args(annotation)[-1]
        else:
            return None
    annotation = _declared(annotation)
    if key and get_origin(annotation) is dict:
        annotation = _declared(get_args(annotation)[0])
    if get_origin(annotation) is not Literal:
        return None
    shown = [repr(value) for value in get_args(annotation)]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def _format_error(model: type[msgspec.Struct], exc: msgspec.ValidationError) -> str:
    """msgspec's error as `path: what` (a.0.b as pydantic wrote paths, the wording of a missing
    or unknown key and of a value outside a Literal as pydantic's, which the tests and users
    know), without msgspec's `$` notation."""
    found = _MESSAGE.match(str(exc))
    if found is None:  # not msgspec's usual form: as it is
        return str(exc)
    what = found["what"]
    trail = found["within"] if found["within"] is not None else found["at"] or "$"
    steps: list[str] = []
    for name, index in _STEP.findall(trail):
        steps.append(name or ("*" if index == "..." else index))
    shown = [*steps, "(key)"] if found["within"] is not None else steps
    if missing := _MISSING.match(what):
        shown, what = [*shown, missing["name"]], "Field required"
    elif unknown := _UNKNOWN.match(what):
        shown, what = [*shown, unknown["name"]], "Extra inputs are not permitted"
    elif (enum := _ENUM.match(what)) and (
        choices := _choices(model, steps, found["within"] is not None)
    ):
        what = f"Input should be {choices} (got {enum['value']})"
    return f"{'.'.join(shown)}: {what}" if shown else what


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root.parent))
    except ValueError:
        return str(path)


def _validate(model: type[ModelT], data: Any, where: str, *, csv: bool = False) -> ModelT:
    """The document as a `model`, or KnowledgeError naming where and what. A CSV row is all text,
    so msgspec may read numbers from text there (strict=False); YAML gives typed values."""
    try:
        return msgspec.convert(_prepare(data, _type_info(model), [], csv), model, strict=not csv)
    except _Unreadable as exc:
        shown = ".".join(str(step) for step in exc.path)
        raise KnowledgeError(
            f"{where}: {shown}: {exc.problem}" if shown else f"{where}: {exc}"
        ) from None
    except msgspec.ValidationError as exc:
        raise KnowledgeError(f"{where}: {_format_error(model, exc)}") from None
    except ValueError as exc:
        raise KnowledgeError(f"{where}: {exc}") from None


def _read_csv(path: Path, model: type[ModelT], root: Path) -> list[ModelT]:
    import csv  # here: a knowledge base from the cache reads no table

    name = _relative(path, root)
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            rows = []
            # Row numbers count the header as row 1, as a spreadsheet shows them.
            for number, raw in enumerate(reader, start=2):
                if None in raw or None in raw.values():
                    raise KnowledgeError(f"{name} row {number}: wrong number of columns")
                rows.append(_validate(model, raw, f"{name} row {number}", csv=True))
    except OSError as exc:
        raise KnowledgeError(f"{name}: cannot read: {exc.strerror}") from None
    if not rows:
        raise KnowledgeError(f"{name}: no rows")
    return rows


def _read_yaml(path: Path, root: Path) -> Any:
    import yaml  # here: a knowledge base from the cache needs no YAML

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


def _signatures(folder: Path, root: Path) -> tuple[list[Signature], dict[str, str]]:
    """The signatures sorted by id, and the file of each (relative to the knowledge folder)."""
    found: list[Signature] = []
    files: dict[str, str] = {}
    for path in sorted(folder.glob("*.yaml")):
        name = _relative(path, root)
        document = _read_yaml(path, root)
        if not isinstance(document, dict) or not isinstance(document.get("rules"), list):
            raise KnowledgeError(f"{name}: expected a mapping with a 'rules' list")
        for index, rule in enumerate(document["rules"], start=1):
            if not isinstance(rule, dict):
                raise KnowledgeError(f"{name} rule {index}: expected a mapping")
            where = f"{name} rule {index} ({rule.get('id', '?')})"
            signature = _validate(Signature, {"as_of": document.get("as_of"), **rule}, where)
            found.append(signature)
            files.setdefault(signature.id, path.relative_to(root).as_posix())
    seen: dict[str, str] = {}
    for signature in found:
        for key in (signature.id, signature.name):
            if key in seen:
                raise KnowledgeError(f"signature {key} is defined twice")
            seen[key] = signature.id
    return sorted(found, key=lambda signature: signature.id), files


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


def _prefix_shapes(path: Path, root: Path) -> PrefixShapes:
    name = _relative(path, root)
    document = _read_yaml(path, root)
    if not isinstance(document, dict):
        raise KnowledgeError(f"{name}: expected a mapping with 'shapes' and 'fixes'")
    extra = set(document) - {"as_of", "source", "shapes", "fixes"}
    if extra:
        raise KnowledgeError(f"{name}: unknown key(s) {', '.join(sorted(extra))}")
    shapes = _rows(document, "shapes", PrefixShape, name, "shape")
    fixes = _rows(document, "fixes", PrefixFix, name, "fix")
    return _validate(
        PrefixShapes,
        {
            "as_of": document.get("as_of"),
            "source": document.get("source"),
            "shapes": shapes,
            "fixes": fixes,
        },
        name,
    )


def _gpu_limits(path: Path, root: Path) -> list[GpuLimit]:
    return _unique_rows(
        path, root, GpuLimit, "limits", "limit", "id", "a limit id is defined twice"
    )


def _registry_realms(path: Path, root: Path) -> list[RealmPairing]:
    """The registries' token services on other hosts, one row per registry."""
    return _unique_rows(
        path, root, RealmPairing, "pairings", "pairing", "registry", "a registry is paired twice"
    )


def _unique_rows(
    path: Path, root: Path, model: type[ModelT], key: str, row: str, unique: str, twice: str
) -> list[ModelT]:
    """A file of `as_of` and one list `key` of `model` rows, no two with the same `unique`."""
    name = _relative(path, root)
    document = _read_yaml(path, root)
    if not isinstance(document, dict) or set(document) - {"as_of", key}:
        raise KnowledgeError(f"{name}: expected a mapping with 'as_of' and a '{key}' list")
    rows = _rows(document, key, model, name, row)
    values = [getattr(item, unique) for item in rows]
    if len(set(values)) != len(values):
        raise KnowledgeError(f"{name}: {twice}")
    return rows


def _catalogue(path: Path, root: Path) -> bool:
    """Whether a file is in the message catalogue (data/messages/: vllm_triage.knowledge.messages
    reads it, for `knowledge check` and the tests only; no command loads it)."""
    return path.relative_to(root).parts[0] == "messages"


def load_knowledge(data_dir: Path | None = None, *, cached: bool = True) -> KnowledgeBase:
    """The knowledge base under data_dir (the packaged data by default), validated.

    The packaged data comes from the cache of the last validation when nothing it was made from
    has changed (vllm_triage.knowledge.cache), so a command starts without validating it again;
    `cached=False` (`knowledge check`, the tests) and any other folder validate every file."""
    if data_dir is not None:
        return _load(data_dir)
    return _load_packaged() if cached else _load(DATA_DIR)


@cache
def _load_packaged() -> KnowledgeBase:
    from vllm_triage.knowledge.cache import load_cached

    return load_cached(DATA_DIR, _load, KnowledgeBase)


def _load(root: Path) -> KnowledgeBase:
    if not root.is_dir():
        raise KnowledgeError(f"{root}: knowledge folder not found")
    signatures, signature_files = _signatures(root / "signatures", root)
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
        signatures=signatures,
        redaction=_redaction(root / "redaction.yaml", root),
        secret_rules=_yaml_model(root / "gitleaks_rules.yaml", SecretRuleSet, root),
        vllm_args=_yaml_model(root / "vllm_args.yaml", VllmArgs, root),
        vllm_metrics=_yaml_model(root / "vllm_metrics.yaml", MetricAliases, root),
        fact_checks=_fact_checks(root / "fact_checks.yaml", root),
        prefix=_prefix_shapes(root / "prefix_shapes.yaml", root),
        gpu_limits=_gpu_limits(root / "gpu_limits.yaml", root),
        recovery=_yaml_model(root / "recovery.yaml", Recovery, root),
        record=_yaml_model(root / "record.yaml", RecordPolicy, root),
        registry_realms=_registry_realms(root / "registry_realms.yaml", root),
        files=sorted(
            _relative(p, root)
            for p in root.rglob("*")
            if p.suffix in {".csv", ".yaml"} and not _catalogue(p, root)
        ),
        signature_files=signature_files,
    )
    base.toolkits.sort(key=lambda row: row.cuda_version)
    return base
