"""Why a probe found no evidence: the reasons it records (a bundle's manifest, a baseline), as
message templates.

The artifacts keep the reason in English, filled in; a rendering in Korean or Japanese finds its
template again and says it with the same values (vllm_triage.i18n.Catalog.composed), so a bundle
written before these templates existed reads the same. A reason made of none of them (a
command's own error line) is shown as it is."""

from __future__ import annotations

from vllm_triage.i18n import N_

# a command of the allow-list (collect/runner.py)
NOT_INSTALLED = N_("{program} is not installed (not on PATH)")
NOT_RUN = N_("`{command}` was not run: collect is stopping")
DID_NOT_FINISH = N_("`{command}` did not finish within {seconds} s")
EXITED = N_("`{command}` exited {code}")
EXITED_SAYING = N_("`{command}` exited {code}: {error}")
# a probe's own
NO_ENGINE = N_("neither docker nor podman is installed")
JSON_TOO_LARGE = N_("`{command}` did not print JSON of a usable size ({size} bytes)")
NOT_JSON = N_("`{command}` did not print JSON ({reason})")
IMAGE_NO_JSON = N_("the image probe printed no JSON line")
IMAGE_NOT_ASKED = N_("not asked (--probe-image); the image CUDA comes from the image config")
IMAGE_NEEDS = N_("--probe-image needs --image or --container")
IMAGE_NEEDS_NOTES = N_("--probe-image needs --image or --container; {notes}")
NO_SUCH_CONTAINER = N_("{engine} inspect {container}: no such container in its answer")
NO_CONTAINER_STACK = N_("no container engine, no Container Toolkit, no runtime config")
NO_MODEL = N_("no --model-path and no model in a launch command")
XML_UNREADABLE = N_("nvidia-smi -q -x printed XML that does not parse ({error})")
XML_NOT_SMI = N_("nvidia-smi -q -x printed <{tag}>, not <nvidia_smi_log>")
NO_NVIDIA_SMI = N_("nvidia-smi is not installed and /proc/driver/nvidia/version is absent")
NOT_A_POD = N_("kubectl get pod {pod}: the answer is not a Pod")
NO_POD = N_("no --pod given")
NO_LOG = N_("no --log given")
NO_ANSWER = N_("no answer within {seconds} s")

REASONS: tuple[str, ...] = (
    NOT_INSTALLED, NOT_RUN, DID_NOT_FINISH, EXITED, EXITED_SAYING, NO_ENGINE, JSON_TOO_LARGE,
    NOT_JSON, IMAGE_NO_JSON, IMAGE_NOT_ASKED, IMAGE_NEEDS, IMAGE_NEEDS_NOTES, NO_SUCH_CONTAINER,
    NO_CONTAINER_STACK, NO_MODEL, XML_UNREADABLE, XML_NOT_SMI, NO_NVIDIA_SMI, NOT_A_POD, NO_POD,
    NO_LOG, NO_ANSWER,
)  # fmt: skip
"""Every template a probe's reason is made from (what a rendering looks its reasons up in)."""
