"""A fake host for collect's tests: a PATH of recording fake commands that replay stored outputs
(or hang, crash, print garbage, flood, leave children behind), and a host root with replayed files.

Every fake appends its argv to calls.jsonl before doing anything, so a test can prove which
commands ran. A program with no reply for the exact argv exits 64 saying so. Fakes that start
children write every pid they start to `pids.txt`, so a test can prove they are all gone.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from vllm_triage.collect.runner import CommandRunner

_DATA = Path(__file__).parent / "data"
_SAMPLES = _DATA / "collect" / "samples"

# Every program collect may call, and decoys it must never call.
PROGRAMS = (
    "nvidia-smi", "docker", "podman", "kubectl", "nvidia-ctk", "nvidia-container-cli",
    "ibv_devinfo", "ibstat", "ip",
)  # fmt: skip
DECOYS = (
    "systemctl",
    "reboot",
    "rm",
    "kill",
    "modprobe",
    "rmmod",
    "shutdown",
    "sudo",
    "sh",
    "bash",
)

_FAKE = """#!{python}
import json, os, signal, sys, time
name = os.path.basename(sys.argv[0])
argv = [name, *sys.argv[1:]]
with open({record!r}, "a") as log:
    log.write(json.dumps(argv) + "\\n")
spec = json.load(open({spec!r})).get(" ".join(argv))
if spec is None:
    sys.stderr.write(name + ": fake has no reply for: " + " ".join(argv) + "\\n")
    sys.exit(64)

def started(pid):
    start = open("/proc/%d/stat" % pid, "rb").read().rsplit(b")", 1)[1].split()[19].decode()
    with open({pids!r}, "a") as pids:
        pids.write("%d %s\\n" % (pid, start))

def forever():
    while True:
        time.sleep(3600)

started(os.getpid())
if spec.get("delay"):
    time.sleep(spec["delay"])
if spec["behaviour"] == "hang":
    forever()
if spec["behaviour"] == "orphan":
    # A child that keeps our stdout open after we exit (reparented to init).
    if os.fork() == 0:
        started(os.getpid())
        forever()
    sys.stdout.write("parent done\\n")
    sys.exit(0)
if spec["behaviour"] == "setsid":
    # A child in a session of its own (a daemon: its group is not ours); then we hang.
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            started(os.getpid())
            forever()
        os._exit(0)
    forever()
if spec["behaviour"] in ("flood", "flood_forever"):
    line = b"2026-11-28T09:14:02.000000000Z (APIServer pid=1) INFO 11-28 09:14:02 [loggers.py:1] Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s\\n"
    out = sys.stdout.buffer
    out.write(b"FIRST LINE of the flood\\n")
    block = line * 4096
    written, size = 0, spec.get("bytes", 0)
    while spec["behaviour"] == "flood_forever" or written < size:
        out.write(block)
        written += len(block)
    out.write(b"LAST LINE of the flood\\n")
    sys.exit(0)
if spec["behaviour"] == "crash":
    sys.stdout.write("partial output before the crash\\n")
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGSEGV)
if spec["behaviour"] == "garbage":
    sys.stdout.buffer.write(bytes(range(256)) * 64 + b"\\x00<<<not what you expected>>>\\x00")
    sys.exit(0)
if spec.get("stdout_file"):
    sys.stdout.buffer.write(open(spec["stdout_file"], "rb").read())
