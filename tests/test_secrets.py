"""No secret reaches a bundle, and an interrupted collect leaves nothing behind.

Every secret form the hardening issue lists is planted in every input collect reads: log files
with each envelope a line can carry (plain, `docker logs --timestamps` / `kubectl logs
--timestamps`, Docker json-file lines, vLLM's `(APIServer pid=1)` prefix), the launch command,
the container's inspect (fake docker), the pod JSON with kubectl's last-applied-configuration
annotation, environments, file names and a host config file. Then every byte of the bundle folder,
of the extracted archive and of the raw and decompressed .tar.gz, and what the CLI printed, is
searched for each secret value and its base64, URL-encoded and JSON-escaped forms.

The second half interrupts a collect mid-probe (SIGINT, and SIGTERM) while commands hang, flood,
leave a child in its own session and a child holding stdout: nothing raw is left in the temporary
folder, no partial bundle in the case folder, and no process the fakes started is alive.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import random
import signal
import subprocess
import sys
import tarfile
import urllib.parse
from dataclasses import replace
from pathlib import Path

import pytest
from deadlines import wait_for, watchdog_s
from fakehost import FakeHost

DATA = Path(__file__).parent / "data"
SMI_XML = DATA / "collect" / "h200-580.159.04" / "nvidia-smi-q-x.xml"
IMAGE_CONFIG = DATA / "image-configs" / "vllm-openai-cu130.inspect.json"

# Distinctive, high-entropy values (a hit in the bundle cannot be chance), one per form.
K1 = "k1-Zq8vW3nR7tY2pL5xQm"  # --api-key K1 K2: the first value
K2 = "k2-Hb4mJ9cX6sD1fG0qWe"  # ... and the second
KEQ = "eq-Uo7Ii3Pp5Aa9Ss2DxCv"  # --api-key=KEQ
HF_ARG = "hf_ArgTok9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk"  # --hf-token HF_ARG
CONTINUED = "cont-Lm3Nb6Vc9Xz2Qa5Ws8Er"  # on the line after `--api-key \`
DOTTED = "dot-Rf4Tg7Yh1Uj3Ik6Ol9Pz"  # "com.example.api_key": ...
DB_PASSWORD = "dbPw/Mk8Nj2+Bh5Vg9Cf3Dx"  # "db.password": ... (/ and + change when encoded)
BEARER = "brr-Qe7Wr1Ty4Ui8Op2As5Dg"  # Bearer X without Authorization:
PRETTY = "prt-Zx9Cv3Bn6Mq1Wl4Ek7Rj"  # "password":<newline> "x"
PRETTY_SEP = "sep-Yt5Re2Wq8Po1Iu4Ly7Kt"  # "password"<newline> : "x"
PRETTY_LIST = "lst-Ju6Hy3Gt9Fr2De5Sw8Aq"  # "api_key": [<newline> "x" ]
YAML_BLOCK = "blk-Ws4Ed7Rf1Tg3Yh6Uj9Ik"  # secret: |<newline>  x
PAIR = "pair-Ol2Ik5Uj8Yh1Tg4Rf7Ed"  # - name: MY_PASSWORD<newline>  value: x
LOGIN = "lgn-Gf6Dd3Ss9Aa2Qq5Ww8Ee"  # docker login -p X
AUTH_EQ = "aeq-Hh4Jj7Kk1Ll3Zz6Xx9Cc"  # authorization=Bearer X
URL_PASSWORD = "url-Vv2Bb5Nn8Mm1Qq4Ww7Rr"  # https:\/\/user:X@
ANNOTATED = "ann-Tt3Yy6Uu9Ii2Oo5Pp8Aa"  # only in the pod spec and its annotation (omitted env)
ENV_TOKEN = "hf_EnvTok1Zx2Cv3Bn4Mq5Wl6Ek7Rj8Ty9Ui0"  # HF_TOKEN in environments
FILE_TOKEN = "hf_FileTok2Ab3Cd4Ef5Gh6Ij7Kl8Mn9Op0Qr"  # in a log file's name
WEAK = "hunter2!"  # a low-entropy password
_rng = random.Random(8)
PEM_LINES = [
    "".join(_rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
            for _ in range(64))
    for _ in range(3)
] + ["Zm9vYmFyQmF6cXV4MTIz"]  # fmt: skip


def _random(alphabet: str, size: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(size))


_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
# The second adversarial pass's forms (issue 19), each with the line that carries it.
AZURE_KEY = base64.b64encode(_random(_ALNUM, 64).encode()).decode()
STRIPE_SK = "sk_live_" + _random(_ALNUM, 24)
STRIPE_RK = "rk_live_" + _random(_ALNUM, 26)
NETRC_ONE = "ntrc1-" + _random(_ALNUM, 14)
NETRC_MULTI = "ntrc2-" + _random(_ALNUM, 14)
DOCKER_PASSWORD = "dkr-" + _random(_ALNUM, 16)
DOCKERCFG = base64.b64encode(
    json.dumps(
        {"auths": {"registry.example.com": {"auth": base64.b64encode(
            f"robot:{DOCKER_PASSWORD}".encode()).decode()}}},
        separators=(",", ":"),
    ).encode()
).decode()  # fmt: skip
NPM_TOKEN = "npm_" + _random(_ALNUM, 36)
SLACK_HOOK = f"T{_random('0123456789ABCDEF', 8)}/B{_random('0123456789ABCDEF', 8)}/" + _random(
    _ALNUM, 24
)
AWS_ID = "AKIA" + _random("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
AWS_SECRET = _random(_ALNUM + "+/", 40)
PEM_AFTER = [_random(_ALNUM + "+/", 64) for _ in range(2)]
CLIENT_ID = "cid-" + _random(_ALNUM, 20)
ADO_PAT = "pat-" + _random(_ALNUM, 40)
COOKIE = "ck-" + _random(_ALNUM, 20)
LICENSE = "lic-" + _random(_ALNUM, 36)
API_KEY_V2 = "v2-" + _random(_ALNUM, 28)
# Values with no name of their own, that prose or a command's shape names (this pass's rules).
PROSE_HEX = _random("0123456789abcdef", 32)
PROSE_UUID = "-".join(_random("0123456789abcdef", n) for n in (8, 4, 4, 4, 12))
CURL_PASSWORD = _random(_ALNUM, 18)
XML_VALUE = "xml-" + _random(_ALNUM, 20)
WORD_PASSWORD = "".join(_rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(12))
RANDOM_LOWER = _random("abcdefghijklmnopqrstuvwxyz0123456789", 32)
SECOND_PASS_LINES = {
    AZURE_KEY: "DefaultEndpointsProtocol=https;AccountName=models1;AccountKey="
    + AZURE_KEY + ";EndpointSuffix=core.windows.net",
    STRIPE_SK: f"billing client configured with {STRIPE_SK}",
    STRIPE_RK: f"restricted billing key {STRIPE_RK} loaded",
    NETRC_ONE: f"machine huggingface.co login robot password {NETRC_ONE}",
    DOCKERCFG: f"imagePullSecret .dockerconfigjson: {DOCKERCFG}",
    NPM_TOKEN: f"//registry.npmjs.org/:_authToken={NPM_TOKEN}",
    SLACK_HOOK: f"alerts go to https://hooks.slack.com/services/{SLACK_HOOK}",
    AWS_SECRET: f"credentials {AWS_ID} {AWS_SECRET}",
    CLIENT_ID: f"AZURE_CLIENT_ID={CLIENT_ID}",
    ADO_PAT: f"ADO_PAT={ADO_PAT}",
    COOKIE: f"SESSION_COOKIE={COOKIE}",
    LICENSE: f"NEWRELIC_LICENSE_KEY={LICENSE}",
    API_KEY_V2: f"SERVICE_API_KEY_V2={API_KEY_V2}",
    PROSE_HEX: f"loaded credential {PROSE_HEX} for upstream",
    PROSE_UUID: f"using token {PROSE_UUID} for the registry",
    CURL_PASSWORD: f"curl -sS -u robot:{CURL_PASSWORD} https://registry.example.com/v2/",
    XML_VALUE: f'<add key="ApiKey" value="{XML_VALUE}" />',
    WORD_PASSWORD: f'provisioner: admin password "{WORD_PASSWORD}" set',
    RANDOM_LOWER: f"forwarding {RANDOM_LOWER} to the gateway",
}  # fmt: skip
SECOND_PASS = [*SECOND_PASS_LINES, DOCKER_PASSWORD, AWS_ID, NETRC_MULTI, *PEM_AFTER]
SECRETS = [
    K1, K2, KEQ, HF_ARG, CONTINUED, DOTTED, DB_PASSWORD, BEARER, PRETTY, PRETTY_SEP, PRETTY_LIST,
    YAML_BLOCK, PAIR, LOGIN, AUTH_EQ, URL_PASSWORD, ANNOTATED, ENV_TOKEN, FILE_TOKEN, WEAK,
    *PEM_LINES, *SECOND_PASS,
]  # fmt: skip


def _forms(secret: str) -> set[bytes]:
    """The secret as an attacker would grep for it: plain, JSON-escaped (with and without an
    escaped slash), URL-encoded, base64 and base64url at every alignment inside a longer text."""
    raw = secret.encode()
    forms = {
        raw,
        json.dumps(secret)[1:-1].encode(),
        json.dumps(secret)[1:-1].replace("/", "\\/").encode(),
        urllib.parse.quote(secret, safe="").encode(),
        urllib.parse.quote_plus(secret).encode(),
    }
    for prefix in (b"", b"\x00", b"\x00\x00"):
        encoded = base64.b64encode(prefix + raw)
        # The characters that depend on the secret alone, whatever comes before and after.
        core = encoded[4 if prefix else 0 : -4]
        if len(core) >= 8:
            forms |= {core, core.replace(b"+", b"-").replace(b"/", b"_")}
    return forms


def _log_lines() -> list[str]:
    """Every secret form as log lines (no envelope yet)."""
    return [
        "(starting) vllm serve /models/m --api-key " + f"{K1} {K2} --port 8000",
        f"vllm serve /models/m --api-key={KEQ} --hf-token {HF_ARG}",
        "vllm serve /models/m \\",
        "  --api-key \\",
        f"  {CONTINUED} --port 8000",
        json.dumps({"com.example.api_key": DOTTED, "db.password": DB_PASSWORD}),
        f"openai.AuthenticationError: retrying with Bearer {BEARER} after 401",
        "{",
        '  "password":',
        f'      "{PRETTY}"',
        "}",
        '  "password"',
        f'  : "{PRETTY_SEP}"',
        '"api_key": [',
        f'  "{PRETTY_LIST}"',
        "]",
        "secret: |",
        f"  {YAML_BLOCK}",
        "model: m",
        "- name: MY_PASSWORD",
        f"  value: {PAIR}",
        f"docker login -u robot -p {LOGIN} registry.example.com",
        f"proxy_set_header authorization=Bearer {AUTH_EQ}",
        '{"registry": "https:\\/\\/robot:' + URL_PASSWORD + '@registry.example.com\\/v2"}',
        f"db password: {WEAK}",
        f"environment HF_TOKEN={ENV_TOKEN}",
        "-----BEGIN RSA PRIVATE KEY-----",
        *PEM_LINES,
        "-----END RSA PRIVATE KEY-----",
        *SECOND_PASS_LINES.values(),
        "machine huggingface.co",
        "  login robot",
        f"  password {NETRC_MULTI}",
        "PRIVATE_KEY=-----BEGIN RSA PRIVATE KEY-----",
        *PEM_AFTER,
        "-----END RSA PRIVATE KEY-----",
        "INFO 11-28 09:14:05 [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:8000",
    ]


def _stamp(index: int) -> str:
    # Docker trims trailing zeros of the nanoseconds: the lengths vary line to line.
    return f"2026-11-28T09:14:{index % 60:02d}.{(index * 7919) % 10**9:d}Z"


ENVELOPES = {
    "plain": lambda i, line: line,
    "timestamps": lambda i, line: f"{_stamp(i)} {line}",
    "json-file": lambda i, line: json.dumps(
        {"log": line + "\n", "stream": "stderr" if i % 2 else "stdout", "time": _stamp(i)},
        separators=(",", ":"),
    ),
    "apiserver": lambda i, line: (
        f"(APIServer pid=1) INFO 11-28 09:14:02 [api_server.py:123] {line}"
    ),
    "timestamps+apiserver": lambda i, line: (
        f"{_stamp(i)} (APIServer pid=1) INFO 11-28 09:14:02 [launcher.py:46] {line}"
    ),
}


def _log(envelope: str) -> str:
    wrap = ENVELOPES[envelope]
    return "".join(wrap(index, line) + "\n" for index, line in enumerate(_log_lines()))


def _launch_command() -> str:
    return (
        f"HF_TOKEN={ENV_TOKEN} DB_PASSWORD='{WEAK}' vllm serve /models/m \\\n"
        f"  --api-key {K1} {K2} \\\n"
        f"  --hf-token {HF_ARG} \\\n"
        f"  --api-key={KEQ} \\\n"
        "  --api-key \\\n"
        f"  {CONTINUED} \\\n"
        "  --tensor-parallel-size 8 --port 8000\n"
        f"# then: docker login -p {LOGIN} registry.example.com\n"
    )


def _inspect() -> list[dict[str, object]]:
    return [
        {
            "Id": "3f2a9c1e0b7d",
            "Name": "/vllm",
            "Path": "vllm",
            "Args": ["serve", "/models/m", "--api-key", K1, K2],
            "Config": {
                "Image": "vllm/vllm-openai:kimi-k3",
                "User": "1000:1000",
                "Env": [
                    f"HF_TOKEN={ENV_TOKEN}",
                    f"DB_PASSWORD={WEAK}",
                    f"VLLM_NOTE=Bearer {BEARER}",
                    f"HTTPS_PROXY=https:\\/\\/robot:{URL_PASSWORD}@proxy.example:3128",
                    "NCCL_DEBUG=INFO",
                    f"APP_SETTING={ANNOTATED}",
                    f"MODELS_STORE={SECOND_PASS_LINES[AZURE_KEY]}",
                ],
                "Entrypoint": ["vllm", "serve"],
                "Cmd": ["/models/m", "--api-key", K1, K2, f"--api-key={KEQ}", "--hf-token", HF_ARG],
                "Labels": {
                    "com.example.api_key": DOTTED,
                    "db.password": DB_PASSWORD,
                    "note": f"login with docker login -p {LOGIN} registry.example.com",
                },
            },
            "State": {"Status": "exited", "ExitCode": 1, "OOMKilled": False},
            "HostConfig": {"Runtime": "nvidia", "ShmSize": 68719476736},
            "Mounts": [],
        }
    ]


def _pod() -> dict[str, object]:
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:kimi-k3",
        "command": ["vllm", "serve"],
        "args": ["/models/m", "--api-key", K1, K2, "--hf-token", HF_ARG],
        "env": [
            {"name": "HF_TOKEN", "value": ENV_TOKEN},
            {"name": "MY_DB_PASSWORD", "value": WEAK},
            {"name": "APP_SETTING", "value": ANNOTATED},
            {"name": "NCCL_DEBUG", "value": "INFO"},
        ],
    }
    applied = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [container]}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "vllm-0",
            "namespace": "ml",
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": json.dumps(applied) + "\n",
                "example.com/api-token": DOTTED,
                "example.com/pull-secret": DOCKERCFG,
            },
        },
        "spec": {"nodeName": "gpu-1", "containers": [container]},
        "status": {"phase": "Running", "containerStatuses": []},
    }


def _host(base: Path) -> FakeHost:
    host = FakeHost(base / "host").install()
    logs = base / "fake-logs"
    logs.mkdir()
    for name in ENVELOPES:
        (logs / f"{name}.log").write_text(_log(name))
    (base / "inspect.json").write_text(json.dumps(_inspect()))
    (base / "pod.json").write_text(json.dumps(_pod()))
    smi = SMI_XML.read_text().replace(
        "<processes>",
        "<processes><process_info><pid>77</pid><type>C</type><process_name>python3 -m "
        f"vllm.entrypoints.openai.api_server --api-key {K1} {K2}</process_name>"
        "<used_memory>1 MiB</used_memory></process_info>",
        1,
    )
    (base / "smi.xml").write_text(smi)
    host.reply("nvidia-smi -q -x", stdout_file=base / "smi.xml")
    host.reply("docker version --format {{json .}}", stdout='{"Client":{"Version":"27.3.1"}}')
    host.reply("docker inspect --type container vllm", stdout_file=base / "inspect.json")
    host.reply("docker logs --timestamps vllm", stdout_file=logs / "timestamps.log")
    host.reply("docker image inspect vllm/vllm-openai:kimi-k3", stdout_file=IMAGE_CONFIG)
    ns = "--namespace ml"
    host.reply(f"kubectl get pod vllm-0 {ns} --output json", stdout_file=base / "pod.json")
    events = {"items": [{"type": "Warning", "reason": "BackOff", "message": f"Bearer {BEARER}"}]}
    host.reply(
        f"kubectl get events {ns} --field-selector involvedObject.name=vllm-0 --output json",
        stdout=json.dumps(events),
    )
    host.reply(
        f"kubectl logs vllm-0 {ns} --all-containers --timestamps --previous",
        stdout_file=logs / "timestamps+apiserver.log",
    )
    host.reply(
        f"kubectl logs vllm-0 {ns} --all-containers --timestamps",
        stdout_file=logs / "json-file.log",
    )
    host.file(
        "/etc/docker/daemon.json",
        '{\n  "registry-mirrors": [],\n  "password":\n    "' + PRETTY + '",\n  "auths": {\n'
        '    "registry.example.com": {"auth": "' + base64.b64encode(f"robot:{LOGIN}".encode()).decode()
        + '"}\n  }\n}\n',
    )  # fmt: skip
    return host


def _cli(args: list[str], path: Path, tmpdir: Path, **kwargs: object) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PATH=str(path), TMPDIR=str(tmpdir), COLUMNS="200")
    return subprocess.Popen(
        [sys.executable, "-m", "vllm_triage", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        **kwargs,  # type: ignore[call-overload]
    )


def _every_byte(case: Path, extracted: Path) -> list[tuple[str, bytes]]:
    """(where, bytes) for every name and content in the case folder, the raw and decompressed
    archives, and the archive extracted."""
    found = []
    for root in (case, extracted):
        for path in sorted(root.rglob("*")):
            found.append((f"name {path}", str(path.relative_to(root)).encode()))
            if path.is_file():
                data = path.read_bytes()
                found.append((str(path), data))
                if path.name.endswith(".tar.gz"):
                    found.append((f"{path} (gunzipped)", gzip.decompress(data)))
    return found


@pytest.mark.slow
def test_no_planted_secret_reaches_the_bundle_in_any_form(tmp_path: Path) -> None:
    host = _host(tmp_path)
    given = tmp_path / "given"
    given.mkdir()
    logs = []
    for name in ENVELOPES:
        log = given / f"{name}-{FILE_TOKEN}.log"
        log.write_text(_log(name))
        logs += ["--log", str(log)]
    launch = given / "launch.sh"
    launch.write_text(_launch_command())
    case, scratch = tmp_path / "case", tmp_path / "tmp"
    scratch.mkdir()
    args = [
        "collect", "--container", "vllm", "--pod", "vllm-0", "-n", "ml", "--launch-cmd",
        str(launch), "--host-root", str(host.root), "--case", str(case), "--timeout", "20",
        "--format", "json", *logs,
    ]  # fmt: skip
    process = _cli(args, host.bin, scratch)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr.decode()
    manifest = json.loads(stdout)

    (archive,) = case.glob("bundles/*.tar.gz")
    extracted = tmp_path / "extracted"
    with tarfile.open(archive) as tar:
        tar.extractall(extracted, filter="data")
    everything = [*_every_byte(case, extracted), ("stdout", stdout), ("stderr", stderr)]
    leaks = [
        f"{secret!r} as {form!r} in {where}"
        for secret in SECRETS
        for form in _forms(secret)
        for where, data in everything
        if form in data
    ]
    assert not leaks, "\n".join(leaks[:20])
    assert not list(scratch.iterdir()), "the raw outputs are removed"

    # The bundle is still evidence: every input made it, redacted, with markers in place.
    states = {p["name"]: p["status"] for p in manifest["probes"]}
    assert states["container"] == states["kubernetes"] == states["vllm"] == "ok", manifest
    paths = {f["path"] for f in manifest["files"]}
    assert {"logs/container.log", "logs/pod-previous.log", "logs/pod-current.log"} <= paths
    assert sum(p.startswith("logs/given-") for p in paths) == len(ENVELOPES)
    bundle = next(p for p in (case / "bundles").iterdir() if p.is_dir())
    assert archive.name == f"{bundle.name}.tar.gz"
    facts = json.loads((bundle / "facts.json").read_text())
    assert facts["vllm"]["launch"]["model"] == "/models/m"
    assert facts["vllm"]["launch"]["tensor_parallel_size"] == 8
    assert facts["vllm"]["launch_source"] == "--launch-cmd"
    for rule in ("secret_arg", "secret_env", "private_key", "bearer_token", "registry_login",
                 "auth_header", "url_password", "hf_token"):  # fmt: skip
        assert manifest["redaction"].get(rule, 0) > 0, rule
    container_log = (bundle / "logs" / "container.log").read_text()
    assert "-----BEGIN RSA PRIVATE KEY-----" in container_log
    assert "Starting vLLM API server 0 on http://0.0.0.0:8000" in container_log
    pod = json.loads((bundle / "kubernetes" / "pod.json").read_text())
    applied = pod["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
    assert json.loads(applied)["spec"]["containers"][0]["env"][0]["name"] == "HF_TOKEN"
    for log in (bundle / "logs").iterdir():
        if "json-file" in log.name or log.name == "pod-current.log":
            for line in log.read_text().splitlines():
                json.loads(line)  # the json-file lines are still JSON


@pytest.mark.slow
def test_equal_secrets_share_a_tag_within_a_bundle_only(tmp_path: Path) -> None:
    """The same value shows the same tag everywhere in one bundle, and another in the next."""
    from vllm_triage.collect import CollectOptions, collect

    host = _host(tmp_path)
    log = tmp_path / "k.log"
    log.write_text(f"PASSWORD={WEAK}\nretry: password={WEAK}\n")
    options = CollectOptions(logs=(log,), host_root=host.root, timeout=10)
    tags = []
    for case in ("one", "two"):
        result = collect(replace(options, case=tmp_path / case), runner=host.runner())
        text = next((result.folder / "logs").iterdir()).read_text()
        found = [line.rsplit(":", 1)[1].rstrip("]") for line in text.splitlines()]
        assert found[0] == found[1]
        tags.append(found[0])
    assert tags[0] != tags[1]


# -- interrupted collect ------------------------------------------------------------------


def _interrupt_host(base: Path) -> FakeHost:
    host = FakeHost(base / "host").install()
    host.reply("nvidia-smi -q -x", behaviour="hang")
    host.reply("ibstat", behaviour="setsid")
    host.reply("ibv_devinfo", behaviour="orphan")
    host.reply("docker version --format {{json .}}", stdout='{"Client":{"Version":"27.3.1"}}')
    host.reply("docker inspect --type container vllm", stdout=json.dumps(_inspect()), delay=0.1)
    host.reply("docker logs --timestamps vllm", behaviour="flood_forever")
    return host


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.slow
def test_an_interrupted_collect_leaves_nothing_behind(tmp_path: Path, signum: int) -> None:
    host = _interrupt_host(tmp_path)
    case, scratch = tmp_path / "case", tmp_path / "tmp"
    scratch.mkdir()
    args = ["collect", "--container", "vllm", "--host-root", str(host.root), "--case", str(case),
            "--timeout", "60"]  # fmt: skip
    process = _cli(args, host.bin, scratch)

    # Wait until the commands run: the hanging one, the daemon child, and the flood writing raw
    # output into the scratch folder.
    def running() -> bool:
        raw = [p for d in scratch.glob("vllm-triage-*") for p in d.iterdir()]
        flooding = any(p.name.endswith("docker_logs.out") and p.stat().st_size for p in raw)
        return flooding and len(host.alive()) >= 3

    try:
        wait_for(running, "the fakes did not start")
    except AssertionError:
        process.kill()
        raise
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=watchdog_s())  # it ends: it waits for nothing
    assert process.returncode == 130, stderr.decode()
    assert b"Traceback" not in stderr and len(stderr.strip().splitlines()) <= 1
    assert not list(scratch.iterdir()), "no raw output is left in the temporary folder"
    # No bundle, no partial one: at most the empty folders of the case.
    assert not case.exists() or [p.name for p in case.rglob("*")] in ([], ["bundles"])
    wait_for(lambda: host.alive() == [], "every process the commands started is killed")
    assert len(host.pids.read_text().splitlines()) >= 4, "the setsid and orphan children ran"


# -- what diagnose, report and the terminal show ------------------------------------------

DRIVER_FAILURE = "RuntimeError: The NVIDIA driver on your system is too old (found version 12090). "


@pytest.mark.slow
@pytest.mark.parametrize("envelope", ["plain", "json-file", "timestamps"])
def test_no_planted_secret_reaches_a_diagnosis_a_report_or_the_terminal(
    tmp_path: Path, envelope: str
) -> None:
    """Each one-line form on the failure's own line, three to a log (a rule keeps its first three
    lines as evidence): diagnose prints and keeps them redacted (text, JSON, markdown, history),
    and so does the report built from that case."""
    from cli import run_cli

    forms = [*SECOND_PASS_LINES.values(), f"HF_TOKEN={ENV_TOKEN}", f"--api-key {K1} {K2}",
             f"Bearer {BEARER}", f"docker login -p {LOGIN} registry.example.com"]  # fmt: skip
    wrap = ENVELOPES[envelope]
    case = tmp_path / "case"
    printed: list[tuple[str, bytes]] = []
    for start in range(0, len(forms), 3):
        lines = ["(APIServer pid=1) INFO 12-01 10:00:00 [api_server.py:1] vLLM API server"]
        lines += [DRIVER_FAILURE + form for form in forms[start : start + 3]]
        log = tmp_path / f"failure-{start}.log"
        log.write_text("".join(wrap(i, line) + "\n" for i, line in enumerate(lines)))
        for output in ("text", "json", "markdown"):
            result = run_cli("diagnose", str(log), "--case", str(case), "--format", output)
            assert result.exit_code == 0, result.stderr
            assert "driver_too_old" in result.stdout or "driver" in result.stdout.lower()
            printed += [(f"{log.name} {output} stdout", result.stdout.encode()),
                        (f"{log.name} {output} stderr", result.stderr.encode())]  # fmt: skip
    result = run_cli("report", "--case", str(case))
    assert result.exit_code == 0, result.stderr
    printed += [
        ("report stdout", result.stdout.encode()),
        ("report stderr", result.stderr.encode()),
    ]
    everything = [*_every_byte(case, case), *printed]
    assert (case / "report.html").is_file() and list((case / "history").iterdir())
    secrets = [*SECOND_PASS_LINES, ENV_TOKEN, K1, K2, BEARER, LOGIN, DOCKER_PASSWORD, AWS_ID]
    leaks = [
        f"{secret!r} as {form!r} in {where}"
        for secret in secrets
        for form in _forms(secret)
        for where, data in everything
        if form in data
    ]
    assert not leaks, "\n".join(leaks[:20])
    diagnosis = json.loads((case / "diagnosis.json").read_text())
    assert diagnosis["primary"]["cause"] == "driver_too_old"
    evidence = " ".join(e["text"] for e in diagnosis["primary"]["evidence"])
    assert "[REDACTED:" in evidence, "the evidence is there, redacted"
