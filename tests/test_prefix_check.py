"""prefix-check: planted divergences are found and named; a clean set reuses nearly everything.

The request sets are built here the way an agent sends them: a long system prompt, five tools with
JSON Schemas, a multi-turn history with tool calls, and a last user message that differs.
"""

from __future__ import annotations

import copy
import json
import re
import string
import sys
from pathlib import Path
from typing import Any

import pytest
from cli import Result
from cli import run_cli as run_in
from deadlines import ends_in_time

from vllm_triage.errors import InputError
from vllm_triage.i18n import Language, catalog
from vllm_triage.knowledge import load_knowledge
from vllm_triage.launch import parse_launch_command
from vllm_triage.prefix.check import (
    FIRST_PAIR,
    LAUNCH_TEXTS,
    REQUIRED,
    UNITS,
    PrefixCheckOptions,
    check_launch,
    common_prefix,
    excerpt,
    launch_said,
    load_requests,
    prefix_check,
    render_canonical,
)
from vllm_triage.prefix.models import PrefixReport
from vllm_triage.render.markdown import prefix_markdown
from vllm_triage.render.prefix_check import prefix_renderable

REPO = Path(__file__).parent.parent
EXIT_OK, EXIT_BAD_INPUT = 0, 2

SYSTEM = "\n\n".join(
    [
        "You are Atlas, the coding agent of the payments team. You work inside the team's "
        "monorepo through the tools below and nothing else.",
        "Rules:\n"
        + "\n".join(
            f"{n}. {rule}"
            for n, rule in enumerate(
                [
                    "Read a file before you change it; never guess its content.",
                    "Keep changes small and focused on the task; do not reformat unrelated code.",
                    "Run the tests that cover what you changed before you say you are done.",
                    "Never print secrets, tokens or customer data, even when a file contains them.",
                    "When a test fails, read the failure, fix the cause, and run it again.",
                    "Write commit messages in the imperative mood, under 72 characters.",
                    "Ask the user when the task is ambiguous instead of guessing intent.",
                    "Prefer the standard library; adding a dependency needs the user's approval.",
                ],
                start=1,
            )
        ),
        "Repository layout: services/ holds one folder per service (ledger, payouts, risk, "
        "webhooks), libs/ the shared libraries (money, idempotency, audit), tools/ the build "
        "scripts. Every service has a tests/ folder run by `make test SERVICE=<name>`.",
        "Style: Python 3.12, type hints everywhere, ruff and mypy strict must pass. Money is "
        "always an integer number of minor units with an ISO 4217 currency, never a float.",
        "When you open a pull request, summarise what changed and why, list the tests you ran, "
        "and link the ticket. Keep the description under 300 words.",
    ]
)


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


TOOLS = [
    _tool(
        "read_file",
        "Read a file of the repository and return its content with line numbers.",
        {
            "path": {"type": "string", "description": "Path relative to the repository root."},
            "start_line": {"type": "integer", "minimum": 1},
            "end_line": {"type": "integer", "minimum": 1},
        },
        ["path"],
    ),
    _tool(
        "write_file",
        "Replace a file's content (the whole file).",
        {"path": {"type": "string"}, "content": {"type": "string"}},
        ["path", "content"],
    ),
    _tool(
        "run_tests",
        "Run the tests of one service and return the summary and the failures.",
        {
            "service": {"type": "string", "enum": ["ledger", "payouts", "risk", "webhooks"]},
            "pattern": {"type": "string", "description": "pytest -k expression"},
        },
        ["service"],
    ),
    _tool(
        "search_code",
        "Search the repository with a regular expression; returns matching lines.",
        {
            "pattern": {"type": "string"},
            "path": {"type": "string", "description": "Folder to search in."},
            "max_results": {"type": "integer", "default": 50, "maximum": 500},
        },
        ["pattern"],
    ),
    _tool(
        "open_pull_request",
        "Open a pull request from the current branch.",
        {
            "title": {"type": "string", "maxLength": 72},
            "body": {"type": "string"},
            "draft": {"type": "boolean", "default": True},
        },
        ["title", "body"],
    ),
]

