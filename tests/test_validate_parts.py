"""The ladder's parts without a server: statistics, the PNG, tool-call checks, metric aliases,
NCCL test output, and the multi-node rung's comparisons."""

from __future__ import annotations

import base64
import struct
import zlib
from pathlib import Path

import httpx
import pytest
from fakeserver import FakeServer

from vllm_triage.errors import InputError
from vllm_triage.validate import ValidateOptions, validate
from vllm_triage.validate.body import BodyError, lines, read_body
from vllm_triage.validate.client import Answer, StreamedToolCall
from vllm_triage.validate.credentials import Credentials, public_url
from vllm_triage.validate.deadlines import DEFAULT_DEADLINES, parse_deadlines
from vllm_triage.validate.metrics import MetricsError, flag, parse_metrics
from vllm_triage.validate.models import RequestRecord, RungResult
from vllm_triage.validate.rungs.concurrency import level_figures, levels, percentile
from vllm_triage.validate.rungs.image import png
from vllm_triage.validate.rungs.multi_node import nccl_test_figures
from vllm_triage.validate.toolcalls import check_answer


def test_levels_and_percentiles() -> None:
    assert levels(1) == [1] and levels(8) == [1, 2, 4, 8] and levels(6) == [1, 2, 4, 6]
    assert percentile([], 50) is None and percentile([3.0], 95) == 3.0
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile(list(range(101)), 95) == 95


def test_level_figures_keep_failures_visible() -> None:
    ok = RequestRecord(rung="c", kind="k", started_at=0, stream=True, ok=True, ttft_s=0.1,
                       e2e_s=1.0, inter_token_s=[0.02, 0.04], completion_tokens=32)  # fmt: skip
    failed = RequestRecord(rung="c", kind="k", started_at=0, stream=True, error="HTTP 503: busy")
    figures = level_figures([ok, ok, failed, failed], wall_s=2.0)
    assert (figures["requests"], figures["ok"], figures["errors"], figures["error_rate"]) == (
        4,
        2,
        2,
        0.5,
    )
    assert figures["error_samples"] == ["HTTP 503: busy"]
    assert figures["ttft_p50_s"] == 0.1 and figures["output_tokens_per_s"] == 32.0
    assert figures["itl_p50_s"] == pytest.approx(0.03)


def test_png_is_a_valid_png() -> None:
    data = png(4, 3)
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    length, kind = struct.unpack(">I4s", data[8:16])
    width, height = struct.unpack(">II", data[16:24])
    assert (kind, length, width, height) == (b"IHDR", 13, 4, 3)
    idat = data.index(b"IDAT")
    size = struct.unpack(">I", data[idat - 4 : idat])[0]
    assert len(zlib.decompress(data[idat + 4 : idat + 4 + size])) == 3 * (1 + 4 * 3)


def _answer(name: str | None, arguments: str, content: str = "") -> Answer:
    calls = [StreamedToolCall("c1", name, arguments)] if name else []
    return Answer(content=content, tool_calls=calls)


@pytest.mark.parametrize(
    ("answer", "required", "named", "expected"),
    [
        (_answer("get_weather", '{"city": "Lisbon"}'), True, None, []),
        (_answer("get_weather", '{"city": "Lisbon", "unit": "kelvin"}'), True, None, ["unit: 'kelvin' is not one of"]),
        (_answer("get_weather", '{"city": "Lis'), True, None, ["arguments are not JSON"]),
        (_answer("get_weather", "{}"), True, None, ["'city' is a required property"]),
        (_answer("launch_missiles", "{}"), True, None, ["undeclared tool"]),
        (_answer("search_docs", '{"query": "x"}'), True, "get_weather", ["named tool 'get_weather' asked"]),
        (_answer(None, "", '<tool_call>{"name": "get_weather"}</tool_call>'), False, None, ["leaked into content"]),
        (_answer(None, "", "It is sunny."), True, None, ["no tool_calls although"]),
        (_answer(None, "", "It is sunny."), False, None, []),
    ],
)  # fmt: skip
def test_tool_call_checks(
    answer: Answer, required: bool, named: str | None, expected: list[str]
) -> None:
    errors = check_answer(answer, required, named)
    assert len(errors) == len(expected)
    for error, fragment in zip(errors, expected, strict=True):
        assert fragment in error


