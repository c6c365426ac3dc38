"""Test hosts for `fleet run` through Ansible: real sshd instances (Debian's openssh-server), each
in a network namespace of its own reached over a veth pair, with keys generated for the run.

Each host gets its own `nvidia-smi` on the PATH its sshd gives sessions (sshd_config SetEnv): a
fake that replays a real `nvidia-smi -q -x` capture (8x B200, tests/data/collect/samples) with
the host's driver written in. One host can be deliberately unreachable: its namespace and link
exist but no sshd listens (the connection is refused). Every address lives only on the veth
pairs this fixture creates (10.2xx.N.0/30), inside this machine.

The hosts share this machine's file system, so the remote side runs vllm-triage from this
checkout: the inventory points ansible_python_interpreter at this Python (the project's .venv).

Creating namespaces needs root; the fixture says why it cannot run otherwise (a skip, or a
failure when VLLM_TRIAGE_REQUIRE_SSHD=1, as `make unit` sets).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from deadlines import WATCHDOG_FLOOR_S

SAMPLES = Path(__file__).parent / "data" / "collect" / "samples"
B200_XML = SAMPLES / "nvidia-smi-xml" / "b200-x8-580.105.08.xml"
TOPO = SAMPLES / "nvidia-smi-text" / "topo-m-a100-x8-nv12-17nic.txt"
SSHD = "/usr/sbin/sshd"
REQUIRE_ENV = "VLLM_TRIAGE_REQUIRE_SSHD"
CEILINGS = {"575": "12.9", "580": "13.0", "590": "13.1", "570": "12.8"}

_FAKE_SMI = """#!/bin/sh
case "$*" in
  "-q -x") cat '{xml}' ;;
  "topo -m") cat '{topo}' ;;
  *) echo "nvidia-smi (test replay): no reply for: $*" >&2; exit 64 ;;
