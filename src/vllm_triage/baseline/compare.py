"""The library behind `baseline compare A B`: two baselines of one node, the expected change (the
driver moved to its target) told apart from the regressions (what a driver change must not
disturb did change). One exit code follows: 1 when any regression is found.

Each check below compares one part of the two baselines and yields findings; a part missing from
either side is `not_compared`, never a regression by default (a capture without --endpoint cannot
say the model got slower), except where the loss is the finding itself (RDMA devices a tool
listed before and no longer does).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from vllm_triage.baseline.models import (
    Baseline,
    BaselineComparison,
    BaselineRef,
    ComparisonItem,
    GpuState,
    ItemKind,
)
from vllm_triage.baseline.parsers import port_active
from vllm_triage.baseline.texts import FINDINGS
from vllm_triage.case import (
    BASELINE_FILE,
    BASELINES,
    Case,
    CaseError,
    case_folder,
    fingerprint,
    read_artifact,
)
from vllm_triage.errors import InputError
from vllm_triage.inputs import display_name
from vllm_triage.versions import DriverVersion, VersionError

COMPARISON = "baseline-comparison.json"
ENDPOINT_SLOWER_FACTOR = 2.0
""""Much slower": the short request takes at least twice as long as before. A request of a few
tokens varies by tens of percent between runs (batching with other traffic, a cold prefix cache),
never by a factor of two on the same node and model; twice the time is what a degraded path looks
like (a fallback kernel, a GPU link trained down, a model partly offloaded)."""
ENDPOINT_SLOWER_MIN_S = 0.5
"""...and by at least half a second: below that, an HTTP round trip on a busy node is noise (a
0.05 s answer that takes 0.12 s is not a regression anyone can act on)."""
THRESHOLDS = {
    "endpoint_slower_factor": ENDPOINT_SLOWER_FACTOR,
    "endpoint_slower_min_s": ENDPOINT_SLOWER_MIN_S,
}


class _PlanTarget(BaseModel):
    """What `baseline compare` reads of the case's plan: the driver it planned (plan.json's
    plan.target; the plan module is a sibling layer, so only these fields are read)."""

    model_config = ConfigDict(extra="ignore")

    min_driver: str | None = None
    toolkit_driver: str | None = Field(
        default=None, validation_alias=AliasChoices("toolkit_driver", "minimum")
    )
    recommended_driver: str | None = Field(
        default=None, validation_alias=AliasChoices("recommended_driver", "release")
    )


class _PlanChange(BaseModel):
    model_config = ConfigDict(extra="ignore")

    target: _PlanTarget | None = None


class _PlanView(BaseModel):
    model_config = ConfigDict(extra="ignore")

    plan: _PlanChange | None = None


@dataclass(frozen=True)
class DriverExpectation:
    """What the driver after the change is judged against: the driver asked for (--expect-driver:
    that version, or that branch), or the plan's minimum the image needs and its recommended
    target (the current release of a long-term branch). Lower than before is always a
    regression."""

    expected: DriverVersion | None = None
    minimum: DriverVersion | None = None
    toolkit: DriverVersion | None = None
    recommended: DriverVersion | None = None

    @property
    def source(self) -> str | None:
        if self.expected is not None:
            return "flag"
        return "plan" if self.minimum is not None or self.recommended is not None else None


@dataclass(frozen=True)
class CompareOptions:
    """Which baselines to compare (labels in the case, or baseline folders) and the driver the
    change was meant to install (a version, or a branch such as r580)."""

    before: str
    after: str
    case: Path = field(default_factory=case_folder)
    expect_driver: str | None = None


def baseline_compare(options: CompareOptions) -> BaselineComparison:
    """The findings of comparing `before` with `after`; every regression counted in the verdict.
    The driver is judged against --expect-driver when given, else against the case's plan."""
    case = Case(options.case)
    flagged = _target(options.expect_driver)
    target = DriverExpectation(expected=flagged) if flagged else _planned(case)
    before_path = resolve_baseline(case, options.before)
    after_path = resolve_baseline(case, options.after)
    before = read_artifact(before_path, Baseline)
    after = read_artifact(after_path, Baseline)
    items = [item for check in _CHECKS for item in check(before, after, target)]
    counts = {kind: sum(1 for i in items if i.kind == kind) for kind in _KIND_ORDER}
    comparison = BaselineComparison(
        before=_ref(before, before_path),
        after=_ref(after, after_path),
        expect_driver=options.expect_driver,
        driver_expectation=target.source,
        min_driver=target.minimum.text if target.minimum else None,
        toolkit_driver=target.toolkit.text if target.toolkit else None,
        recommended_driver=target.recommended.text if target.recommended else None,
        thresholds=dict(THRESHOLDS),
        items=sorted(items, key=lambda i: _KIND_ORDER.index(i.kind)),
        verdict="regression" if counts["regression"] else "no_regression",
        regressions=counts["regression"],
        expected=counts["expected"],
        changed=counts["changed"],
    )
    made_from = [
        fingerprint(before_path, f"{before.label}/{BASELINE_FILE}"),
        fingerprint(after_path, f"{after.label}/{BASELINE_FILE}"),
    ]
    return comparison.stamped(made_from)


