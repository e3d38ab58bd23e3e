"""Slack's late replies go through the outbox in the database: work recorded before it starts,
taken over by any worker when the one that started it is gone, each turn stored once, and the
response_url post count shared by every worker and host. On SQLite and on PostgreSQL."""
from __future__ import annotations

import json
import threading
import time

import pytest

from oomdoctor.channels.slack import responder
from oomdoctor.storage import Store
from test_slack import SECRET, TRACEBACK, Hook, all_text, command


@pytest.fixture
def hook():
    h = Hook()
    yield h
    h.close()


def make_app(database: str, hook: Hook, **extra):
    from oomdoctor.web import create_app

    return create_app({"TESTING": True, "DATABASE": database, "SLACK_SIGNING_SECRET": SECRET,
                       "SLACK_RESPONSE_URL_PREFIXES": (hook.base,), **extra})


def entries(database: str) -> list[tuple]:
    store = Store(database, migrate=False)
    try:
        with store.reading() as conn:
            return [tuple(r) for r in conn.execute("SELECT kind, state, attempts FROM outbox ORDER BY created")]
    finally:
        store.close()


def lapse_all(database: str) -> None:
    """As if every worker holding an entry had died long ago."""
    store = Store(database, migrate=False)
    try:
        with store.transaction() as conn:
            conn.execute("UPDATE outbox SET due = 0")
    finally:
        store.close()


def started(app, text: str, response_url: str):
    """A consultation and an outbox entry for a turn on it, as a worker that died right after
    recording the entry would leave them."""
    with app.app_context():
        from oomdoctor.web.context import store

        cid = store().create({}, owner="T1:U1", channel="slack:C1")
        entry = store().enqueue("slack:turn", {"cid": cid, "here": "slack:C1", "who": "T1:U1", "text": text, "lang": "en"},
                                response_url, lease=0)
    return cid, entry


def turns(app, cid: str) -> list[str]:
    with app.app_context():
        from oomdoctor.web.context import store

        return [m["text"] for m in store().get(cid)["messages"]]


def test_a_late_reply_is_recorded_then_delivered_and_done(database, hook):
    app = make_app(database, hook, SLACK_ACK_SECONDS=0)
    resp = command(app.test_client(), TRACEBACK, hook.url())
    assert "Working on it" in all_text(resp.get_json())
    assert hook.wait()["blocks"]
    deadline = time.monotonic() + 10
    while entries(database) != [("slack:turn", "done", 1)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert entries(database) == [("slack:turn", "done", 1)]
    assert responder.drain(app) == 0  # nothing left for another worker


def test_an_answer_in_time_is_not_posted_again(database, hook):
    app = make_app(database, hook)
    resp = command(app.test_client(), "Llama-3-8B LoRA on a 4090, batch 4", hook.url())
    assert resp.get_json()["blocks"] and "Working on it" not in all_text(resp.get_json())
    assert entries(database) == [("slack:turn", "done", 1)]
    assert responder.drain(app) == 0 and hook.posts.empty()


def test_work_whose_worker_died_is_done_by_another(database, hook):
    app = make_app(database, hook)
    cid, entry = started(app, TRACEBACK, hook.url())
    other = make_app(database, hook)  # another worker, or another host on the same database
    assert responder.drain(other) == 1
    late = hook.wait()
    assert late["response_type"] == "ephemeral" and any(b["type"] == "actions" for b in late["blocks"])
    assert turns(app, cid) == [TRACEBACK]
    assert entries(database) == [("slack:turn", "done", 2)]


def test_a_turn_stored_before_the_worker_died_is_not_stored_again(database, hook):
    app = make_app(database, hook)
    cid, entry = started(app, TRACEBACK, hook.url())
    with app.app_context():  # the dead worker got as far as storing the turn
        from oomdoctor.channels.slack.commands import take_turn

        first = take_turn(cid, "slack:C1", TRACEBACK, request_id=entry.id)
    assert responder.drain(make_app(database, hook)) == 1
    assert hook.wait() == first
    assert turns(app, cid) == [TRACEBACK]


def test_a_kept_message_is_posted_as_it_was(database, hook):
    app = make_app(database, hook)
    cid, entry = started(app, TRACEBACK, hook.url())
    with app.app_context():
        from oomdoctor.web.context import store

        store().settle(entry, {"text": "computed before the crash", "response_type": "ephemeral"})
    assert responder.drain(make_app(database, hook)) == 1
    assert hook.wait()["text"] == "computed before the crash"
    assert turns(app, cid) == []  # not computed again


def test_a_failed_post_is_tried_again_later(database, hook):
    app = make_app(database, hook)
    cid, entry = started(app, TRACEBACK, "http://127.0.0.1:9/unreachable")
    app.config["SLACK_RESPONSE_URL_PREFIXES"] = ("http://127.0.0.1:9/",)
    assert responder.drain(app) == 1
    assert entries(database) == [("slack:turn", "ready", 2)]  # kept, for the next try
    lapse_all(database)
    assert responder.drain(app) == 1
    assert turns(app, cid) == [TRACEBACK]  # the turn itself was stored once


def test_work_that_keeps_killing_its_worker_ends_with_the_failure_message(database, hook):
    app = make_app(database, hook)
    cid, entry = started(app, TRACEBACK, hook.url())
    with app.app_context():
        from oomdoctor.web.context import store

        with store().transaction() as conn:
            conn.execute("UPDATE outbox SET attempts = ? WHERE id = ?", (responder.MAX_ATTEMPTS, entry.id))
    assert responder.drain(app) == 1
    assert "something went wrong while diagnosing" in all_text(hook.wait())
    assert turns(app, cid) == []  # not tried a fourth time
    assert entries(database) == [("slack:turn", "done", responder.MAX_ATTEMPTS + 1)]


def test_the_post_count_of_a_response_url_is_shared_by_hosts(database, hook):
    one, two = make_app(database, hook), make_app(database, hook)
    url = hook.url("shared")
    results = []
    for i in range(7):
        with (one if i % 2 else two).app_context():
            results.append(responder.post(url, {"text": str(i)}, prefixes=(hook.base,)))
    assert results == [True] * 5 + [False] * 2
    assert sorted(hook.wait()["text"] for _ in range(5)) == ["0", "1", "2", "3", "4"]


def test_a_retried_button_answer_delivers_the_stored_turn_not_stale(database, hook):
    app = make_app(database, hook)
    client = app.test_client()
    message = command(client, TRACEBACK, hook.url()).get_json()
    from test_slack import answer_actions, click

    block, elements = answer_actions(message)
    click(client, block, elements[0], hook.url("actions"))
    answered = hook.wait()
    assert "earlier consultation" not in all_text(answered)
    # The action's thread marks its entry done after the post arrives: let it, before undoing that below.
    for thread in threading.enumerate():
        if thread.name == "slack-action":
            thread.join(30)
    # The worker died after the turn was stored and before the post was counted done: redo it.
    lapse_all(database)
    store = Store(database, migrate=False)
    with store.transaction() as conn:
        conn.execute("UPDATE outbox SET state = 'working', message = NULL WHERE kind = 'slack:answer'")
    store.close()
    assert responder.drain(app) == 1
    again = hook.wait()
    assert again["blocks"] == answered["blocks"]
    cid = json.loads(json.dumps(block))["block_id"].split(":")[1]
    assert len(turns(app, cid)) == 2  # the traceback and one answer, not two


def test_the_default_response_url_hosts_are_slacks():
    from oomdoctor import config

    app_default = config.from_environment({})["SLACK_RESPONSE_URL_PREFIXES"]
    assert tuple(app_default.split(",")) == responder.SLACK_HOSTS
