"""Every kind of hostile input, sent to a real gunicorn: the status and message each gets.

Prints the table docs/hardening.md shows (and writes it to bench/results/). The message
limit is set to 1 MiB here so that the over-limit bodies stay small; the default is 16 MiB.
After the inputs it checks that every worker is still the one it started with.

    .venv/bin/python bench/hostile_inputs.py      # about a minute
"""
from __future__ import annotations

import hashlib
import hmac
import json
import re
import socket
import sqlite3
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import requests

from common import MiB, TRACEBACK, Gunicorn, Report, training_log

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


SLACK_SECRET = "bench-signing-secret"
ZERO_CONFIG = json.dumps({"model_type": "llama", "hidden_size": 0, "num_hidden_layers": 0, "num_attention_heads": 0,
                          "intermediate_size": 0, "vocab_size": 0})


def slack_signed(url: str, path: str, body: bytes, timestamp: str | None = None) -> requests.Response:
    timestamp = timestamp or str(int(time.time()))
    mac = hmac.new(SLACK_SECRET.encode(), b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    return requests.post(url + path, data=body, timeout=60, headers={
        "Content-Type": "application/x-www-form-urlencoded", "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": "v0=" + mac})


def slack_payload(payload) -> bytes:
    return urlencode({"payload": json.dumps(payload)}).encode()


def said(r: requests.Response) -> str:
    try:
        body = r.json()
    except ValueError:
        return "HTML page" if "<html" in r.text[:500] else r.text[:80]
    if "error" in body:
        return body["error"]
    reply = body.get("reply", body)
    return f"{reply.get('status', 'reply')}" + (f"; estimate {reply['estimate']['per_gpu_gib']} GiB"
                                               if isinstance(reply.get("estimate"), dict) else "")


def other_routes(server: Gunicorn, report: Report) -> None:
    """The rows of the second pass (issue 11): every route, not only /api/v1/diagnose."""
    url = server.url
    rows: list[tuple[str, str, requests.Response | str, float]] = []

    def row(name: str, where: str, send) -> requests.Response | None:
        start = time.perf_counter()
        try:
            r = send()
        except requests.ConnectionError as exc:
            rows.append((name, where, f"connection closed ({type(exc).__name__})", time.perf_counter() - start))
            return None
        rows.append((name, where, r, time.perf_counter() - start))
        return r

    control = row("a consultation (control)", "POST /api/v1/consultations",
                  lambda: requests.post(url + "/api/v1/consultations", json={"message": TRACEBACK}, timeout=60))
    control_id = control.json()["id"] if control is not None and control.status_code == 201 else "none"
    row("… read back over the API", "GET /api/v1/consultations/<id>",
        lambda: requests.get(f"{url}/api/v1/consultations/{control_id}", timeout=60))
    estimate = lambda body: lambda: requests.post(url + "/api/v1/estimate", json=body, timeout=60)  # noqa: E731
    base = {"model": "llama-3-8b", "method": "lora"}
    for name, extra in [("gpu_memory_gib 0", {"gpu_memory_gib": 0}), ("gpu_memory_gib -0.0", {"gpu_memory_gib": -0.0}),
                        ("host_ram_gib 0", {"host_ram_gib": 0}), ("zero_stage -1", {"zero_stage": -1}),
                        ("zero_stage 7", {"zero_stage": 7}), ("batch_size 0", {"batch_size": 0}),
                        ("lora_targets [1, 2]", {"lora_targets": [1, 2]}),
                        ("config nested 100,000 deep (as text)", {"config": "[" * 100_000 + "]" * 100_000}),
                        ("config.json of zero dimensions", {"config": ZERO_CONFIG})]:
        row(name, "POST /api/v1/estimate", estimate({**base, **extra}))
    row("config.json of zero dimensions in a message", "POST /api/v1/diagnose",
        lambda: requests.post(url + "/api/v1/diagnose", json={"message": ZERO_CONFIG + "\n" + TRACEBACK}, timeout=60))
    first = row("`zero_stage: 4` in a first message", "POST /api/v1/consultations",
                lambda: requests.post(url + "/api/v1/consultations", timeout=60,
                                      json={"message": "zero_stage: 4\n" + TRACEBACK + "\nLlama-3-8B full fine-tuning"}))
    cid = first.json()["id"] if first is not None and first.status_code == 201 else "none"
    row("… its next turn", "POST /api/v1/consultations/<id>/messages",
        lambda: requests.post(f"{url}/api/v1/consultations/{cid}/messages", json={"message": "batch 4, seq 2048"},
                              timeout=60))
    row("an API consultation on the page", "GET /c/<API id>", lambda: requests.get(f"{url}/c/{cid}", timeout=60))
    row("the page's form without a CSRF token, unknown id", "POST /c/<unknown>",
        lambda: requests.post(url + "/c/" + "0" * 32, data={"message": "x"}, timeout=60))
    row("JSON to the page", "POST /", lambda: requests.post(url + "/", json={"message": TRACEBACK}, timeout=60))
    session = requests.Session()
    token = re.search(r'name="csrf_token" value="([^"]+)"', session.get(url + "/", timeout=30).text).group(1)
    row("multipart flood: 2,000 parts", "POST / (page)",
        lambda: session.post(url + "/?lang=en", data={"csrf_token": token, "message": TRACEBACK}, timeout=60,
                             files=[(f"f{i}", ("a.txt", b"x")) for i in range(2000)], headers={"Accept": "application/json"}))
    row("the page's script sending 900 KiB (multipart)", "POST / (page)",
        lambda: session.post(url + "/?lang=en", files={"message": (None, training_log(900 * 1024)),
                                                       "csrf_token": (None, token)},
                             headers={"Accept": "application/json"}, timeout=60))

    def chunked():
        yield b'{"message": "'
        for _ in range(3 * 16):
            yield b"x" * 65536
        yield b'"}'

    row("chunked body of 3 MiB, no Content-Length", "POST /api/v1/diagnose",
        lambda: requests.post(url + "/api/v1/diagnose", data=chunked(), headers={"Content-Type": "application/json"},
                              timeout=60))
    deep = urlencode({"payload": "[" * 100_000}).encode()
    row("unsigned payload of 100,000 `[`", "POST /slack/interactions",
        lambda: requests.post(url + "/slack/interactions", data=deep, timeout=60,
                              headers={"Content-Type": "application/x-www-form-urlencoded"}))
    for name, payload in [("signed, `actions` a string", {"type": "block_actions", "actions": "abc"}),
                          ("signed, `user` a string", {"type": "block_actions", "user": "U1",
                                                       "actions": [{"block_id": "answer:x:y", "value": "1"}]}),
                          ("signed, `block_id` a number", {"type": "block_actions", "actions": [{"block_id": 5}]})]:
        row(name, "POST /slack/interactions", lambda payload=payload: slack_signed(url, "/slack/interactions",
                                                                                   slack_payload(payload)))
    command = urlencode({"team_id": "T1", "user_id": "U1", "channel_id": "C1", "command": "/oom", "text": TRACEBACK,
                         "response_url": "https://hooks.slack.com/commands/T1/1/x", "trigger_id": "1.2.3"}).encode()
    stamp = str(int(time.time()))
    row("a signed command", "POST /slack/commands", lambda: slack_signed(url, "/slack/commands", command, stamp))
    row("… the same request replayed", "POST /slack/commands",
        lambda: slack_signed(url, "/slack/commands", command, stamp))

    report.say("\n| input | route | status | time | what the client is told |")
    report.say("|---|---|---|---|---|")
    for name, where, r, took in rows:
        status, text = (r.status_code, said(r)) if isinstance(r, requests.Response) else ("—", r)
        report.say(f"| {name} | {where} | {status} | {took:.2f} s | {text[:110]} |")
    conn = sqlite3.connect(server.env["OOMDOCTOR_DATABASE"])
    empty = conn.execute("SELECT count(*) FROM consultations WHERE turns = 0").fetchone()[0]
    slack = conn.execute("SELECT count(*) FROM messages m JOIN consultations c ON c.id = m.consultation_id "
                         "WHERE c.channel = 'slack:C1'").fetchone()[0]
    ids = [row[0] for row in conn.execute("SELECT id FROM consultations")]
    conn.close()
    access = Path(server.env["OOMDOCTOR_ACCESS_LOG"]).read_text(errors="replace")
    report.say(f"\n# consultations left without a turn: {empty}; turns stored for the Slack command sent twice: "
               f"{slack}; consultation ids in the access log: "
               f"{sum(cid in access for cid in ids)} of {len(ids)}")


def bounded_time(folder: Path, report: Report) -> None:
    """The work budget answers 422; past the timeout the watchdog ends the request."""
    report.say("\n| bound | settings | input | status | time | what happened |")
    report.say("|---|---|---|---|---|---|")
    log = training_log(14 * MiB)
    for name, env in [("work budget", {"OOMDOCTOR_WORK_SECONDS": "1"}),
                      ("worker timeout (watchdog)", {"OOMDOCTOR_TIMEOUT": "3", "OOMDOCTOR_WORK_SECONDS": "1000"})]:
        with Gunicorn(folder / name.split()[0], workers=1, env={"OOMDOCTOR_RATE_LIMIT_PER_MINUTE": "0", **env}) as server:
            start = time.perf_counter()
            try:
                r = requests.post(server.url + "/api/v1/diagnose", json={"message": log}, timeout=300)
                status, what = r.status_code, said(r)
            except requests.ConnectionError:
                status, what = "—", "connection closed by the server"
            took = time.perf_counter() - start
            alive = requests.get(server.url + "/healthz", timeout=60).status_code
            text = server.log.read_text(errors="replace")
            booted = text.count("Booting worker")
            settings = ", ".join(f"{k.removeprefix('OOMDOCTOR_')}={v}" for k, v in env.items())
            report.say(f"| {name} | {settings} | a 14 MiB log | {status} | {took:.1f} s | {what[:90]}; /healthz after: "
                       f"{alive}; workers booted {booted} |")


def raw(server: Gunicorn, request: bytes) -> str:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(request)
        head = sock.recv(4096).split(b"\r\n", 1)[0].decode(errors="replace")
    return head


def main() -> None:
    report = Report("hostile_inputs")
    with tempfile.TemporaryDirectory(prefix="oomdoctor-hostile-") as folder:
        # The rate limiter runs (its order matters: it used to parse Slack's form unsigned) but never refuses.
        env = {"OOMDOCTOR_MAX_MESSAGE_BYTES": str(LIMIT), "OOMDOCTOR_RATE_LIMIT_PER_MINUTE": str(10**9),
               "OOMDOCTOR_SLACK_SIGNING_SECRET": SLACK_SECRET}
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
            other_routes(server, report)
            alive = requests.get(server.url + "/healthz", timeout=10).status_code
            log = server.log.read_text(errors="replace")
            report.say(f"\n# afterwards: /healthz {alive}; worker timeouts {log.count('WORKER TIMEOUT')}; "
                       f"workers booted {log.count('Booting worker')} (2 at start); tracebacks in the log "
                       f"{log.count('Traceback')}")
        bounded_time(Path(folder), report)
    report.save()


if __name__ == "__main__":
    main()
