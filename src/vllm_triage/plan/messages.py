"""Every sentence and label of `plan` that is not knowledge data, in one place and in the `plan`
gettext domain: the prompts, the assumptions and notes a plan stores (English, as the message
id), the order of the paths, and the labels its renderings use (vllm_triage.render.plan).

They carry no {fields} when a plan stores them, so the stored English is the message id and a
renderer translates it with one lookup; labels with fields are filled when shown."""

from __future__ import annotations

from vllm_triage.i18n import N_

# --- the short prompt (interactive runs only) ----------------------------------------------------
ASK_WINDOW = N_("Is a maintenance window available for the driver change?")
ASK_CLUSTER = N_("Can the shared cluster change today?")
ASK_DEADLINE = N_("Recovery deadline in hours (leave empty for none)")
ASK_BUILD = N_(
    "Can the team keep a custom build reproducible (pinned build script, PyTorch, FlashInfer, "
    "vLLM commit, security updates)?"
)
ASK_DEADLINE_AGAIN = N_("Give a number of hours, or leave it empty.")

# --- assumptions: a constraint nobody gave, planned conservatively --------------------------------
ASSUME_NO_WINDOW = N_(
    "Whether a maintenance window is available was not given: planned as if there is none."
)
ASSUME_CLUSTER_FIXED = N_(
    "Whether the shared cluster can change today was not given: planned as if it cannot."
)
ASSUME_NO_DEADLINE = N_("No recovery deadline was given: planned as if there is no urgent one.")
ASSUME_NO_BUILD = N_(
    "Whether the team can keep a custom build reproducible was not given: planned as if it cannot."
)
ASSUME_GPU_UNKNOWN = N_(
    "The GPU model is not known (no bundle and no --gpu): planned as if it is not a data-center "
    "GPU, so forward compatibility is not offered."
)
ASSUME_GPU_NOT_IN_TABLE = N_(
    "The GPU is not in the knowledge base's GPU table: planned as if it is not a data-center GPU, "
    "so forward compatibility is not offered."
)
ASSUME_DRIVER_UNKNOWN = N_(
    "The host driver is not known (no bundle, no --driver, no compatibility verdict in the "
    "diagnosis): the plan cannot compare it with the minimum."
)
ASSUME_CUDA_UNKNOWN = N_(
    "The image's CUDA is not known (the diagnosis has no compatibility verdict and there is no "
    "bundle): diagnose again with the image (--image, --image-config or --image-cuda) for the "
    "exact driver minimum."
)

# --- notes ---------------------------------------------------------------------------------------
NOTE_THRESHOLD_NEXT = N_(
    "A driver threshold stands among the other findings: once this cause is fixed, the driver "
    "will stop this image next. Diagnose and plan again after the fix."
)
NOTE_ALREADY_MET = N_(
    "By the knowledge base's tables the installed driver already meets the image's minimum: "
    "check that the container sees the host's driver (library mismatch, a compat folder on the "
    "library path) before planning a driver change."
)
NOTE_BUNDLE_DRIVER_DIFFERS = N_(
    "The newest bundle's driver differs from the one the diagnosis used: the plan follows the "
    "diagnosis; diagnose again if the bundle is the newer evidence."
)
NOTE_GIVEN_OVER_CASE = N_(
    "The driver or GPU given on the command line differs from the case's evidence: the plan uses "
    "the values given."
)
NOTE_NOT_THRESHOLD = N_(
    "The diagnosis is not a driver threshold, so the team's constraints do not change the path: "
    "the driver stays as it is."
)

# --- the order of the paths ----------------------------------------------------------------------
WHEN_NOW = N_("now")
WHEN_TODAY_ONE_NODE = N_("today, on one isolated node without service traffic first")
WHEN_IN_WINDOW = N_("in the maintenance window, one isolated node first")
WHEN_UNTIL_WINDOW = N_("now, until the maintenance window")
WHEN_NEXT_WINDOW_EVIDENCE = N_(
    "in the next maintenance window, with the isolated environment's results as evidence for the "
    "approval"
)
WHEN_NEXT_WINDOW_REMOVE_COMPAT = N_(
    "in the next maintenance window; then remove the compat package"
)
WHEN_NEXT_WINDOW_RETIRE_BUILD = N_("in the next maintenance window; then retire the custom build")
WHEN_AFTER_ISOLATED_TEMPORARY = N_(
    "once the isolated environment has validated the application, if the deadline needs it: "
    "a temporary bypass with an end date"
)
WHEN_AFTER_FIX = N_("after this fix, if the driver threshold stops the image next")

