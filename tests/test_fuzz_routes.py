"""Hypothesis over every route the OpenAPI document does not cover, and over the estimate's values:
the web page's forms and pages, Slack's signed (and unsigned) commands and interactions, and
named estimate inputs that are zero, negative, out of range or nested deep. Whatever is sent:
no response >= 500, no traceback, and no error logged by a Slack action's thread.

Bounded: OOMDOCTOR_ROUTE_FUZZ_EXAMPLES examples per test (60 by default; docs/hardening.md has
the figures of a longer run). tests/test_fuzz_api.py does the same for the API from its schema.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import tempfile
import threading
import time
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oomdoctor.named_inputs import INPUTS
from oomdoctor.storage import Store
from oomdoctor.web import create_app, security

EXAMPLES = int(os.environ.get("OOMDOCTOR_ROUTE_FUZZ_EXAMPLES", "60"))
SECRET = "fuzz-signing-secret"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.64 GiB"
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])

APP = create_app({"DATABASE": f"{tempfile.mkdtemp(prefix='oomdoctor-route-fuzz-')}/fuzz.sqlite3",
                  "RATE_LIMIT_PER_MINUTE": 10**9, "SLACK_SIGNING_SECRET": SECRET, "SLACK_ACK_SECONDS": 0.5,
                  "SLACK_MAX_MESSAGE_BYTES": 4096,
                  # no outbox drainer: its thread never ends, and the turns under test run in their own threads
                  "SLACK_OUTBOX_POLL_SECONDS": 0})


class Errors(logging.Handler):
    """Errors the service logs: an unexpected exception, in a request or in a Slack thread."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())


ERRORS = Errors()
logging.getLogger("oomdoctor").addHandler(ERRORS)
logging.getLogger("flask.app").addHandler(ERRORS)


def _stored(channel: str, owner: str = "") -> tuple[str, str]:
    """A consultation with a pending question, started in `channel`: (id, question id)."""
    store = Store(APP.config["DATABASE"], migrate=False)
    try:
        from oomdoctor.service import Consultations

        consultations = Consultations(APP.extensions["oomdoctor.consultant"], lambda: store)
        cid, reply = consultations.start(OOM, channel=channel, owner=owner)
        return cid, reply["questions"][0]["id"] if reply["questions"] else ""
    finally:
        store.close()


WEB_CID, _ = _stored("web")
API_CID, _ = _stored("api")
SLACK_CID, SLACK_QUESTION = _stored("slack:C1", owner="T1:U1")


def check(response) -> None:
    """No server error, no traceback, and (once Slack's background threads are done) no error logged."""
    try:
        body = response.get_data(as_text=True)
        assert response.status_code < 500, body[:500]
        assert "Traceback" not in body
        for thread in threading.enumerate():
            if thread.name in ("slack-turn", "slack-action"):
                thread.join(30)
        assert ERRORS.records == [], ERRORS.records[:3]
    finally:
        ERRORS.records.clear()


# ------------------------------------------------------------------ values: zero, negative, out of range, deep

def nest(depth: int, leaf) -> object:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"a": value}
    return value


SCALARS = st.one_of(
    st.sampled_from([0, -0.0, -1, 1, 3, 4, 7, -2048, 2**53, 10**15, 10**16, 10**400, 1e308, -1e308,
                     float("inf"), float("-inf"), float("nan"), 0.5, True, False, None, "", "0", "-1", "NaN",
                     "llama-3-8b", "rtx-4090", "a100-80gb", "lora", "deepspeed", "q_proj,v_proj", "\x00", "\ud800"]),
    st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40), st.booleans())
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                         max_size=4), max_leaves=12)
DEEP = st.builds(nest, st.integers(20, 400), SCALARS)
HOSTILE = st.one_of(SCALARS, VALUES, DEEP)


def _json_bytes(value) -> bytes:
    return json.dumps(value, allow_nan=True, ensure_ascii=False).encode("utf-8", "surrogatepass")


