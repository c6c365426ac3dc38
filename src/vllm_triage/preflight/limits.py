"""The table preflight compares a node with (limits.yaml): /dev/shm sizes, CDI spec folders, the
flags of a multi-node launch, the RDMA devices' folder.

Data with a source, a date and a certainty like the knowledge base's files; it lives beside the
code that reads it because nothing else in the tool does. Read into frozen dataclasses with a
small strict reader rather than pydantic models: preflight runs on every pod start, and building
validators for a table this size would cost more than reading it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any, TypeVar, get_args

from vllm_triage.errors import KnowledgeError
from vllm_triage.knowledge.schema import Certainty

LIMITS_FILE = Path(__file__).with_name("limits.yaml")
_CERTAINTIES = frozenset(get_args(Certainty))


@dataclass(frozen=True)
class ShmLimits:
    min_bytes_multi_gpu: int
    min_bytes_single_gpu: int
    container_default_bytes: int
    why: str
    sources: tuple[str, ...]
    certainty: str


@dataclass(frozen=True)
class CdiPlaces:
    spec_dirs: tuple[str, ...]
    kind: str
    regenerate: str
    sources: tuple[str, ...]
    certainty: str


@dataclass(frozen=True)
class LaunchFlags:
    multi_node_flags: tuple[str, ...]
    expert_parallel_flags: tuple[str, ...]
    default_all2all_backend: str
    sources: tuple[str, ...]
    certainty: str


@dataclass(frozen=True)
class RdmaPlace:
    class_dir: str
    sources: tuple[str, ...]
    certainty: str


@dataclass(frozen=True)
class Limits:
    source: str
    as_of: str
    certainty: str
    shm: ShmLimits
    cdi: CdiPlaces
    launch: LaunchFlags
    rdma: RdmaPlace


_Section = TypeVar("_Section")
_TOP = ("source", "as_of", "certainty", "source_note")


def _value(where: str, name: str, kind: str, value: Any) -> Any:
    """One field, checked against its annotation (int, str, tuple[str, ...])."""
    if kind == "int":
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise KnowledgeError(f"{LIMITS_FILE.name}: {where}.{name}: a positive integer")
        return value
    if kind == "str":
        if not isinstance(value, str) or not value:
            raise KnowledgeError(f"{LIMITS_FILE.name}: {where}.{name}: a non-empty string")
        if name == "certainty" and value not in _CERTAINTIES:
            raise KnowledgeError(
                f"{LIMITS_FILE.name}: {where}.certainty: {value!r} is not one of {sorted(_CERTAINTIES)}"
            )
        return value
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise KnowledgeError(f"{LIMITS_FILE.name}: {where}.{name}: a list of strings")
    if name == "sources" and not value:
        raise KnowledgeError(f"{LIMITS_FILE.name}: {where}.sources: name at least one source")
    return tuple(value)


def _section(where: str, document: Any, kind: type[_Section]) -> _Section:
    if not isinstance(document, dict):
        raise KnowledgeError(f"{LIMITS_FILE.name}: {where}: expected a mapping")
    names = {f.name: str(f.type).replace("tuple[str, ...]", "list") for f in fields(kind)}  # type: ignore[arg-type]
    unknown = sorted(set(document) - set(names))
    missing = sorted(set(names) - set(document))
    if unknown or missing:
        what = f"unknown {', '.join(unknown)}" if unknown else f"missing {', '.join(missing)}"
        raise KnowledgeError(f"{LIMITS_FILE.name}: {where}: {what}")
    return kind(**{name: _value(where, name, names[name], document[name]) for name in names})


@cache
def load_limits() -> Limits:
    """The checked table; KnowledgeError (one line, exit 3) if the packaged file is broken."""
    import yaml

    try:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        document = yaml.load(LIMITS_FILE.read_text(encoding="utf-8"), Loader=loader)
    except (OSError, yaml.YAMLError) as exc:
        raise KnowledgeError(f"{LIMITS_FILE.name}: cannot be read ({exc})") from None
    if not isinstance(document, dict):
        raise KnowledgeError(f"{LIMITS_FILE.name}: expected a mapping")
    for name in ("source", "as_of", "certainty"):
        _value("top", name, "str", document.get(name))
    unknown = sorted(set(document) - {*_TOP, "shm", "cdi", "launch", "rdma"})
    if unknown:
        raise KnowledgeError(f"{LIMITS_FILE.name}: unknown {', '.join(unknown)}")
    return Limits(
        source=document["source"],
        as_of=str(document["as_of"]),
        certainty=document["certainty"],
        shm=_section("shm", document.get("shm"), ShmLimits),
        cdi=_section("cdi", document.get("cdi"), CdiPlaces),
        launch=_section("launch", document.get("launch"), LaunchFlags),
        rdma=_section("rdma", document.get("rdma"), RdmaPlace),
    )
