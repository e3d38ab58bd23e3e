"""Feishu/Lark: encrypted and signed events only, consultations per user and chat, card buttons, and
replies posted through the official SDK to a real local HTTP server standing in for Lark's open API
(the tenant-token and reply endpoints; the SDK's domain points at it).

Events are encrypted and signed here the way Lark does it (AES-256-CBC under sha256(encrypt key),
X-Lark-Signature = sha256(timestamp + nonce + key + body)), with pycryptodome directly rather than
the SDK's own cipher, so that a mistake shared by the service and the SDK would still show.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import queue
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from Crypto.Cipher import AES

from oomdoctor.channels.lark import conversation, verify
from oomdoctor.storage import Store

ROOT = Path(__file__).resolve().parent.parent
TRACEBACK = (ROOT / "tests" / "corpus" / "alpaca-76-full-ft-4x-a10.log").read_text(encoding="utf-8")
ENCRYPT_KEY = "lark-encrypt-key-for-tests"
TOKEN = "lark-verification-token"


def encrypt(key: str, plaintext: str) -> str:
    iv = os.urandom(16)
    data = plaintext.encode("utf-8")
    pad = 16 - len(data) % 16
    cipher = AES.new(hashlib.sha256(key.encode("utf-8")).digest(), AES.MODE_CBC, iv)
    return base64.b64encode(iv + cipher.encrypt(data + bytes([pad]) * pad)).decode()


def sign(key: str, timestamp: str, nonce: str, body: bytes) -> str:
    return hashlib.sha256((timestamp + nonce + key).encode("utf-8") + body).hexdigest()


class FakeLark:
    """A real HTTP server standing in for Lark's open API: the tenant token and the reply endpoint."""

    def __init__(self) -> None:
        self.replies: queue.Queue = queue.Queue()
        self.token_requests = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path == "/open-apis/auth/v3/tenant_access_token/internal":
                    fake.token_requests += 1
                    ok = body.get("app_secret") == "app-secret"
                    answer = ({"code": 0, "msg": "ok", "tenant_access_token": "t-fake-tenant-token", "expire": 7200}
                              if ok else {"code": 10014, "msg": "app secret invalid"})
                elif self.path.startswith("/open-apis/im/v1/messages/") and self.path.endswith("/reply"):
                    if self.headers.get("Authorization") != "Bearer t-fake-tenant-token":
                        answer = {"code": 99991663, "msg": "invalid access token"}
                    else:
                        message_id = self.path.split("/")[-2]
                        fake.replies.put((message_id, body))
                        answer = {"code": 0, "msg": "success", "data": {"message_id": "om_" + uuid.uuid4().hex}}
                else:
                    answer = {"code": 404, "msg": "not found"}
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.domain = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, timeout: float = 60) -> tuple[str, dict]:
        message_id, body = self.replies.get(timeout=timeout)
        assert body["msg_type"] == "interactive"
        return message_id, json.loads(body["content"])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake():
    server = FakeLark()
    yield server
    server.close()


def make_app(tmp_path, fake, **overrides):
    from oomdoctor.web import create_app

    # A fresh app id per app: the SDK caches tenant tokens per app id for the whole process.
    config = {"TESTING": True, "DATABASE": str(tmp_path / "lark.sqlite3"), "LARK_APP_ID": "cli_" + uuid.uuid4().hex[:12],
              "LARK_APP_SECRET": "app-secret", "LARK_VERIFICATION_TOKEN": TOKEN, "LARK_ENCRYPT_KEY": ENCRYPT_KEY,
              "LARK_DOMAIN": fake.domain, **overrides}
    return create_app(config)


@pytest.fixture
def app(tmp_path, fake):
    return make_app(tmp_path, fake)


@pytest.fixture
def lark(app):
    return app.test_client()


