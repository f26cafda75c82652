"""Gemma 4 through the real `mlxcpp serve` (and `mlxcpp chat`), with the official `openai` SDK: a
tiny random-weight checkpoint with Gemma 4 E2B's layout (per-layer inputs over the whole vocabulary,
sliding layers with a 16-token window, a KV-shared full layer) at the real Gemma 3 vocabulary with
Gemma 3's tokenizer and chat template (tools/oracle/tiny_models.py gemma4-chat-q4g64; no Gemma 4
tokenizer is available here, and Gemma 4 keeps Gemma 3's vocabulary size). Its text is noise;
what is checked is the serving path for shared and rotating caches: streamed = non-streamed,
concurrent requests batched together = each alone, n=2, later turns resuming from the prompt cache
answering as a fresh server does, greedy tokens and logprobs in parity mode equal mlx-lm's,
`--kv-bits 8` batching its quantized caches."""
import json
import subprocess
import urllib.request
import openai
import pytest

from conftest import BINARY, SOURCE, Server, batched_rows_equal_alone, chat as ask, streamed_equals_whole

MODEL = SOURCE / "build" / "golden" / "models" / "gemma4-chat-q4g64"


def start(*args):
    if not (MODEL / "tokenizer.json").exists():
        pytest.skip(f"{MODEL} is missing (run `make goldens`)")
    return Server(list(args), model_dir=MODEL)


def client_of(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", timeout=120, max_retries=0)


@pytest.fixture(scope="module")
def gemma():
    s = start()
    yield s
    assert s.stop() == 0, s.stderr_text()[-2000:]


@pytest.fixture(scope="module")
def client(gemma):
    return client_of(gemma)


def test_streamed_equals_non_streamed(client, gemma):
    streamed_equals_whole(client, gemma, "Tell me about rivers.", 12)


def test_concurrent_requests_equal_each_alone(client, gemma):
    # Prompts of 10 to 25 tokens plus 12 generated: most rows outgrow the 16-token window.
    prompts = ["Name a color.", "Count to five, please, slowly and clearly, one number at a time.",
               "Why is the sky blue?", "Write one word."]
    batched_rows_equal_alone(client, gemma, prompts, 12)


def test_kv_bits_8_concurrent_requests_equal_each_alone():
    """`serve --kv-bits 8`: the donor layers' caches held quantized in the batch (the KV-shared layer
    attends over its donor's quantized rows; group 32: the sliding layers' heads are 32 wide)."""
    server = start("--kv-bits", "8", "--kv-group-size", "32")
    try:
        c = client_of(server)
        prompts = ["Name a color.", "Count to five, please, slowly and clearly, one number at a time.", "Write one word."]
        assert all(batched_rows_equal_alone(c, server, prompts, 10))
    finally:
        assert server.stop() == 0, server.stderr_text()[-2000:]


def test_later_turns_resume_from_the_prompt_cache_as_a_fresh_server_answers(client, gemma):
    turns = [[{"role": "user", "content": "Hi"}]]
    answers = [ask(client, gemma, turns[0], max_tokens=4)]
    for follow_up in ["And then?", "Tell me more about that, please."]:
        turns.append(turns[-1] + [{"role": "assistant", "content": answers[-1].choices[0].message.content},
                                  {"role": "user", "content": follow_up}])
        answers.append(ask(client, gemma, turns[-1], max_tokens=6))
    # The second turn's prompt extends the first's: at least that much comes from the cache (the
    # stored entry holds prompt + answer within the window, so it can be trimmed back to it).
    assert answers[1].usage.prompt_tokens_details.cached_tokens >= answers[0].usage.prompt_tokens
    # The third reuses what can be reused (the second turn's entry has outgrown the window).
    assert answers[2].usage.prompt_tokens_details.cached_tokens > 0
    fresh = start()  # nothing cached there: each turn computed whole
    try:
        c = client_of(fresh)
        for messages, got in zip(turns[1:], answers[1:]):
            ref = ask(c, fresh, messages, max_tokens=6)
            assert ref.usage.prompt_tokens == got.usage.prompt_tokens
            assert ref.choices[0].message.content == got.choices[0].message.content
    finally:
        assert fresh.stop() == 0


def test_parity_greedy_tokens_and_logprobs_equal_mlx_lm():
    """`serve --parity` against mlx-lm's generate_step (float32, greedy) on the same prompt ids: the
    text of the same tokens, every chosen token's log-probability and the top 3 bit for bit."""
    mx = pytest.importorskip("mlx.core")
    from mlx_lm.generate import generate_step
    from mlx_lm.utils import load_model
    from transformers import AutoTokenizer

    messages = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
    steps = 8
    server = start("--parity")
    try:
        req = urllib.request.Request(server.url + "/tokenize", data=json.dumps({"messages": messages}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            ids = json.loads(r.read())["tokens"]
        resp = ask(client_of(server), server, messages, max_tokens=steps, logprobs=True, top_logprobs=3)
    finally:
        assert server.stop() == 0
    model, _ = load_model(MODEL)
    model.set_dtype(mx.float32)
    tokens, want = [], []
    for (tok, lp), _ in zip(generate_step(mx.array(ids, dtype=mx.int32), model, max_tokens=steps), range(steps)):
        tokens.append(int(tok))
        order = mx.argsort(-lp)[:3].tolist()
        want.append((lp[int(tok)].item(), [lp[i].item() for i in order]))
    got = [(e.logprob, [t.logprob for t in e.top_logprobs]) for e in resp.choices[0].logprobs.content]
    assert resp.usage.completion_tokens == steps
    assert got == want
    assert resp.choices[0].message.content == AutoTokenizer.from_pretrained(str(MODEL)).decode(tokens)


def test_chat_cli_keeps_the_conversation(client, gemma):
    """`mlxcpp chat` with scripted stdin: two turns, the second prompt holding the first turn."""
    out = subprocess.run([str(BINARY), "chat", "--model", str(MODEL), "--max-tokens", "6"], input="Hi\nAnd then?\n",
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    stats = [line for line in (out.stdout + out.stderr).splitlines() if line.startswith("prompt: ")]
    assert len(stats) == 2, out.stdout + out.stderr
    first = ask(client, gemma, "Hi", max_tokens=6)
    assert stats[0].startswith(f"prompt: {first.usage.prompt_tokens} tokens")
    assert first.choices[0].message.content.strip() in out.stdout
    assert int(stats[1].split()[1]) > first.usage.prompt_tokens + 4
