"""Qwen3.5 (gated-DeltaNet recurrent layers + gated attention) through the real `mlxcpp serve`, with
the official `openai` SDK: a tiny random-weight checkpoint at the real Qwen3 vocabulary with its
tokenizer and chat template (tools/oracle/tiny_models.py qwen3_5-chat-q4g64). Its text is noise;
what is checked is the serving path for recurrent caches: streamed = non-streamed, concurrent
requests batched together = each alone, n=2, and the prompt cache reusing a recurrent state only
where it ends exactly at a prefix of the new prompt."""
import json
import openai
import pytest
from transformers import AutoTokenizer

from conftest import SOURCE, Server, batched_rows_equal_alone, chat as ask, streamed_equals_whole

MODEL = SOURCE / "build" / "golden" / "models" / "qwen3_5-chat-q4g64"


@pytest.fixture(scope="module")
def qwen():
    if not (MODEL / "tokenizer.json").exists():
        pytest.skip(f"{MODEL} is missing (run `make goldens`)")
    s = Server([], model_dir=MODEL)
    yield s
    assert s.stop() == 0, s.stderr_text()[-2000:]


@pytest.fixture(scope="module")
def client(qwen):
    return openai.OpenAI(base_url=qwen.url + "/v1", api_key="unused", timeout=120, max_retries=0)


def test_streamed_equals_non_streamed(client, qwen):
    streamed_equals_whole(client, qwen, "Tell me about rivers.", 12)


def test_concurrent_requests_equal_each_alone(client, qwen):
    prompts = ["Name a color.", "Count to five, please, slowly and clearly.", "Why is the sky blue?",
               "Write one word."]
    batched_rows_equal_alone(client, qwen, prompts, 10)  # n=2: two rows with their own recurrent states


def byte_level_ids():
    """bytes of a token -> its id, through the tokenizer's byte-level vocabulary (GPT-2's byte map)."""
    vocab = json.loads((MODEL / "tokenizer.json").read_text())["model"]["vocab"]
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    chars, n = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + n)
            n += 1
    return lambda bs: vocab["".join(chars[b] for b in bs)]


def test_prompt_cache_reuses_a_state_only_at_its_exact_end(client, qwen):
    first = [{"role": "user", "content": "Remember the number seven."}]
    r1 = client.chat.completions.create(model=qwen.model, messages=first, temperature=0, max_tokens=4,
                                        logprobs=True)
    assert r1.choices[0].finish_reason == "length"
    # The same request again: the stored state covers prompt + answer, longer than this prompt and
    # not trimmable, so nothing is reused; the answer is the same.
    again = client.chat.completions.create(model=qwen.model, messages=first, temperature=0, max_tokens=4)
    assert again.usage.prompt_tokens_details.cached_tokens == 0
    assert again.choices[0].message.content == r1.choices[0].message.content
    # A raw prompt that extends the stored key (the templated prompt and the 4 answer tokens) token
    # for token resumes from the stored state, and answers as a server that computes it all.
    tok = AutoTokenizer.from_pretrained(str(MODEL))
    text = tok.apply_chat_template(first, add_generation_prompt=True, tokenize=False)
    prompt = tok.encode(text, add_special_tokens=False)
    assert len(prompt) == r1.usage.prompt_tokens
    id_of = byte_level_ids()
    key = prompt + [id_of(bytes(e.bytes)) for e in r1.choices[0].logprobs.content]
    longer = key + [13, 576, 1156]
    r2 = client.completions.create(model=qwen.model, prompt=longer, max_tokens=5, temperature=0)
    assert r2.usage.prompt_tokens_details.cached_tokens == len(key)
    fresh = Server([], model_dir=MODEL)  # nothing cached there
    try:
        c = openai.OpenAI(base_url=fresh.url + "/v1", api_key="unused", timeout=120, max_retries=0)
        ref = c.completions.create(model=fresh.model, prompt=longer, max_tokens=5, temperature=0)
        assert ref.usage.prompt_tokens_details.cached_tokens == 0
        assert ref.choices[0].text == r2.choices[0].text
    finally:
        assert fresh.stop() == 0