FIRST_USER = (
    "The payouts service rounds currency conversions wrong for JPY: a payout of 1000 USD comes "
    "out one yen short. Find where the conversion happens, fix the rounding, and add a test."
)
LEDGER_SOURCE = "\n".join(
    f"{n:4d}  {line}"
    for n, line in enumerate(
        [
            "from decimal import Decimal, ROUND_DOWN",
            "",
            "def convert(amount_minor: int, rate: Decimal, exponent: int) -> int:",
            '    """Convert minor units with the rate; exponent is the target currency\'s."""',
            "    value = Decimal(amount_minor) * rate",
            "    return int(value.quantize(Decimal(1), rounding=ROUND_DOWN))",
        ]
        * 6,
        start=1,
    )
)
HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": FIRST_USER},
    {
        "role": "assistant",
        "content": "I will look for the conversion code first.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {
                    "name": "search_code",
                    "arguments": '{"pattern": "def convert", "path": "services/payouts"}',
                },
            }
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "services/payouts/fx.py:3: def convert(amount_minor: int, rate: Decimal, ...",
    },
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_2",
                "type": "function",
                "function": {
                    "name": "read_file",
                    "arguments": '{"path": "services/payouts/fx.py"}',
                },
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_2", "content": LEDGER_SOURCE},
    {
        "role": "assistant",
        "content": "The conversion truncates with ROUND_DOWN; it should round half-even. "
        "Shall I change it and add a JPY test?",
    },
]
LAST_USER = [
    "Yes, go ahead.",
    "Yes, and also check the webhooks service.",
    "Use ROUND_HALF_UP instead, finance asked for it.",
    "Go ahead, but keep the old behaviour behind a flag.",
    "Yes. Open a draft pull request when the tests pass.",
    "Before that, show me every caller of convert().",
]

UUIDS = [
    "4f1c2a9e-8b7d-4e3f-9a21-0c5d6e7f8a9b",
    "9b3e7c10-2d4f-4a6b-8c1e-5f7a9b2c4d6e",
    "0d8e6f4a-1b3c-4e5d-9f7a-2c4e6a8b0d1f",
    "6a2c4e8b-0d1f-4b3e-a5c7-9e1f3a5c7e9b",
    "c7e9a1b3-5d7f-4a9c-b1d3-f5a7c9e1b3d5",
    "2e4a6c8e-0a2c-4e6a-8c0e-2a4c6e8a0c2e",
]


def agent_request(last: str, **changes: Any) -> dict[str, Any]:
    """One realistic agent request; `changes` override system, tools or history."""
    system = changes.get("system", SYSTEM)
    history = copy.deepcopy(changes.get("history", HISTORY))
    return {
        "model": "moonshotai/Kimi-K3",
        "messages": [
            {"role": "system", "content": system},
            *history,
            {"role": "user", "content": last},
        ],
        "tools": copy.deepcopy(changes.get("tools", TOOLS)),
        "temperature": 0.2,
    }


def clean_set() -> list[dict[str, Any]]:
    return [agent_request(last) for last in LAST_USER]


def timestamp_set() -> list[dict[str, Any]]:
    return [
        agent_request(
            last, system=f"Current date and time: 2026-11-30T09:{14 + i:02d}:03Z\n\n{SYSTEM}"
        )
        for i, last in enumerate(LAST_USER)
    ]


def shuffled_tools_set() -> list[dict[str, Any]]:
    orders = [TOOLS[k:] + TOOLS[:k] for k in range(len(TOOLS))] + [TOOLS[::-1]]
    return [agent_request(last, tools=orders[i]) for i, last in enumerate(LAST_USER)]


def uuid_set() -> list[dict[str, Any]]:
    requests = []
    for i, last in enumerate(LAST_USER):
        history = copy.deepcopy(HISTORY)
        history[0]["content"] = f"Session {UUIDS[i]}.\n{FIRST_USER}"
        requests.append(agent_request(last, history=history))
    return requests


