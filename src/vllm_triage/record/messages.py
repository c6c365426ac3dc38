"""Every sentence and label of `record` and `record check` that is not knowledge data, in one
place and in the `record` gettext domain.

A record stores the key of the sentence behind each judgement (BASIS) and the values that fill
it; the renderers (vllm_triage.render.record) translate the sentence and fill it when shown. The
prompts and the texts a record stores whole (the re-evaluation date's trigger name) are the
English message ids."""

from __future__ import annotations

from vllm_triage.i18n import N_

# --- the prompt (interactive runs only) -----------------------------------------------------------
ASK_MAINTENANCE = N_(
    "Is the maintenance burden of the new environment's driver and dependencies acceptable?"
)
ASK_APPROVAL = N_("Are the rollback package and the change approval ready?")
ASK_NAME = N_("Who answers (your name, recorded with the answers)?")

# --- the verified scope ---------------------------------------------------------------------------
SCOPE_NAMES = {
    "model_load": N_("Model load (engine initialisation)"),
    "short_text": N_("Short text request"),
    "long_context": N_("Long context (near the target)"),
    "image": N_("Image input"),
    "tool_calls": N_("Agent tool calls"),
    "structured_output": N_("Structured output"),
    "concurrency": N_("Concurrency ramp"),
    "multi_node": N_("Multi-node communication"),
}

# --- the four comparisons -------------------------------------------------------------------------
QUESTIONS = {
    "start_failure_recurs": N_("Does the start failure recur?"),
    "prefix_cache_hits": N_("Does prefix caching hit on an identical prefix?"),
    "tool_calls_correct": N_("Are tool calls and structured output correct?"),
    "maintenance_acceptable": ASK_MAINTENANCE,
}

TRIGGER_DATE = N_("The re-evaluation date is reached")

