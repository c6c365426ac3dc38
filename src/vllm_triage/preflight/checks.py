"""Each preflight check: facts in, one PreflightCheck out (a message of one line, and for a
failure what to do). The rules come from the knowledge base (driver / CUDA, GPU table, recipes)
and limits.yaml; the code here only compares."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from vllm_triage.diagnose.threshold import check_compat
from vllm_triage.errors import InputError
from vllm_triage.inputs import display_name
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.knowledge.schema import Recipe, RecipeFlag, RecipeProfile
from vllm_triage.launch import LaunchArgs, parse_launch_command
from vllm_triage.preflight.host import HostGpus, RuntimeView
from vllm_triage.preflight.image_facts import ImageFacts
from vllm_triage.preflight.limits import Limits
from vllm_triage.preflight.models import PreflightCheck, Severity
from vllm_triage.versions import DriverVersion

GIB = 1024**3
MAX_MODEL_ENTRIES = 10_000
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")


def _line(text: str) -> str:
    return " ".join(text.split())


def passed(check_id: str, message: str, severity: Severity = "error") -> PreflightCheck:
    """A check that passed; `severity` is what its failure would have meant."""
    return PreflightCheck(id=check_id, ok=True, severity=severity, message=_line(message))


def failed(
    check_id: str, message: str, fix: str | None = None, severity: Severity = "error"
) -> PreflightCheck:
    """A check that failed: an error stops the start, a warning is said and lets it go on."""
    return PreflightCheck(
        id=check_id,
        ok=False,
        severity=severity,
        message=_line(message),
        fix=_line(fix) if fix else None,
    )


# --- the driver against the image's CUDA ------------------------------------------------------


def driver_check(
    kb: KnowledgeBase,
    driver: str | None,
    driver_from: str | None,
    smi: HostGpus | None,
    image: ImageFacts,
    gpu: str | None,
) -> PreflightCheck:
    """The compat verdict: native or minor-version support is a go, forward compatibility a go
    with a warning (only where NVIDIA allows it: data-center GPU, supported base branch),
    anything else a no-go."""
    if driver is None:
        if smi is not None and smi.problem and not smi.missing:
            return failed(
                "driver",
                f"the driver does not answer: {smi.problem}",
                "Fix the driver before starting anything: a reboot clears a version mismatch "
                "after a driver upgrade; `vllm-triage collect` freezes the evidence first.",
            )
        why = smi.problem if smi and smi.problem else "no nvidia-smi"
        return failed(
            "driver",
            f"cannot check the driver against the image: {why}",
            "Give --driver (e.g. 580.95.05), or run where the NVIDIA runtime mounts nvidia-smi.",
            severity="warning",
        )
    if image.cuda is None:
        return failed(
            "driver",
            "cannot check the driver: the image's CUDA is not known",
            "Give --image-config (docker image inspect output).",
            severity="warning",
        )
    verdict = check_compat(kb, DriverVersion.parse(driver), image.cuda, gpu, image.require)
    source = f" ({driver_from})" if driver_from else ""
    where = f"image CUDA {image.cuda} from {image.cuda_from}; driver {driver}{source}"
    if verdict.verdict == "compatible":
        return passed("driver", f"{verdict.explanation} [{where}]")
    if verdict.verdict == "conditional":
        condition = verdict.conditions[0] if verdict.conditions else ""
        return failed(
            "driver",
            f"{verdict.explanation} Condition: {condition} [{where}]",
            f"Upgrade to {verdict.toolkit_driver} (the image's toolkit driver) or newer to "
            "remove the condition"
            + (
                f"; the recommended target is {verdict.recommended_driver} "
                f"({verdict.recommended_branch})."
                if verdict.recommended_driver
                else "."
            )
            if verdict.toolkit_driver
            else None,
            severity="warning",
        )
    if verdict.verdict == "forward_compat_only":
        package = f"cuda-compat-{image.cuda.major}-{image.cuda.minor}"
        return failed(
            "driver",
            f"runs only through forward compatibility: {verdict.explanation} [{where}]",
            f"Make sure the container loads {package} (CUDA base images carry it under "
            "/usr/local/cuda/compat; the NVIDIA Container Toolkit's enable-cuda-compat hook or "
            "LD_LIBRARY_PATH puts it first), or upgrade the driver to "
            f"{verdict.recommended_driver or verdict.min_driver or 'a newer branch'}.",
            severity="warning",
        )
    return failed(
        "driver",
        f"{verdict.explanation} [{where}]",
        verdict.advice[0] if verdict.advice else None,
    )


# --- the GPU's compute capability against the image's architectures ---------------------------


def gpu_arch_check(kb: KnowledgeBase, image: ImageFacts, gpu: str | None) -> PreflightCheck | None:
    """Only when both are known: the image's architecture list, the GPU's compute capability
    (NVIDIA's binary compatibility rules, vllm_triage.image.arch_supports)."""
    from vllm_triage.image import arch_supports

    if not image.archs or gpu is None:
        return None
    row = kb.gpu(gpu)
    if row is None:
        return None
    cc = row.compute_capability
    what = f"{gpu} is compute capability {cc}; the image carries {' '.join(image.archs)} ({image.archs_from})"
    cubins = [arch.removesuffix("+PTX") for arch in image.archs]
    if arch_supports(cubins, cc):
        return passed("gpu_arch", what)
    if arch_supports(image.archs, cc):
        return failed(
            "gpu_arch",
            f"{what}: only PTX, which the driver compiles at the first start (slow, and kernels "
            "that need newer PTX fail)",
            f"Use a build that lists {cc} natively.",
            severity="warning",
        )
    return failed(
        "gpu_arch",
        f"{what}: no kernel in it runs on this GPU",
        f"Use a build for compute capability {cc} (a newer image, or one built with "
        f"TORCH_CUDA_ARCH_LIST including {cc}).",
    )


# --- the GPUs the container runtime exposes ---------------------------------------------------


def gpus_visible_check(
    view: RuntimeView, smi: HostGpus | None, driver: str | None, needed: int | None
) -> PreflightCheck:
    """Stale CDI specs (generated for another driver), a runtime that exposes no GPU or fewer than
    the launch uses; a node where no source can be read is a warning."""
    counts = {
        "/dev/nvidia*": view.device_nodes,
        "nvidia-container-cli": view.cli_devices,
        "CDI spec": view.cdi_devices,
        "nvidia-smi": len(smi.names) if smi and smi.names else None,
    }
    known = {source: n for source, n in counts.items() if n is not None}
    if view.cdi_driver and driver and _same_driver(view.cdi_driver, driver) is False:
        spec = ", ".join(view.cdi_files) or "the CDI spec"
        return failed(
            "gpus_visible",
            f"{spec} was generated for driver {view.cdi_driver}, the host runs {driver}: "
            "containers started through CDI get the old driver's libraries and fail",
            "Regenerate it: nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml (the "
            "nvidia-cdi-refresh service does it at each driver change).",
        )
    detected = smi.driver if smi else None
    if view.cli_driver and detected and _same_driver(view.cli_driver, detected) is False:
        return failed(
            "gpus_visible",
            f"nvidia-container-cli sees driver {view.cli_driver}, nvidia-smi {detected}",
            "Reboot (or reload the kernel module) after the driver change.",
        )
    if not known:
        why = f" ({view.cli_problem})" if view.cli_problem else ""
        return failed(
            "gpus_visible",
            f"cannot tell which GPUs the container runtime exposes: no /dev/nvidia*, "
            f"nvidia-container-cli or CDI spec here{why}",
            "Run preflight where the NVIDIA runtime exposes the GPUs (an init container with the "
            "same GPU request as the server), or on the host.",
            severity="warning",
        )
    said = ", ".join(f"{source}: {n}" for source, n in known.items())
    visible = min(known.values())
    if visible == 0:
        return failed(
            "gpus_visible",
            f"the container runtime exposes no GPU ({said})",
            "Request GPUs (docker run --gpus all; nvidia.com/gpu in the pod's limits) and check "
            "the NVIDIA Container Toolkit's configuration (nvidia-ctk runtime configure).",
        )
    if needed is not None and needed > visible:
        return failed(
            "gpus_visible",
            f"the launch uses {needed} GPU(s) and only {visible} are visible ({said})",
            f"Request {needed} GPUs for the container, or lower the launch's parallel sizes.",
        )
    if view.cli_problem:
        return failed(
            "gpus_visible",
            f"{visible} GPU(s) visible ({said}), but {view.cli_problem}",
            "The runtime's legacy mode cannot start GPU containers until it works; CDI mode "
            "does not use it.",
            severity="warning",
        )
    uses = f", the launch uses {needed}" if needed is not None else ""
    return passed("gpus_visible", f"{visible} GPU(s) visible ({said}){uses}")


def _same_driver(a: str, b: str) -> bool | None:
    try:
        return DriverVersion.parse(a) == DriverVersion.parse(b)
    except InputError:
        return None


# --- /dev/shm ---------------------------------------------------------------------------------


def shm_check(
    size: int | None, size_from: str | None, gpus_used: int | None, limits: Limits
) -> PreflightCheck:
    """PyTorch and NCCL pass data between the worker processes through /dev/shm."""
    rule = limits.shm
    if size is None:
        return failed(
            "shm",
            "cannot read /dev/shm's size here",
            "Give --shm-size (what the container gets, e.g. 16g).",
            severity="warning",
        )
    several = gpus_used is not None and gpus_used > 1
    minimum = rule.min_bytes_multi_gpu if several else rule.min_bytes_single_gpu
    shown = _size(size)
    where = f"/dev/shm is {shown} ({size_from})"
    if size >= minimum:
        return passed("shm", where)
    default = " (the container default)" if size == rule.container_default_bytes else ""
    uses = f"a launch on {gpus_used} GPUs" if several else "vLLM"
    return failed(
        "shm",
        f"{where}{default}: {uses} needs at least {_size(minimum)}",
        "Give the container more shared memory: docker run --ipc=host or --shm-size 16g; in "
        "Kubernetes an emptyDir with medium: Memory mounted at /dev/shm.",
        severity="error" if several else "warning",
    )


def _size(value: int) -> str:
    if value >= GIB:
        return f"{value / GIB:,.1f} GiB"
    return f"{value / 1024**2:,.0f} MiB"


# --- the model's files for the container's user -----------------------------------------------


@dataclass(frozen=True)
class User:
    uid: int
    gid: int | None
    text: str

    @classmethod
    def parse(cls, value: str, option: str = "--container-user") -> User:
        """UID[:GID], numbers only (a name needs the image's /etc/passwd)."""
        uid_text, _, gid_text = value.strip().partition(":")
        if not uid_text.isdigit() or (gid_text and not gid_text.isdigit()):
            raise InputError(f"{option} {value!r}: expected UID[:GID] in numbers, e.g. 1000:1000")
        uid, gid = int(uid_text), int(gid_text) if gid_text else None
        if uid > 2**32 - 2 or (gid is not None and gid > 2**32 - 2):
            raise InputError(f"{option} {value!r}: out of range")
        return cls(uid, gid, value.strip())


def _may(st: os.stat_result, user: User, want: int) -> bool:
    """Whether `user` has the permission bits `want` (4 read, 1 search/execute) on a file, by its
    mode: root always may read, and search where any execute bit is set."""
    if user.uid == 0:
        return want != 1 or stat.S_ISDIR(st.st_mode) or bool(st.st_mode & 0o111)
    mode = st.st_mode
    if st.st_uid == user.uid:
        bits = (mode >> 6) & 7
    elif user.gid is not None and st.st_gid == user.gid:
        bits = (mode >> 3) & 7
    else:
        bits = mode & 7
    return bits & want == want


def model_path_check(path: Path, user: User, user_from: str) -> PreflightCheck:
    """Every folder on the way searchable, the folder readable, config.json and the weight files
    readable, for the container's user (by mode bits; ACLs and supplementary groups are not
    known from here)."""
    shown = display_name(path)
    who = (
        f"uid {user.uid}" + (f" gid {user.gid}" if user.gid is not None else "") + f" ({user_from})"
    )
    fix = (
        f"Make the model readable for {who.split(' (')[0]}: chmod -R a+rX on the model folder, "
        "or run the container as its owner (--container-user / securityContext)."
    )
    try:
        target = path.resolve(strict=True)
    except FileNotFoundError:
        return failed(
            "model_path",
            f"model path {shown} does not exist here",
            "Mount the model where the launch expects it, or give the right --model-path.",
        )
    except OSError as exc:
        return failed(
            "model_path", f"cannot check model path {shown}: {exc.strerror}", severity="warning"
        )
    blocked: list[str] = []
    try:
        for folder in reversed(target.parents):
            if not _may(folder.stat(), user, 1):
                blocked.append(f"{display_name(folder)} (not searchable)")
                break
        st = target.stat()
        if stat.S_ISDIR(st.st_mode):
            if not _may(st, user, 5):
                blocked.append(f"{shown} (folder not readable)")
            files = _model_files(target)
        else:
            files = [(target, st)]
        blocked += [display_name(file) for file, file_stat in files if not _may(file_stat, user, 4)]
    except PermissionError:
        return failed(
            "model_path",
            f"cannot check model path {shown} for {who}: preflight itself may not read it",
            "Run preflight as the container's user, or with read access to the model.",
            severity="warning",
        )
    except OSError as exc:
        return failed(
            "model_path", f"cannot check model path {shown}: {exc.strerror}", severity="warning"
        )
    if blocked:
        more = f" and {len(blocked) - 3} more" if len(blocked) > 3 else ""
        return failed(
            "model_path",
            f"model path {shown} is not readable for {who}: {', '.join(blocked[:3])}{more}",
            fix,
        )
    weights = sum(1 for file, _ in files if file.name.endswith(_WEIGHT_SUFFIXES))
    has_config = any(file.name == "config.json" for file, _ in files)
    what = f"config.json and {weights} weight file(s)" if has_config else f"{len(files)} file(s)"
    return passed("model_path", f"model path {shown} ({what}) is readable for {who}")


def _model_files(folder: Path) -> list[tuple[Path, os.stat_result]]:
    """The folder's own files (the weights sit at its top, not in subfolders), capped."""
    found = []
    with os.scandir(folder) as entries:
        for index, entry in enumerate(entries):
            if index >= MAX_MODEL_ENTRIES:
                break
            if entry.is_file():
                found.append((Path(entry.path), entry.stat()))
    return found


# --- the recipe: vLLM version, the profile's flags, the all-to-all backend --------------------


def _release(text: str) -> tuple[int, ...] | None:
    parts = []
    for part in text.strip().lstrip("v").split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit()) if part[:1].isdigit() else ""
        if not digits:
            return None
        parts.append(int(digits))
    return tuple(parts) if len(parts) >= 2 else None


