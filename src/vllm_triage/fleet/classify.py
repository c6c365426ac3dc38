"""A node's status for one image: the compat verdict (diagnose/threshold.py) for its driver and
GPU, computed once per distinct (driver, GPU model) and reused across the fleet: a cluster of
10,000 nodes has a few dozen such pairs."""

from __future__ import annotations

from dataclasses import dataclass, field

from vllm_triage.diagnose.threshold import check_compat
from vllm_triage.errors import InputError
from vllm_triage.fleet.labels import NodeFacts
from vllm_triage.fleet.models import NodeRecord, NodeStatus
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.knowledge.drivers import driver_requirement
from vllm_triage.knowledge.schema import gpu_name_key
from vllm_triage.models import CompatVerdict, DriverRequirement
from vllm_triage.versions import CudaVersion, DriverVersion

HOUR = 3600.0


@dataclass(frozen=True)
class Verdict:
    """A cached verdict, as the scan reports it."""

    status: NodeStatus
    min_driver: str | None
    reason: str
    ceiling: str | None


def _condition_ids(verdict: CompatVerdict) -> str:
    return ", ".join(condition.split(":", 1)[0] for condition in verdict.conditions)


def _why_not_forward(verdict: CompatVerdict) -> str:
    """The forward-compatibility condition's reason, cut to its first clause."""
    for condition in verdict.conditions:
        if condition.startswith("forward_compat: "):
            text = condition.removeprefix("forward_compat: ").removeprefix("not possible: ")
            return text.split(";")[0].split(" (")[0]
    return ""


def _first_sentence(text: str) -> str:
    return text.split(". ")[0].rstrip(".")


def from_verdict(verdict: CompatVerdict, gpu_known: bool, gpu: str | None) -> Verdict:
    """The compat verdict as a node status and a one-line reason."""
    driver = f"driver {verdict.driver} ({verdict.driver_branch})"
    ceiling = verdict.driver_cuda_ceiling
    supports = f"{driver} supports CUDA up to {ceiling or 'an unknown release'}"
    unknown_gpu = "" if gpu_known or not gpu else f"; GPU {gpu} is not in the GPU table"
    if verdict.verdict == "compatible":
        return Verdict("ready", None, f"{supports}: runs natively{unknown_gpu}", ceiling)
    if verdict.verdict == "conditional":
        reason = f"{supports}: runs through minor-version compatibility ({_condition_ids(verdict)})"
        return Verdict("ready", None, reason + unknown_gpu, ceiling)
    if verdict.verdict == "forward_compat_only":
        major, minor = verdict.cuda.split(".")[:2]
        reason = (
            f"{supports}: runs only with cuda-compat-{major}-{minor} (forward compatibility), "
            f"without it from driver {verdict.min_driver}"
        )
        return Verdict("forward_compat", verdict.min_driver, reason, ceiling)
    if verdict.cause == "unsupported_gpu_arch":
        return Verdict("unsupported", None, _first_sentence(verdict.explanation), ceiling)
    needs = f"needs >= {verdict.min_driver}" if verdict.min_driver else "needs a newer driver"
    why = _why_not_forward(verdict)
    reason = f"{supports}; {needs}" + (f"; forward compatibility: {why}" if why else "")
    return Verdict("needs_upgrade", verdict.min_driver, reason + unknown_gpu, ceiling)