EDGES = st.sampled_from([0, -0.0, -1, 1, 2, 3, 4, 7, 0.5, -0.5, 10**15, 10**15 + 1, 1e15, 1.0000001e15, 2**63])
BASES = st.sampled_from([{}, {"model": "llama-3-8b"}, {"model": "llama-3-8b", "method": "full", "gpu": "a100-80gb"},
                         {"params_b": 7, "method": "qlora", "gpu_memory_gib": 24, "num_gpus": 2, "strategy": "deepspeed"}])


@FUZZ
@given(base=BASES, edges=st.dictionaries(st.sampled_from(list(INPUTS)), EDGES, max_size=2),
       hostile=st.dictionaries(st.sampled_from([*INPUTS, "lang", "extra"]), HOSTILE, max_size=2))
def test_estimate_values(base, edges, hostile):
    """A valid set-up with one or two values at or past the edges of their range, or anything at all."""
    ERRORS.records.clear()  # what other tests logged before this example
    for body in ({**base, **edges}, {**base, **hostile}):
        check(APP.test_client().post("/api/v1/estimate", data=_json_bytes(body), content_type="application/json"))


@FUZZ
@given(value=HOSTILE, field=st.sampled_from(["message", "lang"]),
       path=st.sampled_from(["/api/v1/diagnose", "/api/v1/consultations", f"/api/v1/consultations/{API_CID}/messages"]))
def test_message_routes_values(value, field, path):
    ERRORS.records.clear()  # what other tests logged before this example
    body = {"message": OOM, field: value}
    check(APP.test_client().post(path, data=_json_bytes(body), content_type="application/json"))


TEXT = st.one_of(st.text(max_size=200), st.sampled_from(["", " ", OOM, "skip", "0", "-1", "zero_stage: 4", "LoRA",
                                                         "Llama-3-8B on a 4090", "\x00", "a\x01\x02\x03" * 40,
                                                         "显存不足", "{" * 500, '"zero_optimization": {"stage": 7}']))
TEXT_OR_EDGE = st.one_of(TEXT, EDGES.map(str))
FRAGMENTS = st.sampled_from([
    "zero_stage: {n}", '{{"zero_optimization": {{"stage": {n}}}}}', "per_device_train_batch_size={n}",
    "--max_seq_length {n}", "GPU 0 has a total capacity of {n} GiB", "num_gpus={n}", "lora_r: {n}",
    "MemTotal: {n} kB", '{{"model_type": "llama", "hidden_size": {n}, "num_hidden_layers": {n}, '
    '"num_attention_heads": {n}, "intermediate_size": {n}, "vocab_size": {n}}}', "Llama-3-8B", "full fine-tuning",
    "deepspeed", "on a 4090", "gradient_accumulation_steps: {n}", "Tried to allocate {n} GiB",
])


@FUZZ
@given(parts=st.lists(st.tuples(FRAGMENTS, EDGES), min_size=1, max_size=5), answers=st.lists(TEXT_OR_EDGE, max_size=2))
def test_messages_with_values_out_of_range(parts, answers):
    """Settings with zero, negative or impossible values in a pasted text, then follow-up turns."""
    ERRORS.records.clear()  # what other tests logged before this example
    message = "\n".join([OOM, *(fragment.format(n=n) for fragment, n in parts)])
    client = APP.test_client()
    check(client.post("/api/v1/diagnose", json={"message": message}))
    r = client.post("/api/v1/consultations", json={"message": message})
    check(r)
    for answer in answers:
        check(client.post(f"/api/v1/consultations/{r.get_json()['id']}/messages", json={"message": answer}))


# ------------------------------------------------------------------ the web page

PAGE_PATHS = st.sampled_from(["/", f"/c/{WEB_CID}", f"/c/{API_CID}", f"/c/{SLACK_CID}", "/c/" + "0" * 32, "/c/x",
                              "/c/%00", "/c/" + "a" * 300])