def replaces_current(case_folder: Path, comparison: BaselineComparison) -> bool:
    """Whether a comparison becomes the case's current one (baseline-comparison.json, what the
    runbook and the record read): always when there is none yet, else only when it starts from
    the case's first baseline (the node before the change). A pair that starts elsewhere (after
    against after-ep) is exploratory: it is kept in history, under its pair's labels, and never
    silently replaces the comparison of the change."""
    case = Case(case_folder)
    if not os.path.lexists(case.root / COMPARISON):
        return True
    first = _first_baseline(case)
    return first is None or comparison.before.label == first


def _first_baseline(case: Case) -> str | None:
    """The label of the case's earliest complete baseline."""
    found: list[tuple[str, str]] = []
    for folder in case.baselines():
        path = folder / BASELINE_FILE
        if os.path.lexists(path):
            baseline = read_artifact(path, Baseline)
            found.append((baseline.created_at or "", baseline.label))
    return min(found)[1] if found else None


def resolve_baseline(case: Case, given: str) -> Path:
    """The baseline.json a label of the case (baselines/<label>/) or a baseline folder names."""
    labelled = case.root / BASELINES / given
    candidates = [labelled] if "/" not in given and given not in (".", "..") else []
    candidates.append(Path(given))
    for folder in candidates:
        if folder.name == BASELINE_FILE and folder.is_file():
            return folder
        if folder.is_dir() and not folder.is_symlink():
            path = folder / BASELINE_FILE
            if not os.path.lexists(path):
                raise CaseError(
                    f"{display_name(folder)}: no {BASELINE_FILE} (a capture that did not finish, "
                    "or not a baseline folder)"
                )
            return path
    captured = ", ".join(p.name for p in case.baselines()) or "none"
    raise InputError(
        f"baseline {given!r}: no such label in {display_name(case.root / BASELINES)} "
        f"(captured: {captured}) and no such baseline folder"
    )


def _planned(case: Case) -> DriverExpectation:
    """The plan's minimum and recommended driver, when the case has a plan that names them."""
    if not os.path.lexists(case.root / "plan.json"):
        return DriverExpectation()
    view = read_artifact(case.root / "plan.json", _PlanView)
    target = view.plan.target if view.plan else None
    if target is None:
        return DriverExpectation()
    return DriverExpectation(
        minimum=_version(target.min_driver),
        toolkit=_version(target.toolkit_driver),
        recommended=_version(target.recommended_driver),
    )


def _version(text: str | None) -> DriverVersion | None:
    try:
        return DriverVersion.parse(text) if text else None
    except VersionError:
        return None