# --- why each judgement came out as it did (key -> sentence, filled with the stored fields) -------
BASIS = {
    # scope
    "scope_passed": N_("Passed in {run}."),
    "scope_failed": N_("Failed in {run}: {reason}"),
    "scope_not_supported": N_("Not supported by the server in {run}: {reason}"),
    "scope_skipped": N_("Skipped in {run}: {reason}"),
    "scope_not_climbed": N_("No run climbed this rung."),
    "starts_ready": N_(
        "{ready} of {requested} starts reached /health on {node} in {run}; engine initialisation "
        "{init}."
    ),
    "starts_failed": N_(
        "{ready} of {requested} starts reached /health on {node} in {run}; start {number} "
        "ended: {outcome}."
    ),
    # does the start failure recur
    "recurs_same_cause": N_(
        "Start {number} in {run} failed again with {cause}, the diagnosed cause."
    ),
    "recurs_other_cause": N_(
        "Start {number} in {run} failed with {other}, not with the diagnosed {cause}."
    ),
    "recurs_starts_ready": N_(
        "{ready} of {requested} starts in {run} reached /health: the diagnosed {cause} did not "
        "come back."
    ),
    "recurs_served": N_(
        "The server answered in {run}, made after the diagnosis; no start was timed "
        "(validate --start-cmd FILE --starts N times them)."
    ),
    "recurs_no_run": N_(
        "No run after the diagnosis: whether the start failure recurs is not known "
        "(validate --start-cmd FILE --starts N on the changed node)."
    ),
    "recurs_no_failure": N_("The diagnosis found no start failure ({cause})."),
    # prefix caching
    "prefix_hits": N_(
        "{hits} of {queries} prompt tokens hit the prefix cache in {run} (rate {rate}); time "
        "to first token {first} s the first time, {repeats} s repeated."
    ),
    "prefix_no_hits": N_("No prefix-cache hit on an identical prefix in {run}: {reason}"),
    "prefix_not_measured": N_("Not measured in {run}: {reason}"),
    "prefix_no_run": N_("No run measured prefix caching on an identical prefix (same_prefix)."),
    # tool calls and structured output
    "tools_correct": N_(
        "In {run}: tool calls {tool_valid} of {tool_requests} valid ({mode} tools), structured "
        "output {so_valid} of {so_requests} valid, no format errors."
    ),
    "tools_errors": N_(
        "Format errors in {run}: tool calls {tool_valid} of {tool_requests} valid, {tool_errors} "
        "format errors; structured output {so_valid} of {so_requests} valid, {so_errors} format "
        "errors."
    ),
    "tools_failed": N_(
        "{rung} failed in {run}: {reason} (tool calls {tool_valid} of {tool_requests} valid, "
        "structured output {so_valid} of {so_requests} valid, no format errors)."
    ),
    "tools_partial": N_(
        "Only part was checked in {run}: tool calls {tool_valid} of {tool_requests} valid, "
        "structured output {so_valid} of {so_requests} valid."
    ),
    "tools_no_run": N_("No run checked tool calls or structured output."),
    # asked
    "maintenance_yes": N_("{by} answered that the maintenance burden is acceptable ({when})."),
    "maintenance_no": N_("{by} answered that the maintenance burden is not acceptable ({when})."),
    "maintenance_not_asked": N_(
        "Not answered: give --maintenance-acceptable or --maintenance-not-acceptable with "
        "--answered-by NAME."
    ),
    # widening conditions
    "init_repeated": N_(
        "{ready} of {requested} starts ready on {node} in {run}; engine initialisation {init}."
    ),
    "init_failed": N_(
        "{ready} of {requested} starts ready on {node} in {run}; start {number} ended: {outcome}."
    ),
    "init_once": N_(
        "Only one start was timed in {run}: repeat it (validate --start-cmd FILE --starts N, N "
        "of 2 or more)."
    ),
    "validated_on": N_("{run}: node {node}, driver {driver} (baseline {baseline})."),
    "validated_no_run": N_(
        "No validation run: vllm-triage validate URL --node NAME on the node, after "
        "vllm-triage baseline capture there."
    ),
    "run_node_unknown": N_(
        "{run} names no node, so it proves nothing about the plan's node ({nodes}): run it "
        "there with vllm-triage validate --node NAME, after vllm-triage baseline capture on "
        "that node."
    ),
    "run_other_node": N_(
        "{run} ran on {node}, not on the plan's node ({nodes}): it is no evidence for that "
        "node. Validate there (vllm-triage validate --node NAME)."
    ),
    "run_driver_unknown": N_(
        "{run} ran on {node}, but the case holds no baseline of that node, so its driver is not "
        "known: capture one there (vllm-triage baseline capture --label LABEL), then validate "
        "again with --node {node}."
    ),
    "run_driver_below_floor": N_(
        "{run} ran on {node} with driver {driver}, below {floor}, the minimum the image needs to "
        "start: it is no evidence for the planned driver."
    ),
    "init_no_run": N_(
        "No run timed the engine's starts (validate --start-cmd FILE --starts N on the isolated "
        "node)."
    ),
    "regression_none": N_(
        "No regression between {before} and {after} ({expected} expected changes)."
    ),
    "regression_found": N_("{regressions} regressions between {before} and {after}: {checks}."),
    "regression_no_endpoint": N_(
        "No regression of the node between {before} and {after}, but no existing model's "
        "request was compared: capture both baselines with --endpoint URL of a model already "
        "serving (vllm-triage baseline capture --label LABEL --endpoint URL), then compare."
    ),
    "regression_no_comparison": N_(
        "No baseline comparison in the case (vllm-triage baseline compare BEFORE AFTER)."
    ),
    "requests_passed": N_(
        "Short text and target context passed in {run} ({tokens} prompt tokens at the target)."
    ),
    "requests_failed": N_("{rung} failed in {run}: {reason}"),
    "requests_no_run": N_("No run climbed both short_text and target_context."),
    "communication_passed": N_(
        "The multi_node rung passed in {run}; the baseline comparison shows no communication "
        "regression."
    ),
    "communication_passed_no_baseline": N_(
        "The multi_node rung passed in {run}; no baseline comparison to check the fabric against."
    ),
    "communication_failed": N_("The multi_node rung failed in {run}: {reason}"),
    "communication_regression": N_(
        "The baseline comparison shows a communication regression: {checks}."
    ),
    "communication_no_run": N_("No run climbed the multi_node rung."),
    "approval_ready": N_(
        "{by} answered that the rollback package and the change approval are ready ({when}); "
        "rollback driver {driver}."
    ),
    "approval_not_ready": N_(
        "{by} answered that the rollback package and the change approval are not ready ({when})."
    ),
    "approval_not_asked": N_(
        "Not answered: give --approval-ready or --approval-not-ready with --answered-by NAME; "
        "rollback driver {driver} (the before baseline)."
    ),
    "no_check": N_("record.yaml has no check for this condition: judge it by hand."),
    # notes
    "note_adopted_differs": N_(
        "The adopted path differs from the plan's recommendation ({recommended}): the reason "
        "shown is the plan's reason against the adopted path."
    ),
    "note_no_recipe": N_(
        "No recipe is known for this case (give --recipe NAME): only the re-evaluation date is "
        "watched."
    ),
    "note_run_unfinished": N_("{run} has no summary.json (a run that did not finish): not read."),
    "note_plan_other_diagnosis": N_(
        "The plan was made for another diagnosis ({planned}) than the current one ({current}): "
        "plan again."
    ),
    # record check
    "date_due": N_("The re-evaluation date {date} has come (today is {today})."),
    "date_not_due": N_("The re-evaluation date is {date} (today is {today})."),
    "tag_found": N_("{registry} lists {count} tags of {repository} that meet it: {tags}."),
    "tag_not_found": N_("{registry} lists {read} tags of {repository}; none meets it."),
    "tag_unknown": N_("{registry} could not be read: {error}"),
}