def deliver(client, event: dict, *, key: str = ENCRYPT_KEY, signed: bool = True, timestamp: str | None = None,
            body: bytes | None = None, signature: str | None = None):
    body = body if body is not None else json.dumps({"encrypt": encrypt(key, json.dumps(event))}).encode()
    headers = {}
    if signed:
        timestamp = timestamp if timestamp is not None else str(int(time.time()))
        nonce = uuid.uuid4().hex[:16]
        headers = {"X-Lark-Request-Timestamp": timestamp, "X-Lark-Request-Nonce": nonce,
                   "X-Lark-Signature": signature if signature is not None else sign(key, timestamp, nonce, body)}
    return client.post("/lark/events", data=body, headers=headers, content_type="application/json; charset=utf-8")


def header(event_type: str, event_id: str | None = None, token: str = TOKEN) -> dict:
    return {"event_id": event_id or uuid.uuid4().hex, "token": token, "create_time": str(int(time.time() * 1000)),
            "event_type": event_type, "tenant_key": "tenant1", "app_id": "cli_test"}


def message_event(text: str | None = None, *, chat_type: str = "p2p", chat: str = "oc_chat1", user: str = "ou_user1",
                  mentions: list[dict] | None = None, message_type: str = "text", content: dict | None = None,
                  event_id: str | None = None, sender_type: str = "user", token: str = TOKEN) -> dict:
    return {"schema": "2.0", "header": header("im.message.receive_v1", event_id, token), "event": {
        "sender": {"sender_id": {"open_id": user, "union_id": "on_" + user, "user_id": user[3:]},
                   "sender_type": sender_type, "tenant_key": "tenant1"},
        "message": {"message_id": "om_" + uuid.uuid4().hex, "create_time": str(int(time.time() * 1000)),
                    "chat_id": chat, "chat_type": chat_type, "message_type": message_type,
                    "content": json.dumps(content if content is not None else {"text": text}),
                    "mentions": mentions or []}}}


def press(button: dict, *, user: str = "ou_user1", chat: str = "oc_chat1", message_id: str = "om_card") -> dict:
    return {"schema": "2.0", "header": header("card.action.trigger"), "event": {
        "operator": {"tenant_key": "tenant1", "open_id": user, "union_id": "on_" + user},
        "token": "c-" + uuid.uuid4().hex, "action": {"value": button["value"], "tag": "button"},
        "host": "im_message", "context": {"open_message_id": message_id, "open_chat_id": chat}}}


def buttons(card: dict) -> list[dict]:
    return [b for element in card["elements"] if element["tag"] == "action" for b in element["actions"]]


def consultations(app) -> list[tuple]:
    store = Store(app.config["DATABASE"], migrate=False)
    try:
        return store.conn.execute("SELECT id, owner, channel, lang, turns FROM consultations").fetchall()
    finally:
        store.close()


def record(app, cid: str) -> dict:
    store = Store(app.config["DATABASE"], migrate=False)
    try:
        return store.get(cid)
    finally:
        store.close()


# --- the protection ------------------------------------------------------------------

def test_the_cipher_decrypts_larks_published_example():
    from lark_oapi.core.utils import AESCipher  # here: the SDK takes seconds to import, in every test worker

    # The example in Lark's guide to the Encrypt Key: "test key" and this ciphertext give "hello world".
    assert AESCipher("test key").decrypt_str("P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk=") == "hello world"
    # And what these tests encrypt, the SDK's cipher (which the service uses) reads back.
    assert verify.decrypt("k", encrypt("k", '{"a": "显存"}')) == {"a": "显存"}


def test_url_verification_is_answered_only_when_encrypted_with_our_key_and_token(lark):
    challenge = {"challenge": "ch-" + uuid.uuid4().hex, "token": TOKEN, "type": "url_verification"}
    resp = deliver(lark, challenge, signed=False)
    assert resp.status_code == 200 and resp.get_json() == {"challenge": challenge["challenge"]}
    assert deliver(lark, {**challenge, "token": "not-ours"}, signed=False).status_code == 401
    assert deliver(lark, challenge, key="another-key", signed=False).status_code == 401
    plain = lark.post("/lark/events", json=challenge)
    assert plain.status_code == 401


@pytest.mark.parametrize("case", ["unsigned", "wrong signature", "tampered", "stale", "future", "other key",
                                  "wrong token", "not json", "plain event", "garbage timestamp"])
