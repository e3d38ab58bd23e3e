"""Slack: signed requests only, `/oom` commands, buttons, and late replies to a real local response_url.

Requests are signed exactly as Slack signs them (HMAC-SHA256 over `v0:timestamp:raw body`,
form-encoded like Slack's own); response_url posts land on a real HTTP server in a thread.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import queue
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlencode

import pytest
from slack_sdk.signature import SignatureVerifier

from oomdoctor.channels.slack import responder, verify
from oomdoctor.storage import Store

ROOT = Path(__file__).resolve().parent.parent
TRACEBACK = (ROOT / "tests" / "corpus" / "alpaca-76-full-ft-4x-a10.log").read_text(encoding="utf-8")
SECRET = "8f742231b10e8888abcd99yyyzzz85a5-test"

# The worked example in Slack's "Verifying requests from Slack"
# (https://api.slack.com/authentication/verifying-requests-from-slack).
DOC_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
DOC_TS = "1531420618"
DOC_BODY = ("token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V"
            "&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text="
            "&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
            "&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c")
DOC_SIG = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """What Slack puts in X-Slack-Signature."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


class Hook:
    """A real HTTP server standing in for Slack's response_url."""

    def __init__(self) -> None:
        self.posts: queue.Queue = queue.Queue()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path.startswith("/slow"):
                    time.sleep(2)
                hook.posts.put((self.path, self.headers.get("Content-Type"), json.loads(body)))
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, name: str = "commands") -> str:
        return f"{self.base}{name}/{uuid.uuid4().hex}"

    def wait(self, timeout: float = 20) -> dict:
        path, content_type, body = self.posts.get(timeout=timeout)
        assert content_type.startswith("application/json")
        return body

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook():
    h = Hook()
    yield h
    h.close()


@pytest.fixture
def slack_app(tmp_path, hook):
    from oomdoctor.web import create_app

    return create_app({"TESTING": True, "DATABASE": str(tmp_path / "slack.sqlite3"), "SLACK_SIGNING_SECRET": SECRET,
                       "SLACK_RESPONSE_URL_PREFIXES": (hook.base,)})


@pytest.fixture
def slack(slack_app):
    return slack_app.test_client()


def send(client, path: str, body: bytes, secret: str = SECRET, timestamp: str | None = None,
         signature: str | None = None):
    timestamp = timestamp if timestamp is not None else str(int(time.time()))
    headers = {"X-Slack-Request-Timestamp": timestamp,
               "X-Slack-Signature": signature if signature is not None else sign(secret, timestamp, body)}
    return client.post(path, data=body, headers=headers, content_type="application/x-www-form-urlencoded")


def command(client, text: str, response_url: str, user: str = "U1", channel: str = "C1", team: str = "T1"):
    body = urlencode({"token": "legacy", "team_id": team, "team_domain": "lab", "channel_id": channel,
                      "channel_name": "training", "user_id": user, "user_name": "ada", "command": "/oom",
                      "text": text, "api_app_id": "A1", "response_url": response_url,
                      "trigger_id": "1.2.3"}).encode()
    return send(client, "/slack/commands", body)


def click(client, block: dict, element: dict, response_url: str, user: str = "U1", channel: str = "C1",
          team: str = "T1", option: dict | None = None):
    action = {"type": element["type"], "action_id": element["action_id"], "block_id": block.get("block_id", ""),
              "action_ts": str(time.time())}
    if element["type"] == "button":
        action.update(value=element["value"], text=element["text"])
    else:
        action["selected_option"] = option
    payload = {"type": "block_actions", "user": {"id": user, "team_id": team}, "team": {"id": team},
               "channel": {"id": channel, "name": "training"}, "response_url": response_url,
               "container": {"type": "message", "is_ephemeral": True}, "actions": [action]}
    return send(client, "/slack/interactions", urlencode({"payload": json.dumps(payload)}).encode())


def consultations(app) -> list[tuple]:
    store = Store(app.config["DATABASE"], migrate=False)
    try:
        return store.conn.execute("SELECT id, owner, channel, state FROM consultations").fetchall()
    finally:
        store.close()


def all_text(message: dict) -> str:
    return json.dumps(message["blocks"], ensure_ascii=False)


def answer_actions(message: dict) -> tuple[dict, list[dict]]:
    block = next(b for b in message["blocks"] if b["type"] == "actions")
    return block, block["elements"]


# --- signing ---------------------------------------------------------------