def changed_schema_set() -> list[dict[str, Any]]:
    requests = []
    for i, last in enumerate(LAST_USER):
        tools = copy.deepcopy(TOOLS)
        if i % 2:
            properties = tools[2]["function"]["parameters"]["properties"]
            properties["timeout_s"] = {"type": "integer", "default": 600}
        requests.append(agent_request(last, tools=tools))
    return requests


def image_history(order: tuple[int, int]) -> list[dict[str, Any]]:
    images = [
        {"type": "image_url", "image_url": {"url": "https://example.com/screens/before.png"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/screens/after.png"}},
    ]
    history = copy.deepcopy(HISTORY)
    history[0]["content"] = [
        {"type": "text", "text": "Here are the two payout screens, before and after the change."},
        images[order[0]],
        images[order[1]],
        {"type": "text", "text": FIRST_USER},
    ]
    return history


def image_order_set() -> list[dict[str, Any]]:
    return [
        agent_request(last, history=image_history((1, 0) if i % 2 else (0, 1)))
        for i, last in enumerate(LAST_USER)
    ]


def kinds(report: PrefixReport) -> set[str]:
    return {c.kind for c in report.classes}


def problem_kinds(report: PrefixReport) -> set[str]:
    return {c.kind for c in report.problems}


# ---------------------------------------------------------------------------------------------
# the planted divergences


def test_clean_set_reuses_nearly_everything() -> None:
    report = prefix_check(PrefixCheckOptions(clean_set()))
    assert report.unit == "characters"
    assert report.reusable_share > 0.9
    assert problem_kinds(report) == set()
    assert kinds(report) == {"last_message_differs"}
    assert report.reusable_share_if_fixed is None
    assert report.pairs_compared == 2 * len(LAST_USER) - 3
    assert all(r.share > 0.9 for r in report.requests)
    assert all(d.expected and d.where.endswith("(user)") for d in report.divergences)


def test_timestamp_in_system_prompt() -> None:
    report = prefix_check(PrefixCheckOptions(timestamp_set()))
    assert problem_kinds(report) == {"timestamp"}
    assert report.reusable_share < 0.05
    divergence = report.divergences[0]
    assert divergence.shape == "iso_datetime"
    assert divergence.where.startswith("system prompt")
    assert "2026-11-30T09:14:03Z" in divergence.a_excerpt
    assert "2026-11-30T09:15:03Z" in divergence.b_excerpt
    assert report.classes[0].fix and "last user message" in report.classes[0].fix
    # moving the timestamp out would bring back nearly everything
    assert report.reusable_share_if_fixed is not None and report.reusable_share_if_fixed > 0.9


def test_shuffled_tools() -> None:
    report = prefix_check(PrefixCheckOptions(shuffled_tools_set()))
    assert problem_kinds(report) == {"tools_reordered"}
    assert all(d.where.startswith("tools[") for d in report.divergences)
    assert "in another order" in report.divergences[0].detail
    assert report.reusable_share < 0.6  # the system prompt before the tools is shared
    assert report.reusable_share_if_fixed is not None and report.reusable_share_if_fixed > 0.9


def test_a_timestamp_hides_shuffled_tools() -> None:
    requests = timestamp_set()
    for request, shuffled in zip(requests, shuffled_tools_set(), strict=True):
        request["tools"] = shuffled["tools"]
    report = prefix_check(PrefixCheckOptions(requests))
    assert problem_kinds(report) == {"timestamp"}
    assert [c.kind for c in report.after_fixes] == ["tools_reordered"]
    assert report.reusable_share_if_fixed is not None and report.reusable_share_if_fixed > 0.9


def test_uuid_in_first_user_message() -> None:
    report = prefix_check(PrefixCheckOptions(uuid_set()))
    assert problem_kinds(report) == {"random_id"}
    assert {d.shape for d in report.divergences} == {"uuid"}
    assert all(d.where == "messages[1] (user)" for d in report.divergences)
    assert report.reusable_share_if_fixed is not None and report.reusable_share_if_fixed > 0.9


def test_changed_tool_schema() -> None:
    report = prefix_check(PrefixCheckOptions(changed_schema_set()))
    assert "tools_changed" in problem_kinds(report)
    changed = next(d for d in report.divergences if d.kind == "tools_changed")
    assert changed.where == "tools[2] (run_tests)"
    assert "schema differs: run_tests" in changed.detail
    # pairs of two even (or two odd) requests only differ in the last message
    assert kinds(report) == {"tools_changed", "last_message_differs"}


def test_date_in_a_tool_description_is_a_timestamp() -> None:
    requests = []
    for day, last in zip((28, 29, 30), LAST_USER, strict=False):
        tools = copy.deepcopy(TOOLS)
        tools[1]["function"]["description"] += f" Data as of 2026-11-{day}."
        requests.append(agent_request(last, tools=tools))
    report = prefix_check(PrefixCheckOptions(requests))
    assert problem_kinds(report) == {"timestamp"}
    assert report.divergences[0].where == "tools[1] (write_file)"


def test_tools_only_in_one_request() -> None:
    bare = agent_request(LAST_USER[0])
    del bare["tools"]
    report = prefix_check(PrefixCheckOptions([agent_request(LAST_USER[1]), bare]))
    assert problem_kinds(report) == {"tools_changed"}
    assert "only in a: read_file" in report.divergences[0].detail


def test_image_order_swapped() -> None:
    report = prefix_check(PrefixCheckOptions(image_order_set()))
    assert problem_kinds(report) == {"image_order_changed"}
    swapped = next(d for d in report.divergences if d.kind == "image_order_changed")
    assert swapped.where == "image in messages[1] (user)"


def test_different_image_is_history_changed() -> None:
    requests = image_order_set()[:2]
    part = requests[1]["messages"][1]["content"][1]
    part["image_url"]["url"] = "https://example.com/screens/other.png"
    report = prefix_check(PrefixCheckOptions(requests))
    assert problem_kinds(report) == {"history_changed"}
    assert "a different image" in report.divergences[0].detail


def test_edited_history() -> None:
    requests = clean_set()[:3]
    requests[2]["messages"][6]["content"] = "The conversion truncates. Fix it?"
    report = prefix_check(PrefixCheckOptions(requests))
    assert problem_kinds(report) == {"history_changed"}
    edited = next(d for d in report.divergences if d.kind == "history_changed")
    assert edited.where == "messages[6] (assistant)"


def test_other_system_prompt() -> None:
    requests = clean_set()[:2]
    requests[1]["messages"][0]["content"] = SYSTEM.replace("payments team", "risk team")
    report = prefix_check(PrefixCheckOptions(requests))
    assert problem_kinds(report) == {"system_prompt_changed"}


def test_different_conversations_are_expected() -> None:
    first, second = clean_set()[:2]
    second["messages"] = [second["messages"][0], {"role": "user", "content": "Explain fx.py."}]
    third = copy.deepcopy(second)
    third["messages"][1:] = [
        {"role": "user", "content": "Refactor the risk scoring module."},
        {"role": "assistant", "content": "Which part?"},
        {"role": "user", "content": "The rules engine."},
    ]
    report = prefix_check(PrefixCheckOptions([first, second, third]))
    assert problem_kinds(report) == set()
    assert "other_conversation" in kinds(report)


def test_continued_conversation_is_shared_fully() -> None:
    shorter = agent_request(LAST_USER[0])
    longer = copy.deepcopy(shorter)
    longer["messages"] += [
        {"role": "assistant", "content": "Done: ROUND_HALF_EVEN, and a JPY test."},
        {"role": "user", "content": "Thanks. Now open the pull request."},
    ]
    report = prefix_check(PrefixCheckOptions([shorter, longer]))
    assert kinds(report) == {"conversation_continued"}
    assert report.requests[0].share == 1.0


def test_timestamp_at_the_end_of_the_last_message_is_fine() -> None:
    requests = [agent_request(f"Go ahead. (sent 2026-11-30 09:{m:02d})") for m in (10, 11, 12)]
    report = prefix_check(PrefixCheckOptions(requests))
    assert problem_kinds(report) == set()
    assert report.reusable_share > 0.9


def test_request_id_ahead_of_a_long_last_message_is_a_problem() -> None:
    document = "Review this design document.\n" + "The ledger keeps one entry per movement. " * 30
    requests = [agent_request(f"Request ID: {u}\n{document}") for u in UUIDS[:3]]
    report = prefix_check(PrefixCheckOptions(requests))
    assert problem_kinds(report) == {"random_id"}


def test_identical_requests() -> None:
    report = prefix_check(PrefixCheckOptions([agent_request("same"), agent_request("same")]))
    assert kinds(report) == {"identical"}
    assert report.reusable_share == 1.0


# ---------------------------------------------------------------------------------------------
# the building blocks


@pytest.mark.parametrize(
    "text", ["a-" * 100_000, "2026-" * 40_000, "req-" * 50_000, "aB1-" * 50_000 + "!"]
)
def test_shapes_take_linear_time_on_hostile_text(text: str) -> None:
    """A run of token characters with a boundary at every other one ("a-a-a-..."): each shape is
    tried once per run, not once per boundary (that was quadratic: minutes for 200 KB). The
    shapes are knowledge data (prefix_shapes.yaml); their examples are checked by `knowledge
    check` (tests/test_knowledge.py)."""
    for shape in load_knowledge().prefix.shapes:
        with ends_in_time(what=f"shape {shape.name}"):
            shape.regex.sub("<x>", text)


def test_masking_hostile_history_is_fast() -> None:
    """The fixes mask timestamps and ids in every message but the last: 200 KB of hostile text
    there must not stall the estimate."""
    hostile = "a-" * 100_000
    requests = [
        {
            "messages": [
                {"role": "system", "content": f"Current time: 2026-11-30T09:14:0{i}Z"},
                {"role": "user", "content": hostile},
                {"role": "user", "content": f"question {i}"},
            ]
        }
        for i in range(3)
    ]
    with ends_in_time(what="prefix-check of hostile history"):
        report = prefix_check(PrefixCheckOptions(requests))
    assert problem_kinds(report) == {"timestamp"}
    assert report.reusable_share_if_fixed is not None and report.reusable_share_if_fixed > 0.9


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("", ""),
        ("abc", "abd"),
        ("abc", "abc"),
        ("abc", "ab"),
        ("x" * 10000 + "a", "x" * 10000 + "b"),
    ],
)
def test_common_prefix(a: str, b: str) -> None:
    expected = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    assert common_prefix(a, b) == expected
    assert common_prefix(list(a), list(b)) == expected