def test_metric_aliases_old_and_new_names(kb) -> None:
    new = parse_metrics(
        "# TYPE vllm:prefix_cache_hits counter\n"
        'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 1024.0\n'
        'vllm:prefix_cache_hits_total{engine="1",model_name="m"} 512.0\n'
        "# TYPE vllm:cache_config_info gauge\n"
        'vllm:cache_config_info{block_size="128",enable_prefix_caching="False"} 1.0\n'
    )
    assert new.value(kb, "prefix_cache_hits") == 1536.0
    assert new.name(kb, "prefix_cache_hits") == "vllm:prefix_cache_hits_total"
    assert flag(new.labels(kb, "cache_config_info"), "enable_prefix_caching") is False
    old = parse_metrics(
        "# TYPE vllm:gpu_prefix_cache_queries counter\n"
        'vllm:gpu_prefix_cache_queries_total{model_name="m"} 40.0\n'
    )
    assert (
        old.value(kb, "prefix_cache_queries") == 40.0 and old.value(kb, "prefix_cache_hits") is None
    )
    with pytest.raises(MetricsError):
        parse_metrics("this is { not prometheus")


def test_nccl_test_summary_lines() -> None:
    output = "#  Out of bounds values : 0 OK\n# Avg bus bandwidth    : 171.331 \n#\n"
    assert nccl_test_figures(output) == {
        "avg_bus_bandwidth_gbps": 171.331,
        "out_of_bounds_values": 0,
    }
    assert nccl_test_figures("nothing") == {
        "avg_bus_bandwidth_gbps": None,
        "out_of_bounds_values": None,
    }


@pytest.mark.slow
def test_multi_node_rung(tmp_path: Path) -> None:
    log = tmp_path / "node1.log"
    log.write_text("NCCL WARN Net : Connect to 10.0.0.2<45123> failed : Connection refused\n")
    nccl = tmp_path / "all_reduce_perf"
    nccl.write_text(
        "#!/bin/sh\necho '# Out of bounds values : 0 OK'\necho '# Avg bus bandwidth    : 171.3'\n"
    )
    nccl.chmod(0o755)
    launch = "vllm serve moonshotai/Kimi-K3 -tp 8 --all2all-backend flashinfer_nvlink_one_sided"
    with FakeServer() as server:
        options = ValidateOptions(
            url=server.url, case=tmp_path, multi_node=True, launch_cmd=launch, transport="rdma",
            logs=(log,), nccl_test=str(nccl), keep_going=True, max_concurrency=1,
        )  # fmt: skip
        result = validate(options)
    rung = next(r for r in result.run.rungs if r.name == "multi_node")
    assert rung.status == "failed"
    assert "wants deepep_v2" in (rung.reason or "") and "VT511" in (rung.reason or "")
    assert rung.figures["avg_bus_bandwidth_gbps"] == 171.3
    assert rung.figures["expected_backend"] == "deepep_v2"


def test_loose_tools_are_the_ladders_tools_without_strict() -> None:
    from vllm_triage.validate.toolcalls import TOOLS, loose_tools

    assert all(tool["function"]["strict"] is True for tool in TOOLS)
    loose = loose_tools()
    assert all("strict" not in tool["function"] for tool in loose)
    assert [t["function"]["parameters"] for t in loose] == [
        t["function"]["parameters"] for t in TOOLS
    ]


def test_each_sample_is_read_once() -> None:
    snapshot = parse_metrics(
        "# TYPE vllm:cache_config_info gauge\n"
        'vllm:cache_config_info{block_size="128",enable_prefix_caching="True"} 1.0\n'
    )
    assert len(snapshot.samples["vllm:cache_config_info"]) == 1


