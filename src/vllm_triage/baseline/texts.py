"""Every sentence `baseline` shows people, in one place (the `baseline` gettext domain): the
comparison's findings by (check, kind), and the labels of the rendered output. English is the
message id; render/baseline.py translates them with the reader's catalog and fills the fields.
"""

from __future__ import annotations

from vllm_triage.i18n import N_

# (check, kind) -> the finding's sentence; fields: {subject}, {before}, {after}.
FINDINGS: dict[tuple[str, str], str] = {
    ("driver", "expected"): N_("The driver moved from {before} to {after}, as planned."),
    ("driver", "regression"): N_(
        "The driver is {after} (it was {before}), not the target {subject}."
    ),
    ("driver", "same"): N_("The driver is unchanged ({after})."),
    ("driver_downgrade", "regression"): N_(
        "The driver went down from {before} to {after}: a change must not lower it."
    ),
    ("driver_minimum", "regression"): N_(
        "The driver is {after} (it was {before}), below {subject}, the minimum the plan says the "
        "image needs."
    ),
    ("driver_below_target", "expected"): N_(
        "The driver moved from {before} to {after}: it meets the minimum the image needs, below "
        "the plan's recommended target {subject} (enough to run; move to the target when "
        "convenient)."
    ),
    ("driver_up", "expected"): N_(
        "The driver moved up from {before} to {after} (no plan or --expect-driver to judge it "
        "against)."
    ),
    ("driver", "not_compared"): N_("The driver version is missing from one of the baselines."),
    ("cuda_ceiling", "expected"): N_(
        "The CUDA version the driver supports moved with it, from {before} to {after}."
    ),
    ("cuda_ceiling", "changed"): N_(
        "The CUDA version the driver supports changed from {before} to {after}."
    ),
    ("cuda_ceiling", "same"): N_("The CUDA version the driver supports is unchanged ({after})."),
    ("library_mismatch", "regression"): N_(
        "The kernel module and the user-space driver are out of step ({after}): reboot the node "
        "before it takes work."
    ),
    ("kernel", "regression"): N_("The kernel changed from {before} to {after}."),
    ("kernel", "same"): N_("The kernel is unchanged ({after})."),
    ("kernel", "not_compared"): N_("The kernel version is missing from one of the baselines."),
    ("os_release", "regression"): N_("The OS release changed from {before} to {after}."),
    ("nvidia_module", "regression"): N_("The kernel module {subject} is no longer loaded."),
    ("nvidia_module", "changed"): N_("The kernel module {subject} is loaded now."),
    ("gpu_count", "regression"): N_("The node has {after} GPUs; it had {before}."),
    ("gpu_count", "same"): N_("{after} GPUs, as before."),
    ("gpu_count", "not_compared"): N_("The GPU list is missing from one of the baselines."),
    ("gpu_name", "regression"): N_("GPU {subject} is now {after}; it was {before}."),
    ("gpu_memory", "regression"): N_(
        "GPU {subject} has {after} MiB of memory; it had {before} MiB."
    ),
    ("gpu_memory", "same"): N_("Every GPU's memory is unchanged."),
    ("ecc", "regression"): N_(
        "GPU {subject}: uncorrectable ECC errors rose from {before} to {after}."
    ),
    ("ecc", "same"): N_("No GPU's uncorrectable ECC errors or retired pages rose."),
    ("retired_pages", "regression"): N_(
        "GPU {subject}: retired memory pages rose from {before} to {after}."
    ),
    ("remapped_rows", "regression"): N_(
        "GPU {subject} has a memory row remapping pending: reset the GPU before it takes work."
    ),
    ("mig_mode", "regression"): N_("GPU {subject}: MIG mode changed from {before} to {after}."),
    ("persistence_mode", "changed"): N_(
        "GPU {subject}: persistence mode changed from {before} to {after}."
    ),
    ("gpu_jobs", "changed"): N_("GPU jobs: {before} before, {after} now."),
    ("gpu_jobs", "same"): N_("GPU jobs: {after}, as before."),
    ("container_engine", "regression"): N_(
        "The container engine changed from {before} to {after}."
    ),
    ("container_engine", "same"): N_("The container engine is unchanged ({after})."),
    ("container_engine", "not_compared"): N_(
        "The container engine version is missing from one of the baselines."
    ),
    ("toolkit", "regression"): N_("The NVIDIA Container Toolkit changed from {before} to {after}."),
    ("toolkit", "same"): N_("The NVIDIA Container Toolkit is unchanged ({after})."),
    ("toolkit", "not_compared"): N_(
        "The NVIDIA Container Toolkit version is missing from one of the baselines."
    ),
    ("container_cli", "regression"): N_("libnvidia-container changed from {before} to {after}."),
    ("container_cli", "same"): N_("libnvidia-container is unchanged ({after})."),
    ("nvidia_runtime", "regression"): N_(
        "The nvidia runtime is no longer registered with the container engine."
    ),
    ("nvidia_runtime", "changed"): N_("The nvidia runtime is registered with the engine now."),
    ("default_runtime", "regression"): N_(
        "The default container runtime changed from {before} to {after}."
    ),
    ("cdi_spec", "regression"): N_("The CDI spec {subject} is gone."),
    ("cdi_spec", "changed"): N_("The CDI spec {subject} is new."),
    ("device_node", "regression"): N_("The device file {subject} is gone."),
    ("device_permissions", "regression"): N_(
        "{subject}: permissions changed from {before} to {after}."
    ),
    ("nccl_version", "regression"): N_("NCCL changed from {before} to {after}."),
    ("nccl_version", "same"): N_("NCCL is unchanged ({after})."),
    ("nccl_version", "not_compared"): N_(
        "The NCCL version is missing from one of the baselines (capture with --container or "
        "--log of the existing model)."
    ),
    ("nccl_transport", "regression"): N_("NCCL's transport changed from {before} to {after}."),
    ("nccl_transport", "same"): N_("NCCL's transport is unchanged ({after})."),
    ("rdma_device", "regression"): N_("The RDMA device {subject} is gone."),
    ("rdma_device", "changed"): N_("The RDMA device {subject} is new."),
    ("rdma_device", "same"): N_("All {after} RDMA devices are still there."),
    ("rdma_device", "not_compared"): N_(
        "RDMA devices: no RDMA tool (ibv_devinfo, ibstat) answered in one of the baselines."
    ),
    ("rdma_port", "regression"): N_("The RDMA port {subject} went from {before} to {after}."),
    ("rdma_port", "changed"): N_("The RDMA port {subject} changed from {before} to {after}."),
    ("interface", "regression"): N_("The network interface {subject} is gone."),
    ("interface", "changed"): N_("The network interface {subject} is new."),
    ("interface", "same"): N_("All {after} network interfaces are still there."),
    ("interface_state", "regression"): N_(
        "The network interface {subject} went from {before} to {after}."
    ),
    ("interface_mtu", "changed"): N_(
        "The network interface {subject}: MTU changed from {before} to {after}."
    ),
    ("endpoint", "regression"): N_("The existing model's short request fails now: {after}."),
    ("endpoint", "changed"): N_(
        "The existing model answers now ({after}); it failed before ({before})."
    ),
    ("endpoint", "same"): N_("The existing model answered in {after} (before: {before})."),
    ("endpoint", "not_compared"): N_(
        "The short request was not made in both baselines (capture both with --endpoint)."
    ),
    ("endpoint_failing", "same"): N_(
        "The existing model's short request failed in both baselines (now: {after})."
    ),
    ("endpoint_slower", "regression"): N_(
        "The existing model's short request is much slower: {after}, against {before} before."
    ),
}