def test_canonical_rendering_order() -> None:
    text = render_canonical(image_order_set()[0]).text
    system, tools, first = (
        text.index("You are Atlas"),
        text.index('"read_file"'),
        text.index(FIRST_USER),
    )
    assert system < tools < first
    assert text.count("<image:") == 2


def test_excerpt_is_short() -> None:
    text = "a" * 500 + "\n" + "b" * 500
    shown = excerpt(text, 500)
    assert len(shown) <= 82 and "⏎" in shown


def test_large_sample_is_capped() -> None:
    requests = [agent_request(f"question {i}") for i in range(12)]
    report = prefix_check(PrefixCheckOptions(requests, max_requests=5))
    assert report.requests_read == 12 and report.requests_compared == 5
    assert any("first 5 of 12" in note for note in report.notes)


def test_openai_batch_lines_are_read(tmp_path: Path) -> None:
    path = tmp_path / "batch.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(
                {"custom_id": str(i), "method": "POST", "url": "/v1/chat/completions", "body": r}
            )
            for i, r in enumerate(clean_set())
        )
    )
    sample = load_requests(path)
    assert len(sample.requests) == len(LAST_USER)
    assert prefix_check(PrefixCheckOptions(path)).reusable_share > 0.9


# ---------------------------------------------------------------------------------------------
# the launch command


