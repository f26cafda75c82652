"""bench/serve's parts: the llama-server build, the prompts, the engines' processes, an SSE client.

The llama-server build reuses bench/peers (imported by path: it has no .py suffix): its
build_llamacpp() fetches the pinned, hash-checked llama-cpp-python sdist and builds the shared
libraries into build/peers/llama.cpp/build; the same folder is then reconfigured with the server
on (the embedded web UI off: no npm, no download) and only the llama-server target is added.
"""
import http.client
import importlib.machinery
import importlib.util
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = ROOT / ".venv" / "bin" / "python"
HOST = "127.0.0.1"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# --- llama-server -----------------------------------------------------------------------------

def load_peers():
    """bench/peers as a module (no .py suffix, hence the explicit SourceFileLoader)."""
    path = ROOT / "bench" / "peers"
    loader = importlib.machinery.SourceFileLoader("bench_peers", str(path))
    mod = importlib.util.module_from_spec(importlib.util.spec_from_loader("bench_peers", loader))
    loader.exec_module(mod)
    return mod


def build_llama_server(peers_dir):
    """(path of llama-server, bench/peers module); built once, a stamp names the pin."""
    peers = load_peers()
    out = Path(peers_dir) / "llama.cpp"
    binary = out / "build" / "bin" / "llama-server"
    stamp = out / f".built-server-{peers.LLAMA_CPP_PYTHON}"
    if stamp.exists() and binary.exists():
        return binary, peers
    log("bench/serve: building llama-server once (the first time: 10+ minutes on 2 cores)")
    peers.build_llamacpp(Path(peers_dir))  # sdist, hash check, configure, ggml + llama libraries
    tree = Path(peers_dir) / "src" / f"llama_cpp_python-{peers.LLAMA_CPP_PYTHON}" / "vendor" / "llama.cpp"
    # bench/peers' configure with the server on; the web UI off (it would run npm or download).
    cfg = ["cmake", "-S", tree, "-B", out / "build", "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
           "-DGGML_NATIVE=ON", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_TESTS=OFF",
           "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_APP=OFF",
           "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_OPENSSL=OFF",
           "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TOOLS=ON"]
    for cmd in (cfg, ["ninja", "-C", out / "build", "-j", str(os.cpu_count()), "llama-server"]):
        r = peers.run(cmd)
        if r.returncode:
            sys.exit(f"bench/serve: llama-server build failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    stamp.touch()
    return binary, peers


# --- prompts (the same text for every engine) ---------------------------------------------------

WORDS = """time year people way day man thing woman life child world school state family student
group country problem hand part place case week company system program question work government
number night point home water room mother area money story fact month lot right study book eye
job word business issue side kind head house service friend father power hour game line end
member law car city community name president team minute idea kid body information back parent
face others level office door health person art war history party result change morning reason
research girl guy moment air teacher force education river garden bridge window market village
mountain forest island letter music picture paper table chair bread apple stone cloud winter
summer autumn spring ocean valley harbor castle lantern candle mirror ladder basket needle thread
violin piano drum whistle kettle blanket pillow carpet ribbon feather pebble meadow orchard
""".split()
LONG_WORDS = 940  # ~1,000 SmolLM2 tokens with the question and the chat template (the table prints it)


def word_list(seed=20261204, n=LONG_WORDS):
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n))


class Prompts:
    """Prompt text per metric and repetition `i`. The number `i` opens the prompt (a system message
    in chat, so it precedes even a template's default system prompt): no prefix is shared between
    repetitions beyond the template's first few tokens, so no prompt-cache hits except turn 2."""

    def __init__(self, chat):
        self.chat = chat  # False: the model has no chat template, raw /v1/completions for all
        self.words = word_list()

    def _req(self, i, text):
        if self.chat:
            return {"messages": [{"role": "system", "content": f"{i}. You are a helpful assistant."},
                                 {"role": "user", "content": text}]}
        return {"prompt": f"{i}. Question: {text}\nAnswer:"}

    def short(self, i):
        return self._req(i, "In two sentences, what is Paris, the capital of France, famous for?")

    def long(self, i):
        return self._req(i, f"Here is a list of words: {self.words}. Which three words appear most often "
                            f"in the list?")

    def turn2(self, first, reply):
        follow = "Now list those three words in alphabetical order."
        if self.chat:
            return {"messages": first["messages"] + [{"role": "assistant", "content": reply},
                                                     {"role": "user", "content": follow}]}
        return {"prompt": f"{first['prompt']}{reply}\nQuestion: {follow}\nAnswer:"}

    def sized(self, i, n_words, seed):
        """A story task over a fixed-seed list of n_words words (the concurrency mixes' prompts)."""
        words = word_list(seed, n_words) if n_words > 0 else "bread"
        return self._req(i, f"Here is a list of words: {words}. Write a long story that uses these words, "
                            f"in many paragraphs.")

    def story(self, i):
        return self._req(i, "Write a very long, detailed story about a dragon who learns to bake bread in a "
                            "mountain village. Use many paragraphs and describe every step.")