KINDS: dict[str, str] = {
    "expected": N_("expected"),
    "regression": N_("regression"),
    "changed": N_("changed"),
    "same": N_("same"),
    "not_compared": N_("not compared"),
}

# Labels of the rendered output.
BASELINE_TITLE = N_("Baseline {label}")
COMPARISON_TITLE = N_("Baseline comparison: {before} → {after}")
VERDICT_REGRESSION = N_("{count} regression(s): do not widen the change until each is explained.")
VERDICT_OK = N_("No regression: only the expected change ({expected} finding(s)).")
COUNTS = N_("{regressions} regression(s), {expected} expected, {changed} changed")
TARGET = N_("target driver: {target}")
NO_TARGET = N_("no --expect-driver given: any driver change is taken as the planned one")
COLUMN_KIND = N_("kind")
COLUMN_CHECK = N_("check")
COLUMN_FINDING = N_("finding")
COLUMN_ITEM = N_("item")
COLUMN_VALUE = N_("value")
COLUMN_PROBE = N_("probe")
COLUMN_STATUS = N_("status")
COLUMN_SECONDS = N_("seconds")
COLUMN_NOTES = N_("reason / notes")
LABEL_NODE = N_("node")
LABEL_DRIVER = N_("driver")
LABEL_GPUS = N_("GPUs")
LABEL_GPU_JOBS = N_("GPU jobs")
LABEL_KERNEL = N_("kernel")
LABEL_ENGINE = N_("container engine")
LABEL_TOOLKIT = N_("NVIDIA Container Toolkit")
LABEL_NCCL = N_("NCCL")
LABEL_TRANSPORT = N_("NCCL transport")
LABEL_RDMA = N_("RDMA devices")
LABEL_INTERFACES = N_("network interfaces")
LABEL_ENDPOINT = N_("short request")
LABEL_FOLDER = N_("folder")
LABEL_FILES = N_("raw outputs")
LABEL_REDACTED = N_("redacted")
LABEL_NEXT = N_("next")
UNKNOWN = N_("unknown")
NOT_ASKED = N_("not asked (--endpoint)")
ENDPOINT_OK = N_("{seconds} s, {model}: {answer}")
ENDPOINT_FAILED = N_("failed: {error}")
NEXT_CAPTURE = N_(
    "after the change: vllm-triage baseline capture --label AFTER, then vllm-triage baseline "
    "compare {label} AFTER"
)
NEXT_COMPARE = N_("vllm-triage baseline compare {before} {after}")
PROBES_TITLE = N_("probes")
FINDINGS_TITLE = N_("findings")

KEPT_IN_HISTORY = N_(
    "Kept in history only: it compares {before} with {after}, not the node before the change; "
    "the current comparison ({current_before} -> {current_after}) stays what the runbook and the "
    "record read."
)

# Where the NCCL version or transport was read (Communication.nccl_version_source and
# nccl_transport_source): baseline capture and the communication probe keep it in English, the
# rows say it through the catalog.
LOG_SOURCE = N_("log {name}")
CONTAINER_LOG_SOURCE = N_("the container's log")
SETTINGS_SOURCE = N_("settings and RDMA ports")
IMAGE_ENV_SOURCE = N_("image env NCCL_VERSION")
NCCL_SOURCES = (LOG_SOURCE, CONTAINER_LOG_SOURCE, SETTINGS_SOURCE, IMAGE_ENV_SOURCE)