def test_launch_disabled() -> None:
    check = check_launch(
        parse_launch_command("vllm serve moonshotai/Kimi-K3 --no-enable-prefix-caching")
    )
    assert check.status == "disabled" and check.problem
    assert "--enable-prefix-caching" in (check.fix or "")


def test_launch_k3_without_the_flag() -> None:
    check = check_launch(
        parse_launch_command(
            "vllm serve moonshotai/Kimi-K3 --tensor-parallel-size 8 --trust-remote-code"
        )
    )
    assert check.status == "required_not_given" and check.problem
    assert check.recipe == "kimi-k3"
    assert "--prefix-match-unit" in check.summary
    assert check.fix == "Add --enable-prefix-caching --prefix-match-unit 128 to the launch command."


def test_launch_k3_with_the_flag() -> None:
    check = check_launch(
        parse_launch_command(
            "vllm serve /models/Kimi-K3 --enable-prefix-caching --prefix-match-unit 128 -tp 8"
        )
    )
    assert check.status == "enabled" and not check.problem and check.fix is None


def test_launch_k3_with_the_flag_but_not_the_match_unit() -> None:
    check = check_launch(
        parse_launch_command("vllm serve moonshotai/Kimi-K3 --enable-prefix-caching")
    )
    assert check.status == "enabled" and not check.problem
    assert check.fix == "Add --prefix-match-unit 128."