def vllm_version_check(recipe: Recipe, image: ImageFacts) -> PreflightCheck:
    """The recipe's minimum vLLM against the image's version (label, environment or tag)."""
    minimum = recipe.min_vllm_version
    fix = f"Use an image with vLLM {minimum} or newer (vllm/vllm-openai:v{minimum} or later)."
    if image.reference and image.reference.strip() == recipe.image:
        return passed(
            "vllm_version",
            f"{image.reference} is the {recipe.id} recipe's own image (needs vLLM >= {minimum})",
        )
    version = image.vllm_version
    if version is None:
        return failed(
            "vllm_version",
            f"the image's vLLM version is not known (no version label, no release tag); the "
            f"{recipe.id} recipe needs vLLM >= {minimum}",
            "Check `vllm --version` in the image, or use a release tag.",
            severity="warning",
        )
    found, wanted = _release(version), _release(minimum)
    said = f"vLLM {version} ({image.version_from})"
    if found is None or wanted is None or ".dev" in version:
        return failed(
            "vllm_version",
            f"{said} is a development build; the {recipe.id} recipe needs vLLM >= {minimum}",
            "Make sure the build includes the model's support, or use a release image.",
            severity="warning",
        )
    if found < wanted:
        return failed(
            "vllm_version", f"{said} is older than the {recipe.id} recipe's minimum {minimum}", fix
        )
    return passed("vllm_version", f"{said} meets the {recipe.id} recipe's minimum {minimum}")


