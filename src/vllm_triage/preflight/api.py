"""`preflight`: on the node where a vLLM server is about to start (an init container, a wrapper
around `docker run`), refuse a start that cannot work before the image is pulled and the weights
are read. One library function, `preflight(PreflightOptions) -> PreflightResult`.

Checks: the image's CUDA against the driver (forward compatibility only where NVIDIA allows it),
the GPU's compute capability against the image's architectures (when the image says them), the
GPUs the container runtime exposes, /dev/shm, the model folder for the container's user, capacity,
and the recipe's minimum vLLM and its profile's flags (with the all-to-all backend for the
transport). Host facts are detected (nvidia-smi, os.statvfs, /dev, CDI specs) or given, so the
same checks run anywhere; a check that cannot run is a warning, never a crash. It is meant to run
on every pod start: what only one check needs is imported by that check.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vllm_triage.errors import InputError
from vllm_triage.knowledge import KnowledgeBase, load_knowledge
from vllm_triage.knowledge.drivers import driver_requirement
from vllm_triage.knowledge.schema import Recipe, RecipeProfile
from vllm_triage.launch import LaunchArgs, parse_launch_command, split_command
from vllm_triage.preflight import checks
from vllm_triage.preflight.host import (
    HostGpus,
    detect_gpus,
    parse_size,
    rdma_devices,
    runtime_view,
    shm_bytes,
)
from vllm_triage.preflight.image_facts import ImageFacts, image_facts
from vllm_triage.preflight.limits import Limits, load_limits
from vllm_triage.preflight.models import HostFacts, PreflightCheck, PreflightResult
from vllm_triage.versions import DriverVersion

TRANSPORTS = ("rdma", "nvlink")
MAX_GPU_COUNT = 100_000
_USER_OPTIONS = ("--user", "-u")


@dataclass(frozen=True)
class PreflightOptions:
    """What to check.

    `image` / `image_config`: the image (a reference, resolved through the local engine, the
    registry or its tag; a `docker image inspect` output or OCI config, which wins);
    `registry_auth`: a docker config.json for a private registry. `recipe` / `profile`: the model recipe and its serving
    profile (else the recipe the launch's model names, and its default profile). `launch`: the
    launch command's text. `model_path`: the model folder as this process sees it.
    `container_user`: UID[:GID] the server runs as (else the launch's --user, the image's User,
    root). Given host facts win over detected ones: `driver`, `gpu`, `gpu_count`, `shm_size`
    (64m, 16g, 2Gi), `transport` (rdma or nvlink). `host_root`: where the node's / is (for /dev,
    /etc/cdi, /sys); `timeout`: seconds each command may take."""

    image: str | None = None
    image_config: Path | None = None
    registry_auth: Path | None = None
    recipe: str | None = None
    profile: str | None = None
    launch: str | None = None
    model_path: Path | None = None
    container_user: str | None = None
    driver: str | None = None
    gpu: str | None = None
    gpu_count: int | None = None
    shm_size: str | None = None
    transport: str | None = None
    host_root: Path = Path("/")
    timeout: float = 15.0


@dataclass
class _Plan:
    """The inputs, validated: everything a bad value in them could break is checked here first,
    so that bad input ends in one line and exit 2 before any host command runs."""

    launch: LaunchArgs | None
    recipe: Recipe | None
    profile: RecipeProfile | None
    shm_given: int | None
    user: checks.User | None
    driver: str | None


def _validate(options: PreflightOptions, kb: KnowledgeBase) -> _Plan:
    if options.image is None and options.image_config is None:
        raise InputError("say which image: --image REF or --image-config FILE")
    if options.transport is not None and options.transport not in TRANSPORTS:
        raise InputError(f"--transport must be rdma or nvlink, not {options.transport!r}")
    if options.gpu_count is not None and not 1 <= options.gpu_count <= MAX_GPU_COUNT:
        raise InputError(f"--gpu-count {options.gpu_count} is outside 1..{MAX_GPU_COUNT}")
    if not 0.1 <= options.timeout <= 600:
        raise InputError(f"--timeout {options.timeout:g} is outside 0.1..600 seconds")
    if not options.host_root.is_dir():
        raise InputError(f"--host-root {options.host_root}: not a folder")
    driver = None
    if options.driver is not None:
        driver = DriverVersion.parse(options.driver).text
    shm_given = None
    if options.shm_size is not None:
        try:
            shm_given = checks_size(options.shm_size)
        except ValueError:
            raise InputError(
                f"--shm-size {options.shm_size!r}: expected a size such as 64m, 16g or 2Gi"
            ) from None
    user = checks.User.parse(options.container_user) if options.container_user else None
    launch = parse_launch_command(options.launch, kb) if options.launch is not None else None
    recipe = kb.recipe(options.recipe) if options.recipe else None
    if recipe is None and launch is not None:
        recipe = kb.recipe_for_model(launch.model)
    if options.profile is not None and recipe is None:
        raise InputError("--profile needs --recipe (or a launch whose model has a recipe)")
    profile = kb.recipe_profile(recipe, options.profile) if recipe else None
    return _Plan(launch, recipe, profile, shm_given, user, driver)


def checks_size(text: str) -> int:
    """A size as docker --shm-size and Kubernetes write it, in bytes (ValueError otherwise)."""
    size = parse_size(text)
    if not 0 < size <= 2**50:
        raise ValueError(text)
    return size


def _gpus_used(launch: LaunchArgs | None, limits: Limits) -> int | None:
    """GPUs one node of the launch uses: TP x PP, times DP on one node (DP local on several)."""
    if launch is None:
        return None
    per_replica = (launch.tensor_parallel_size or 1) * (launch.pipeline_parallel_size or 1)
    multi_node = any(key.split("=")[0] in limits.launch.multi_node_flags for key in launch.other)
    local = launch.other.get("--data-parallel-size-local")
    if local is not None and local.isdigit():
        return per_replica * int(local)
    if multi_node:
        return per_replica
    return per_replica * (launch.data_parallel_size or 1)


def _launch_user(text: str | None) -> str | None:
    """`docker run --user 1000:1000 ...` / `-u 1000` / `--user=1000` in the launch command."""
    if text is None:
        return None
    try:
        tokens = split_command(text)
    except InputError:
        return None
    if not any(token.endswith(("docker", "podman")) for token in tokens[:4]):
        return None
    for index, token in enumerate(tokens):
        if token in _USER_OPTIONS and index + 1 < len(tokens):
            return tokens[index + 1]
        if token.startswith("--user="):
            return token.removeprefix("--user=")
    return None


def _container_user(
    plan: _Plan, options: PreflightOptions, image: ImageFacts
) -> tuple[checks.User | None, str]:
    """The container's user: given, else the launch's --user, the image's User, else root."""
    if plan.user is not None:
        return plan.user, "given"
    for value, where in (
        (_launch_user(options.launch), "the launch's --user"),
        (image.user, "the image's User"),
    ):
        if value:
            try:
                return checks.User.parse(value), where
            except InputError:
                return None, f"{where} {value!r} is a name; give --container-user UID[:GID]"
    if options.image_config is None:
        return checks.User(0, 0, "0:0"), (
            "root, the runtime's default: the image's own User is read only from --image-config; "
            "give --container-user if it sets one"
        )
    return checks.User(0, 0, "0:0"), "root, as neither the launch nor the image sets a user"