def test_launch_other_model_depends_on_the_default() -> None:
    check = check_launch(parse_launch_command("vllm serve Qwen/Qwen3-8B"))
    assert check.status == "not_given" and not check.problem and check.recipe is None
    assert "default" in check.summary


def test_launch_in_the_report() -> None:
    report = prefix_check(
        PrefixCheckOptions(clean_set(), launch="vllm serve moonshotai/Kimi-K3 --trust-remote-code")
    )
    assert report.launch is not None and report.launch.status == "required_not_given"


@pytest.mark.parametrize("language", ["ko", "ja"])
def test_a_launch_check_is_said_in_the_readers_language(language: Language) -> None:
    """The report keeps the launch check's sentences in English; each is said in the reader's
    language through its template, the recipe's reason it quotes too, though that reason holds
    "; " (K3's: Catalog.composed alone would cut the sentence there and leave the rest English)."""
    tr = catalog(language)
    kb = load_knowledge()
    check = check_launch(parse_launch_command("vllm serve moonshotai/Kimi-K3"), kb)
    recipe = kb.recipes["kimi-k3"]
    profile = kb.recipe_profile(recipe)
    why = next(f.why for f in profile.flags if f.flag == "--enable-prefix-caching")
    assert "; " in why and tr(why) != why
    assert launch_said(tr, check.summary) == tr(
        REQUIRED,
        recipe_name=recipe.name,
        profile=profile.id,
        profile_name=profile.name,
        why=tr(why),
    )
    assert launch_said(catalog("en"), check.summary) == check.summary
    names = {p.id: p.name for p in recipe.profiles}
    for command, named in [
        ("vllm serve moonshotai/Kimi-K3", None),
        ("vllm serve moonshotai/Kimi-K3 --no-enable-prefix-caching", None),
        ("vllm serve moonshotai/Kimi-K3 --no-enable-prefix-caching", "pd-decode"),
        ("vllm serve moonshotai/Kimi-K3 --enable-prefix-caching", None),
        ("vllm serve moonshotai/Kimi-K3 --enable-prefix-caching", "pd-decode"),
        ("vllm serve moonshotai/Kimi-K3", "pd-decode"),
        ("vllm serve Qwen/Qwen3-8B", None),
    ]:
        launch = check_launch(parse_launch_command(command), kb, named)
        for text in filter(None, (launch.summary, launch.fix)):
            words = launch_said(tr, text)
            # English left, but for the profile's name (RecipeProfile.name is no Text)
            left = words.replace(names.get(launch.profile or "", "\0"), "")
            assert words != text and not re.search(r"[a-z]+ [a-z]+ [a-z]+", left), words
    # every template, filled in, comes back as its own translation
    for template in LAUNCH_TEXTS:
        values = {name: f"<{name}>" for _, name, _, _ in string.Formatter().parse(template) if name}
        assert launch_said(tr, template.format(**values)) == tr(template, **values), template
    assert tr.composed(FIRST_PAIR.format(a=1, b=2), (FIRST_PAIR,)) == tr(FIRST_PAIR, a=1, b=2)
    assert all(tr.word(UNITS, unit) != unit for unit in UNITS)