def _target(expect: str | None) -> DriverVersion | None:
    if expect is None:
        return None
    try:
        return DriverVersion.parse(expect)
    except VersionError as exc:
        raise InputError(f"--expect-driver: {exc}") from None


def _ref(baseline: Baseline, path: Path) -> BaselineRef:
    return BaselineRef(
        label=baseline.label,
        path=display_name(path.parent),
        created_at=baseline.created_at,
        node=baseline.node,
        driver=baseline.gpu.driver_version if baseline.gpu else None,
    )


_KIND_ORDER: tuple[ItemKind, ...] = ("regression", "expected", "changed", "not_compared", "same")


def item(
    check: str,
    kind: ItemKind,
    *,
    subject: object = None,
    before: object = None,
    after: object = None,
) -> ComparisonItem:
    """One finding, its English sentence made from the same message the renderer translates."""
    fields = {
        "subject": "" if subject is None else str(subject),
        "before": "-" if before is None else str(before),
        "after": "-" if after is None else str(after),
    }
    return ComparisonItem(
        check=check,
        kind=kind,
        subject=None if subject is None else str(subject),
        before=None if before is None else str(before),
        after=None if after is None else str(after),
        summary=FINDINGS[(check, kind)].format(**fields),
    )


Check = Callable[[Baseline, Baseline, DriverExpectation], Iterator[ComparisonItem]]


def _driver(a: Baseline, b: Baseline, target: DriverExpectation) -> Iterator[ComparisonItem]:
    old = a.gpu.driver_version if a.gpu else None
    new = b.gpu.driver_version if b.gpu else None
    if old is None or new is None:
        yield item("driver", "not_compared", before=old, after=new)
        return
    finding = _driver_finding(old, new, target)
    yield finding
    reached = finding.kind != "regression"
    old_cuda = a.gpu.cuda_ceiling if a.gpu else None
    new_cuda = b.gpu.cuda_ceiling if b.gpu else None
    if old_cuda and new_cuda:
        if old_cuda == new_cuda:
            yield item("cuda_ceiling", "same", before=old_cuda, after=new_cuda)
        else:
            kind: ItemKind = "expected" if old != new and reached else "changed"
            yield item("cuda_ceiling", kind, before=old_cuda, after=new_cuda)
    if b.gpu and b.gpu.library_mismatch:
        versions = f"kernel module {b.gpu.kernel_module_version or '?'}, user space {new}"
        yield item("library_mismatch", "regression", after=versions)


def _driver_finding(old: str, new: str, target: DriverExpectation) -> ComparisonItem:
    """The driver's move judged: below the driver asked for, below the plan's minimum, or lower
    than before is a regression; meeting the minimum below the recommended target is expected,
    and said so."""
    if target.expected is not None:
        if not _meets(new, target.expected):
            return item("driver", "regression", subject=target.expected.text, before=old, after=new)
        return item("driver", "expected" if old != new else "same", before=old, after=new)
    was, now = _version(old), _version(new)
    if was is not None and now is not None and now < was:
        return item("driver_downgrade", "regression", before=old, after=new)
    if target.minimum is not None and now is not None and now < target.minimum:
        return item(
            "driver_minimum", "regression", subject=target.minimum.text, before=old, after=new
        )
    if old == new:
        return item("driver", "same", before=old, after=new)
    if target.recommended is not None and now is not None and now < target.recommended:
        return item(
            "driver_below_target",
            "expected",
            subject=target.recommended.text,
            before=old,
            after=new,
        )
    if target.source is None:
        return item("driver_up", "expected", before=old, after=new)
    return item("driver", "expected", before=old, after=new)


def _meets(version: str, target: DriverVersion) -> bool:
    """A driver is the target: the same version, or for a branch target (r580) the same branch."""
    try:
        found = DriverVersion.parse(version)
    except VersionError:
        return False
    if "." not in target.text:
        return found.branch == target.branch
    return found == target


