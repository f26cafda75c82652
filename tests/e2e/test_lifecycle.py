"""Cancellation and shutdown: clients that hang up mid-stream have their generations cancelled
and their memory freed; SIGTERM ends running streams cleanly and the process exits 0."""
import json
import signal
import socket
import threading
import time

import pytest

from conftest import metrics, wait_idle


def open_stream(server, max_tokens=200, content="Tell me a long story about a dragon."):
    host, port = server.url[len("http://"):].split(":")
    s = socket.create_connection((host, int(port)), timeout=60)
    body = json.dumps({"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
                       "stream": True, "temperature": 0.7}).encode()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    return s


def read_until_data(s):
    data = b""
    while b"data: " not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def test_clients_disconnecting_mid_stream(start_server):
    server = start_server("--prompt-cache-gb", "0.05")
    rss = []
    for round_ in range(4):
        for i in range(50):
            s = open_stream(server, content=f"Story number {round_ * 50 + i}: tell me about a dragon.")
            assert b"data: " in read_until_data(s)
            s.close()
        m = wait_idle(server)
        rss.append(m["mlxcpp_resident_memory_bytes"])
        assert m["mlxcpp_prompt_cache_bytes"] <= m["mlxcpp_prompt_cache_max_bytes"]
    assert m["mlxcpp_requests_cancelled_total"] >= 150, m
    # Memory settles after the first round: later rounds do not keep growing it.
    assert rss[-1] - rss[1] < 64e6, rss
    assert server.alive()


def test_sigterm_ends_running_streams_and_exits_0(start_server):
    server = start_server()
    s = open_stream(server, max_tokens=2000)
    assert b"data: " in read_until_data(s)
    got = []

    def drain():
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got.append(chunk)
        except OSError:
            pass

    t = threading.Thread(target=drain)
    t.start()
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(30) == 0
    t.join(30)
    s.close()
    # The stream was ended cleanly: its last chunk is the terminating zero-length chunk.
    assert b"".join(got).endswith(b"0\r\n\r\n")