# ---------------------------------------------------------------------------------------------
# bad input


def test_bad_inputs(tmp_path: Path) -> None:
    good = json.dumps(agent_request("x"))
    cases = {
        "empty.jsonl": ("", "no requests"),
        "notjson.jsonl": (good + "\n{oops\n", "notjson.jsonl:2: not JSON"),
        "nomessages.jsonl": (good + '\n\n{"model": "m"}\n', "nomessages.jsonl:3: no `messages`"),
        "array.jsonl": ("[1, 2]\n", "array.jsonl:1: not a JSON object"),
        "one.jsonl": (good + "\n", "only one request"),
    }
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(InputError, match=message):
            prefix_check(PrefixCheckOptions(tmp_path / name))
    with pytest.raises(InputError, match="no such file"):
        prefix_check(PrefixCheckOptions(tmp_path / "missing.jsonl"))


def test_tokenizer_without_transformers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # import fails as if not installed
    with pytest.raises(InputError, match="pip install transformers"):
        prefix_check(PrefixCheckOptions(clean_set(), tokenizer=tmp_path))


# ---------------------------------------------------------------------------------------------
# renderers and the command line


def run_cli(*args: str, cwd: Path, stdin: bytes = b"") -> Result:
    return run_in("prefix-check", *args, cwd=cwd, input=stdin)


def write_jsonl(path: Path, requests: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in requests))
    return path


def test_renderers() -> None:
    report = prefix_check(
        PrefixCheckOptions(timestamp_set(), launch="vllm serve moonshotai/Kimi-K3")
    )
    markdown = prefix_markdown(report)
    assert "timestamp" in markdown and "required_not_given" in markdown
    assert "| lines 1 and 2 |" in markdown or "lines 1 and 2" in markdown
    from rich.console import Console

    console = Console(width=120, record=True)
    console.print(prefix_renderable(report))
    text = console.export_text()
    assert "timestamp" in text and "Reusable" in text


def test_cli_formats(tmp_path: Path) -> None:
    requests = write_jsonl(tmp_path / "requests.jsonl", timestamp_set())
    launch = tmp_path / "launch.sh"
    launch.write_text("vllm serve moonshotai/Kimi-K3 \\\n  --tensor-parallel-size 8\n")
    result = run_cli(str(requests), "--launch-cmd", str(launch), "--format", "json", cwd=tmp_path)
    assert result.exit_code == EXIT_OK, result.stderr
    document = json.loads(result.stdout)
    assert document["schema_version"] == 1
    assert document["unit"] == "characters"
    assert document["classes"][0]["kind"] == "timestamp"
    assert document["launch"]["status"] == "required_not_given"
    text = run_cli(str(requests), "--launch-cmd", str(launch), cwd=tmp_path)
    assert text.exit_code == EXIT_OK and "timestamp" in text.stdout
    markdown = run_cli(str(requests), "--format", "markdown", cwd=tmp_path)
    assert markdown.exit_code == EXIT_OK and markdown.stdout.startswith("## ")


def test_cli_stdin(tmp_path: Path) -> None:
    data = "".join(json.dumps(r) + "\n" for r in clean_set()).encode()
    result = run_cli("-", "--format", "json", cwd=tmp_path, stdin=data)
    assert result.exit_code == EXIT_OK, result.stderr
    assert json.loads(result.stdout)["source"] == "<stdin>"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "missing.jsonl: no such file"),
        ("", "empty.jsonl: no requests"),
        ('{"messages": [{"role": "user", "content": "hi"}]}\nnot json\n', "bad.jsonl:2: not JSON"),
        ('{"model": "m"}\n', "bad.jsonl:1: no `messages`"),
    ],
)
def test_cli_bad_input(tmp_path: Path, content: str | None, expected: str) -> None:
    name = expected.split(":")[0]
    if content is not None:
        (tmp_path / name).write_text(content)
    result = run_cli(name, cwd=tmp_path)
    stderr = result.stderr
    assert result.exit_code == EXIT_BAD_INPUT, stderr
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("vllm-triage: error:"), stderr
    assert expected in lines[0]