QUERY = st.one_of(st.just(""), st.sampled_from(["?lang=en", "?lang=zh", "?lang=xx", "?lang=", "?lang=en&lang=zh"]),
                  st.text(max_size=20).map(lambda q: "?" + urlencode({"lang": q})))


@FUZZ
@given(path=PAGE_PATHS, query=QUERY, accept=st.sampled_from(["text/html", "application/json", "*/*", ""]),
       language=st.sampled_from(["", "zh-CN,zh;q=0.9", "en", "xx;q=2", ";;;"]))
def test_page_get(path, query, accept, language):
    ERRORS.records.clear()  # what other tests logged before this example
    check(APP.test_client().get(path + query, headers={"Accept": accept, "Accept-Language": language}))


@FUZZ
@given(path=PAGE_PATHS, query=QUERY, fields=st.dictionaries(st.sampled_from(["message", "choice", "skip", "extra"]),
                                                            TEXT, max_size=4),
       token=st.sampled_from(["valid", "missing", "wrong", "other cookie"]),
       upload=st.one_of(st.none(), st.binary(max_size=300), st.sampled_from([OOM.encode(), b"\xff\xfe", b"\x00" * 10])),
       accept=st.sampled_from(["text/html", "application/json"]),
       kind=st.sampled_from(["multipart", "urlencoded", "json", "text"]))
def test_page_post(path, query, fields, token, upload, accept, kind):
    ERRORS.records.clear()  # what other tests logged before this example
    client = APP.test_client()
    client.get("/")
    cookie = client.get_cookie(security.CSRF_COOKIE).value
    form = dict(fields)
    if token != "missing":
        form["csrf_token"] = {"valid": cookie, "wrong": "w" * 43, "other cookie": "o" * 43}[token]
    headers = {"Accept": accept}
    if kind == "multipart":
        data = {**form, **({"logfile": (__import__("io").BytesIO(upload), "log.txt")} if upload is not None else {})}
        response = client.post(path + query, data=data, content_type="multipart/form-data", headers=headers)
    elif kind == "urlencoded":
        response = client.post(path + query, data=urlencode(form).encode(), headers=headers,
                               content_type="application/x-www-form-urlencoded")
    elif kind == "json":
        response = client.post(path + query, data=_json_bytes(form), content_type="application/json", headers=headers)
    else:
        response = client.post(path + query, data=str(form).encode(), content_type="text/plain", headers=headers)
    check(response)


# ------------------------------------------------------------------ Slack, signed with the test secret