def preflight(options: PreflightOptions, *, kb: KnowledgeBase | None = None) -> PreflightResult:
    """Go (no check with severity error failed) or no-go, with every check's one-line reason.
    InputError (one line, exit 2) for input it cannot use."""
    kb = kb or load_knowledge()
    limits = load_limits()
    plan = _validate(options, kb)
    image = image_facts(
        kb,
        options.image,
        options.image_config,
        registry_auth=options.registry_auth,
        timeout=options.timeout,
    )

    smi: HostGpus | None = None
    if plan.driver is None or options.gpu is None or options.gpu_count is None:
        smi = detect_gpus(kb, options.timeout)
    driver = plan.driver or (smi.driver if smi else None)
    driver_from = "given" if plan.driver else (smi.source if smi and smi.driver else None)
    gpu = options.gpu or (smi.names[0] if smi and smi.names else None)
    gpu_count = options.gpu_count or (len(smi.names) if smi and smi.names else None)
    gpu_from = "given" if options.gpu else (smi.source if smi and smi.names else None)
    memory = smi.memory_mib if smi and not options.gpu and smi.names else None

    found: list[PreflightCheck] = []
    found += [checks.failed("image", note, severity="warning") for note in image.notes]
    if smi is not None and smi.names and len(set(smi.names)) > 1:
        found.append(
            checks.failed(
                "gpu",
                f"the node mixes GPUs ({', '.join(sorted(set(smi.names)))}); the checks use the first",
                severity="warning",
            )
        )
    found.append(checks.driver_check(kb, driver, driver_from, smi, image, gpu))
    if (arch := checks.gpu_arch_check(kb, image, gpu)) is not None:
        found.append(arch)

    needed = _gpus_used(plan.launch, limits)
    view = runtime_view(options.host_root, limits, options.timeout)
    found.append(checks.gpus_visible_check(view, smi, driver, needed))

    size: int | None = plan.shm_given
    size_from = "given"
    if size is None:
        size, size_from = shm_bytes(options.host_root), "statvfs of /dev/shm"
    found.append(checks.shm_check(size, size_from, needed or gpu_count, limits))

    user, user_from = _container_user(plan, options, image)
    if options.model_path is not None:
        if user is None:
            found.append(
                checks.failed(
                    "model_path", f"cannot check the model path: {user_from}", severity="warning"
                )
            )
        else:
            found.append(checks.model_path_check(options.model_path, user, user_from))
        found.append(
            checks.capacity_check(kb, options.model_path, gpu, gpu_count, memory, plan.launch)
        )

    if plan.recipe is not None and plan.profile is not None:
        found.append(checks.vllm_version_check(plan.recipe, image))
        if plan.launch is None:
            found.append(
                checks.failed(
                    "recipe_flags",
                    f"the {plan.recipe.id} recipe's flags are not checked: no launch command",
                    "Give --launch-cmd FILE (or - for standard input).",
                    severity="warning",
                )
            )
        else:
            found += checks.flag_checks(kb, plan.recipe, plan.profile, plan.launch)
            all2all = checks.all2all_check(
                plan.recipe,
                plan.launch,
                options.transport,
                rdma_devices(options.host_root, limits),
                limits,
            )
            if all2all is not None:
                found.append(all2all)

    requirement = driver_requirement(kb, image.cuda) if image.cuda else None
    host = HostFacts(
        driver=driver,
        driver_from=driver_from,
        cuda_ceiling=smi.cuda_ceiling if smi else None,
        gpu=gpu,
        gpu_count=gpu_count,
        gpu_from=gpu_from,
        shm_bytes=size,
        shm_from=size_from if size is not None else None,
        image=image.reference,
        image_pinned=image.pinned,
        image_cuda=str(image.cuda) if image.cuda else None,
        image_cuda_from=image.cuda_from,
        min_driver=requirement.min_driver if requirement else None,
        toolkit_driver=requirement.toolkit_driver if requirement else None,
        recommended_driver=requirement.recommended_driver if requirement else None,
        recommended_branch=requirement.recommended_branch if requirement else None,
        recipe=plan.recipe.id if plan.recipe else None,
        profile=plan.profile.id if plan.profile else None,
        container_user=f"{user.text} ({user_from})" if user else None,
    )
    go = not any(not check.ok and check.severity == "error" for check in found)
    return PreflightResult(go=go, checks=found, host=host)