def _host(a: Baseline, b: Baseline, target: DriverExpectation) -> Iterator[ComparisonItem]:
    old = a.host.kernel if a.host else None
    new = b.host.kernel if b.host else None
    if old is None or new is None:
        yield item("kernel", "not_compared", before=old, after=new)
    else:
        yield item("kernel", "same" if old == new else "regression", before=old, after=new)
    old_os = a.host.os_release if a.host else None
    new_os = b.host.os_release if b.host else None
    if old_os and new_os and old_os != new_os:
        yield item("os_release", "regression", before=old_os, after=new_os)
    if a.host and b.host and a.host.nvidia_modules and b.host.nvidia_modules:
        before, after = set(a.host.nvidia_modules), set(b.host.nvidia_modules)
        for module in sorted(before - after):
            yield item("nvidia_module", "regression", subject=module)
        for module in sorted(after - before):
            yield item("nvidia_module", "changed", subject=module)


def _gpus(a: Baseline, b: Baseline, target: DriverExpectation) -> Iterator[ComparisonItem]:
    if not (a.gpu and a.gpu.gpus and b.gpu and b.gpu.gpus):
        count_a = len(a.gpu.gpus) if a.gpu else None
        count_b = len(b.gpu.gpus) if b.gpu else None
        yield item("gpu_count", "not_compared", before=count_a, after=count_b)
        return
    old_gpus, new_gpus = a.gpu.gpus, b.gpu.gpus
    count_kind: ItemKind = "same" if len(old_gpus) == len(new_gpus) else "regression"
    yield item("gpu_count", count_kind, before=len(old_gpus), after=len(new_gpus))
    memory_same = health_same = True
    reported: str | None = None
    for old, new in _pairs(old_gpus, new_gpus):
        name = new.bus_id or str(new.index)
        if old.name != new.name:
            yield item("gpu_name", "regression", subject=name, before=old.name, after=new.name)
        if (
            old.memory_total_mib
            and new.memory_total_mib
            and (old.memory_total_mib != new.memory_total_mib)
        ):
            memory_same = False
            yield item(
                "gpu_memory",
                "regression",
                subject=name,
                before=old.memory_total_mib,
                after=new.memory_total_mib,
            )
        # Lifetime counters first; the volatile ones only count when they rose (a reboot resets
        # them), and one finding per GPU either way.
        for check, old_count, new_count in (
            ("ecc", old.ecc_aggregate_uncorrectable, new.ecc_aggregate_uncorrectable),
            ("ecc", old.ecc_volatile_uncorrectable, new.ecc_volatile_uncorrectable),
            ("retired_pages", old.retired_pages, new.retired_pages),
        ):
            if old_count is not None and new_count is not None and new_count > old_count:
                if check == "ecc" and not health_same and reported == name:
                    continue
                health_same, reported = False, name
                yield item(check, "regression", subject=name, before=old_count, after=new_count)
        if new.remapped_rows_pending and not old.remapped_rows_pending:
            health_same = False
            yield item("remapped_rows", "regression", subject=name)
        if old.mig_mode != new.mig_mode and old.mig_mode and new.mig_mode:
            yield item(
                "mig_mode", "regression", subject=name, before=old.mig_mode, after=new.mig_mode
            )
        if (
            old.persistence_mode
            and new.persistence_mode
            and (old.persistence_mode != new.persistence_mode)
        ):
            yield item(
                "persistence_mode",
                "changed",
                subject=name,
                before=old.persistence_mode,
                after=new.persistence_mode,
            )
    if memory_same:
        yield item("gpu_memory", "same")
    if health_same:
        yield item("ecc", "same")
    old_jobs, new_jobs = _jobs(a), _jobs(b)
    yield item(
        "gpu_jobs", "same" if old_jobs == new_jobs else "changed", before=old_jobs, after=new_jobs
    )