def _signed(path: str, body: bytes, signature: str = "good", timestamp: str | None = None):
    timestamp = str(int(time.time())) if timestamp is None else timestamp
    mac = "v0=" + hmac.new(SECRET.encode(), b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    headers = {"X-Slack-Request-Timestamp": timestamp,
               "X-Slack-Signature": {"good": mac, "bad": "v0=" + "0" * 64, "none": ""}[signature]}
    return APP.test_client().post(path, data=body, headers=headers, content_type="application/x-www-form-urlencoded")


SIGNATURES = st.sampled_from(["good", "good", "good", "bad", "none"])
TIMESTAMPS = st.one_of(st.none(), st.sampled_from(["0", "-1", "abc", "1e400", str(2**70), ""]))
IDS = st.one_of(st.sampled_from(["T1", "U1", "C1", ""]), st.text(max_size=40))
COMMAND_TEXT = st.one_of(TEXT, st.sampled_from(["help", "new", "lang zh", "lang en", "lang xx", "lang", "new " + OOM,
                                               "new lang", "x" * 5000]), st.text(max_size=20).map("lang ".__add__))


@FUZZ
@given(team=IDS, user=IDS, channel=IDS, text=COMMAND_TEXT, extra=st.dictionaries(st.text(max_size=8), st.text(max_size=20),
                                                                                 max_size=3),
       signature=SIGNATURES, timestamp=TIMESTAMPS)
def test_slack_commands(team, user, channel, text, extra, signature, timestamp):
    ERRORS.records.clear()  # what other tests logged before this example
    body = urlencode({**extra, "team_id": team, "user_id": user, "channel_id": channel, "command": "/oom",
                      "text": text, "response_url": "https://hooks.slack.com/commands/T1/1/x"}).encode()
    check(_signed("/slack/commands", body, signature, timestamp))


ACTIONS = st.fixed_dictionaries({}, optional={
    "type": st.one_of(st.sampled_from(["button", "static_select"]), HOSTILE),
    "action_id": st.one_of(st.sampled_from(["share", "answer", "choose"]), HOSTILE),
    "block_id": st.one_of(st.sampled_from([f"answer:{SLACK_CID}:{SLACK_QUESTION}", f"answer:{SLACK_CID}:nope",
                                           f"answer:{WEB_CID}:{SLACK_QUESTION}", "answer:", "answer:x:y", "other"]),
                          HOSTILE),
    "value": st.one_of(st.sampled_from([SLACK_CID, WEB_CID, "llama-3-8b", "", "skip"]), HOSTILE),
    "text": st.one_of(st.fixed_dictionaries({"type": st.just("plain_text"), "text": TEXT}), HOSTILE),
    "selected_option": st.one_of(st.fixed_dictionaries({"value": st.one_of(TEXT, HOSTILE),
                                                        "text": st.one_of(st.fixed_dictionaries({"text": TEXT}),
                                                                          HOSTILE)}), HOSTILE),
})
PAYLOADS = st.one_of(
    st.fixed_dictionaries({"type": st.just("block_actions")}, optional={
        "actions": st.one_of(st.lists(st.one_of(ACTIONS, HOSTILE), max_size=3), HOSTILE),
        "user": st.one_of(st.fixed_dictionaries({"id": st.one_of(IDS, HOSTILE)},
                                                optional={"team_id": st.one_of(IDS, HOSTILE)}), HOSTILE),
        "team": st.one_of(st.fixed_dictionaries({"id": st.one_of(IDS, HOSTILE)}), HOSTILE),
        "channel": st.one_of(st.fixed_dictionaries({"id": st.one_of(IDS, HOSTILE)}), HOSTILE),
        "response_url": st.one_of(st.just("https://hooks.slack.com/actions/T1/1/x"), HOSTILE),
    }),
    HOSTILE,
)


@FUZZ
@given(payload=PAYLOADS, raw=st.one_of(st.none(), st.text(max_size=200),
                                       st.integers(1, 3000).map(lambda n: "[" * n), st.just("{" * 100_000)),
       signature=SIGNATURES, timestamp=TIMESTAMPS)
def test_slack_interactions(payload, raw, signature, timestamp):
    ERRORS.records.clear()  # what other tests logged before this example
    text = raw if raw is not None else json.dumps(payload, allow_nan=True)
    body = urlencode({"payload": text}).encode("utf-8", "surrogatepass")
    check(_signed("/slack/interactions", body, signature, timestamp))


@FUZZ
@given(body=st.binary(max_size=400), path=st.sampled_from(["/slack/commands", "/slack/interactions", "/slack/other"]),
       signature=SIGNATURES)
def test_slack_raw_bodies(body, path, signature):
    ERRORS.records.clear()  # what other tests logged before this example
    check(_signed(path, body, signature))


def test_the_fuzzed_consultations_are_still_whole():
    """After everything above, the stored consultations read back and take a turn (run last in this file)."""
    client = APP.test_client()
    assert client.get(f"/api/v1/consultations/{API_CID}").status_code == 200
    r = client.post(f"/api/v1/consultations/{API_CID}/messages", json={"message": "Llama-3-8B, LoRA, batch 4"})
    assert r.status_code == 200
    assert client.get(f"/c/{WEB_CID}").status_code == 200
