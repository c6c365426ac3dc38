"""Make the tiny model the real-server tests serve: no download, deterministic, a few seconds.

    python make_tiny_model.py OUTPUT_DIR

Run it with the vLLM environment's Python (it has torch, transformers and tokenizers). It writes a
2-layer Llama (hidden 128, 4 heads) as safetensors, and a byte-level BPE tokenizer trained here on
a small built-in corpus, with a ChatML chat template that renders `tools` the Hermes way (tools
listed in the system prompt inside <tools></tools>, calls as <tool_call>{...}</tool_call>), so
vLLM's `hermes` tool parser can read its output.

The weights start random (fixed seed) and get a short fine-tune (about 200 steps, under a minute on
two cores) on synthetic agent turns: short answers, and tool calls to the ladder's tools
(AGENT_TOOLS: the same file as vllm_triage.validate.toolcalls.TOOLS), and incident summaries as
compact JSON (the shape of vllm_triage.validate.structured.SCHEMA, for the structured-output rung).
Like a real model it then does both: well-formed calls and JSON when the schema is enforced
(`strict`, `response_format`), a mix of well-formed and malformed ones when it is not. Output is
the same every time at temperature 0.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SEED = 1234
VOCAB_SIZE = 2048
MAX_POSITIONS = 2048

# ChatML tokens (special), then the Hermes tool tags: ordinary added tokens, so they survive
# detokenisation and the parser sees them in the text.
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TOOL_TOKENS = [
    "<tool_call>",
    "</tool_call>",
    "<tools>",
    "</tools>",
    "<tool_response>",
    "</tool_response>",
]

CHAT_TEMPLATE = """\
{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages and messages[0].role == 'system' %}
        {{- messages[0].content + '\\n\\n' }}
    {%- endif %}
    {{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n' }}
    {{- 'You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}
    {%- for tool in tools %}
        {{- '\\n' }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and ' }}
    {{- 'arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n' }}
    {{- '{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}
{%- elif messages and messages[0].role == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if message.role == 'system' %}
        {%- if not loop.first %}
            {{- '<|im_start|>system\\n' + message.content + '<|im_end|>\\n' }}
        {%- endif %}
    {%- elif message.role == 'assistant' %}
        {{- '<|im_start|>assistant' }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if tool_call.function is defined %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '\\n<tool_call>\\n{"name": "' + tool_call.name + '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == 'tool' %}
        {{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

_WORD_TEXT = (
    "the a an model server request token prompt cache prefix block driver cuda version image "
    "container node cluster gpu memory weights load start health ready error warning info debug "
    "engine worker rank tensor parallel pipeline batch sequence length context window chat "
    "completion stream tool call function name arguments result content role system user "
    "assistant weather city unit celsius fahrenheit temperature query search limit offset page "
    "file path folder read write permission denied not found timeout retry latency throughput "
    "first last next previous value key list object string number boolean null true false yes "
    "no ok done failed passed check validate ladder step rung serve vllm llama tiny random"
)
_WORDS = _WORD_TEXT.split()


def corpus() -> list[str]:
    """A few hundred KB of English-ish, JSON-ish, chat and tool-call text, the same every time."""
    rng = random.Random(SEED)
    lines: list[str] = []
    for _ in range(3000):
        n = rng.randint(4, 16)
        sentence = " ".join(rng.choice(_WORDS) for _ in range(n))
        lines.append(sentence.capitalize() + rng.choice([".", "?", "!", ":", ","]))
    for i in range(1500):
        obj = {
            rng.choice(_WORDS): rng.choice(
                [rng.randint(-999, 99999), rng.random(), rng.choice(_WORDS)]
            ),
            "name": "_".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 3))),
            "arguments": {rng.choice(_WORDS): rng.choice(_WORDS), "n": i, "ok": rng.random() > 0.5},
        }
        text = json.dumps(obj, indent=rng.choice([None, 2]))
        lines.append(text)
        lines.append(f"<tool_call>\n{text}\n</tool_call>")
        lines.append(f"<|im_start|>user\n{rng.choice(_WORDS)} {rng.choice(_WORDS)}?<|im_end|>")
        lines.append(f"<|im_start|>assistant\n{rng.choice(_WORDS)} {i}<|im_end|>")
    schema = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather for a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["c", "f"]},
                },
                "required": ["city"],
            },
        },
    }
    lines.extend([f"<tools>\n{json.dumps(schema)}\n</tools>"] * 50)
    lines.extend(
        f'<tool_response>\n{{"temperature": {t}}}\n</tool_response>' for t in range(-20, 45)
    )
    return lines


# The ladder's tools (vllm_triage.validate.toolcalls.TOOLS), read from the package's data file.
AGENT_TOOLS_FILE = (
    Path(__file__).resolve().parents[2] / "src" / "vllm_triage" / "validate" / "agent_tools.json"
)
AGENT_TOOLS = json.loads(AGENT_TOOLS_FILE.read_text(encoding="utf-8"))
TRAIN_STEPS = 200
_CITIES = ["Lisbon", "Paris", "Berlin", "Tokyo", "Oslo", "Rome", "Madrid", "Lima", "Cairo", "Delhi"]
_TOPICS = ["drain a node", "rotate logs", "restart vllm", "check nccl", "upgrade driver"]
_ANSWERS = [
    ("Name three primary colours, separated by commas.", "Red, yellow, blue."),
    ("Say hello.", "Hello there."),
    ("Write a short line about GPUs.", "GPUs run many threads at once."),
    ("What does the ledger list?", "The ledger lists crates of glass."),
    ("Which runbook step comes first?", "First, drain the node."),
]


_NODES = ["gpu-01", "gpu-03", "gpu-07", "gpu-11", "node-a2", "node-b5", "h100-04", "dgx-02"]
_BRANCHES = ["r535", "r550", "r570", "r575", "r580"]
_SEVERITIES = ["low", "medium", "high", "critical"]
_SITUATIONS = [
    "cannot start a CUDA 13 image because",
    "fails to load the model because",
    "stopped serving after an update and",
    "passed its checks and",
]


def incident_turn(rng: random.Random) -> tuple[str, str]:
    """A request for an incident summary as JSON, and the compact JSON answer."""
    node, gpus = rng.choice(_NODES), rng.choice([1, 2, 4, 8, 16])
    branch, severity = rng.choice(_BRANCHES), rng.choice(_SEVERITIES)
    question = rng.choice([
        "Summarise this incident as JSON with the fields node, severity, gpus and driver "
        f"(branch, upgrade_needed): node {node} with {gpus} GPUs {rng.choice(_SITUATIONS)} its "
        f"driver branch is {branch}; the severity is {severity}.",
        f"Incident as JSON: {node}, {gpus} GPUs, driver {branch}, severity {severity}.",
    ])  # fmt: skip
    answer = {
        "node": node,
        "severity": severity,
        "gpus": gpus,
        "driver": {"branch": branch, "upgrade_needed": branch != "r580"},
    }
    return question, json.dumps(answer)


def agent_turns(count: int) -> list[tuple[list[dict[str, str]], bool, str]]:
    """Synthetic (messages, with_tools, assistant text) turns: weather and search calls, incident
    summaries as JSON, answers."""
    rng = random.Random(SEED + 1)
    turns = []
    for _ in range(count):
        kind = rng.random()
        if kind >= 0.8:
            question, answer = incident_turn(rng)
            turns.append(([{"role": "user", "content": question}], False, answer))
            continue
        kind /= 0.8  # the other turns as they were before incident summaries came in
        if kind < 0.45:
            city = rng.choice(_CITIES)
            question = rng.choice([
                f"What is the weather in {city}?",
                f"What is the weather in {city} right now? Use the tools.",
                f"Weather in {city} please.",
                f"Is it cold in {city}?",
            ])  # fmt: skip
            arguments: dict[str, object] = {"city": city}
            if rng.random() < 0.5:
                arguments["unit"] = rng.choice(["celsius", "fahrenheit"])
            call = json.dumps({"name": "get_weather", "arguments": arguments})
            turns.append(
                (
                    [{"role": "user", "content": question}],
                    True,
                    f"<tool_call>\n{call}\n</tool_call>",
                )
            )
        elif kind < 0.7:
            topic = rng.choice(_TOPICS)
            arguments = {"query": topic, "top_k": rng.randint(1, 5)}
            call = json.dumps({"name": "search_docs", "arguments": arguments})
            question = f"Search the runbooks: how to {topic}?"
            turns.append(
                (
                    [{"role": "user", "content": question}],
                    True,
                    f"<tool_call>\n{call}\n</tool_call>",
                )
            )
        else:
            question, answer = rng.choice(_ANSWERS)
            turns.append(([{"role": "user", "content": question}], rng.random() < 0.3, answer))
    return turns


def train(out: Path, pad_id: int) -> None:
    """Fine-tune the random weights briefly on agent turns (loss on the assistant part only)."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(str(out))
    model = LlamaForCausalLM.from_pretrained(str(out), dtype=torch.float32)
    examples = []
    for messages, with_tools, answer in agent_turns(600):
        prompt = tokenizer.apply_chat_template(
            messages,
            tools=AGENT_TOOLS if with_tools else None,
            tokenize=False,
            add_generation_prompt=True,
        )
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        answer_ids = tokenizer(answer + "<|im_end|>", add_special_tokens=False)["input_ids"]
        examples.append((prompt_ids, answer_ids))
    torch.manual_seed(SEED)
    torch.set_num_threads(2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    batch_size = 8
    for step in range(TRAIN_STEPS):
        batch = [examples[(step * batch_size + i) % len(examples)] for i in range(batch_size)]
        length = max(len(p) + len(a) for p, a in batch)
        inputs = torch.full((batch_size, length), pad_id)
        labels = torch.full((batch_size, length), -100)
        for row, (prompt_ids, answer_ids) in enumerate(batch):
            ids = prompt_ids + answer_ids
            inputs[row, : len(ids)] = torch.tensor(ids)
            labels[row, len(prompt_ids) : len(ids)] = torch.tensor(answer_ids)
        loss = model(input_ids=inputs, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.save_pretrained(str(out), safe_serialization=True)


def make_tokenizer(out: Path) -> int:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE - len(TOOL_TOKENS),
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TOKENS])
    if tok.get_vocab_size() != VOCAB_SIZE:
        raise SystemExit(
            f"tokenizer has {tok.get_vocab_size()} tokens, not {VOCAB_SIZE}: grow the corpus"
        )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        model_max_length=MAX_POSITIONS,
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out))
    return tok.get_vocab_size()


def make_model(out: Path, vocab_size: int, bos_id: int, eos_id: int, pad_id: int) -> None:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=MAX_POSITIONS,
        rms_norm_eps=1e-6,
        bos_token_id=bos_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        tie_word_embeddings=False,
        dtype="float32",
    )
    model = LlamaForCausalLM(config).to(torch.float32)
    model.generation_config = GenerationConfig(
        bos_token_id=bos_id, eos_token_id=eos_id, pad_token_id=pad_id
    )
    model.save_pretrained(str(out), safe_serialization=True)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python make_tiny_model.py OUTPUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    vocab_size = make_tokenizer(out)
    vocab = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    ids = {t["content"]: t["id"] for t in vocab["added_tokens"]}
    make_model(out, vocab_size, ids["<|endoftext|>"], ids["<|im_end|>"], ids["<|endoftext|>"])
    train(out, ids["<|endoftext|>"])
    print(f"tiny model in {out}: vocab {vocab_size}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