# --- engines ------------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def help_lists(argv, flag):
    """Whether `argv --help` (a binary's help) names `flag`: features detected, not assumed."""
    try:
        r = subprocess.run(list(map(str, argv)) + ["--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return flag in (r.stdout + r.stderr).replace(",", " ").split()


def http_get(port, path, timeout=2.0):
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        r.read()
        return r.status
    finally:
        conn.close()


class Server:
    """One engine process on loopback: spawned, polled until /health is 200, stopped (TERM, KILL)."""

    def __init__(self, name, argv, port, logdir, extra_body=None):
        self.name, self.argv, self.port, self.extra_body = name, argv, port, extra_body or {}
        self.logpath = Path(logdir) / f"{name}-{port}.log"
        self.proc = self.logfile = None

    def start(self, timeout):
        """Seconds from spawn until /health answered 200 (raises after `timeout`)."""
        self.logfile = open(self.logpath, "w")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(list(map(str, self.argv)), stdout=self.logfile, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        while time.perf_counter() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode} before ready "
                                   f"(log: {self.logpath}): {self.tail()}")
            try:
                if http_get(self.port, "/health", timeout=1.0) == 200:
                    return time.perf_counter() - t0
            except OSError:
                pass
            time.sleep(0.005)
        raise RuntimeError(f"{self.name} not ready after {timeout:.0f} s (log: {self.logpath})")

    def tail(self, n=3):
        try:
            return " | ".join(self.logpath.read_text(errors="replace").strip().splitlines()[-n:])
        except OSError:
            return ""

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None
        if self.logfile:
            self.logfile.close()
            self.logfile = None


# --- the client ---------------------------------------------------------------------------------

class Cancel:
    """Ends streams from another thread at once: set() marks it and shuts their sockets down (a
    read blocked on a stuck server returns), so no client outlives its round."""

    def __init__(self):
        self.lock = threading.Lock()
        self.socks = set()  # the sockets themselves: http.client drops conn.sock on Connection: close
        self.is_set = False

    def add(self, sock):
        with self.lock:
            self.socks.add(sock)
            return not self.is_set

    def discard(self, sock):
        with self.lock:
            self.socks.discard(sock)

    def set(self):
        with self.lock:
            self.is_set = True
            socks = list(self.socks)
        for sk in socks:
            try:
                sk.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def stream(port, body, max_tokens, timeout, extra=None, cancel=None, out=None, allow_empty=False):
    """One streaming request (chat when body has messages, else completions), greedy.

    Returns {ttft, total, t0, t_first, t_last, times, chunks, text, usage, cached, finish, cancelled}:
    ttft = seconds from sending to the first non-empty content delta; times = the arrival of every
    content delta; t_last = the last chunk that carried content or a finish_reason; usage from
    stream_options.include_usage when the engine sends it. `out` (a dict) is filled as the stream
    goes, for a watcher thread; `cancel` (a Cancel) may end it early (then cancelled is True)."""
    path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
    payload = {**body, "max_tokens": max_tokens, "temperature": 0, "stream": True,
               "stream_options": {"include_usage": True}, **(extra or {})}
    data = json.dumps(payload).encode()
    out = out if out is not None else {}
    out.update({"ttft": None, "t_first": None, "t_last": None, "times": [], "chunks": 0, "text": "",
                "usage": None, "cached": None, "finish": None, "cancelled": False})
    t0 = out["t0"] = time.perf_counter()
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    sock = None
    try:
        conn.request("POST", path, data, {"Content-Type": "application/json"})
        sock = conn.sock
        if cancel is not None and not cancel.add(sock):
            out["cancelled"] = True
            return out
        r = conn.getresponse()
        if r.status != 200:
            raise RuntimeError(f"HTTP {r.status} on {path}: {r.read()[:300]!r}")
        _read_events(r, out, t0, timeout, cancel)
    except (OSError, http.client.HTTPException):
        if cancel is None or not cancel.is_set:
            raise
        out["cancelled"] = True
    finally:
        if cancel is not None:
            cancel.discard(sock)
        conn.close()
    if out["t_first"] is None and not (allow_empty or out["cancelled"]):
        raise RuntimeError(f"no content in the stream of {path}")
    out["ttft"] = out["t_first"] - t0 if out["t_first"] is not None else None
    out["total"] = time.perf_counter() - t0
    return out


def _read_events(r, out, t0, timeout, cancel):
    for _ in range(100000):  # bounded; each line waits at most `timeout`
        if time.perf_counter() - t0 > timeout:
            raise RuntimeError(f"stream past {timeout:.0f} s")
        if cancel is not None and cancel.is_set:
            out["cancelled"] = True
            return
        line = r.readline()
        if not line:
            out["cancelled"] = cancel is not None and cancel.is_set
            return
        line = line.strip()
        if not line.startswith(b"data:"):
            continue  # blank lines, ': keepalive' comments
        now = time.perf_counter()
        item = line[5:].strip()
        if item == b"[DONE]":
            return
        ev = json.loads(item)
        if ev.get("usage"):
            out["usage"] = ev["usage"]
            details = ev["usage"].get("prompt_tokens_details") or {}
            out["cached"] = details.get("cached_tokens", out["cached"])
        if ev.get("timings") and "cache_n" in ev["timings"]:  # llama-server's own report
            out["cached"] = ev["timings"]["cache_n"]
        for ch in ev.get("choices") or []:
            piece = (ch.get("delta") or {}).get("content") if "delta" in ch else ch.get("text")
            if piece:
                out["text"] += piece
                out["chunks"] += 1
                out["times"].append(now)
                if out["t_first"] is None:
                    out["t_first"] = now
                out["t_last"] = now
            elif ch.get("finish_reason") and out["t_first"] is not None:
                out["t_last"] = now
            if ch.get("finish_reason"):
                out["finish"] = ch["finish_reason"]


def decode_rate(res):
    """Decode tok/s of one streamed answer: tokens after the first over the time after the first."""
    n = (res["usage"] or {}).get("completion_tokens") or res["chunks"]
    span = res["t_last"] - res["t_first"]
    return (n - 1) / span if n > 1 and span > 0 else None, n