@dataclass
class Classifier:
    """Node statuses for one image, each distinct (driver, GPU model) decided once."""

    kb: KnowledgeBase
    cuda: CudaVersion
    require: str | None
    now: float
    stale_after_hours: float
    _verdicts: dict[tuple[str, str], Verdict] = field(default_factory=dict)
    _gpu_keys: dict[str, tuple[str, bool]] = field(default_factory=dict)
    _requirement: DriverRequirement | None = None
    _shared: dict[str, str] = field(default_factory=dict)
    _ages: dict[float, float] = field(default_factory=dict)

    def _one(self, text: str | None) -> str | None:
        """One string object for every node with this driver, product, ceiling or reason: a
        million nodes share a few hundred of them."""
        return None if text is None else self._shared.setdefault(text, text)

    def _gpu(self, product: str | None) -> tuple[str, bool]:
        """The GPU's table key (SHARED / MIG forms of one model share it) and whether the table
        knows it."""
        if product is None:
            return "", False
        found = self._gpu_keys.get(product)
        if found is None:
            key = gpu_name_key(product)
            found = (key, self.kb.gpu(key) is not None)
            self._gpu_keys[product] = found
        return found

    def verdict(self, driver: str, product: str | None) -> Verdict:
        """The cached verdict for a driver and a GPU product label."""
        key, known = self._gpu(product)
        cached = self._verdicts.get((driver, key))
        if cached is None:
            try:
                parsed = DriverVersion.parse(driver)
            except InputError as exc:
                cached = Verdict("unknown", None, f"driver label unreadable: {exc}", None)
            else:
                compat = check_compat(self.kb, parsed, self.cuda, key or None, self.require)
                cached = from_verdict(compat, known, product)
            self._verdicts[(driver, key)] = cached
        return cached

    @property
    def requirement(self) -> DriverRequirement:
        """The image's three driver figures (the same whatever the host)."""
        if self._requirement is None:
            self._requirement = driver_requirement(self.kb, self.cuda)
        return self._requirement

    def _from_ceiling(self, ceiling: str) -> Verdict:
        """No driver label, only the CUDA ceiling (nvidia.com/cuda.runtime-version)."""
        key = ("", f"ceiling {ceiling}")
        cached = self._verdicts.get(key)
        if cached is None:
            try:
                version = CudaVersion.parse(ceiling)
            except InputError:
                cached = Verdict("unknown", None, f"CUDA ceiling label unreadable: {ceiling}", None)
            else:
                base = f"driver version not labelled; its CUDA ceiling is {ceiling}"
                if version.minor_release >= self.cuda.minor_release:
                    cached = Verdict("ready", None, f"{base}: runs natively", ceiling)
                elif version.major == self.cuda.major:
                    cached = Verdict(
                        "ready", None, f"{base}: runs through minor-version compatibility", ceiling
                    )
                else:
                    cached = Verdict(
                        "needs_upgrade",
                        self.requirement.min_driver,
                        f"{base}; forward compatibility cannot be judged without the driver",
                        ceiling,
                    )
            self._verdicts[key] = cached
        return cached

    def node(self, facts: NodeFacts) -> NodeRecord:
        """One node's entry, as a tuple: its fields come from this module and fleet/labels.py
        (already printable and typed); the model is made from it only for the artifact."""
        if facts.driver is not None:
            verdict = self.verdict(facts.driver, facts.gpu)
        elif facts.ceiling is not None:
            verdict = self._from_ceiling(facts.ceiling)
        else:
            verdict = Verdict(
                "unknown",
                None,
                "no driver labels (nvidia.com/cuda.driver-version.*): is GPU Feature Discovery "
                "running on it?",
                None,
            )
        reason = verdict.reason
        if facts.note:
            reason += f"; {facts.note}"
        age = stale = None
        if facts.timestamp is not None:
            age = round(max(self.now - facts.timestamp, 0.0) / HOUR, 1)
            age = self._ages.setdefault(age, age)
            stale = age > self.stale_after_hours
            if stale:
                reason += (
                    f"; labels {_age_words(age)} old (nvidia.com/gfd.timestamp): GPU Feature "
                    "Discovery may have stopped, re-check the driver"
                )
        return NodeRecord(
            facts.name,
            verdict.status,
            self._one(facts.driver),
            verdict.min_driver,
            self._shared.setdefault(reason, reason),
            self._one(facts.gpu),
            facts.gpu_count,
            self._one(facts.ceiling) or verdict.ceiling,
            age,
            bool(stale),
            facts.gpu_pods,
        )


def _age_words(hours: float) -> str:
    return f"{hours / 24:,.0f} days" if hours >= 48 else f"{hours:,.0f} hours"