def _pairs(old: list[GpuState], new: list[GpuState]) -> Iterator[tuple[GpuState, GpuState]]:
    """The GPUs of both sides matched by PCI bus id (by index where a side has none)."""
    by_bus = {gpu.bus_id: gpu for gpu in new if gpu.bus_id}
    by_index = {gpu.index: gpu for gpu in new}
    for gpu in old:
        match = by_bus.get(gpu.bus_id) if gpu.bus_id else by_index.get(gpu.index)
        if match is not None:
            yield gpu, match


def _jobs(baseline: Baseline) -> str:
    processes = baseline.gpu.processes if baseline.gpu else []
    if not processes:
        return "0"
    names = sorted({p.name.rsplit("/", 1)[-1].split(" ")[0] or "?" for p in processes})
    shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
    return f"{len(processes)} ({shown})"


def _runtime(a: Baseline, b: Baseline, target: DriverExpectation) -> Iterator[ComparisonItem]:
    old, new = a.container, b.container
    pairs = (
        ("container_engine", _engine(old), _engine(new)),
        ("toolkit", old.toolkit_version if old else None, new.toolkit_version if new else None),
        (
            "container_cli",
            old.container_cli_version if old else None,
            new.container_cli_version if new else None,
        ),
    )
    for check, before, after in pairs:
        if before is None or after is None:
            if check != "container_cli" and (before or after):
                yield item(check, "not_compared", before=before, after=after)
            continue
        yield item(check, "same" if before == after else "regression", before=before, after=after)
    if old is None or new is None:
        return
    if old.runtimes and new.runtimes:
        if "nvidia" in old.runtimes and "nvidia" not in new.runtimes:
            yield item("nvidia_runtime", "regression")
        elif "nvidia" in new.runtimes and "nvidia" not in old.runtimes:
            yield item("nvidia_runtime", "changed")
    if old.default_runtime and new.default_runtime and old.default_runtime != new.default_runtime:
        yield item(
            "default_runtime", "regression", before=old.default_runtime, after=new.default_runtime
        )
    for spec in sorted(set(old.cdi_specs) - set(new.cdi_specs)):
        yield item("cdi_spec", "regression", subject=spec)
    for spec in sorted(set(new.cdi_specs) - set(old.cdi_specs)):
        yield item("cdi_spec", "changed", subject=spec)
    new_nodes = {node.path: node for node in new.device_nodes}
    for node in old.device_nodes:
        now = new_nodes.get(node.path)
        if now is None:
            yield item("device_node", "regression", subject=node.path)
        elif (node.mode, node.owner) != (now.mode, now.owner):
            yield item(
                "device_permissions",
                "regression",
                subject=node.path,
                before=f"{node.mode} {node.owner}",
                after=f"{now.mode} {now.owner}",
            )


def _engine(runtime: object) -> str | None:
    engine = getattr(runtime, "engine", None)
    version = getattr(runtime, "engine_version", None)
    if engine in (None, "none") or version is None:
        return None
    return f"{engine} {version}"


def _nccl(a: Baseline, b: Baseline, target: DriverExpectation) -> Iterator[ComparisonItem]:
    old, new = a.communication, b.communication
    version = (old.nccl_version if old else None, new.nccl_version if new else None)
    if version[0] is None or version[1] is None:
        yield item("nccl_version", "not_compared", before=version[0], after=version[1])
    else:
        kind: ItemKind = "same" if version[0] == version[1] else "regression"
        yield item("nccl_version", kind, before=version[0], after=version[1])
    transport = (old.nccl_transport if old else None, new.nccl_transport if new else None)
    if transport[0] and transport[1]:
        kind = "same" if transport[0] == transport[1] else "regression"
        yield item("nccl_transport", kind, before=transport[0], after=transport[1])


