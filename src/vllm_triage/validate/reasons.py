"""Why a rung passed with a note, failed or was skipped, and why a start of the server did not
become ready: the reasons a validation run records (summary.json), as message templates.

The run keeps its reasons in English, filled in; a rendering in Korean or Japanese (the report,
the decision record) finds each one's template again and says it with the same values
(vllm_triage.i18n.Catalog.composed), so a run made before these templates existed reads the
same. What a reason quotes from the server (its error body, a format error of its answer) stays
as the server said it."""

from __future__ import annotations

from vllm_triage.i18n import N_

# health
CANNOT_REACH = N_("cannot reach {url}{error}")
NO_MODEL_LIST = N_("no model list: {error}")
NO_MODEL = N_("/v1/models lists no model")
NOT_SERVED = N_("model {model} is not served here (served: {served})")
# short_text, target_context
ANSWER_PROBLEM = N_("{kind}: {problem}")
NO_TARGET = N_("no --target-context and /v1/models gives no max_model_len")
NO_ROOM = N_("max_model_len {length} leaves no room for a long prompt")
LONG_PROMPT_FAILED = N_("a {target}-token prompt: {error}")
LONG_PROMPT_EMPTY = N_("the long prompt got an empty answer")
LENGTH_ESTIMATED = N_("the length is an estimate: {why}")
# same_prefix
REQUESTS_FAILED = N_("{count} request(s) failed: {error}")
CACHE_OFF_BY_PROFILE = N_(
    "prefix caching is off, as the {recipe} recipe's {profile} profile sets it"
)
CACHE_DISABLED = N_("prefix caching is disabled (from {source})")
CANNOT_COUNT_HITS = N_(
    "cannot count hits: no /metrics and no usage.prompt_tokens_details "
    "(start the server with --enable-prompt-tokens-details)"
)
CACHE_WORKS = N_("caching works: {hits} prompt tokens hit the cache")
NO_HITS = N_("enabled but no hits: {reasons}")
PREFIX_TOO_SHORT = N_(
    "the shared prefix ({tokens} tokens) is shorter than one cache block ({block})"
)
BLOCK_ALIGNMENT = N_(
    "{recipe}: hybrid-model block alignment; hits need --prefix-match-unit (e.g. 128) or shared "
    "prefixes of whole large blocks"
)
EVICTED = N_(
    "retention: the cached blocks were evicted between requests (KV cache full, or other "
    "traffic); compare vllm:kv_cache_usage_perc while it runs"
)
# concurrency
LEVEL_FAILED = N_(
    "at {level} concurrent requests {errors} of {requests} failed ({rate} > {threshold}): {sample}"
)
LEVEL_FAILED_AFTER = N_(
    "at {level} concurrent requests {errors} of {requests} failed ({rate} > {threshold}): "
    "{sample}; last good level {last_good}"
)
# image
TEXT_ONLY = N_("text-only model: {error}")
IMAGE_EMPTY = N_("the image request got an empty answer")
# tool_calls, structured_output
NO_TOOL_PARSER = N_("configuration: the server has no tool-call parser ({error})")
TOOL_FORMAT_ERRORS = N_(
    "{errors} of {requests} requests had tool-call format errors; first: {first}"
)
FORMAT_REFUSED = N_("the server refuses response_format {mode} ({error})")
STRUCTURED_FORMAT_ERRORS = N_(
    "{errors} of {requests} requests had structured-output format errors; first: {first}"
)
# multi_node
NOTHING_TO_CHECK = N_("nothing to check: give --launch-cmd with --transport, --log, or --nccl-test")
BACKEND_MISMATCH = N_(
    "all2all backend {actual} over {transport}: {recipe} wants {expected} "
    "(--all2all-backend {expected})"
)
NCCL_TEST_DEADLINE = N_("the NCCL test did not finish before the rung's deadline")
NCCL_TEST_NOT_STARTED = N_("the NCCL test could not start: {error}")
NCCL_TEST_EXITED = N_("the NCCL test exited {code}")
NCCL_TEST_NO_BANDWIDTH = N_("the NCCL test printed no '# Avg bus bandwidth' line")
NCCL_TEST_WRONG_VALUES = N_("the NCCL test found {count} wrong values")
# the ladder
SERVER_NOT_STARTED = N_("the server did not start")
RUNG_FAILED = N_("the {rung} rung failed")
INTERNAL_ERROR = N_(
    "internal error of vllm-triage ({error}: {detail}); please report it with requests.jsonl"
)
NEVER_RAN = N_("the server started by --start-cmd never ran")
NOT_READY = N_("the server started by --start-cmd did not become ready (start {number}: {reason})")
NOT_READY_DIAGNOSED = N_(
    "the server started by --start-cmd did not become ready (start {number}: {reason}; "
    "diagnosis: {cause})"
)
# a start of the server (validate --start-cmd)
CANNOT_RUN = N_("cannot run {program}: {error}")
EXITED_EARLY = N_("the process exited with {code} before /health answered")
NO_HEALTH = N_("/health did not answer 200 within {seconds} s")
NOT_DIAGNOSED = N_("{reason}; the log could not be diagnosed ({error})")

REASONS: tuple[str, ...] = (
    CANNOT_REACH, NO_MODEL_LIST, NO_MODEL, NOT_SERVED, ANSWER_PROBLEM, NO_TARGET, NO_ROOM,
    LONG_PROMPT_FAILED, LONG_PROMPT_EMPTY, LENGTH_ESTIMATED, REQUESTS_FAILED,
    CACHE_OFF_BY_PROFILE, CACHE_DISABLED, CANNOT_COUNT_HITS, CACHE_WORKS, NO_HITS,
    PREFIX_TOO_SHORT, BLOCK_ALIGNMENT, EVICTED, LEVEL_FAILED, LEVEL_FAILED_AFTER, TEXT_ONLY,
    IMAGE_EMPTY, NO_TOOL_PARSER, TOOL_FORMAT_ERRORS, FORMAT_REFUSED, STRUCTURED_FORMAT_ERRORS,
    NOTHING_TO_CHECK, BACKEND_MISMATCH, NCCL_TEST_DEADLINE, NCCL_TEST_NOT_STARTED,
    NCCL_TEST_EXITED, NCCL_TEST_NO_BANDWIDTH, NCCL_TEST_WRONG_VALUES, SERVER_NOT_STARTED,
    RUNG_FAILED, INTERNAL_ERROR, NEVER_RAN, NOT_READY, NOT_READY_DIAGNOSED, CANNOT_RUN,
    EXITED_EARLY, NO_HEALTH, NOT_DIAGNOSED,
)  # fmt: skip
"""Every template a rung's or a start's reason is made from (what a rendering looks them up in)."""