def test_signing_matches_slacks_published_example():
    assert sign(DOC_SECRET, DOC_TS, DOC_BODY.encode()) == DOC_SIG

    class Then:
        def now(self) -> float:
            return int(DOC_TS) + 60

    assert SignatureVerifier(DOC_SECRET, clock=Then()).is_valid(DOC_BODY.encode(), DOC_TS, DOC_SIG)
    assert SignatureVerifier(DOC_SECRET).generate_signature(timestamp=DOC_TS, body=DOC_BODY) == DOC_SIG


def test_slacks_published_request_is_accepted_when_fresh(tmp_path, monkeypatch):
    from oomdoctor.web import create_app

    app = create_app({"TESTING": True, "DATABASE": str(tmp_path / "doc.sqlite3"), "SLACK_SIGNING_SECRET": DOC_SECRET})
    monkeypatch.setattr("slack_sdk.signature.time", lambda: int(DOC_TS) + 30)
    resp = send(app.test_client(), "/slack/commands", DOC_BODY.encode(), timestamp=DOC_TS, signature=DOC_SIG)
    assert resp.status_code == 200
    assert resp.get_json()["response_type"] == "ephemeral"
    assert "/oom new" in all_text(resp.get_json())  # empty text: the help


def test_slacks_published_request_is_stale_today(tmp_path):
    from oomdoctor.web import create_app

    app = create_app({"TESTING": True, "DATABASE": str(tmp_path / "doc.sqlite3"), "SLACK_SIGNING_SECRET": DOC_SECRET})
    resp = send(app.test_client(), "/slack/commands", DOC_BODY.encode(), timestamp=DOC_TS, signature=DOC_SIG)
    assert resp.status_code == 401


@pytest.mark.parametrize("case", ["unsigned", "wrong secret", "tampered", "stale", "future", "garbage timestamp",
                                  "no timestamp"])
def test_unsigned_or_bad_requests_are_refused_and_nothing_is_stored(slack_app, slack, hook, case):
    body = urlencode({"team_id": "T1", "channel_id": "C1", "user_id": "U1", "text": TRACEBACK,
                      "response_url": hook.url()}).encode()
    now = int(time.time())
    if case == "unsigned":
        resp = slack.post("/slack/commands", data=body, content_type="application/x-www-form-urlencoded")
    elif case == "wrong secret":
        resp = send(slack, "/slack/commands", body, secret="not-the-secret")
    elif case == "tampered":
        signature = sign(SECRET, str(now), body)
        resp = send(slack, "/slack/commands", body.replace(b"T1", b"T2"), timestamp=str(now), signature=signature)
    elif case == "stale":
        resp = send(slack, "/slack/commands", body, timestamp=str(now - 301))
    elif case == "future":
        resp = send(slack, "/slack/commands", body, timestamp=str(now + 310))  # well past the window: the verifier compares against a float clock
    elif case == "garbage timestamp":
        resp = send(slack, "/slack/commands", body, timestamp="soon", signature=sign(SECRET, "soon", body))
    else:
        resp = slack.post("/slack/commands", data=body, content_type="application/x-www-form-urlencoded",
                          headers={"X-Slack-Signature": sign(SECRET, str(now), body)})
    assert resp.status_code == 401
    interaction = slack.post("/slack/interactions", data=urlencode({"payload": "{}"}),
                             content_type="application/x-www-form-urlencoded")
    assert interaction.status_code == 401
    assert consultations(slack_app) == []
    assert hook.posts.empty()


def test_no_signing_secret_refuses_everything(tmp_path, hook):
    from oomdoctor.web import create_app

    app = create_app({"TESTING": True, "DATABASE": str(tmp_path / "x.sqlite3"), "SLACK_SIGNING_SECRET": ""})
    resp = command(app.test_client(), "help", hook.url())
    assert resp.status_code == 401


def test_is_signed_is_strict():
    now = str(int(time.time()))
    body = b"text=hi"
    assert verify.is_signed(SECRET, body, now, sign(SECRET, now, body))
    assert not verify.is_signed("", body, now, sign("", now, body))
    assert not verify.is_signed(SECRET, body, None, sign(SECRET, now, body))
    assert not verify.is_signed(SECRET, b"\xff\xfe", now, "v0=00")


# --- /oom --------------------------------------------------------------------

def test_help(slack, hook):
    for text in ("", "help", "HELP"):
        resp = command(slack, text, hook.url())
        assert resp.status_code == 200
        body = resp.get_json()
        assert body["response_type"] == "ephemeral"
        assert "/oom lang zh" in all_text(body)