esac
"""


def unavailable() -> str | None:
    """Why the hosts cannot be made here (None when they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not Path(SSHD).exists():
        return "sshd is not installed (Debian's openssh-server: make system-deps)"
    probe = f"vtprobe{os.getpid() % 100000}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


@dataclass
class Host:
    name: str
    driver: str | None  # None: unreachable (no sshd)
    index: int
    namespace: str = ""
    address: str = ""
    process: subprocess.Popen[bytes] | None = None


@dataclass
class SshHosts:
    """The hosts (a context manager: everything it made is removed on exit)."""

    base: Path
    hosts: list[Host]
    tag: str = field(default_factory=lambda: f"{os.getpid() % 10000}")
    _links: list[str] = field(default_factory=list)
    _namespaces: list[str] = field(default_factory=list)

    def __enter__(self) -> SshHosts:
        try:
            self._keys()
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
            for host in self.hosts:
                self._network(host)
                if host.driver is not None:
                    self._sshd(host)
            for host in self.hosts:
                if host.driver is not None:
                    self._wait(host)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for host in self.hosts:
            if host.process is not None and host.process.poll() is None:
                host.process.terminate()
                try:
                    host.process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    host.process.kill()
                    host.process.wait()
        # The sessions sshd started live on in the namespace (a session whose client went away
        # while its link is deleted would wait for a FIN that never comes): end every process
        # left in each namespace this fixture made, by pid.
        for namespace in self._namespaces:
            listed = subprocess.run(
                ["ip", "netns", "pids", namespace], capture_output=True, text=True
            )
            for pid in listed.stdout.split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGTERM)
        for link in self._links:
            subprocess.run(["ip", "link", "del", link], capture_output=True)
        for namespace in self._namespaces:
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)

    def _run(self, *argv: str) -> None:
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")

    def _keys(self) -> None:
        self.keys = self.base / "keys"
        self.keys.mkdir(parents=True)
        for name in ("host_key", "client_key"):
            self._run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"vllm-triage-test-{name}", "-f", str(self.keys / name))  # fmt: skip
        authorized = self.keys / "authorized_keys"
        authorized.write_text((self.keys / "client_key.pub").read_text())
        authorized.chmod(0o600)

    def _network(self, host: Host) -> None:
        host.namespace = f"vt{self.tag}n{host.index}"
        outside, inside = f"vt{self.tag}h{host.index}", f"vt{self.tag}p{host.index}"
        self._run("ip", "netns", "add", host.namespace)
        self._namespaces.append(host.namespace)
        self._run("ip", "link", "add", outside, "type", "veth", "peer", "name", inside)
        self._links.append(outside)
        self._run("ip", "link", "set", inside, "netns", host.namespace)
        subnet = f"10.{200 + int(self.tag) % 50}.{host.index + 1}"
        host.address = f"{subnet}.2"
        self._run("ip", "addr", "add", f"{subnet}.1/30", "dev", outside)
        self._run("ip", "link", "set", outside, "up")
        inside_ns = ("ip", "netns", "exec", host.namespace)
        self._run(*inside_ns, "ip", "addr", "add", f"{host.address}/30", "dev", inside)
        self._run(*inside_ns, "ip", "link", "set", inside, "up")
        self._run(*inside_ns, "ip", "link", "set", "lo", "up")

    def _sshd(self, host: Host) -> None:
        assert host.driver is not None
        folder = self.base / host.name
        bin_dir = folder / "bin"
        bin_dir.mkdir(parents=True)
        self.tmp_dir(host).mkdir()
        xml = B200_XML.read_text()
        branch = host.driver.split(".")[0]
        xml = xml.replace(
            "<driver_version>580.105.08</driver_version>",
            f"<driver_version>{host.driver}</driver_version>",
        )
        xml = xml.replace(
            "<cuda_version>13.0</cuda_version>", f"<cuda_version>{CEILINGS[branch]}</cuda_version>"
        )
        (folder / "nvidia-smi-q-x.xml").write_text(xml)
        smi = bin_dir / "nvidia-smi"
        smi.write_text(_FAKE_SMI.format(xml=folder / "nvidia-smi-q-x.xml", topo=TOPO))
        smi.chmod(0o755)
        config = folder / "sshd_config"
        config.write_text(
            "\n".join(
                [
                    f"ListenAddress {host.address}",
                    "Port 22",
                    f"HostKey {self.keys / 'host_key'}",
                    f"PidFile {folder / 'sshd.pid'}",
                    f"AuthorizedKeysFile {self.keys / 'authorized_keys'}",
                    "PermitRootLogin prohibit-password",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "StrictModes no",
                    "Subsystem sftp internal-sftp",
                    f"SetEnv PATH={bin_dir}:/usr/local/bin:/usr/bin:/bin VLLM_TRIAGE_TEST_HOST={host.name} "
                    f"TMPDIR={self.tmp_dir(host)}",
                    "",
                ]
            )
        )
        host.process = subprocess.Popen(
            ["ip", "netns", "exec", host.namespace, SSHD, "-D", "-f", str(config), "-E", str(folder / "sshd.log")],
            stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def _wait(self, host: Host, seconds: float = WATCHDOG_FLOOR_S) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if host.process is not None and host.process.poll() is not None:
                log = (self.base / host.name / "sshd.log").read_text(errors="replace")
                raise RuntimeError(f"sshd of {host.name} exited: {log.strip()[-500:]}")
            try:
                with socket.create_connection((host.address, 22), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"sshd of {host.name} does not answer on {host.address}:22")

    def tmp_dir(self, host: Host) -> Path:
        """The host's own temporary folder (its sessions' TMPDIR): what a remote command leaves
        behind is there, apart from any other process's /tmp."""
        return self.base / host.name / "tmp"

    def inventory(self, path: Path, python: str = sys.executable) -> Path:
        """An Ansible INI inventory of every host (the unreachable one too)."""
        common = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o ConnectTimeout=5"
        lines = ["[gpu]"]
        for host in self.hosts:
            lines.append(f"{host.name} ansible_host={host.address}")
        lines += [
            "",
            "[gpu:vars]",
            "ansible_user=root",
            f"ansible_ssh_private_key_file={self.keys / 'client_key'}",
            f"ansible_python_interpreter={python}",
            f"ansible_ssh_common_args='{common}'",
            "",
        ]
        path.write_text("\n".join(lines))
        return path