def _expected(flag: RecipeFlag, kb: KnowledgeBase) -> LaunchArgs:
    """The recipe flag read the way a launch is read, so values compare as the same types."""
    return parse_launch_command(["vllm", "serve", *flag.flag.split()], kb)


def _differences(expected: LaunchArgs, launch: LaunchArgs) -> list[tuple[str, object, object]]:
    """(name, wanted, found) for each field or unmapped flag the recipe flag sets."""
    out: list[tuple[str, object, object]] = []
    for name in expected.model_fields_set - {"other", "env"}:
        wanted, found = getattr(expected, name), getattr(launch, name)
        if wanted != found:
            out.append((name, wanted, found))
    given = {key.replace("_", "-"): value for key, value in launch.other.items()}
    for key, wanted in expected.other.items():
        found = given.get(key.replace("_", "-"))
        if found != wanted:
            out.append((key, wanted, found))
    return out


def flag_checks(
    kb: KnowledgeBase, recipe: Recipe, profile: RecipeProfile, launch: LaunchArgs
) -> list[PreflightCheck]:
    """Each flag of the recipe's profile (and of every profile), in the launch as the recipe has
    it; the recipe's data says whether a launch without it is a no-go or a warning."""
    checks = []
    for flag in kb.recipe_flags(recipe, profile.id):
        check_id = f"recipe_flag:{flag.flag.split()[0]}"
        differences = _differences(_expected(flag, kb), launch)
        where = f"the {recipe.id} recipe's {profile.id} profile"
        if not differences:
            checks.append(
                passed(check_id, f"{flag.flag} is given, as {where} sets it", flag.severity)
            )
            continue
        _, _, found = differences[0]
        state = "missing from the launch" if found in (None, "") else f"given as {found!r}"
        checks.append(
            failed(
                check_id,
                f"{flag.flag} is {state}; {where} sets it: {flag.why}",
                f"Add {flag.flag} to the launch command.",
                flag.severity,
            )
        )
    return checks