# --- labels of the renderings ---------------------------------------------------------------------
TITLE = N_("Decision record")
ADOPTED = N_("Adopted path")
FOLLOWS_PLAN = N_("the plan's recommendation")
DIFFERS_FROM_PLAN = N_("not the plan's recommendation ({recommended})")
REASON = N_("Reason")
OTHER_REASONS = N_("Also")
THEIR_WORDS = N_("In the team's words")
TIME_AVAILABLE = N_("Time available")
VALIDATED_ON = N_("Validated on")
DRIVER_CHANGE = N_("Driver")
DRIVER_CHANGE_LINE = N_(
    "{installed} → {target}; the image starts from {floor} (its toolkit's driver {toolkit}); "
    "rollback to {rollback}"
)
VALIDATED_GPUS = N_("{gpus}x {model}")
VALIDATED_IMAGE = N_("image {image}")
IMAGE_NOT_NAMED = N_("image not named (vllm-triage validate --image REF)")
NOT_TIED = N_("not established: {why}")
WINDOW_YES = N_("a maintenance window is available")
WINDOW_NO = N_("no maintenance window")
WINDOW_UNKNOWN = N_("maintenance window not known")
CLUSTER_YES = N_("the shared cluster can change today")
CLUSTER_NO = N_("the shared cluster cannot change today")
CLUSTER_UNKNOWN = N_("whether the shared cluster can change today is not known")
DEADLINE = N_("Recovery deadline")
HOURS = N_("{hours} h")
NONE_GIVEN = N_("none given")
MAINTAIN = N_("Ability to maintain dependencies")
MAINTAIN_YES = N_("the team can keep a custom build reproducible")
MAINTAIN_NO = N_("the team cannot keep a custom build reproducible")
MAINTAIN_UNKNOWN = N_("not known")
VERIFIED = N_("Verified scope")
UNVERIFIED = N_("Unverified scope")
SCOPE = N_("Scope")
STATUS = N_("Status")
EVIDENCE = N_("Evidence")
FIGURES = N_("Figures")
COMPARED_WITH = N_("compared with {url}: {status}")
COMPARISONS = N_("Comparisons")
QUESTION = N_("Question")
ANSWER = N_("Answer")
WIDENING = N_("Conditions to widen")
CONDITION = N_("Condition")
ROLLBACK = N_("Rollback conditions")
ROLLBACK_PROCEDURE = N_("Rollback procedure (from the plan)")
TARGETS = {
    "driver": N_("Driver"),
    "image": N_("Image"),
    "nodes": N_("Node assignment"),
}
REVIEW = N_("Re-evaluation")
REVIEW_DATE = N_("Re-evaluate on {date} ({days} days), or earlier when a trigger below is met.")
TRIGGERS = N_("Triggers")
WATCH = N_("watch {repository} at {registry}: {what}")
WATCH_TAGS = N_("tags {tags}")
WATCH_PATTERN = N_("tags matching {pattern} from version {version}")
WATCH_PATTERN_ANY = N_("tags matching {pattern}")
SOURCE = N_("source: {source} (as of {as_of}, certainty {certainty})")
NOTES = N_("Notes")
BASED_ON = N_("Based on")
DIAGNOSIS_LINE = N_("diagnosis {artifact}: {cause} ({phase})")
PLAN_LINE = N_("plan {artifact}, recommended {path}")
RUNS_LINE = N_("{count} validation runs")
RECIPE_LINE = N_("recipe {recipe}")
STATUSES = {
    "verified": N_("verified"),
    "failed": N_("failed"),
    "not_verified": N_("not verified"),
    "met": N_("met"),
    "not_met": N_("not met"),
    "unknown": N_("unknown"),
    "yes": N_("yes"),
    "no": N_("no"),
}
# record check
CHECK_TITLE = N_("Decision record: review check")
DUE = N_("Due for review")
NOT_DUE = N_("Not due for review")
DUE_LINE = N_("The decision ({path}, recorded {recorded}) is due for review: {reasons}.")
NOT_DUE_LINE = N_("The decision ({path}, recorded {recorded}) is not due for review before {date}.")
UNKNOWN_TRIGGERS = N_(
    "Not checked ({count}): {names}. A trigger that could not be checked does not make the "
    "decision due; the check exits 4 so that a scheduled run learns it checked less than the "
    "record asks."
)
TRIGGER = N_("Trigger")