# --- labels of the renderings --------------------------------------------------------------------
TITLE = N_("Recovery plan")
RECOMMENDED = N_("Recommended")
WHY = N_("Why")
CAVEATS = N_("Caveats")
ALTERNATIVES = N_("Alternatives")
PATH = N_("Path")
WHY_NOT = N_("Why not")
ORDER = N_("Order")
STEPS = N_("Steps")
DIAGNOSIS = N_("Diagnosis")
CAUSE_LINE = N_("{cause} (phase {phase}, confidence {confidence})")
DRIVER_THRESHOLD = N_("Driver threshold")
YES = N_("yes")
NO = N_("no")
UNKNOWN = N_("unknown")
DRIVER_TARGET = N_("Driver target")
INSTALLED = N_("Installed")
MINIMUM = N_("Minimum driver (to start)")
MINIMUM_FAMILY = N_("{driver} ({branch}: CUDA {major}.x minor-version compatibility)")
TOOLKIT = N_("Toolkit's driver")
TOOLKIT_LINE = N_("{driver} (the {release} toolkit's; PTX JIT and the newest features need it)")
TOOLKIT_FLOOR = N_("{driver} or newer (the {release} toolkit's, an earlier update: a floor)")
TARGET = N_("Recommended target")
TARGET_LINE = N_("{release} ({branch}, long-term branch, end of life {eol})")
TARGET_BRANCH_ONLY = N_("the newest release of {branch}")
AS_OF = N_("as of {date}, certainty {certainty}")
IMAGE_CUDA = N_("Image CUDA")
FORWARD_COMPAT = N_("Forward compatibility")
POSSIBLE = N_("possible")
NOT_POSSIBLE = N_("not possible")
PACKAGE = N_("Package")
SUPPORTED_BASES = N_("Supported base branches")
INSTALLED_BRANCH = N_("Installed branch")
DATACENTER_GPU = N_("Data-center GPU")
FLOW = N_("Flow")
VALIDATE_WITH = N_("Prove it with the validate rungs")
DO_NOT = N_("Do not")
BASELINE = N_("Baseline to save")
NOW = N_("Now")
STAGED_ORDER = N_("Staged order")
ROLLBACK = N_("Rollback")
RISKS_OF = N_("Risks: {path}")
WIDEN_WHEN = N_("Widen only when")
CHANGE_RECORD = N_("Change record")
PIN = N_("A custom build pins")
REPRODUCE = N_("Reproducibility check")
RECHECK = N_("Re-check before the change")
CONSTRAINTS = N_("Constraints")
MAINTENANCE_WINDOW = N_("Maintenance window")
CLUSTER_CAN_CHANGE = N_("Shared cluster can change today")
DEADLINE = N_("Recovery deadline")
HOURS = N_("{hours} h")
NONE_GIVEN = N_("none given")
CAN_MAINTAIN_BUILD = N_("Team can maintain a custom build")
GPU = N_("GPU")
DRIVER = N_("Driver")
TARGET_NODES = N_("Target nodes")
EXCLUDED_NODES = N_("Excluded nodes")
ASKED = N_("answered at the prompt")
ASSUMPTIONS = N_("Assumptions")
NOTES = N_("Notes")
NODE = N_("Node")

# Knowledge values shown with a word for people: how sure a fact is, what a driver branch is.
CERTAINTY = {
    "primary": N_("primary: read in the vendor's own documents"),
    "secondary": N_("secondary: seen in public logs or quotes"),
    "inferred": N_("inferred"),
    "memory": N_("from memory, not verified"),
}
BRANCH_TYPE = {
    "ltsb": N_("long-term support branch"),
    "production": N_("production branch"),
    "new_feature": N_("New Feature Branch"),
    "developer": N_("developer branch"),
    "unknown": N_("branch type unknown"),
}
