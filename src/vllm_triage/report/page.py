"""The report page: what was read from the case, laid out for people as one self-contained HTML
page (inline CSS, inline SVG charts, no script, nothing fetched), in English, Korean or Japanese.

Everything reaches the page through a jinja2 template with autoescape on, and every value passes
`_finalize` on its way: text from logs and servers is hostile, so it is escaped, its control
characters shown as symbols, any URL in it loses its `user:password@`, and the redaction rules
run over it once more (an artifact placed in the case by hand is not trusted to be clean). The
page also forbids itself scripts and fetches (a Content-Security-Policy meta tag), a second wall
should a value ever slip through. Charts are drawn here (charts.py) and are the only markup not
from the template. The plan and the baselines are shown through their own renderers' views
(render/plan.py, render/baseline.py, render/record.py), so they read the same as `plan`,
`baseline` and `record` print them.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from vllm_triage import __version__
from vllm_triage.baseline import texts as baseline_texts
from vllm_triage.baseline.models import BaselineComparison
from vllm_triage.collect.reasons import REASONS as PROBE_REASONS
from vllm_triage.fleet.models import STATUSES
from vllm_triage.i18n import N_, Catalog, Language, catalog
from vllm_triage.plan import messages as plan_texts
from vllm_triage.plan.models import Plan
from vllm_triage.prefix import check as prefix_texts
from vllm_triage.record import messages as record_texts
from vllm_triage.redact import Redactor
from vllm_triage.render.baseline import capture_rows, finding
from vllm_triage.render.diagnosis import ROLES, VERDICTS, localized
from vllm_triage.render.plan import plan_view
from vllm_triage.render.record import View as RecordView
from vllm_triage.render.record import record_view, validated_on_text
from vllm_triage.report.charts import (
    Series,
    Step,
    bar_chart,
    figure,
    ladder_chart,
    share_chart,
)
from vllm_triage.report.gather import (
    BaselineRead,
    BundleRead,
    CaseRead,
    FleetRead,
    PrefixRead,
    RecordRead,
    RunRead,
)
from vllm_triage.report.texts import MAKE_COMMANDS, MESSAGES, SECTIONS
from vllm_triage.runbook.steps import AFTER_PLAN
from vllm_triage.validate.models import RUNG_ORDER, RungResult, ValidationRun
from vllm_triage.validate.reasons import REASONS as RUN_REASONS

if TYPE_CHECKING:
    from jinja2 import Environment

# Lone surrogates cannot be written as UTF-8; C0 controls (but newline and tab), DEL and C1 codes
# are shown as symbols rather than passed to the page.
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROLS = str.maketrans(
    {
        **{code: 0x2400 + code for code in range(32) if chr(code) not in "\n\t"},
        0x7F: 0x2421,
        **dict.fromkeys(range(0x80, 0xA0), 0xFFFD),
    }
)
# The user part of a URL anywhere in a text: scheme://user:password@ (up to the last @ before the
# host's end), dropped.
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^\s/?#]*@")
COMPARISON_FILE = "baseline-comparison.json"
# A fleet can be 10,000 nodes: the page shows this many waves and upgrade rows, then a count
# (fleet-scan.json holds every node).
FLEET_WAVES = 12
FLEET_WAVE_NAMES = 6
FLEET_UPGRADE_ROWS = 50


# The redactor of the page being rendered (one per page: it remembers the secrets it has seen).
_REDACTOR: ContextVar[Redactor | None] = ContextVar("report_redactor", default=None)


def clean_text(text: str, redactor: Redactor | None = None) -> str:
    """A value as the page shows it: printable, no URL with its credentials, and (with a
    redactor) no secret the redaction rules know."""
    if not text.isascii():
        text = _SURROGATE.sub("\ufffd", text)
    text = text.translate(_CONTROLS)
    if "://" in text and "@" in text:
        text = _URL_USERINFO.sub(lambda match: match.group("scheme"), text)
    return redactor.text(text) if redactor is not None else text


def _finalize(value: Any) -> Any:
    """Every {{ value }} of the template on its way to the page (then autoescaped)."""
    if isinstance(value, Markup):  # the charts, drawn and escaped by charts.py
        return value
    if isinstance(value, str):
        return clean_text(value, _REDACTOR.get())
    if value is None:
        return "\u2013"
    return value


@cache
def _env() -> Environment:
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("vllm_triage.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _num
    env.filters["when"] = _when
    env.filters["human"] = _human
    return env


def _num(value: Any, digits: int = 2) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "\u2013" if value is None else str(value)
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def _when(created_at: Any) -> str:
    """2026-12-01T08:34:33.970916+00:00 as 2026-12-01 08:34:33 (the artifact keeps it whole)."""
    return created_at[:19].replace("T", " ") if isinstance(created_at, str) else "\u2013"


def _human(key: Any) -> str:
    return str(key).replace("_", " ")


@dataclass
class Words:
    """The page's words in one language: `t(key, **fields)` for the report's own texts, `known`
    for a text that may be in a catalog as it is (the knowledge base's advice)."""

    tr: Catalog

    def t(self, key: str, /, **fields: object) -> str:
        return self.tr(MESSAGES[key], **fields)

    def known(self, text: str) -> str:
        return self.tr(text) if text else text

    def status(self, status: str) -> str:
        key = f"status_{status}"
        return self.t(key) if key in MESSAGES else status

    def probe_reason(self, reason: str | None) -> str | None:
        """Why a probe found nothing, said in the page's language (collect/reasons.py)."""
        return self.tr.composed(reason, PROBE_REASONS) if reason else reason

    def rung_reason(self, reason: str | None) -> str | None:
        """Why a rung or a start came out as it did, in the page's language
        (validate/reasons.py); what it quotes from the server stays as the server said it."""
        return self.tr.composed(reason, RUN_REASONS) if reason else reason

    def yes_no(self, value: bool | None) -> str:
        if value is None:
            return self.t("unknown")
        return self.t("yes") if value else self.t("no")

    def seconds(self, value: float) -> str:
        return self.t("seconds", value=f"{value:.2f}" if value < 100 else f"{value:.0f}")


@dataclass(frozen=True)
class Overview:
    """One row of the at-a-glance table."""

    section: str
    title: str
    present: bool
    artifacts: list[str]
    verdict: str
    command: str
    # False: the case's path does not take this step (shown as not needed, never as missing)
    needed: bool = True
    # what the verdict says at a glance: passed, failed, warn (unfinished, unknown) or "" (a
    # verdict that is no pass or fail: a diagnosis, a plan)
    outcome: str = ""


@dataclass
class RunView:
    """A validation run and its charts."""

    read: RunRead
    run: ValidationRun | None
    verdict: str
    passed: bool | None
    failed_rung: str | None = None
    ladder: Markup | None = None
    levels: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    ttft: Markup | None = None
    throughput: Markup | None = None
    prefix: Markup | None = None
    prefix_ttft: Markup | None = None


def render_page(read: CaseRead, language: Language, made_at: datetime) -> str:
    """The whole page as HTML text."""
    words = Words(catalog(language))
    if read.diagnosis is not None:  # its sentences in the page's language, as `diagnose --lang`
        read = replace(read, diagnosis=localized(read.diagnosis, language))
    quoted = shlex.quote(read.case)
    commands = {key: command.format(case=quoted) for key, command in MAKE_COMMANDS.items()}
    runs = [_run_view(run, words) for run in read.runs]
    read = replace(read, prefix_checks=[_prefix_read(c, words) for c in read.prefix_checks])
    token = _REDACTOR.set(Redactor())
    try:
        return _render(
            lang=language,
            t=words.t,
            known=words.known,
            status=words.status,
            word=words.tr.word,
            verdicts=VERDICTS,
            roles=ROLES,
            probe_reason=words.probe_reason,
            rung_reason=words.rung_reason,
            yes_no=words.yes_no,
            read=read,
            made_at=made_at.isoformat(),
            version=__version__,
            sections=SECTIONS,
            commands=commands,
            overview=_overview(read, runs, words, commands),
            decision=_decision(read, language, words),
            facts=[_facts(bundle, words) for bundle in read.bundles],
            runs=runs,
            prefix_charts=[
                _prefix_check_chart(check.report, words) for check in read.prefix_checks
            ],
            plan=plan_view(read.plan, language) if read.plan is not None else None,
            record=_record_section(read.record, language),
            baselines=[
                _baseline_view(b, words)
                for b in sorted(read.baselines, key=lambda b: _captured(b) or "~")
            ],
            comparison=_comparison_view(read.comparison, words),
            fleet=_fleet_view(read.fleet, words),
        )
    finally:
        _REDACTOR.reset(token)


def _render(**values: Any) -> str:
    text: str = _env().get_template("report.html.j2").render(**values)
    return text


@dataclass(frozen=True)
class RecordSection:
    """The decision record: where it is, when it was made, and its view in the reader's language
    (render/record.py, as `record` prints it)."""

    path: str
    created_at: str | None
    view: RecordView


@dataclass(frozen=True)
class BaselineView:
    """A baseline at a glance: its rows as `baseline capture` shows them, in the reader's
    language (render/baseline.py)."""

    label: str
    path: str
    created_at: str | None
    rows: list[tuple[str, str]]
    probes: str


@dataclass(frozen=True)
class ComparisonItemView:
    kind: str
    kind_label: str
    check: str
    finding: str


@dataclass(frozen=True)
class ComparisonView:
    """The comparison of two baselines: regressions first, then what was expected."""

    title: str
    verdict: str
    regression: bool
    counts: str
    target: str
    created_at: str | None
    items: list[ComparisonItemView]


@dataclass(frozen=True)
class FleetWaveView:
    """One rollout wave: its number, its size and the first few node names."""

    number: int
    size: int
    names: str


@dataclass(frozen=True)
class FleetView:
    """The fleet scan at a glance: nodes per status, the waves, the nodes a driver upgrade
    would make ready with the driver each needs."""

    path: str
    created_at: str | None
    image: str
    source: str
    counts: str
    waves_title: str
    waves: list[FleetWaveView]
    waves_more: str
    upgrades: list[tuple[str, str | None, str | None, str | None]]
    """(node, driver now, minimum driver, GPU)"""
    upgrades_more: str
    notes: list[str]


def _fleet_counts(counts: dict[str, int], words: Words) -> str:
    """Nodes per status in the reader's language, every status the scan found."""
    return ", ".join(
        f"{words.t(f'fleet_status_{status}')} {counts[status]}"
        for status in STATUSES
        if counts.get(status)
    )


def _fleet_view(read: FleetRead | None, words: Words) -> FleetView | None:
    if read is None:
        return None
    scan = read.scan
    counts = scan.counts or {s: sum(n.status == s for n in scan.nodes) for s in STATUSES}
    waves = [
        FleetWaveView(
            number,
            len(wave),
            ", ".join(wave[:FLEET_WAVE_NAMES])
            + (f", \u2026 {wave[-1]}" if len(wave) > FLEET_WAVE_NAMES else ""),
        )
        for number, wave in enumerate(scan.waves[:FLEET_WAVES], 1)
    ]
    rest = scan.waves[FLEET_WAVES:]
    upgrade = [node for node in scan.nodes if node.status == "needs_upgrade"]
    upgrade.sort(key=lambda node: node.name)
    return FleetView(
        path=read.path,
        created_at=scan.created_at,
        image=words.t("fleet_image", image=scan.image or "\u2013", cuda=scan.cuda),
        source=words.t("fleet_source", source=scan.source),
        counts=words.t("fleet_counts", nodes=len(scan.nodes), counts=_fleet_counts(counts, words)),
        waves_title=words.t("fleet_waves", size=scan.wave_size),
        waves=waves,
        waves_more=words.t("more", count=sum(len(w) for w in rest)) if rest else "",
        upgrades=[
            (node.name, node.driver, node.min_driver, node.gpu)
            for node in upgrade[:FLEET_UPGRADE_ROWS]
        ],
        upgrades_more=(
            words.t("fleet_more", count=len(upgrade) - FLEET_UPGRADE_ROWS)
            if len(upgrade) > FLEET_UPGRADE_ROWS
            else ""
        ),
        notes=list(scan.notes),
    )


@dataclass(frozen=True)
class DecisionRow:
    """One line of what is approved: its label, its value, and the artifact it comes from."""

    key: str
    label: str
    value: str
    source: str = ""


@dataclass(frozen=True)
class WideningRow:
    """A widening condition on the first screen: its status and the artifacts that prove it."""

    name: str
    status: str
    """met, not_met or unknown (record.models.WideningStatus)"""
    status_label: str
    proof: list[str]


@dataclass(frozen=True)
class Decision:
    """The first screen, for the person who signs: what is approved (the path, the driver from
    and to, the nodes, the rollback target), the widening conditions with their proof, and the
    path's open risks; each part None where the case lacks the artifact it comes from."""

    path_label: str
    path_name: str
    path: str
    path_note: str
    rows: list[DecisionRow]
    widening_title: str
    widening: list[WideningRow]
    judged: bool
    """False: no record judged them yet (the rows are the plan's, every one unknown)"""
    widening_counts: str
    widening_source: str
    risks_title: str
    risks: list[str]
    risks_source: str


_WIDENING_CSS = {"met": "passed", "not_met": "failed", "unknown": "warn"}


def _decision(read: CaseRead, language: Language, words: Words) -> Decision | None:
    """What the signer approves, from the plan (and the record, once there is one)."""
    plan = read.plan
    if plan is None:
        return None
    tr = words.tr
    found = read.record
    record = found.record if found is not None else None
    if record is not None:
        view = record_view(record, language)
        path, path_label = record.adopted.path, tr(record_texts.ADOPTED)
        path_name, path_note = view.adopted_name, view.adopted_note
    else:
        path, path_label = plan.recommended.path, tr(plan_texts.RECOMMENDED)
        path_name, path_note = tr(plan.recommended.name), ""
    rows = _driver_rows(plan, words)
    nodes = plan.constraints.nodes
    rows.append(
        DecisionRow(
            "nodes",
            tr(plan_texts.TARGET_NODES),
            ", ".join(nodes) if nodes else words.t("nodes_not_named"),
            "plan.json",
        )
    )
    if plan.constraints.exclude:
        rows.append(
            DecisionRow(
                "excluded",
                tr(plan_texts.EXCLUDED_NODES),
                ", ".join(plan.constraints.exclude),
                "plan.json",
            )
        )
    driver, source = _rollback_driver(read)
    rows.append(
        DecisionRow("rollback", words.t("rollback_target"), driver or words.t("unknown"), source)
    )
    if found is not None and record is not None and (on := record.validated_on) is not None:
        short = [
            on.node,
            on.driver,
            tr(record_texts.VALIDATED_GPUS, gpus=on.gpus, model=on.gpu_model) if on.gpus else None,
            on.image,
        ]
        value = (
            " · ".join(part for part in short if part)
            if on.tied
            else validated_on_text(record, tr) or ""
        )
        rows.append(DecisionRow("validated", tr(record_texts.VALIDATED_ON), value, found.path))
    if found is not None and record is not None:
        widening = [
            WideningRow(
                row.name,
                judged.status,
                row.status_label,
                list(dict.fromkeys(proof.artifact for proof in judged.proof)),
            )
            for judged, row in zip(record.widening, view.widening, strict=True)
        ]
        widening_source = found.path
    else:
        unknown = tr(record_texts.STATUSES["unknown"])
        widening = [WideningRow(tr(c), "unknown", unknown, []) for c in plan.plan.widen_when]
        widening_source = "plan.json"
    counts = {status: sum(c.status == status for c in widening) for status in _WIDENING_CSS}
    return Decision(
        path_label=path_label,
        path_name=path_name,
        path=path,
        path_note=path_note,
        rows=rows,
        widening_title=tr(record_texts.WIDENING),
        widening=widening,
        judged=record is not None,
        widening_counts=(
            words.t(
                "widening_counts",
                met=counts["met"],
                not_met=counts["not_met"],
                unknown=counts["unknown"],
            )
            if widening
            else ""
        ),
        widening_source=widening_source,
        risks_title=words.t("open_risks"),
        risks=[tr(risk) for risk in _risks(plan, path)],
        risks_source="plan.json",
    )


def _risks(plan: Plan, path: str) -> list[str]:
    """The risks the plan names for the path taken (risks_by_path; an older plan's flat list
    when that path is the recommended one)."""
    for entry in plan.plan.risks_by_path:
        if entry.path == path:
            return list(entry.risks)
    if not plan.plan.risks_by_path and path == plan.recommended.path:
        return list(plan.plan.risks)
    return []


def _driver_rows(plan: Plan, words: Words) -> list[DecisionRow]:
    """The driver the change goes from and to, the floor to start and the toolkit's driver
    (plan.target); for a path with no driver target, that the driver stays."""
    tr = words.tr
    target = plan.plan.target
    installed = (target.installed if target else None) or plan.constraints.driver
    if target is None or not (target.recommended_driver or target.recommended_branch):
        if installed is None:
            return []
        return [
            DecisionRow(
                "driver",
                tr(plan_texts.DRIVER_TARGET),
                words.t("driver_unchanged", driver=installed),
                "plan.json",
            )
        ]
    to = target.recommended_driver or target.recommended_branch or "?"
    branch = target.recommended_branch or "?"
    rows = [
        DecisionRow(
            "driver",
            tr(plan_texts.DRIVER_TARGET),
            f"{installed or '?'} \u2192 {to} ({branch})",
            "plan.json",
        )
    ]
    if target.min_driver:
        shown = target.min_driver + (f" ({target.min_branch})" if target.min_branch else "")
        rows.append(DecisionRow("min_driver", tr(plan_texts.MINIMUM), shown, "plan.json"))
    if target.toolkit_driver:
        shown = target.toolkit_driver + (
            f" ({target.toolkit_release})" if target.toolkit_release else ""
        )
        rows.append(DecisionRow("toolkit_driver", tr(plan_texts.TOOLKIT), shown, "plan.json"))
    return rows


def _rollback_driver(read: CaseRead) -> tuple[str | None, str]:
    """The driver a rollback goes back to, and the artifact that says it: the record's (its
    driver change; a record written before it had one names it in its approval condition),
    else the comparison's before side, else the first baseline's, else the driver the plan found
    installed."""
    if read.record is not None:
        change = read.record.record.driver
        if change is not None and change.rollback_driver:
            return change.rollback_driver, read.record.path
        for judged in read.record.record.widening:
            driver = judged.fields.get("driver")
            if judged.check == "rollback_and_approval" and driver and driver != "\u2013":
                return driver, read.record.path
    comparison = read.comparison
    if comparison is not None and comparison.before.driver:
        return comparison.before.driver, COMPARISON_FILE
    for baseline in sorted(read.baselines, key=lambda b: _captured(b) or "~"):
        gpu = baseline.capture.gpu if baseline.capture is not None else None
        if gpu is not None and gpu.driver_version:
            return gpu.driver_version, f"{baseline.path}/baseline.json"
    plan = read.plan
    target = plan.plan.target if plan is not None else None
    if target is not None and target.installed:
        return target.installed, "plan.json"
    return None, ""


def _record_section(read: RecordRead | None, language: Language) -> RecordSection | None:
    if read is None:
        return None
    record = read.record
    return RecordSection(read.path, record.created_at, record_view(record, language))


def _captured(read: BaselineRead) -> str | None:
    """When a baseline was captured (baselines show in that order: before, then after)."""
    return read.capture.created_at if read.capture is not None else None


def _baseline_view(read: BaselineRead, words: Words) -> BaselineView:
    capture = read.capture
    if capture is None:
        return BaselineView(read.label, read.path, None, [], "")
    ok = sum(p.status == "ok" for p in capture.probes)
    failed = sum(p.status in ("failed", "timed_out") for p in capture.probes)
    absent = sum(p.status == "not_available" for p in capture.probes)
    return BaselineView(
        read.label,
        read.path,
        capture.created_at,
        capture_rows(capture, words.tr),
        words.t("probes_count", ok=ok, failed=failed, absent=absent),
    )


_KIND_ORDER = {"regression": 0, "expected": 1, "changed": 2, "not_compared": 3, "same": 4}


def _comparison_view(comparison: BaselineComparison | None, words: Words) -> ComparisonView | None:
    if comparison is None:
        return None
    tr = words.tr
    items = sorted(comparison.items, key=lambda item: _KIND_ORDER.get(item.kind, 5))
    if comparison.verdict == "regression":
        verdict = tr(baseline_texts.VERDICT_REGRESSION, count=comparison.regressions)
    else:
        verdict = tr(baseline_texts.VERDICT_OK, expected=comparison.expected)
    return ComparisonView(
        title=tr(
            baseline_texts.COMPARISON_TITLE,
            before=comparison.before.label,
            after=comparison.after.label,
        ),
        verdict=verdict,
        regression=comparison.verdict == "regression",
        counts=tr(
            baseline_texts.COUNTS,
            regressions=comparison.regressions,
            expected=comparison.expected,
            changed=comparison.changed,
        ),
        target=(
            tr(baseline_texts.TARGET, target=comparison.expect_driver)
            if comparison.expect_driver
            else tr(baseline_texts.NO_TARGET)
        ),
        created_at=comparison.created_at,
        items=[
            ComparisonItemView(
                item.kind,
                tr(baseline_texts.KINDS.get(item.kind, item.kind)),
                item.check,
                finding(item, tr),
            )
            for item in items
        ],
    )


def _overview(
    read: CaseRead, runs: Sequence[RunView], words: Words, commands: dict[str, str]
) -> list[Overview]:
    """One row per step: is its artifact in the case, and what it says at a glance (with its
    outcome where the step passes or fails: a bundle changed after collect, the baselines
    compared, the validation runs)."""
    rows = []
    bundles = read.bundles
    outcome = ""
    if bundles:
        newest = bundles[-1].manifest
        ok = sum(p.status == "ok" for p in newest.probes)
        failed = sum(p.status in ("failed", "timed_out") for p in newest.probes)
        absent = sum(p.status == "not_available" for p in newest.probes)
        verdict = words.t("probes_count", ok=ok, failed=failed, absent=absent)
        # files changed after collect: the evidence cannot be trusted as it is
        outcome = "failed" if any(bundle.problems for bundle in bundles) else ""
    else:
        verdict = ""
    rows.append(
        Overview("evidence", words.t("evidence_title"), bool(bundles),
                 [b.path for b in bundles], verdict, commands["evidence"], outcome=outcome)
    )  # fmt: skip
    diagnosis = read.diagnosis
    verdict = ""
    if diagnosis is not None:
        primary = diagnosis.primary
        verdict = (
            f"{primary.cause} ({primary.phase}, {primary.confidence:.2f}); "
            f"{words.t('driver_change')}: {words.yes_no(primary.driver_change_advised)}"
        )
    rows.append(
        Overview("diagnosis", words.t("diagnosis_title"), diagnosis is not None,
                 ["diagnosis.json"] if diagnosis else [], verdict, commands["diagnosis"])
    )  # fmt: skip
    plan = read.plan
    verdict = words.known(plan.recommended.name) if plan is not None else ""
    rows.append(
        Overview("plan", words.t("plan_title"), plan is not None,
                 ["plan.json"] if plan else [], verdict, commands["plan"])
    )  # fmt: skip
    fleet = read.fleet
    verdict = _fleet_counts(fleet.scan.counts, words) if fleet is not None else ""
    rows.append(
        Overview("fleet", words.t("fleet_title"), fleet is not None,
                 [fleet.path] if fleet else [], verdict, commands["fleet"])
    )  # fmt: skip
    comparison = read.comparison
    baseline_paths = [b.path for b in read.baselines]
    outcome = ""
    if comparison is not None:
        baseline_paths.append(COMPARISON_FILE)
        regression = comparison.verdict == "regression"
        verdict = (
            words.tr(baseline_texts.VERDICT_REGRESSION, count=comparison.regressions)
            if regression
            else words.tr(baseline_texts.VERDICT_OK, expected=comparison.expected)
        )
        outcome = "failed" if regression else "passed"
    else:
        verdict = ", ".join(b.label for b in read.baselines)
    rows.append(
        Overview("baseline", words.t("baseline_title"), bool(baseline_paths), baseline_paths,
                 verdict, commands["baseline"], outcome=outcome)
    )  # fmt: skip
    verdict, outcome = _runs_verdict(runs, words)
    rows.append(
        Overview("validation", words.t("validation_title"), bool(runs),
                 [r.read.path for r in runs] + [c.path for c in read.prefix_checks],
                 verdict, commands["validation"], outcome=outcome)
    )  # fmt: skip
    record = read.record
    verdict = (
        f"{words.known(record.record.adopted.name)} ({record.record.adopted.path})"
        if record is not None
        else ""
    )
    rows.append(
        Overview("record", words.t("record_title"), record is not None,
                 [record.path] if record else [], verdict, commands["record"])
    )  # fmt: skip
    taken: set[str] | None = (
        set(AFTER_PLAN.get(plan.recommended.path, ())) if plan is not None else None
    )
    # before a plan every step may come; after it, only the steps its path takes
    return [
        replace(row, needed=_needed(_STEP_OF_SECTION[row.section], taken))
        if row.section in _STEP_OF_SECTION
        else row
        for row in rows
    ]


def _needed(step: str | None, taken: set[str] | None) -> bool:
    return step is not None and (taken is None or step in taken)


# The runbook step (runbook.steps.AFTER_PLAN) each section after the plan stands for; the fleet
# scan is no step of the runbook: a tool for a rollout, never missing.
_STEP_OF_SECTION = {
    "baseline": "baseline_capture",
    "validation": "validate",
    "record": "record",
    "fleet": None,
}


def _runs_verdict(runs: Sequence[RunView], words: Words) -> tuple[str, str]:
    """The validation at a glance, and its outcome: one run's verdict; of several, how many
    failed when any did (a failed run is never hidden behind a newer passing one: the outcome
    is failed), else how many passed and the newest's verdict when they do not all agree."""
    if not runs:
        return "", ""
    newest = runs[-1].verdict
    failed = [run for run in runs if run.passed is False and not (run.run and run.run.interrupted)]
    passed = sum(run.passed is True for run in runs)
    outcome = "failed" if failed else "passed" if passed == len(runs) else "warn"
    if len(runs) == 1 or passed == len(runs):
        return newest, outcome
    if failed:
        rungs = dict.fromkeys(run.failed_rung for run in failed if run.failed_rung)
        said = words.t("runs_failed_of", failed=len(failed), total=len(runs))
        return said + (f" ({', '.join(rungs)})" if rungs else ""), outcome
    return words.t("runs_passed_of", passed=passed, total=len(runs), newest=newest), outcome


# A container's state (docker/podman State.Status) and where vLLM came from (VllmFacts.origin) in
# words; another value is shown as it is.
CONTAINER_STATES = {
    "created": N_("created"),
    "running": N_("running"),
    "paused": N_("paused"),
    "restarting": N_("restarting"),
    "removing": N_("removing"),
    "exited": N_("exited"),
    "dead": N_("dead"),
}
VLLM_ORIGINS = {
    "image-bundled": N_("bundled in the image"),
    "pip": N_("installed with pip"),
    "source": N_("built from source"),
    "unknown": N_("origin unknown"),
}


def _facts(bundle: BundleRead, words: Words) -> list[tuple[str, str]]:
    """The facts an approver looks for first, each on one line, from what the probes parsed."""
    facts = bundle.facts
    rows: list[tuple[str, str]] = []

    def add(key: str, value: object) -> None:
        if value not in (None, "", []):
            rows.append((words.t(key), str(value)))

    host = facts.host
    if host is not None:
        add("fact_node", host.node_name)
        add("fact_os", host.os_release)
        add("fact_kernel", host.kernel)
    gpu = facts.gpu
    if gpu is not None:
        if gpu.driver_version:
            add(
                "fact_driver",
                words.t(
                    "fact_driver_value",
                    version=gpu.driver_version,
                    branch=gpu.driver_branch or "?",
                    ceiling=gpu.cuda_ceiling or "?",
                ),
            )
        by_name: dict[str, list[int | None]] = {}
        for device in gpu.gpus:
            by_name.setdefault(device.name, []).append(device.memory_total_mib)
        add(
            "fact_gpus",
            ", ".join(
                f"{len(memory)} \u00d7 {name}"
                + (f" ({memory[0]} MiB)" if memory and memory[0] else "")
                for name, memory in by_name.items()
            ),
        )
    container = facts.container
    if container is not None:
        add("fact_image", container.image)
        add("fact_image_cuda", container.image_cuda or container.image_require_cuda)
        add(
            "fact_container",
            words.t(
                "fact_container_value",
                engine=container.engine,
                version=container.engine_version or "",
                status=words.tr.word(CONTAINER_STATES, container.status or "?"),
                code=container.exit_code if container.exit_code is not None else "?",
            ),
        )
        runtime = ", ".join(
            part
            for part in (
                container.runtime,
                container.toolkit_version,
                container.container_cli_version,
            )
            if part
        )
        add("fact_runtime", runtime)
    pod = facts.kubernetes
    if pod is not None:
        add("fact_pod", f"{pod.namespace}/{pod.pod} ({pod.node or '?'})")
    vllm = facts.vllm
    if vllm is not None:
        origin = words.tr.word(VLLM_ORIGINS, vllm.origin) if vllm.origin else None
        add("fact_vllm", " ".join(p for p in (vllm.version, origin, vllm.commit) if p))
    communication = facts.communication
    if communication is not None:
        add("fact_nccl", communication.nccl_version)
        add(
            "fact_rdma",
            ", ".join(
                f"{p.device}:{p.port} {p.state or ''}".strip() for p in communication.rdma_ports
            ),
        )
    files = facts.model_files
    if files is not None:
        add(
            "fact_model",
            words.t(
                "fact_model_value",
                model=files.model,
                exists=words.yes_no(files.exists),
                readable=words.yes_no(files.readable),
            ),
        )
    return rows


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _run_view(read: RunRead, words: Words) -> RunView:
    run = read.run
    if run is None:
        return RunView(read, None, words.t("unfinished"), None)
    failed = next((r.name for r in run.rungs if r.status == "failed"), None)
    if run.passed:
        verdict = words.t("passed")
    elif run.interrupted:
        verdict = words.t("interrupted") + (f" ({failed})" if failed else "")
    else:
        verdict = words.t("failed") + (f" ({failed})" if failed else "")
    view = RunView(read, run, verdict, run.passed, failed)
    view.ladder = ladder_chart(words.t("ladder"), _steps(run.rungs, words), words.seconds)
    by_name = {rung.name: rung for rung in run.rungs}
    concurrency = by_name.get("concurrency")
    levels = concurrency.figures.get("levels") if concurrency else None
    if isinstance(levels, dict) and levels:
        rows = [(str(k), v) for k, v in levels.items() if isinstance(v, dict)]
        rows.sort(key=lambda row: int(row[0]) if row[0].isdigit() else 0)
        view.levels = rows
        names = [name for name, _ in rows]
        view.ttft = bar_chart(
            words.t("ttft_chart"),
            names,
            [
                Series(words.t("ttft_p50"), [_number(f.get("ttft_p50_s")) for _, f in rows], "p50"),
                Series(words.t("ttft_p95"), [_number(f.get("ttft_p95_s")) for _, f in rows], "p95"),
            ],
            figure,
            words.t("seconds_axis"),
        )
        view.throughput = bar_chart(
            words.t("throughput_chart"),
            names,
            [
                Series(
                    words.t("tokens_per_s"),
                    [_number(f.get("output_tokens_per_s")) for _, f in rows],
                    "throughput",
                )
            ],
            figure,
            words.t("tokens_axis"),
        )
    same = by_name.get("same_prefix")
    figures = same.figures if same else {}
    queries = _number(figures.get("queries")) or float(run.prefix_cache.queries)
    hits = _number(figures.get("hits"))
    if hits is None:
        hits = float(run.prefix_cache.hits)
    if queries or same is not None:
        view.prefix = share_chart(
            words.t("prefix_chart"),
            [
                (
                    words.t("prefix_hits", hits=int(hits), queries=int(queries)),
                    hits / queries if queries else None,
                    "",
                )
            ],
        )
    first, repeats = (
        _number(figures.get("ttft_first_s")),
        _number(figures.get("ttft_repeats_p50_s")),
    )
    if first is not None or repeats is not None:
        view.prefix_ttft = bar_chart(
            words.t("ttft_prefix_chart"),
            [words.t("ttft_first"), words.t("ttft_repeats")],
            [Series(words.t("ttft_p50"), [first, repeats], "p50")],
            figure,
            words.t("seconds_axis"),
        )
    return view


def _steps(rungs: Sequence[RungResult], words: Words) -> list[Step]:
    """Every rung of the ladder in its order: those the run climbed with their status, the rest
    as not run (a ladder stops at its first failure)."""
    by_name = {rung.name: rung for rung in rungs}
    steps = []
    for name in RUNG_ORDER:
        rung = by_name.get(name)
        if rung is None:
            steps.append(Step(name, "not-run", words.t("not_run"), None))
        else:
            steps.append(Step(name, rung.status, words.status(rung.status), rung.duration_s))
    return steps


def _prefix_read(check: PrefixRead, words: Words) -> PrefixRead:
    """A prefix check as the page shows it: its launch check's sentences, each class's first pair
    and its unit in the page's language (the report keeps them in English)."""
    tr = words.tr
    if tr.language == "en":
        return check
    report = check.report
    launch = report.launch
    if launch is not None:
        said = {"summary": prefix_texts.launch_said(tr, launch.summary)}
        if launch.fix:
            said["fix"] = prefix_texts.launch_said(tr, launch.fix)
        launch = launch.model_copy(update=said)
    pair = (prefix_texts.FIRST_PAIR,)
    classes, after_fixes = (
        [c.model_copy(update={"first_pair": tr.composed(c.first_pair, pair)}) for c in counts]
        for counts in (report.classes, report.after_fixes)
    )
    update = {
        "launch": launch,
        "classes": classes,
        "after_fixes": after_fixes,
        "unit": tr.word(prefix_texts.UNITS, report.unit),
    }
    return replace(check, report=report.model_copy(update=update))


def _prefix_check_chart(report: Any, words: Words) -> Markup:
    return share_chart(
        words.t("prefix_title"),
        [
            (words.t("reusable"), report.reusable_share, ""),
            (words.t("reusable_if_fixed"), report.reusable_share_if_fixed, ""),
        ],
    )
