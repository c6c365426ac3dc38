"""The runbook as data: its steps in order, the steps each recovery path takes after the plan, and
every reason the runbook gives for a next step with the command that goes with it.

Which reason holds for a case is decided in code (vllm_triage.runbook.next_step), from what the
case holds; what each step is called, what command makes its artifact and the sentence that says
why are here, once, as English message ids of the core gettext domain (`N_`, translated where they
are shown). A command is a template of machine words (not translated), except where no command
does the step: then it says what to do, and is a message too. {fields} are filled after the
lookup: {case} is the case folder quoted for a shell; the others name artifacts, labels,
causes, rungs and versions as the case's artifacts write them.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm_triage.i18n import N_
from vllm_triage.runbook.models import Step

ORDER: tuple[Step, ...] = (
    "collect",
    "diagnose",
    "plan",
    "baseline_capture",
    "validate",
    "baseline_compare",
    "record",
    "report",
)
"""The runbook's order: freeze the evidence, find the cause, choose the recovery, save the node's
state before a driver change, prove the server works after it, compare the node with its state
before, write the decision, hand the case to the approvers."""

TITLES: dict[Step, str] = {
    "collect": N_("collect the evidence"),
    "diagnose": N_("diagnose"),
    "plan": N_("plan the recovery"),
    "baseline_capture": N_("save a baseline"),
    "validate": N_("validate"),
    "baseline_compare": N_("compare the baselines"),
    "rollback": N_("roll back or fix"),
    "record": N_("write the decision record"),
    "review": N_("review the decision"),
    "report": N_("write the report"),
    "done": N_("done"),
}

AFTER_PLAN: dict[str, tuple[Step, ...]] = {
    "upgrade_driver": ("baseline_capture", "validate", "baseline_compare", "record", "report"),
    "isolated_env": ("validate", "record", "report"),
    "custom_build": ("validate", "record", "report"),
    "forward_compat": ("validate", "record", "report"),
    "no_driver_change": ("validate", "report"),
}
"""The steps after the plan, per recommended path (plan.models.PathId). Only a driver upgrade
changes the node under other jobs, so only it is framed by baselines; a decision record is for
the paths `record` adopts (a driver upgrade, an isolated environment, a custom build, forward
compatibility), not for a cause fixed in its own flow."""

BEFORE_LABEL = "before"
AFTER_LABEL = "after"


@dataclass(frozen=True)
class Reason:
    """One reason for a next step: the step, its command, and why."""

    step: Step
    command: str
    why: str


_COLLECT = "vllm-triage collect --case {case} --container NAME (or --pod NAME, --log FILE)"
_DIAGNOSE = "vllm-triage diagnose --case {case}"
_PLAN = "vllm-triage plan --case {case}"
_CAPTURE = "vllm-triage baseline capture --label {label} --case {case}"
_VALIDATE = "vllm-triage validate URL --case {case}"
_VALIDATE_STARTS = "vllm-triage validate URL --case {case} --start-cmd FILE --starts 3"
_COMPARE = "vllm-triage baseline compare {before} {after} --case {case}{expect}"
_RECORD = "vllm-triage record --case {case}"
_RECORD_CHECK = "vllm-triage record check --case {case}"
_REPORT = "vllm-triage report --case {case}"

REASONS: dict[str, Reason] = {
    # --- collect, diagnose -------------------------------------------------------------------
    "no_evidence": Reason(
        "collect",
        _COLLECT,
        N_(
            "no evidence is frozen yet: collect it once, right after the failure, before "
            "anything restarts"
        ),
    ),
    "bundle_not_diagnosed": Reason(
        "diagnose", _DIAGNOSE, N_("the bundle {bundle} has no diagnosis yet")
    ),
    "bundle_newer": Reason(
        "diagnose", _DIAGNOSE, N_("the bundle {bundle} is newer than the diagnosis")
    ),
    # --- plan --------------------------------------------------------------------------------
    "plan_threshold": Reason(
        "plan",
        _PLAN,
        N_(
            "{cause}: the image needs a newer driver. Choose the recovery path under the team's "
            "constraints (maintenance window, shared cluster, deadline, custom build) before "
            "anything on the cluster changes"
        ),
    ),
    "plan_flow": Reason(
        "plan",
        _PLAN,
        N_(
            "{cause}: not a driver threshold, so the driver stays as it is; the plan routes the "
            "cause to its own flow (no_driver_change) with that flow's next steps"
        ),
    ),
    "plan_outdated": Reason(
        "plan",
        _PLAN,
        N_(
            "the plan {plan} follows an earlier diagnosis ({planned}); the current one is "
            "{cause}: plan again"
        ),
    ),
    # --- the baseline before a driver change -------------------------------------------------
    "baseline_before": Reason(
        "baseline_capture",
        _CAPTURE,
        N_(
            "the plan upgrades the driver: first save the state of the node that changes first "
            "(driver, GPUs and running jobs, kernel, container runtime, NCCL, RDMA, an existing "
            "model's short request)"
        ),
    ),
    # --- validate ----------------------------------------------------------------------------
    "validate_upgrade": Reason(
        "validate",
        _VALIDATE_STARTS,
        N_(
            "baseline {before} is saved: apply the driver on one isolated node without service "
            "traffic by the plan's staged order, reboot, check nvidia-smi and the GPUs, then "
            "validate there (repeated starts show the engine initialises every time)"
        ),
    ),
    "validate_isolated": Reason(
        "validate",
        _VALIDATE,
        N_(
            "the plan validates in an isolated environment: start the server where the driver "
            "already meets the image's minimum, with the same request format and model version, "
            "and validate it there; the runs are the evidence for the driver approval"
        ),
    ),
    "validate_custom_build": Reason(
        "validate",
        _VALIDATE,
        N_(
            "the plan takes a temporary custom build: build it twice from the pinned inputs, "
            "compare the builds, start it on one isolated node, then validate it there"
        ),
    ),
    "validate_forward_compat": Reason(
        "validate",
        _VALIDATE,
        N_(
            "the plan uses CUDA forward compatibility: install the compat package, check the "
            "driver version it reports inside the container, start the server, then validate it"
        ),
    ),
    "validate_flow": Reason(
        "validate",
        _VALIDATE,
        N_(
            "{cause}: apply the steps of the plan's {flow} flow (no driver change), restart the "
            "server, then prove it works"
        ),
    ),
    "healthy": Reason(
        "validate",
        _VALIDATE,
        N_(
            "{cause}: nothing failed: the server started and served, or a signal stopped it "
            "cleanly. There is nothing to fix or restart and no recovery to plan: to prove it "
            "works end to end, validate the running server; otherwise the case is done"
        ),
    ),
    "healthy_validated": Reason(
        "done",
        N_("nothing to do: the case folder {case} holds the proof, should anyone ask"),
        N_("nothing failed, and the validation {run} proves that the server works"),
    ),
    "validation_failed": Reason(
        "validate",
        _VALIDATE,
        N_(
            "the validation {run} did not pass at {rung}: fix what it says, restart, then "
            "validate again (a server that no longer starts: collect and diagnose that)"
        ),
    ),
    "validation_failed_after_change": Reason(
        "validate",
        _VALIDATE,
        N_(
            "the validation {run} after the driver change did not pass at {rung}: if the change "
            "caused it, roll back by the plan's procedure; otherwise fix what it says and "
            "validate again"
        ),
    ),
    "validation_unfinished": Reason(
        "validate",
        _VALIDATE,
        N_(
            "the validation {run} did not finish (interrupted, or stopped before its summary): "
            "validate again"
        ),
    ),
    "starts_failed": Reason(
        "validate",
        _VALIDATE_STARTS,
        N_(
            "only {ready} of {requested} starts in {run} became ready: the start is not stable "
            "yet; read the failed start's diagnosis in the run, fix it, then validate again"
        ),
    ),
    "compared_endpoint_failed": Reason(
        "validate",
        _VALIDATE,
        N_(
            "in {run} the compared endpoint {url} did not pass: the two environments do not "
            "behave the same yet; find out why before going on"
        ),
    ),
    # --- the baseline after, and the comparison ----------------------------------------------
    "baseline_after": Reason(
        "baseline_capture",
        _CAPTURE,
        N_(
            "the validation {run} passed after the change: save the node's state after it, to "
            "compare with baseline {before}"
        ),
    ),
    "compare": Reason(
        "baseline_compare",
        _COMPARE,
        N_(
            "baselines {before} and {after} are saved: compare them; the driver moving to the "
            "target is expected, anything else that changed is a regression"
        ),
    ),
    "compare_outdated": Reason(
        "baseline_compare",
        _COMPARE,
        N_("the comparison {comparison} is not of baselines {before} and {after}: compare again"),
    ),
    "regression": Reason(
        "rollback",
        _CAPTURE,
        N_(
            "the comparison {comparison} found {count} regression(s) ({checks}): the change "
            "disturbed what it must leave alone; roll back by the plan's procedure or fix it, "
            "then capture the node again and compare"
        ),
    ),
    # --- record, review ----------------------------------------------------------------------
    "record": Reason(
        "record",
        _RECORD,
        N_(
            "{path}: the validation {run} passed; after the observation period, write the "
            "decision record (adopted path, verified and unverified scope, rollback conditions, "
            "re-evaluation date)"
        ),
    ),
    "record_outdated": Reason(
        "record",
        _RECORD,
        N_("the record {record} is older than {newer}: write it again on the newest evidence"),
    ),
    "review_due": Reason(
        "review",
        _RECORD_CHECK,
        N_(
            "the decision record's review date {date} has come: check its triggers (an official "
            "image for the host's CUDA, the model's support in a stable vLLM release) and decide "
            "again"
        ),
    ),
    # --- report, and after it ----------------------------------------------------------------
    "report": Reason(
        "report",
        _REPORT,
        N_(
            "every step before it has its artifact: write the report for the approvers (one "
            "offline HTML page; --pdf prints it too)"
        ),
    ),
    "report_outdated": Reason(
        "report",
        _REPORT,
        N_("report.html is older than {newer}: write it again"),
    ),
    "review_scheduled": Reason(
        "review",
        _RECORD_CHECK,
        N_(
            "the case is complete; the decision is due for review on {date}, or earlier when "
            "one of its triggers fires"
        ),
    ),
    "done": Reason(
        "done",
        N_("attach the case folder {case} (with report.html) to the ticket"),
        N_("the case is complete: every step of the runbook has its artifact"),
    ),
}

NOTES: dict[str, str] = {
    "unreadable": N_(
        "{path} cannot be read ({error}); the next step is worked out without it: make it again, "
        "or upgrade vllm-triage if a newer one wrote it"
    ),
}
"""Sentences said after the reason."""
