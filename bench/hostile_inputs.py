"""Every kind of hostile input, sent to a real gunicorn: the status and message each gets.

Prints the table docs/hardening.md shows (and writes it to bench/results/). The message
limit is set to 1 MiB here so that the over-limit bodies stay small; the default is 16 MiB.
After the inputs it checks that every worker is still the one it started with.

    .venv/bin/python bench/hostile_inputs.py      # about half a minute
"""
from __future__ import annotations

import json
import socket
import tempfile
import time
from pathlib import Path

import requests

from common import MiB, TRACEBACK, Gunicorn, Report

LIMIT = MiB
YAML_BOMB = "\n".join(['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
                      + [f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]" for i in range(8)])


def message(text: str, **extra) -> bytes:
    return json.dumps({"message": text, **extra}, ensure_ascii=False).encode()


CASES: list[tuple[str, bytes, str]] = [
    ("typical traceback (control)", message(TRACEBACK), "application/json"),
    ("body over the request limit (3 MiB)", message("x" * 3 * LIMIT), "application/json"),
    ("message over the message limit (bytes, not characters)", message("é" * (LIMIT // 2 + 1)), "application/json"),
    ("invalid UTF-8 bytes with Content-Type JSON", b'{"message": "\xff\xfe CUDA \xc3\x28"}', "application/json"),
    ("binary file (PNG) as the body", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 64, "application/json"),
    ("UTF-16 JSON", '{"message": "CUDA out of memory"}'.encode("utf-16"), "application/json"),
    ("NUL byte in the message", b'{"message": "a\\u0000b"}', "application/json"),
    ("control characters (binary pasted as text)", message("\x01\x02\x03\x04\x05\x06\x07\x08" * 500), "application/json"),
    ("lone surrogate", b'{"message": "\\ud800 CUDA"}', "application/json"),
    ("JSON nested 1,000 levels", b'{"message": ' + b"[" * 1000 + b"]" * 1000 + b"}", "application/json"),
    ("JSON nested 200,000 levels", b'{"message": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "application/json"),
    ("JSON objects nested 5,000 levels", b'{"a": ' * 5000 + b"1" + b"}" * 5000, "application/json"),
    ("not JSON", b"{bad json", "application/json"),
    ("empty body", b"", "application/json"),
    ("JSON array instead of an object", b"[1, 2]", "application/json"),
    ("5,000-digit number", b'{"message": ' + b"9" * 5000 + b"}", "application/json"),
    ("message is not a string", b'{"message": {"a": 1}}', "application/json"),
    ("empty message", message("   \n "), "application/json"),
    ("unknown field", message("x", extra=1), "application/json"),
    ("plain text body", TRACEBACK.encode(), "text/plain"),
    ("YAML alias bomb as the message", message(YAML_BOMB), "application/json"),
    ("enormous single line (1 MiB - 64 KiB)", message(("x" * 4096 + " ") * ((LIMIT - 65536) // 4097) + TRACEBACK), "application/json"),
    ("1,000,000 open braces", message("{" * 1_000_000), "application/json"),
    ("400,000 unterminated quotes", message('"' * 400_000), "application/json"),
    ("'Tried to allocate' x 50,000", message("Tried to allocate " * 50_000), "application/json"),
    ("'--' x 500,000", message("--" * 500_000), "application/json"),
    ("digits x 1,000,000", message("7" * 1_000_000), "application/json"),
    ("setting of 1e400", message("per_device_train_batch_size=1e400 max_seq_length=inf"), "application/json"),
    ("400-digit counts (eval set, DeepSpeed micro-batch)", message(
        "max_eval_samples=1" + "0" * 400 + ' {"train_micro_batch_size_per_gpu": 1' + "0" * 400
        + ', "zero_optimization": {"stage": 3}}\n' + TRACEBACK), "application/json"),
    ("config.json with a 400-digit hidden_size", message(
        '{"model_type": "llama", "hidden_size": 1' + "0" * 400 + ', "num_hidden_layers": 2, "num_attention_heads": 2, '
        '"intermediate_size": 4, "vocab_size": 10}\n' + TRACEBACK), "application/json"),
    ("deep JSON inside the message (DeepSpeed anchor)", message('"zero_optimization": {' + "{" * 100_000 + "}" * 100_000), "application/json"),
    ("secrets in the log", message(TRACEBACK + "\nHF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567\n"), "application/json"),
]


def raw(server: Gunicorn, request: bytes) -> str:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(request)
        head = sock.recv(4096).split(b"\r\n", 1)[0].decode(errors="replace")
    return head


def main() -> None:
    report = Report("hostile_inputs")
    with tempfile.TemporaryDirectory(prefix="oomdoctor-hostile-") as folder:
        env = {"OOMDOCTOR_MAX_MESSAGE_BYTES": str(LIMIT), "OOMDOCTOR_RATE_LIMIT_PER_MINUTE": "0"}
        with Gunicorn(Path(folder), workers=2, env=env) as server:
            report.say(f"# gunicorn, 2 workers; message limit {LIMIT} bytes, request limit {LIMIT + 65536} bytes")
            report.say("| input | POST /api/v1/diagnose | time | what the client is told |")
            report.say("|---|---|---|---|")
            for name, body, content_type in CASES:
                start = time.perf_counter()
                r = requests.post(server.url + "/api/v1/diagnose", data=body, headers={"Content-Type": content_type},
                                  timeout=120)
                took = time.perf_counter() - start
                try:
                    said = r.json().get("error") or f"report; notes {r.json().get('notes')}"
                except ValueError:
                    said = r.text[:80]
                report.say(f"| {name} | {r.status_code} | {took:.2f} s | {said[:110]} |")
            for name, request in [
                ("header of 20,000 bytes", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n"),
                ("request line of 20,000 bytes", b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"),
                ("garbage instead of HTTP", b"GARBAGE\r\n\r\n"),
            ]:
                report.say(f"| {name} | {raw(server, request)} | | (answered by gunicorn) |")
            alive = requests.get(server.url + "/healthz", timeout=10).status_code
            log = server.log.read_text(errors="replace")
            report.say(f"\n# afterwards: /healthz {alive}; worker timeouts {log.count('WORKER TIMEOUT')}; "
                       f"workers booted {log.count('Booting worker')} (2 at start); tracebacks in the log "
                       f"{log.count('Traceback')}")
    report.save()


if __name__ == "__main__":
    main()
