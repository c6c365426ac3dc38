"""Versions and names read from the inputs (a log's own lines, the flags, a bundle): decoded,
and weighed against each other: does what the driver supports cover what the software needs?

A version fact is what decides driver advice: a message alone ("PTX was compiled with an
unsupported toolchain") names candidates, a fact (PyTorch's "found version 11080" next to
"CUDA used to build PyTorch: 12.4") shows the driver below the need.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from vllm_triage.i18n import N_
from vllm_triage.knowledge import KnowledgeBase, drivers
from vllm_triage.models import Evidence, Fact, FactKey, Said, said
from vllm_triage.versions import CudaVersion, DriverVersion, VersionError

# The CUDA the software needs, most telling first: PyTorch's own build (its wheel carries the
# runtime that talks to the driver), then the image's CUDA, then its NVIDIA_REQUIRE_CUDA.
_NEED_KEYS: tuple[FactKey, ...] = ("torch_cuda", "image_cuda", "image_require")
_SOURCE_ORDER = {"flag": 0, "bundle": 1, "recipe": 2, "log": 3}


def source_rank(source: str) -> int:
    """Which source of a fact wins: a flag, then the bundle, then the recipe, then the log."""
    return _SOURCE_ORDER.get(source, len(_SOURCE_ORDER))


def decode_fact(decode: str, value: str | None) -> str | None:
    """A fact's text as read (cuda_api: 12080 is 12.8; cu_tag: 124 is 12.4); None if unreadable."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        if decode == "cuda_api":
            return _short(CudaVersion.from_api_int(int(text)))
        if decode == "cu_tag":
            return _short(CudaVersion.parse(f"cu{text}"))
    except (ValueError, VersionError):
        return None
    return text


def _short(cuda: CudaVersion) -> str:
    return f"{cuda.major}.{cuda.minor}"


_SOURCES = {
    "flag": N_("a flag"),
    "bundle": N_("the bundle's facts"),
    "recipe": N_("the recipe"),
}
# What the software needs, by the fact that says it: one sentence each, so that a translation
# can put the version where its language wants it.
_SHORTFALL = {
    "torch_cuda": N_(
        "the driver supports CUDA up to {ceiling} ({ceiling_at}) and PyTorch was built with "
        "CUDA {need} ({need_at})"
    ),
    "image_cuda": N_(
        "the driver supports CUDA up to {ceiling} ({ceiling_at}) and the image is CUDA {need} "
        "({need_at})"
    ),
    "image_require": N_(
        "the driver supports CUDA up to {ceiling} ({ceiling_at}) and the image requires CUDA "
        "{need} ({need_at})"
    ),
}
_SHORTFALL_OTHER = N_(
    "the driver supports CUDA up to {ceiling} ({ceiling_at}) and the software needs CUDA {need} "
    "({need_at})"
)


def where(fact: Fact) -> str:
    """Where a fact was read, for a sentence: "log.txt:12", "a flag", "the bundle's facts"."""
    return where_said(fact).say()


def where_said(fact: Fact) -> Said:
    """`where`, as wording (a log position is shown as it is, a flag or a bundle is said)."""
    if fact.evidence is not None:
        return Said(text=f"{fact.evidence.file}:{fact.evidence.line}")
    return Said(text=_SOURCES.get(fact.source, fact.source))


def _cuda(text: str) -> CudaVersion | None:
    try:
        return CudaVersion.parse(text.removeprefix("cuda>="))
    except VersionError:
        return None