def test_traceback_starts_a_consultation_with_a_question(slack_app, slack, hook):
    resp = command(slack, TRACEBACK, hook.url())
    body = resp.get_json()
    assert body["response_type"] == "ephemeral" and body["text"]
    block, elements = answer_actions(body)
    [(cid, owner, channel, _state)] = consultations(slack_app)
    assert (owner, channel) == ("T1:U1", "slack:C1")
    assert block["block_id"].startswith(f"answer:{cid}:")
    assert elements[-1]["action_id"] == "answer_skip"


def test_the_same_person_continues_and_others_are_separate(slack_app, slack, hook):
    command(slack, TRACEBACK, hook.url())
    command(slack, "Llama-2-7B", hook.url())
    command(slack, TRACEBACK, hook.url(), user="U2")
    command(slack, TRACEBACK, hook.url(), channel="C2")
    rows = consultations(slack_app)
    assert sorted((o, c) for _, o, c, _ in rows) == [("T1:U1", "slack:C1"), ("T1:U1", "slack:C2"),
                                                     ("T1:U2", "slack:C1")]


def test_new_starts_over(slack_app, slack, hook):
    command(slack, TRACEBACK, hook.url())
    resp = command(slack, "new", hook.url())
    assert "Started a new consultation" in all_text(resp.get_json())
    assert len(consultations(slack_app)) == 2
    resp = command(slack, "new " + TRACEBACK, hook.url())
    assert any(b["type"] == "actions" for b in resp.get_json()["blocks"])
    assert len(consultations(slack_app)) == 3


def test_lang_is_kept_in_the_consultation_state(slack_app, slack, hook):
    resp = command(slack, "lang zh", hook.url())
    assert "中文" in all_text(resp.get_json())
    [(cid, _, _, state)] = consultations(slack_app)
    assert json.loads(state)["lang"] == "zh"
    # An English traceback would be answered in English; the preference wins.
    resp = command(slack, TRACEBACK, hook.url())
    assert "跳过" in all_text(resp.get_json())
    assert "/oom lang" in all_text(command(slack, "help", hook.url()).get_json())
    assert "诊断微调" in all_text(command(slack, "help", hook.url()).get_json())
    # Switching back, in the middle of the consultation, keeps its facts.
    command(slack, "lang en", hook.url())
    [(_, _, _, state)] = consultations(slack_app)
    assert json.loads(state)["lang"] == "en" and json.loads(state)["facts"]
    assert "Skip" in all_text(command(slack, "Llama-2-7B", hook.url()).get_json())
    # /oom new keeps the language preference.
    command(slack, "lang zh", hook.url())
    command(slack, "new", hook.url())
    newest = Store(slack_app.config["DATABASE"], migrate=False)
    try:
        assert newest.get(newest.find("T1:U1", "slack:C1"))["state"]["lang"] == "zh"
    finally:
        newest.close()


def test_lang_usage(slack, hook):
    assert "/oom lang en" in all_text(command(slack, "lang fr", hook.url()).get_json())


def test_slack_escaping_is_undone_before_the_consultation(slack_app, slack, hook):
    command(slack, "File &lt;frozen runpy&gt; &amp; CUDA out of memory", hook.url())
    store = Store(slack_app.config["DATABASE"], migrate=False)
    try:
        record = store.get(store.find("T1:U1", "slack:C1"))
    finally:
        store.close()
    assert record["messages"][0]["text"] == "File <frozen runpy> & CUDA out of memory"


def test_too_large(tmp_path, hook):
    from oomdoctor.web import create_app

    app = create_app({"TESTING": True, "DATABASE": str(tmp_path / "x.sqlite3"), "SLACK_SIGNING_SECRET": SECRET,
                      "MAX_MESSAGE_BYTES": 100})
    resp = command(app.test_client(), "x" * 500, hook.url())
    assert resp.status_code == 200
    assert "the limit is 100 bytes" in all_text(resp.get_json())


# --- answering late ---------------------------------------------------------------

def test_slow_turn_is_acknowledged_and_posted_to_response_url(tmp_path, hook):
    from oomdoctor.web import create_app

    app = create_app({"TESTING": True, "DATABASE": str(tmp_path / "x.sqlite3"), "SLACK_SIGNING_SECRET": SECRET,
                      "SLACK_RESPONSE_URL_PREFIXES": (hook.base,), "SLACK_ACK_SECONDS": 0})
    # With no time allowed for the turn, the command is acknowledged first and answered later:
    # the same path a turn slower than Slack's 3 seconds takes (timing is measured in bench/, not here).
    resp = command(app.test_client(), TRACEBACK, hook.url())
    assert "Working on it" in all_text(resp.get_json())
    late = hook.wait()
    assert late["response_type"] == "ephemeral"
    assert any(b["type"] == "actions" for b in late["blocks"])