def test_cli_unreadable_launch_cmd(tmp_path: Path) -> None:
    requests = write_jsonl(tmp_path / "requests.jsonl", clean_set())
    result = run_cli(str(requests), "--launch-cmd", "nope.sh", cwd=tmp_path)
    assert result.exit_code == EXIT_BAD_INPUT
    assert "--launch-cmd nope.sh" in result.stderr


def test_the_example_requests_show_a_timestamp_and_reordered_tools() -> None:
    """examples/prefix-check/ (the README's example, whose output tests/test_readme.py checks):
    a timestamp in the system prompt now, reordered tools once that is fixed, and the launch
    without the recipe's --enable-prefix-caching."""
    path = REPO / "examples" / "prefix-check" / "agent-requests.jsonl"
    report = prefix_check(PrefixCheckOptions(path, launch=(path.parent / "launch.sh").read_text()))
    assert [c.kind for c in report.problems] == ["timestamp"]
    assert [c.kind for c in report.after_fixes] == ["tools_reordered"]
    assert report.launch is not None and report.launch.status == "required_not_given"


# ---------------------------------------------------------------------------------------------
# token mode, only where transformers is installed


# Qwen2.5-like: the tools inside the system turn, images as one placeholder token whatever the image
TEMPLATE = """{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}{% endif %}
# Tools
<tools>{% for tool in tools %}
{{ tool | tojson }}{% endfor %}
</tools><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}{%- for message in messages %}{%- if message.role != 'system' %}<|im_start|>\
{{ message.role }}
{% if message.content is string %}{{ message.content }}{% elif message.content %}\
{% for part in message.content %}{% if part.type == 'text' %}{{ part.text }}{% else %}\
<|vision_pad|>{% endif %}{% endfor %}{% endif %}{% for tc in message.tool_calls or [] %}\
<tool_call>{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments | tojson }}}\
</tool_call>{% endfor %}<|im_end|>
{% endif %}{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""


@pytest.mark.slow
def test_token_mode(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "<|vision_pad|>": 96, **{chr(c): c - 31 for c in range(32, 127)}}
    backend = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Split("", behavior="isolated")
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|vision_pad|>"]})
    tokenizer.chat_template = TEMPLATE
    tokenizer.save_pretrained(tmp_path / "tok")
    folder = tmp_path / "tok"

    clean = prefix_check(PrefixCheckOptions(clean_set(), tokenizer=folder))
    assert clean.unit == "tokens" and clean.reusable_share > 0.9
    assert problem_kinds(clean) == set()
    stamped = prefix_check(PrefixCheckOptions(timestamp_set(), tokenizer=folder))
    assert problem_kinds(stamped) == {"timestamp"} and stamped.reusable_share < 0.05
    shared = "<|im_start|>system\nCurrent date and time: 2026-11-30T09:1"
    assert stamped.divergences[0].common_prefix == len(shared)  # one token per character
    assert stamped.reusable_share_if_fixed is not None and stamped.reusable_share_if_fixed > 0.9
    shuffled = prefix_check(PrefixCheckOptions(shuffled_tools_set(), tokenizer=folder))
    assert problem_kinds(shuffled) == {"tools_reordered"} and shuffled.reusable_share < 0.6
    # the same placeholder token for every image: the shared prefix still ends at the swap
    swapped = prefix_check(PrefixCheckOptions(image_order_set(), tokenizer=folder))
    assert problem_kinds(swapped) == {"image_order_changed"}
    assert swapped.reusable_share < 0.9


@pytest.mark.slow
def test_token_mode_cli(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    write_jsonl(tmp_path / "requests.jsonl", clean_set())
    result = run_cli("requests.jsonl", "--tokenizer", str(tmp_path), cwd=tmp_path)
    assert result.exit_code == EXIT_BAD_INPUT
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot load it" in lines[0], lines
