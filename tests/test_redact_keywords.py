"""The keyword finder says which keywords a text holds and where, as a plain search does, with
Hyperscan and with RE2 alike; frequent keywords are given up on (None), never missed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_triage.redact.keywords import KeywordFinder

WORDS = ["token", "tok", "api", "api-", "sk", "ey", "s.", "hvs.", "-----begin", "curl", "aa"]
_PIECES = st.sampled_from([*WORDS, "TOKEN", "Api", "x", " ", "\n", "e", "s", "-", ".", "hv", "a"])


def _plain(data: bytes, limit: int) -> dict[str, list[int] | None]:
    """Every place of every keyword, lowered, overlapping ones included; None past `limit`."""
    lowered = data.lower()
    places: dict[str, list[int] | None] = {}
    for word in WORDS:
        found = [i for i in range(len(lowered)) if lowered.startswith(word.encode(), i)]
        if found:
            places[word] = None if len(found) > limit else found
    return places


ENGINES = pytest.mark.parametrize("hyperscan", [True, False], ids=["hyperscan", "re2"])


@ENGINES
@settings(max_examples=200)
@given(text=st.lists(_PIECES, max_size=60).map("".join))
def test_places_are_those_of_a_plain_search(hyperscan: bool, text: str) -> None:
    data = text.encode()
    assert KeywordFinder(WORDS, hyperscan=hyperscan).places(data, limit=4) == _plain(data, 4)


@ENGINES
def test_a_keyword_frequent_at_the_start_is_given_up_on(hyperscan: bool) -> None:
    """Past the sample's bound `token` is not looked for (None), the rare keyword still is."""
    data = b"prompt tokens: 12\n" * 10_000 + b"curl -u x\n"
    places = KeywordFinder(WORDS, hyperscan=hyperscan).places(data, limit=64)
    assert places["token"] is None and places["tok"] is None
    assert places["curl"] == [len(data) - 10]


@ENGINES
def test_a_keyword_frequent_only_later_is_given_up_on_past_the_limit(hyperscan: bool) -> None:
    data = b"x" * 100_000 + b"api " * 100 + b"-----BEGIN\n"
    places = KeywordFinder(WORDS, hyperscan=hyperscan).places(data, limit=64)
    assert places["api"] is None
    assert places["-----begin"] == [100_000 + 400]