sys.stdout.write(spec.get("stdout", ""))
sys.stderr.write(spec.get("stderr", ""))
sys.exit(spec.get("exit", 0))
"""


@dataclass
class FakeHost:
    """Fake commands under `bin/`, host files under `root/`, calls recorded in `calls.jsonl`."""

    base: Path
    replies: dict[str, dict[str, object]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.bin = self.base / "bin"
        self.root = self.base / "root"
        self.record = self.base / "calls.jsonl"
        self.spec = self.base / "replies.json"
        self.pids = self.base / "pids.txt"
        for folder in (self.bin, self.root):
            folder.mkdir(parents=True, exist_ok=True)
        self.record.touch()
        self.pids.touch()
        self._save()

    def reply(
        self,
        command: str,
        stdout: str = "",
        stdout_file: Path | None = None,
        stderr: str = "",
        exit: int = 0,
        behaviour: str = "normal",
        delay: float = 0.0,
        size: int = 0,
    ) -> FakeHost:
        """What the fake prints for this exact command line (program and arguments). Behaviours:
        normal, hang, crash, garbage, orphan, setsid, flood (`size` bytes), flood_forever."""
        self.replies[command] = {
            "stdout": stdout,
            "stdout_file": str(stdout_file) if stdout_file else None,
            "stderr": stderr,
            "exit": exit,
            "behaviour": behaviour,
            "delay": delay,
            "bytes": size,
        }
        self._save()
        return self

    def file(self, path: str, text: str | Path) -> FakeHost:
        """A host file, under the fake root, from text or a stored file."""
        target = self.root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        content = text.read_bytes() if isinstance(text, Path) else text.encode()
        target.write_bytes(content)
        return self

    def install(self, programs: tuple[str, ...] = PROGRAMS + DECOYS) -> FakeHost:
        """Put recording fakes for these programs on the fake PATH (others are 'not installed')."""
        script = _FAKE.format(
            python=sys.executable, record=str(self.record), spec=str(self.spec), pids=str(self.pids)
        )
        for program in programs:
            fake = self.bin / program
            fake.write_text(script)
            fake.chmod(0o755)
        return self

    def runner(self) -> CommandRunner:
        return CommandRunner(path=str(self.bin))

    def calls(self) -> list[list[str]]:
        return [json.loads(line) for line in self.record.read_text().splitlines() if line]

    def alive(self) -> list[int]:
        """The processes the fakes started that still run (zombies count as dead)."""
        living = []
        for line in self.pids.read_text().splitlines():
            pid, start = line.split()
            try:
                fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if fields[0] not in (b"Z", b"X") and fields[19].decode() == start:
                living.append(int(pid))
        return living

    def _save(self) -> None:
        self.spec.write_text(json.dumps(self.replies))


def replay_kimi_k3_node(host: FakeHost, smi_xml: Path, container_log: Path) -> FakeHost:
    """The node where the cu130 Kimi K3 container `vllm-k3` exited: real outputs for every
    command collect runs (docker, Container Toolkit, RDMA), with the given GPU XML and log."""
    samples, h200 = _SAMPLES, _DATA / "collect" / "h200-580.159.04"
    open_module = samples / "proc-driver-version" / "open-565.57.01-ubuntu24.04.version.txt"
    host.file(
        "/proc/driver/nvidia/version", open_module.read_text().replace("565.57.01", "575.57.08")
    )
    host.file("/etc/os-release", h200 / "os-release.txt")
    host.file("/proc/modules", h200 / "proc-modules.txt")
    host.file("/proc/uptime", h200 / "proc-uptime.txt")
    host.file(
        "/etc/cdi/nvidia.yaml",
        samples / "nvidia-container" / "cdi-nvidia-yaml-575.64.03-ctk-1.17.8.yaml",
    )
    host.reply("nvidia-smi -q -x", stdout_file=smi_xml)
    host.reply(
        "nvidia-smi topo -m",
        stdout_file=samples / "nvidia-smi-text" / "topo-m-a100-x8-nv12-17nic.txt",
    )
    host.reply(
        "docker version --format {{json .}}",
        stdout='{"Client":{"Version":"27.3.1"},"Server":{"Version":"27.3.1"}}\n',
    )
    host.reply(
        "docker info --format {{json .}}",
        stdout='{"Runtimes":{"nvidia":{"path":"nvidia-container-runtime"},"runc":{"path":"runc"}},"DefaultRuntime":"runc"}\n',
    )
    host.reply(
        "docker inspect --type container vllm-k3",
        stdout_file=_DATA / "collect" / "scenarios" / "kimi-k3-docker-inspect.json",
    )
    host.reply("docker logs --timestamps vllm-k3", stdout_file=container_log)
    host.reply(
        "docker image inspect vllm/vllm-openai:kimi-k3",
        stdout_file=_DATA / "image-configs" / "vllm-openai-cu130.inspect.json",
    )
    host.reply(
        "nvidia-ctk --version",
        stdout_file=samples / "nvidia-container" / "nvidia-ctk-version-1.12.0.txt",
    )
    host.reply(
        "nvidia-container-cli --version",
        stdout_file=samples / "nvidia-container" / "nvidia-container-cli-V-1.0.7.txt",
    )
    host.reply(
        "ibv_devinfo",
        stdout_file=samples / "rdma" / "ibv_devinfo-mlx5_2-roce-cx7-h100-host.one-hca.txt",
    )
    host.reply("ibstat", stdout_file=samples / "rdma" / "gpud-ibstat-h100-some-down.txt")
    host.reply(
        "ip -json address show",
        stdout='[{"ifname":"lo","operstate":"UNKNOWN","mtu":65536},{"ifname":"eth0","operstate":"UP","mtu":9000}]\n',
    )
    return host  # fmt: skip
