"""The artifact of `prefix-check`: why a sample of chat requests would not share the prefix cache.

The top-level fields (schema_version, unit, reusable_share, reusable_share_if_fixed, requests,
divergences, classes, launch, notes) are a contract that users' scripts read; fields may be added,
never renamed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from vllm_triage.models import Artifact, CaseArtifact

DivergenceClass = Literal[
    # problems: something that should be identical across requests is not
    "timestamp",
    "random_id",
    "tools_reordered",
    "tools_changed",
    "system_prompt_changed",
    "history_changed",
    "image_order_changed",
    # expected: the prefix up to here IS shared
    "last_message_differs",
    "other_conversation",
    "conversation_continued",
    "identical",
]

EXPECTED_CLASSES: frozenset[DivergenceClass] = frozenset(
    {"last_message_differs", "other_conversation", "conversation_continued", "identical"}
)

Unit = Literal["tokens", "characters"]

LaunchStatus = Literal["enabled", "disabled", "required_not_given", "not_given"]


class RequestShare(Artifact):
    """How much of one request's prompt another request of the sample already put in the cache."""

    index: int = Field(description="0-based position among the requests compared")
    line: int = Field(description="line of the JSONL file (position + 1 for in-memory requests)")
    length: int = Field(description="prompt length in the report's unit")
    reusable: int = Field(description="longest prefix shared with a request it was compared with")
    share: float = Field(ge=0.0, le=1.0)
    partner_line: int | None = Field(description="the request that shares that prefix")


class Divergence(Artifact):
    """The first point where two requests' rendered prompts differ, and why."""

    a_line: int
    b_line: int
    kind: DivergenceClass
    expected: bool = Field(description="true when this is where the prompts are meant to differ")
    shape: str | None = Field(default=None, description="the volatile-value shape, e.g. uuid")
    where: str = Field(
        description="e.g. 'system prompt', 'tools[2] (search)', 'messages[3] (user)'"
    )
    common_prefix: int = Field(description="shared prefix, in the report's unit")
    a_excerpt: str = Field(description="request a around the divergence (at most ~80 characters)")
    b_excerpt: str = Field(description="request b around the divergence (at most ~80 characters)")
    detail: str


class ClassCount(Artifact):
    """How many compared pairs diverge for one reason, and what to do about it."""

    kind: DivergenceClass
    pairs: int
    expected: bool
    first_pair: str = Field(description="the first pair with this class, e.g. 'lines 1 and 2'")
    fix: str | None


class LaunchCheck(Artifact):
    """Whether the launch command turns prefix caching on."""

    status: LaunchStatus
    problem: bool
    model: str | None
    recipe: str | None = Field(default=None, description="the model recipe that matched, if any")
    profile: str | None = Field(
        default=None, description="the recipe's serving profile checked (its default if none named)"
    )
    summary: str
    fix: str | None = None


class PrefixReport(CaseArtifact):
    """The answer of `prefix-check`."""

    source: str
    unit: Unit
    tokenizer: str | None = None
    requests_read: int = Field(
        description="requests in the input, up to where reading stopped (see unread_input)"
    )
    unread_input: bool = Field(
        default=False,
        description="true when reading stopped at a cap (requests or bytes) before the input "
        "ended: the rest was not read, so requests_read counts only what was",
    )
    requests_compared: int = Field(description="requests compared (the first ones, up to the cap)")
    pairs_compared: int
    prompt_length: int = Field(description="sum of the compared prompts' lengths, in unit")
    reusable: int = Field(description="sum of each request's longest shared prefix, in unit")
    reusable_share: float = Field(ge=0.0, le=1.0)
    reusable_share_if_fixed: float | None = Field(
        default=None,
        description="estimate after the fixable problems (timestamps, ids, tool order) are fixed",
    )
    requests: list[RequestShare]
    divergences: list[Divergence]
    classes: list[ClassCount]
    after_fixes: list[ClassCount] = Field(
        default_factory=list,
        description="problems the first divergences hid, found once the fixable problems "
        "(timestamps, ids, tool order) were fixed and the requests compared again",
    )
    launch: LaunchCheck | None = None
    notes: list[str] = Field(default_factory=list)

    @property
    def problems(self) -> list[ClassCount]:
        return [c for c in self.classes if not c.expected]