def _given(launch: LaunchArgs, flags: Iterable[str]) -> str | None:
    names = set(flags)
    return next((key for key in launch.other if key.split("=")[0] in names), None)


def all2all_check(
    recipe: Recipe,
    launch: LaunchArgs,
    transport: str | None,
    rdma: list[str] | None,
    limits: Limits,
) -> PreflightCheck | None:
    """With expert parallelism (or a backend or transport given): the backend the recipe names
    for the transport; over several nodes RDMA when the node has RDMA devices, on one node NVLink."""
    expert = _given(launch, limits.launch.expert_parallel_flags)
    if expert is None and launch.all2all_backend is None and transport is None:
        return None
    multi_node = _given(launch, limits.launch.multi_node_flags)
    how = "given"
    if transport is None:
        if multi_node is None:
            transport, how = "nvlink", "one node: NVLink between its GPUs"
        elif rdma:
            transport, how = (
                "rdma",
                f"{multi_node} in the launch, RDMA devices {', '.join(rdma[:4])}",
            )
        else:
            return failed(
                "all2all_backend",
                f"the launch spans nodes ({multi_node}) and this node shows no RDMA device: "
                "cannot tell the transport",
                "Give --transport rdma or --transport nvlink.",
                severity="warning",
            )
    backends = recipe.all2all_backends
    expected = getattr(backends, transport)
    actual = launch.all2all_backend
    said = f"over {transport.upper() if transport == 'rdma' else 'NVLink'} ({how})"
    if actual == expected:
        return passed(
            "all2all_backend",
            f"--all2all-backend {actual} {said}, as the {recipe.id} recipe has it",
        )
    shown = actual or f"not set (vLLM's default {limits.launch.default_all2all_backend})"
    return failed(
        "all2all_backend",
        f"all-to-all backend {shown} {said}: the {recipe.id} recipe wants {expected}. "
        f"{backends.note}",
        f"Add --all2all-backend {expected} to the launch command.",
    )