def test_anything_not_from_lark_is_refused_and_does_nothing(app, lark, fake, case):
    event = message_event(TRACEBACK)
    body = json.dumps({"encrypt": encrypt(ENCRYPT_KEY, json.dumps(event))}).encode()
    now = int(time.time())
    if case == "unsigned":
        resp = deliver(lark, event, signed=False)
    elif case == "wrong signature":
        resp = deliver(lark, event, signature="0" * 64)
    elif case == "tampered":
        other = json.dumps({"encrypt": encrypt(ENCRYPT_KEY, json.dumps(message_event("hello")))}).encode()
        stamp = str(now)
        resp = lark.post("/lark/events", data=other, content_type="application/json", headers={
            "X-Lark-Request-Timestamp": stamp, "X-Lark-Request-Nonce": "n",
            "X-Lark-Signature": sign(ENCRYPT_KEY, stamp, "n", body)})
    elif case == "stale":
        resp = deliver(lark, event, timestamp=str(now - verify.MAX_AGE_SECONDS - 5))
    elif case == "future":
        resp = deliver(lark, event, timestamp=str(now + verify.MAX_AGE_SECONDS + 5))
    elif case == "other key":
        resp = deliver(lark, event, key="not-our-key")
    elif case == "wrong token":
        resp = deliver(lark, message_event(TRACEBACK, token="not-our-token"))
    elif case == "not json":
        resp = deliver(lark, event, body=b"\xff{not json")
    elif case == "plain event":
        resp = deliver(lark, event, body=json.dumps(event).encode())
    else:
        resp = deliver(lark, event, timestamp="soon")
    assert resp.status_code == 401
    assert "Traceback" not in resp.get_data(as_text=True)
    assert consultations(app) == []
    time.sleep(0.3)
    assert fake.replies.empty()


@pytest.mark.parametrize("missing", ["LARK_ENCRYPT_KEY", "LARK_VERIFICATION_TOKEN"])
def test_without_both_settings_everything_is_refused(tmp_path, fake, missing):
    app = make_app(tmp_path, fake, **{missing: ""})
    challenge = {"challenge": "c", "token": TOKEN, "type": "url_verification"}
    assert deliver(app.test_client(), challenge, signed=False).status_code == 401
    assert deliver(app.test_client(), message_event("help")).status_code == 401


def test_an_oversized_body_is_refused_before_it_is_read_and_a_long_message_is_told_its_limit(tmp_path, fake):
    app = make_app(tmp_path, fake, LARK_MAX_MESSAGE_BYTES=1000)
    resp = deliver(app.test_client(), message_event("x" * 100_000))
    assert resp.status_code == 413
    assert deliver(app.test_client(), message_event("显存 " + "x" * 5_000)).status_code == 200
    assert "上限为 1000 字节" in fake.wait()[1]["elements"][0]["content"]
    assert consultations(app) == []


# --- messages ---------------------------------------------------------------------------

def test_a_direct_message_starts_a_consultation_in_chinese_with_buttons(app, lark, fake):
    event = message_event(TRACEBACK)
    started = time.monotonic()
    resp = deliver(lark, event)
    assert resp.status_code == 200 and time.monotonic() - started < 3  # acknowledged within Lark's window
    replied_to, card = fake.wait()
    assert replied_to == event["event"]["message"]["message_id"]
    [(cid, owner, channel, lang, turns)] = consultations(app)
    assert (owner, channel, lang, turns) == ("tenant1:ou_user1", "lark:oc_chat1", "zh", 1)
    assert card["header"]["title"]["content"] == "先问一个问题"
    pressable = buttons(card)
    question = record(app, cid)["state"]["pending"]
    assert all(b["value"]["answer"] == cid and b["value"]["q"] == question for b in pressable)
    assert pressable[-1]["text"]["content"] == "跳过（不知道）"
    assert pressable[0]["text"]["content"].startswith("1. ")
    assert fake.token_requests == 1


def test_an_event_delivered_twice_is_answered_once_even_by_a_restarted_service(tmp_path, app, lark, fake):
    event = message_event("help", event_id="ev_" + uuid.uuid4().hex)
    assert deliver(lark, event).status_code == 200
    fake.wait()
    assert deliver(lark, event).status_code == 200
    # The same database, a new process: the id is still claimed.
    again = make_app(tmp_path, fake)
    assert deliver(again.test_client(), event).status_code == 200
    time.sleep(0.5)
    assert fake.replies.empty()