def _response(body: bytes, encoding: str | None = None) -> httpx.Response:
    headers = {"Content-Encoding": encoding} if encoding else {}
    return httpx.Response(200, headers=headers, stream=httpx.ByteStream(body))


def _deflate(data: bytes, wbits: int) -> bytes:
    compressor = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return compressor.compress(data) + compressor.flush()


@pytest.mark.parametrize(
    ("encoding", "wbits"),
    [("gzip", 31), ("x-gzip", 31), ("deflate", 15), ("deflate", -15), (None, 0)],
)
def test_bodies_are_decoded_within_the_cap(encoding: str | None, wbits: int) -> None:
    data = b'{"data": []}' * 1000
    body = _deflate(data, wbits) if encoding else data
    assert read_body(_response(body, encoding), len(data), "x") == data
    with pytest.raises(BodyError, match=f"x: larger than {len(data) - 1} bytes"):
        read_body(_response(body, encoding), len(data) - 1, "x")


def test_undecodable_and_unknown_encodings_are_refused() -> None:
    with pytest.raises(BodyError, match="x: not valid gzip data"):
        read_body(_response(b"not gzip at all", "gzip"), 1000, "x")
    for encoding in ("br", "zstd", "gzip, deflate"):
        with pytest.raises(BodyError, match="unsupported Content-Encoding"):
            read_body(_response(b"", encoding), 1000, "x")


def test_lines_split_at_any_line_end_across_chunks() -> None:
    chunks = [b"data: a\r", b"\ndata: b\n\n", b"data: c\rdata: d", b"\r", b"\n", b"tail"]
    assert list(lines(chunks, 64, "s")) == ["data: a", "data: b", "", "data: c", "data: d", "tail"]
    with pytest.raises(BodyError, match="s: a line longer than 8 bytes"):
        list(lines([b"0123", b"45678", b"9\n"], 8, "s"))


def test_deadlines_from_the_command_line() -> None:
    deadlines = parse_deadlines(["all=5", "health=1.5"])
    assert deadlines["health"] == 1.5 and deadlines["concurrency"] == 5.0
    assert parse_deadlines([]) == DEFAULT_DEADLINES
    for bad in ("health", "nope=3", "health=0", "health=abc", "health=nan", "all=1e9"):
        with pytest.raises(InputError, match="--deadline"):
            parse_deadlines([bad])


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:pa%40ss@127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        ("https://token@host", "https://host"),
        ("user:pass@host:8000", "host:8000"),
        ("http://host:8000", "http://host:8000"),
        ("http://host/path?q=a@b", "http://host/path?q=a@b"),
    ],
)
def test_the_url_is_shown_without_its_user_part(url: str, shown: str) -> None:
    assert public_url(url) == shown


def test_credentials_are_masked_in_every_form() -> None:
    bare, credentials = Credentials.split("http://alice:pa%2Fss%20word@h:1/v1")
    assert bare == "http://h:1/v1" and credentials.basic == ("alice", "pa/ss word")
    basic = base64.b64encode(b"alice:pa/ss word").decode()
    text = f"got pa/ss word, pa%2Fss%20word, Basic {basic} from alice"
    assert credentials.mask(text) == "got [redacted], [redacted], Basic [redacted] from alice"
    assert Credentials.split("http://h:1")[1].mask("pa/ss word") == "pa/ss word"


def test_masking_a_model_keeps_it_whole_even_for_a_secret_like_json() -> None:
    credentials = Credentials(basic=("u", '", "ok": true, "x": "'))
    result = RungResult(
        name="health",
        status="failed",
        reason='echoed: ", "ok": true, "x": "',
        figures={'", "ok": true, "x": "': 1},
    )
    masked = credentials.mask_model(result)
    assert masked.reason == "echoed: [redacted]" and masked.figures == {"[redacted]": 1}
    assert Credentials().mask_model(result) is result