# --- capacity ---------------------------------------------------------------------------------


def capacity_check(
    kb: KnowledgeBase,
    model: Path,
    gpu: str | None,
    gpu_count: int | None,
    memory_mib: int | None,
    launch: LaunchArgs | None,
) -> PreflightCheck:
    """The capacity library's verdict for the model, the GPUs and the launch: does_not_fit is a
    no-go, tight a warning; an estimate that cannot be made is a warning."""
    from vllm_triage.capacity import CapacityOptions, capacity

    if gpu is None and memory_mib is None:
        return failed(
            "capacity",
            "cannot estimate whether the model fits: the GPU is not known",
            "Give --gpu NAME (and --gpu-count N).",
            severity="warning",
        )
    options = CapacityOptions(
        model,
        gpu=gpu,
        gpu_count=gpu_count,
        gpu_memory_gib=memory_mib / 1024 if memory_mib else None,
        launch=launch,
    )
    try:
        estimate = capacity(options, kb=kb)
    except InputError as exc:
        return failed(
            "capacity",
            f"capacity not estimated: {exc}",
            "See `vllm-triage capacity --help`.",
            "warning",
        )
    summary = f"{estimate.summary} (an estimate)"
    change = estimate.changes[0] if estimate.changes else None
    fix = f"{change.flag} {change.value}: {change.effect}" if change else None
    if estimate.verdict == "fits":
        return passed("capacity", summary)
    if estimate.verdict == "tight":
        return failed("capacity", summary, fix, severity="warning")
    return failed("capacity", summary, fix or "More GPUs, or a smaller --max-model-len.")