@dataclass(frozen=True)
class Shortfall:
    """What the facts say about the driver against the software's need."""

    ceiling: CudaVersion
    ceiling_fact: Fact
    need: CudaVersion
    need_fact: Fact
    min_driver: str | None

    @property
    def too_old(self) -> bool:
        """Across CUDA majors nothing bridges the gap (minor-version compatibility works within
        one major only; forward compatibility needs a package and a data-center GPU)."""
        return self.need.major > self.ceiling.major

    @property
    def evidence(self) -> list[Evidence]:
        return [f.evidence for f in (self.ceiling_fact, self.need_fact) if f.evidence is not None]

    def said(self) -> list[Said]:
        """The shortfall in words: what the driver supports against what the software needs,
        then the driver that needs (clauses joined with "; ")."""
        clauses = [
            said(
                _SHORTFALL.get(self.need_fact.key, _SHORTFALL_OTHER),
                ceiling=_short(self.ceiling),
                ceiling_at=where_said(self.ceiling_fact),
                need=_short(self.need),
                need_at=where_said(self.need_fact),
            )
        ]
        if self.min_driver:
            clauses.append(said(N_("it needs driver >= {driver}"), driver=self.min_driver))
        return clauses

    def sentence(self) -> str:
        """`said`, in English."""
        return "; ".join(clause.say() for clause in self.said())


class FactSet:
    """The facts of one diagnosis: flags first, then the bundle's, then the log's own."""

    def __init__(self, facts: Iterable[Fact]):
        ordered = sorted(facts, key=lambda f: source_rank(f.source))
        seen: set[tuple[str, str]] = set()
        self.facts = []
        for fact in ordered:
            if (fact.key, fact.value) not in seen:
                seen.add((fact.key, fact.value))
                self.facts.append(fact)

    def first(self, key: FactKey) -> Fact | None:
        return next((f for f in self.facts if f.key == key), None)

    def driver(self) -> tuple[DriverVersion, Fact] | None:
        for fact in self.facts:
            if fact.key == "driver_version":
                try:
                    return DriverVersion.parse(fact.value), fact
                except VersionError:
                    continue
        return None

    def need(self, kb: KnowledgeBase | None = None) -> tuple[CudaVersion, Fact] | None:
        """The CUDA the software needs; with the knowledge base, also from the driver release a
        container was built for (the newest CUDA of that driver's branch, or of the nearest
        known branch below it: never more than the release supports)."""
        for key in _NEED_KEYS:
            for fact in self.facts:
                if fact.key == key and (cuda := _cuda(fact.value)) is not None:
                    return cuda, fact
        if kb is not None:
            for fact in self.facts:
                if fact.key == "driver_need" and (cuda := _branch_cuda(kb, fact.value)) is not None:
                    return cuda, fact
        return None

    def ceiling(self) -> tuple[CudaVersion, Fact] | None:
        for fact in self.facts:
            if fact.key == "driver_cuda" and (cuda := _cuda(fact.value)) is not None:
                return cuda, fact
        return None

    def shortfall(self, kb: KnowledgeBase) -> Shortfall | None:
        """The driver's CUDA ceiling against the software's need, when the facts give both."""
        ceiling, need = self.ceiling(), self.need(kb)
        if ceiling is None or need is None:
            return None
        floor = drivers.floor(kb, need[0])
        return Shortfall(ceiling[0], ceiling[1], need[0], need[1], str(floor[0]) if floor else None)


def _branch_cuda(kb: KnowledgeBase, release: str) -> CudaVersion | None:
    """The newest CUDA the driver release's branch supports, or the nearest known branch's below
    it (None for an unreadable release or one below every known branch)."""
    try:
        number = DriverVersion.parse(release).major
    except VersionError:
        return None
    known = [b for b in kb.branches if b.number <= number and b.cuda_ceiling]
    return max(known, key=lambda b: b.number).cuda_ceiling if known else None


def given_facts(
    driver: str | None,
    cuda: str | None,
    gpu: str | None,
    source: Literal["flag", "bundle"],
    cuda_source: Literal["flag", "bundle", "recipe"] | None = None,
) -> Sequence[Fact]:
    """The facts a flag or a bundle gives, in the same shape as the log's; the image's CUDA says
    where it came from when that is not `source` (a recipe's image, not a flag)."""
    found = []
    if driver:
        found.append(Fact(key="driver_version", value=driver, source=source))
    if cuda:
        found.append(Fact(key="image_cuda", value=cuda, source=cuda_source or source))
    if gpu:
        found.append(Fact(key="gpu", value=gpu, source=source))
    return found