def _rdma(a: Baseline, b: Baseline, target: DriverExpectation) -> Iterator[ComparisonItem]:
    old, new = a.communication, b.communication
    if old is None or not old.rdma_sources:
        if new is not None and new.rdma_sources:
            yield item("rdma_device", "not_compared")
        return
    before = {device.name: device for device in old.rdma_devices}
    after = {device.name: device for device in (new.rdma_devices if new else [])}
    lost = sorted(set(before) - set(after))
    for name in lost:
        yield item("rdma_device", "regression", subject=name)
    for name in sorted(set(after) - set(before)):
        yield item("rdma_device", "changed", subject=name)
    ports_same = True
    for name in sorted(set(before) & set(after)):
        now = {port.port: port for port in after[name].ports}
        for port in before[name].ports:
            current = now.get(port.port)
            subject = f"{name}:{port.port}"
            if current is None:
                ports_same = False
                yield item(
                    "rdma_port", "regression", subject=subject, before=port.state, after="gone"
                )
                continue
            if port_active(port.state) and not port_active(current.state):
                ports_same = False
                yield item(
                    "rdma_port",
                    "regression",
                    subject=subject,
                    before=port.state,
                    after=current.state,
                )
            for old_value, new_value in (
                (port.link_layer, current.link_layer),
                (port.rate, current.rate),
            ):
                if old_value and new_value and old_value != new_value:
                    yield item(
                        "rdma_port", "changed", subject=subject, before=old_value, after=new_value
                    )
    if not lost and ports_same and before:
        yield item("rdma_device", "same", after=len(before))


def _interfaces(a: Baseline, b: Baseline, target: DriverExpectation) -> Iterator[ComparisonItem]:
    old = {i.name: i for i in (a.communication.interfaces if a.communication else [])}
    new = {i.name: i for i in (b.communication.interfaces if b.communication else [])}
    if not old or not new:
        return
    lost = sorted(set(old) - set(new))
    for name in lost:
        yield item("interface", "regression", subject=name)
    for name in sorted(set(new) - set(old)):
        yield item("interface", "changed", subject=name)
    down = False
    for name in sorted(set(old) & set(new)):
        before, after = old[name], new[name]
        if before.state == "UP" and after.state != "UP":
            down = True
            yield item(
                "interface_state",
                "regression",
                subject=name,
                before=before.state,
                after=after.state,
            )
        if before.mtu and after.mtu and before.mtu != after.mtu:
            yield item("interface_mtu", "changed", subject=name, before=before.mtu, after=after.mtu)
    if not lost and not down:
        yield item("interface", "same", after=len(old))


def _endpoint(a: Baseline, b: Baseline, target: DriverExpectation) -> Iterator[ComparisonItem]:
    old, new = a.endpoint, b.endpoint
    if old is None or new is None:
        if old is not None or new is not None:
            yield item("endpoint", "not_compared")
        return
    if not new.ok:
        if old.ok:
            yield item("endpoint", "regression", before=_seconds(old), after=new.error or "failed")
        else:
            yield item("endpoint_failing", "same", before=old.error, after=new.error)
        return
    if not old.ok:
        yield item("endpoint", "changed", before=old.error or "failed", after=_seconds(new))
        return
    if (
        old.seconds is not None
        and new.seconds is not None
        and new.seconds >= old.seconds * ENDPOINT_SLOWER_FACTOR
        and new.seconds - old.seconds >= ENDPOINT_SLOWER_MIN_S
    ):
        yield item("endpoint_slower", "regression", before=_seconds(old), after=_seconds(new))
        return
    yield item("endpoint", "same", before=_seconds(old), after=_seconds(new))


def _seconds(check: object) -> str:
    seconds = getattr(check, "seconds", None)
    return f"{seconds:.2f} s" if isinstance(seconds, float | int) else "?"


_CHECKS: tuple[Check, ...] = (_driver, _host, _gpus, _runtime, _nccl, _rdma, _interfaces, _endpoint)