def test_large_text_is_answered_directly_or_through_response_url(slack, hook):
    noise = "".join(f"step {i}: loss=2.{i % 97:02d} lr=2e-5 grad_norm=1.{i % 13}\n" for i in range(1_200))
    resp = command(slack, noise + TRACEBACK, hook.url())
    body = resp.get_json()
    if "Working on it" in all_text(body):
        body = hook.wait(timeout=60)
    assert body["blocks"] and body["text"]


def test_responder_posts_at_most_five_times_per_url(slack_app, hook):
    url = hook.url("limit")
    with slack_app.app_context():  # the count is kept in the app's database
        results = [responder.post(url, {"text": str(i)}, prefixes=(hook.base,)) for i in range(7)]
    assert results == [True] * 5 + [False] * 2
    got = sorted(hook.wait()["text"] for _ in range(5))
    assert got == ["0", "1", "2", "3", "4"]
    assert hook.posts.empty()


def test_responder_has_a_timeout(slack_app, hook):
    # The slow endpoint answers long after the timeout: a poster without one would report success.
    with slack_app.app_context():
        assert responder.post(hook.url("slow"), {"text": "x"}, prefixes=(hook.base,), timeout=0.5) is False


def test_responder_only_posts_to_slack():
    assert responder.post("http://127.0.0.1:9/commands/x", {"text": "x"}) is False
    assert responder.post("https://hooks.slack.com.evil.example/x", {"text": "x"}, timeout=0.1) is False


# --- buttons -------------------------------------------------------------------

def test_buttons_answer_until_the_report_then_share(slack_app, slack, hook):
    message = command(slack, TRACEBACK, hook.url()).get_json()
    for _ in range(10):
        if not any(b["type"] == "actions" and b["block_id"].startswith("answer:") for b in message["blocks"]):
            break
        block, elements = answer_actions(message)
        first = elements[0]
        option = first["options"][0] if first["type"] == "static_select" else None
        resp = click(slack, block, first, hook.url("actions"), option=option)
        assert resp.status_code == 200 and resp.data == b""
        message = hook.wait()
        assert message["replace_original"] is True
        shown = option["text"]["text"] if option else first["text"]["text"]
        assert f"You answered: {shown}" in all_text(message)
    assert [b["type"] for b in message["blocks"]][:2] == ["context", "header"]
    assert "Memory estimate" in all_text(message) or "No estimate" in all_text(message)
    block = next(b for b in message["blocks"] if b["type"] == "actions")
    share = block["elements"][0]
    assert share["action_id"] == "share"
    click(slack, block, share, hook.url("actions"))
    shared = hook.wait()
    assert shared["response_type"] == "in_channel" and shared["replace_original"] is False
    assert "Shared by <@U1>" in all_text(shared)
    assert not any(b["type"] == "actions" for b in shared["blocks"])


def test_skip_button(slack, hook):
    message = command(slack, TRACEBACK, hook.url()).get_json()
    block, elements = answer_actions(message)
    click(slack, block, elements[-1], hook.url("actions"))
    assert "You answered: Skip (I don't know)" in all_text(hook.wait())


def test_old_buttons_are_stale(slack, hook):
    message = command(slack, TRACEBACK, hook.url()).get_json()
    block, elements = answer_actions(message)
    click(slack, block, elements[0], hook.url("actions"))
    hook.wait()
    # The same button again: that question was answered.
    click(slack, block, elements[0], hook.url("actions"))
    stale = hook.wait()
    assert "earlier consultation" in all_text(stale) and stale["replace_original"] is False
    # After /oom new, the old consultation's buttons are stale too.
    message = command(slack, TRACEBACK, hook.url()).get_json()
    block, elements = answer_actions(message)
    command(slack, "new", hook.url())
    click(slack, block, elements[0], hook.url("actions"))
    assert "earlier consultation" in all_text(hook.wait())