def test_a_button_answers_the_question_and_the_next_card_follows(app, lark, fake):
    deliver(lark, message_event(TRACEBACK))
    _, card = fake.wait()
    [(cid, *_)] = consultations(app)
    first = buttons(card)[0]
    resp = deliver(lark, press(first, message_id="om_question"))
    assert resp.status_code == 200
    body = resp.get_json()
    assert body["toast"]["type"] == "success" and first["value"]["label"] in body["toast"]["content"]
    assert body["card"]["type"] == "raw" and not buttons(body["card"]["data"])  # answered: no buttons left
    replied_to, following = fake.wait()
    assert replied_to == "om_question"
    model = next(f for f in record(app, cid)["state"]["facts"] if f["name"] == "model.name")
    assert model["value"] == first["value"]["v"] and model["source"]["kind"] == "answer"
    # The same button again: its question is no longer pending.
    stale = deliver(lark, press(first)).get_json()
    assert stale["toast"]["type"] == "warning" and "之前的诊断" in stale["toast"]["content"]
    assert following["header"]["title"]["content"] in ("先问一个问题", "OOM Doctor 诊断报告")


def test_buttons_until_the_report(app, lark, fake):
    deliver(lark, message_event(TRACEBACK))
    _, card = fake.wait()
    for _ in range(10):
        if not buttons(card):
            break
        deliver(lark, press(buttons(card)[0]))
        _, card = fake.wait()
    assert card["header"]["title"]["content"] == "OOM Doctor 诊断报告"
    text = card["elements"][0]["content"]
    assert "**耗尽的资源**" in text and "**最可能的原因**" in text


def test_a_reply_of_2_picks_option_2(app, lark, fake):
    deliver(lark, message_event(TRACEBACK))
    _, card = fake.wait()
    second = buttons(card)[1]
    deliver(lark, message_event("2"))
    fake.wait()
    [(cid, *_)] = consultations(app)
    model = next(f for f in record(app, cid)["state"]["facts"] if f["name"] == "model.name")
    assert model["value"] == second["value"]["v"]


def test_someone_else_cannot_press_my_buttons(app, lark, fake):
    deliver(lark, message_event(TRACEBACK))
    _, card = fake.wait()
    other = deliver(lark, press(buttons(card)[0], user="ou_someone_else")).get_json()
    assert other["toast"]["type"] == "warning" and "发起" in other["toast"]["content"]
    [(cid, *_)] = consultations(app)
    assert record(app, cid)["turns"] == 1


def test_english_when_the_user_writes_english(app, lark, fake):
    deliver(lark, message_event("My Llama-3-8B LoRA run on one RTX 4090 runs out of CUDA memory with batch size 8"))
    _, card = fake.wait()
    assert card["header"]["title"]["content"] in ("One question first", "OOM Doctor report")
    [(_, _, _, lang, _)] = consultations(app)
    assert lang == "en"
    # A bare answer afterwards keeps the language.
    deliver(lark, message_event("LoRA"))
    _, card = fake.wait()
    assert card["header"]["title"]["content"] in ("One question first", "OOM Doctor report")


@pytest.mark.parametrize("text, lang", [
    ("My Llama-3-8B LoRA run runs out of memory", "en"),
    ("我的 Llama-3-8B 用 LoRA 训练时显存不足", "zh"),
    (TRACEBACK, None),           # a paste: English, but not the user's own words
    ("LoRA", None), ("2", None), ("Qwen2.5 7B", None),
    ("CUDA out of memory\n" * 5, None),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB", None),
    ("[ 1234.567890] Out of memory: Killed process 4242 (python) total-vm:123kB", None),
    ("I get CUDA out of memory on my 4090 with llama 3 8b", "en"),
])
def test_which_messages_say_the_language(text, lang):
    assert conversation.written_language(text) == lang


def test_groups_answer_only_mentions_and_mentions_are_removed(app, lark, fake):
    deliver(lark, message_event(TRACEBACK, chat_type="group", chat="oc_group"))
    time.sleep(0.5)
    assert fake.replies.empty() and consultations(app) == []
    mention = {"key": "@_user_1", "id": {"open_id": "ou_bot"}, "name": "OOM Doctor", "tenant_key": "tenant1"}
    deliver(lark, message_event("@_user_1 " + TRACEBACK, chat_type="group", chat="oc_group", mentions=[mention]))
    fake.wait()
    [(cid, owner, channel, *_)] = consultations(app)
    assert (owner, channel) == ("tenant1:ou_user1", "lark:oc_group")
    assert "@_user_1" not in record(app, cid)["messages"][0]["text"]


def test_each_person_and_chat_has_their_own_consultation(app, lark, fake):
    deliver(lark, message_event(TRACEBACK))
    deliver(lark, message_event(TRACEBACK, user="ou_user2"))
    deliver(lark, message_event(TRACEBACK, chat="oc_chat2"))
    for _ in range(3):
        fake.wait()
    deliver(lark, message_event("Llama-2-7B"))
    fake.wait()
    rows = sorted((owner, channel, turns) for _, owner, channel, _, turns in consultations(app))
    assert rows == [("tenant1:ou_user1", "lark:oc_chat1", 2), ("tenant1:ou_user1", "lark:oc_chat2", 1),
                    ("tenant1:ou_user2", "lark:oc_chat1", 1)]


def test_a_rich_text_post_with_a_code_block_is_read(app, lark, fake):
    post = {"title": "", "content": [[{"tag": "text", "text": "训练时报错："}],
                                     [{"tag": "code_block", "language": "PLAIN_TEXT", "text": TRACEBACK}]]}
    deliver(lark, message_event(message_type="post", content=post))
    fake.wait()
    [(cid, _, _, lang, _)] = consultations(app)
    stored = record(app, cid)["messages"][0]["text"]
    assert "CUDA out of memory" in stored and lang == "zh"


def test_an_image_gets_a_note_and_bots_get_nothing(app, lark, fake):
    deliver(lark, message_event(message_type="image", content={"image_key": "img_v2_x"}))
    _, card = fake.wait()
    assert "文本" in card["elements"][0]["content"]
    deliver(lark, message_event(TRACEBACK, sender_type="app"))
    time.sleep(0.5)
    assert fake.replies.empty() and consultations(app) == []


def test_commands(app, lark, fake):
    deliver(lark, message_event("帮助"))
    assert "新的" in fake.wait()[1]["elements"][0]["content"]
    deliver(lark, message_event("lang en"))
    assert "English" in fake.wait()[1]["elements"][0]["content"]
    deliver(lark, message_event(TRACEBACK))
    _, card = fake.wait()
    assert card["header"]["title"]["content"] == "One question first"  # the preference wins over the default
    deliver(lark, message_event("new"))
    assert "new consultation" in fake.wait()[1]["elements"][0]["content"]
    assert len(consultations(app)) == 2
    # The old question's button is stale now.
    stale = deliver(lark, press(buttons(card)[0])).get_json()
    assert stale["toast"]["type"] == "warning"


def test_a_reply_the_api_refuses_is_logged_not_retried(tmp_path, fake, caplog):
    app = make_app(tmp_path, fake, LARK_APP_SECRET="wrong-secret")
    deliver(app.test_client(), message_event("help"))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and "Lark reply" not in caplog.text:
        time.sleep(0.1)
    assert "Lark reply" in caplog.text
    assert fake.replies.empty()


def test_the_setup_guide_names_every_setting_event_and_scope_the_code_relies_on():
    from oomdoctor.channels.lark import events
    from oomdoctor.config import DEFAULTS

    guide = (ROOT / "docs" / "lark.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for key in DEFAULTS:
        if key.startswith("LARK_") and not key.endswith("MAX_MESSAGE_BYTES"):
            assert f"OOMDOCTOR_{key}" in guide + readme, key
    for name in (events.MESSAGE, events.CARD_ACTION, "/lark/events", "im:message.group_at_msg:readonly"):
        assert name in guide