def test_someone_elses_buttons(slack, hook):
    message = command(slack, TRACEBACK, hook.url()).get_json()
    block, elements = answer_actions(message)
    click(slack, block, elements[0], hook.url("actions"), user="U2")
    assert "Only the person who started" in all_text(hook.wait())
    click(slack, {"block_id": "share:x"}, {"type": "button", "action_id": "share", "value": block["block_id"].split(":")[1],
                                           "text": {"type": "plain_text", "text": "Share"}}, hook.url("actions"), user="U2")
    assert "Only the person who started" in all_text(hook.wait())


def test_share_before_any_report(slack, hook):
    message = command(slack, TRACEBACK, hook.url()).get_json()
    cid = answer_actions(message)[0]["block_id"].split(":")[1]
    click(slack, {"block_id": f"share:{cid}"}, {"type": "button", "action_id": "share", "value": cid,
                                                "text": {"type": "plain_text", "text": "Share"}}, hook.url("actions"))
    assert "Nothing to share yet" in all_text(hook.wait())


def test_unknown_interactions_are_acknowledged(slack, hook):
    resp = send(slack, "/slack/interactions", urlencode({"payload": json.dumps({"type": "view_submission"})}).encode())
    assert resp.status_code == 200
    resp = send(slack, "/slack/interactions", urlencode({"payload": "not json"}).encode())
    assert resp.status_code == 200
    assert hook.posts.empty()


# --- manifest and docs ------------------------------------------------------

def test_manifest_points_at_the_routes(slack_app):
    import yaml

    manifest = yaml.safe_load((ROOT / "slack" / "manifest.yaml").read_text(encoding="utf-8"))
    routes = {rule.rule for rule in slack_app.url_map.iter_rules() if rule.rule.startswith("/slack/")}
    [cmd] = manifest["features"]["slash_commands"]
    assert cmd["command"] == "/oom"
    assert cmd["url"].startswith("https://") and "/" + cmd["url"].split("/", 3)[3] in routes
    interactivity = manifest["settings"]["interactivity"]
    assert interactivity["is_enabled"] and "/" + interactivity["request_url"].split("/", 3)[3] in routes
    assert manifest["oauth_config"]["scopes"] == {"bot": ["commands"]}
    assert manifest["settings"]["socket_mode_enabled"] is False


def test_docs_cover_every_subcommand_route_and_setting(slack_app):
    docs = (ROOT / "docs" / "slack.md").read_text(encoding="utf-8")
    help_text = slack_app.extensions["oomdoctor.consultant"].kb.texts["slack.help"]
    for sub in ("/oom new", "/oom lang zh", "/oom lang en", "/oom help"):
        assert sub in docs, sub
        assert sub.split(" zh")[0].split(" en")[0] in help_text["en"] and sub.split(" zh")[0].split(" en")[0] in help_text["zh"]
    for route in ("/slack/commands", "/slack/interactions"):
        assert route in docs
    assert "OOMDOCTOR_SLACK_SIGNING_SECRET" in docs
    assert "slack/manifest.yaml" in docs


@pytest.mark.server
def test_real_gunicorn_answers_a_signed_command(tmp_path):
    import urllib.error
    import urllib.request

    from conftest import LiveServer

    server = LiveServer(tmp_path, env={"OOMDOCTOR_SLACK_SIGNING_SECRET": SECRET}).start()
    try:
        body = urlencode({"team_id": "T1", "channel_id": "C1", "user_id": "U1", "command": "/oom", "text": TRACEBACK,
                          "response_url": "https://hooks.slack.com/commands/T1/1/x"}).encode()
        now = str(int(time.time()))
        request = urllib.request.Request(server.url + "/slack/commands", data=body, method="POST", headers={
            "Content-Type": "application/x-www-form-urlencoded", "X-Slack-Request-Timestamp": now,
            "X-Slack-Signature": sign(SECRET, now, body)})
        with urllib.request.urlopen(request, timeout=10) as resp:
            message = json.loads(resp.read())
        assert message["response_type"] == "ephemeral" and message["blocks"]
        forged = urllib.request.Request(server.url + "/slack/commands", data=body, method="POST", headers={
            "Content-Type": "application/x-www-form-urlencoded", "X-Slack-Request-Timestamp": now,
            "X-Slack-Signature": sign("wrong", now, body)})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(forged, timeout=10)
        assert refused.value.code == 401
    finally:
        server.stop()


def test_text_over_the_slack_limit_gets_a_clear_ephemeral_message(slack, hook):
    resp = command(slack, "x" * (65 * 1024), hook.url())
    assert resp.status_code == 200
    body = resp.get_json()
    assert body["response_type"] == "ephemeral"
    assert str(64 * 1024) in all_text(body)
