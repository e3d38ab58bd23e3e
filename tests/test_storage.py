"""The stores: clear errors for broken files and unreachable servers, migrations at start, turns
that never overwrite each other, counters, expiry, the outbox. Every test of what a store does
runs on SQLite and on PostgreSQL (the `database` fixture); the broken-file tests are SQLite's own."""
from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from oomdoctor import config, storage
from oomdoctor.storage import NotFound, StorageError, Store, migrations

LOG = (Path(__file__).parent / "fixtures" / "logs" / "cuda_oom_new.txt").read_text()


def rows(store: Store, sql: str, params: tuple = ()) -> list[tuple]:
    with store.reading() as conn:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]


# ------------------------------------------------------------------ which database a setting names

@pytest.mark.parametrize("value, kind, target", [
    ("var/oomdoctor.sqlite3", "sqlite", "var/oomdoctor.sqlite3"),
    ("/data/oomdoctor.sqlite3", "sqlite", "/data/oomdoctor.sqlite3"),
    ("sqlite:///var/x.sqlite3", "sqlite", "var/x.sqlite3"),
    ("sqlite:////data/x.sqlite3", "sqlite", "/data/x.sqlite3"),
    ("SQLite:///my%20db.sqlite3", "sqlite", "my db.sqlite3"),
    ("postgresql://oom:secret@db:5432/oomdoctor", "postgresql", "postgresql://oom:secret@db:5432/oomdoctor"),
    ("postgres://db/oomdoctor?sslmode=require", "postgresql", "postgres://db/oomdoctor?sslmode=require"),
])
def test_the_database_setting_names_the_store(value, kind, target):
    assert config.database(value) == (kind, target)


def test_an_unknown_scheme_is_refused_not_taken_for_a_file():
    with pytest.raises(ValueError, match="unknown scheme 'mysql'"):
        config.database("mysql://db/oom")


def test_the_environment_keeps_a_postgresql_url_whole():
    settings = config.from_environment({"OOMDOCTOR_DATABASE": "postgresql://u@h:5432/d"})
    assert settings["DATABASE"] == "postgresql://u@h:5432/d"


def test_store_opens_the_database_the_setting_names(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/via-url.sqlite3")
    try:
        assert store.kind == "sqlite" and (tmp_path / "via-url.sqlite3").exists()
    finally:
        store.close()


# ------------------------------------------------------------------ broken files, said clearly at start

def test_a_file_of_random_bytes_is_named_as_not_a_database(tmp_path):
    path = tmp_path / "random.sqlite3"
    path.write_bytes(os.urandom(64 * 1024))
    with pytest.raises(StorageError) as info:
        Store(path)
    message = str(info.value)
    assert str(path) in message and "not an SQLite database or is damaged" in message
    assert "move it aside" in message


def test_a_truncated_database_is_named_as_damaged(tmp_path):
    path = tmp_path / "cut.sqlite3"
    store = Store(path)
    for _ in range(50):
        store.create({"facts": [{"x": "y" * 500}]})
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    data = path.read_bytes()
    path.write_bytes(data[:100] + os.urandom(len(data) - 100))  # a good header, then garbage
    with pytest.raises(StorageError) as info:
        Store(path)
    assert "damaged" in str(info.value) or "not an SQLite database" in str(info.value)


def test_a_database_whose_wal_cannot_be_created_is_named_as_not_writable(tmp_path):
    """As root chmod does not stop writes; a folder where the -wal file must go does."""
    path = tmp_path / "db.sqlite3"
    (tmp_path / "db.sqlite3-wal").mkdir()
    with pytest.raises(StorageError) as info:
        Store(path)
    message = str(info.value)
    assert "cannot be opened for writing" in message and "db.sqlite3-wal" in message


def test_an_existing_database_whose_wal_cannot_be_created(tmp_path):
    path = tmp_path / "db.sqlite3"
    Store(path).close()
    (tmp_path / "db.sqlite3-shm").unlink(missing_ok=True)
    (tmp_path / "db.sqlite3-wal").unlink(missing_ok=True)
    (tmp_path / "db.sqlite3-shm").mkdir()
    with pytest.raises(StorageError) as info:
        Store(path)
    assert "cannot be opened for writing" in str(info.value)


def test_a_folder_in_place_of_the_database(tmp_path):
    (tmp_path / "db.sqlite3").mkdir()
    with pytest.raises(StorageError) as info:
        Store(tmp_path / "db.sqlite3")
    assert "cannot be opened for writing" in str(info.value)


def test_a_file_in_place_of_the_folder(tmp_path):
    (tmp_path / "var").write_text("not a folder")
    with pytest.raises(StorageError) as info:
        Store(tmp_path / "var" / "db.sqlite3")
    assert "cannot be opened for writing" in str(info.value)


def test_a_read_only_database_is_refused_at_start(tmp_path):
    """A read-only connection stands for a read-only file (chmod does not bind root)."""
    path = tmp_path / "ro.sqlite3"
    Store(path).close()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError) as info:
        conn.execute("PRAGMA user_version = 5")
    assert "readonly" in str(info.value)
    assert "cannot be opened for writing" in storage.explain(str(path), info.value)


def test_the_app_factory_fails_at_start_with_the_message(tmp_path):
    from oomdoctor.web import create_app

    path = tmp_path / "random.sqlite3"
    path.write_bytes(os.urandom(4096))
    with pytest.raises(StorageError, match="not an SQLite database"):
        create_app({"TESTING": True, "DATABASE": str(path)})


def test_an_old_schema_gains_the_tables_it_lacks(tmp_path):
    """A file of the first schema (version 1, consultations only) is brought up to date at start."""
    path = tmp_path / "v1.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE consultations (id TEXT PRIMARY KEY, created FLOAT, updated FLOAT, owner TEXT, "
                 "channel TEXT, lang TEXT, state TEXT, turns INTEGER)")
    conn.execute("INSERT INTO consultations VALUES ('old', 1, 1, '', 'api', 'en', '{}', 0)")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    store = Store(path)
    assert {"rate_limits", "messages", "snapshots", "outbox", "response_posts"} <= set(store.tables())
    assert store.conn.execute("PRAGMA user_version").fetchone()[0] == storage.SCHEMA_VERSION
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.turn("old", "m", _step("m"), request_id="r1")
    assert store.get("old")["turns"] == 1


def test_an_old_postgresql_schema_gains_the_next_step(postgres):
    import psycopg

    url = postgres.database()
    with psycopg.connect(url) as conn:  # what a host of schema version 2 left
        conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, what TEXT NOT NULL, "
                     "applied TIMESTAMPTZ NOT NULL DEFAULT now())")
        for step in migrations.STEPS[:2]:
            for statement in step.postgresql:
                conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations (version, what) VALUES (%s, %s)", (step.version, step.what))
        conn.execute("INSERT INTO consultations (id, created, updated, state) VALUES ('old', 1, 1, '{}')")
    store = Store(url)
    assert rows(store, "SELECT version FROM schema_migrations ORDER BY version") == [
        (step.version,) for step in migrations.STEPS]
    store.turn("old", "m", _step("m"), request_id="r1")
    assert store.get("old")["messages"][0]["text"] == "m"


def test_a_schema_newer_than_the_code_is_refused(database):
    Store(database).close()
    store = Store(database, migrate=False)
    with store.transaction() as conn:
        if store.kind == "sqlite":
            conn.execute(f"PRAGMA user_version = {storage.SCHEMA_VERSION + 1}")
        else:
            conn.execute("INSERT INTO schema_migrations (version, what) VALUES (?, 'from the future')",
                         (storage.SCHEMA_VERSION + 1,))
    store.close()
    with pytest.raises(StorageError, match=f"schema version {storage.SCHEMA_VERSION + 1}, newer than"):
        Store(database)


def test_many_processes_starting_at_once_apply_each_step_once(database, tmp_path):
    """Eight processes open a fresh database at the same moment; every one starts, each step applied once."""
    import subprocess
    import sys

    code = ("import sys; from oomdoctor.storage import Store; print('ready', flush=True); sys.stdin.read(); "
            "Store(sys.argv[1]).close(); print('ok')")
    procs = [subprocess.Popen([sys.executable, "-c", code, database], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=Path(__file__).parent.parent)
             for _ in range(8)]
    # Every process has imported and waits on stdin: closing it starts them together.
    ready = [p.stdout.readline() for p in procs]
    outputs = [p.communicate("", timeout=120) for p in procs]
    assert ready == ["ready\n"] * 8, [err[-800:] for _, err in outputs]
    assert [out for out, _ in outputs] == ["ok\n"] * 8, [err[-800:] for _, err in outputs]
    store = Store(database, migrate=False)
    if store.kind == "sqlite":
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == storage.SCHEMA_VERSION
    else:
        applied = rows(store, "SELECT version FROM schema_migrations ORDER BY version")
        assert applied == [(s.version,) for s in migrations.STEPS]
    assert {"consultations", "messages", "snapshots", "rate_limits", "outbox", "response_posts"} <= set(store.tables())


def test_an_unreachable_server_is_named_without_its_password(postgres):
    from conftest import free_port

    url = f"postgresql://oom:s3cret-pw@127.0.0.1:{free_port()}/oomdoctor"
    with pytest.raises(StorageError) as info:
        Store(url)
    message = str(info.value)
    assert "cannot reach the PostgreSQL server of postgresql://oom@127.0.0.1:" in message
    assert "s3cret-pw" not in message


def test_a_missing_postgresql_database_is_named(postgres):
    with pytest.raises(StorageError, match="does not exist"):
        Store(postgres.url("no_such_database"))


def test_a_user_that_may_not_write_is_refused_at_start(postgres):
    import psycopg

    url = postgres.database()
    Store(url).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS reader")
        conn.execute("CREATE ROLE reader LOGIN")
        conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader")
    with pytest.raises(StorageError, match="cannot be written by this user"):
        Store(url.replace("oomdoctor@", "reader@", 1))


# ------------------------------------------------------------------ turns

def _step(tag: str):
    def step(raw: dict) -> tuple[dict, dict]:
        seen = list(raw.get("seen", []))
        return {**raw, "seen": seen + [tag]}, {"tag": tag, "after": seen}
    return step


def test_a_turn_computed_on_a_stale_state_is_computed_again(database):
    one, two = Store(database), Store(database, migrate=False)
    cid = one.create({})
    calls = []

    def slow(raw):
        calls.append(list(raw.get("seen", [])))
        if len(calls) == 1:
            two.turn(cid, "second", _step("second"))  # another worker stores a turn meanwhile
        return _step("first")(raw)

    reply = one.turn(cid, "first", slow)
    assert calls == [[], ["second"]]
    assert reply == {"tag": "first", "after": ["second"]}
    record = one.get(cid)
    assert [(m["seq"], m["text"]) for m in record["messages"]] == [(1, "second"), (2, "first")]
    assert record["state"]["seen"] == ["second", "first"] and record["turns"] == 2
    assert rows(one, "SELECT seq FROM snapshots WHERE consultation_id = ? ORDER BY seq", (cid,)) == [(1,), (2,)]


def test_after_repeated_conflicts_the_turn_runs_under_the_lock(database):
    one, two = Store(database), Store(database, migrate=False)
    cid = one.create({})
    calls = []

    def contested(raw):
        calls.append(1)
        if len(calls) <= storage.TURN_TRIES:
            two.turn(cid, f"other {len(calls)}", _step(f"other {len(calls)}"))
        return _step("mine")(raw)

    one.turn(cid, "mine", contested)
    record = one.get(cid)
    assert len(calls) == storage.TURN_TRIES + 1
    assert [m["seq"] for m in record["messages"]] == list(range(1, storage.TURN_TRIES + 2))
    assert record["messages"][-1]["text"] == "mine"


def test_the_locked_turn_holds_off_other_turns_until_it_is_stored(database):
    """Under the lock a second writer waits, then conflicts and recomputes on the locked turn's result."""
    one, two = Store(database), Store(database, migrate=False)
    cid = one.create({})
    entered, release = threading.Event(), threading.Event()
    result: dict = {}

    def held(raw):
        entered.set()
        release.wait(10)
        return _step("held")(raw)

    with one.transaction() as conn:
        state, turns = one._state(conn, cid, None, lock=True)
        worker = threading.Thread(target=lambda: result.setdefault("reply", two.turn(cid, "other", _step("other"))))
        worker.start()
        time.sleep(0.5)
        assert "reply" not in result  # the other turn cannot be stored while the row (or file) is held
        one._store_turn(conn, cid, turns, "held", *_step("held")({}), None)
    worker.join(20)
    assert result["reply"] == {"tag": "other", "after": ["held"]}
    assert [m["text"] for m in one.get(cid)["messages"]] == ["held", "other"]


def test_a_consultation_deleted_during_a_turn(database):
    one, two = Store(database), Store(database, migrate=False)
    cid = one.create({})

    def step(raw):
        two.delete(cid)
        return _step("x")(raw)

    with pytest.raises(NotFound):
        one.turn(cid, "x", step)
    assert rows(one, "SELECT count(*) FROM messages") == [(0,)]


def test_a_turn_with_a_request_id_is_stored_once(database):
    """Work retried after a crash (the Slack outbox) passes the same request id: the second run
    returns the stored reply and stores nothing."""
    store = Store(database)
    cid = store.create({})
    first = store.turn(cid, "hello", _step("a"), request_id="job-1")
    ran = []
    again = store.turn(cid, "hello", lambda raw: ran.append(1) or _step("b")(raw), request_id="job-1")
    assert again == first and not ran
    store.turn(cid, "next", _step("c"), request_id="job-2")
    assert [m["text"] for m in store.get(cid)["messages"]] == ["hello", "next"]


def test_two_runs_of_one_request_at_once_store_one_turn(database):
    one, two = Store(database), Store(database, migrate=False)
    cid = one.create({})

    def racing(raw):  # the other process finishes the same request while this one computes
        two.turn(cid, "same", _step("theirs"), request_id="job-9")
        return _step("mine")(raw)

    reply = one.turn(cid, "same", racing, request_id="job-9")
    assert reply == {"tag": "theirs", "after": []}
    assert [m["text"] for m in one.get(cid)["messages"]] == ["same"]


def test_concurrent_turns_on_one_consultation_lose_nothing(database):
    Store(database).close()
    cid = Store(database, migrate=False).create({})
    errors = []

    def worker(n: int) -> None:
        store = Store(database, migrate=False)
        try:
            for i in range(10):
                store.turn(cid, f"w{n}-{i}", _step(f"w{n}-{i}"))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    record = Store(database, migrate=False).get(cid)
    texts = [m["text"] for m in record["messages"]]
    assert [m["seq"] for m in record["messages"]] == list(range(1, 61))
    assert sorted(texts) == sorted(f"w{n}-{i}" for n in range(6) for i in range(10))
    assert record["state"]["seen"] == texts  # the state saw the turns in the order they were stored
    for n in range(6):  # each writer's own messages kept their order
        mine = [t for t in texts if t.startswith(f"w{n}-")]
        assert mine == [f"w{n}-{i}" for i in range(10)]
    # Each reply was computed on exactly the turns before it.
    for index, message in enumerate(record["messages"]):
        assert message["reply"] == {"tag": message["text"], "after": texts[:index]}


# ------------------------------------------------------------------ counters and expiry

def test_rate_counter_is_atomic_across_connections(database):
    Store(database).close()
    seen: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        store = Store(database, migrate=False)
        mine = [store.hit("ip:1.2.3.4", 100) for _ in range(50)]
        store.close()
        with lock:
            seen.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen) == list(range(1, 301))


def test_post_slots_per_url_are_counted_across_connections(database):
    one, two = Store(database), Store(database, migrate=False)
    url = "https://hooks.slack.com/commands/T1/2/abc"
    got = [(one if i % 2 else two).post_slot(url, 5, 1800, now=1000.0 + i) for i in range(7)]
    assert got == [True] * 5 + [False] * 2
    assert one.post_slot("https://hooks.slack.com/commands/T1/2/other", 5, 1800, now=1010.0)
    assert one.post_slot(url, 5, 1800, now=1000.0 + 1801)  # a new window
    assert url not in str(rows(one, "SELECT url FROM response_posts"))  # kept as a hash only


def test_expire_removes_only_old_consultations_and_stale_counters(database):
    store = Store(database)
    old, new = store.create({}), store.create({})
    store.turn(old, "m", _step("m"))
    store.turn(new, "m", _step("m"))
    with store.transaction() as conn:
        conn.execute("UPDATE consultations SET updated = updated - 1000 WHERE id = ?", (old,))
    now = time.time()
    store.hit("ip:a", int(now // 60) - 5)
    store.hit("ip:b", int(now // 60))
    stale = store.enqueue("turn", {}, "https://hooks.slack.com/x", lease=60)
    with store.transaction() as conn:
        conn.execute("UPDATE outbox SET created = created - 7200 WHERE id = ?", (stale.id,))
    fresh = store.enqueue("turn", {}, "https://hooks.slack.com/y", lease=60)
    assert store.expire(500, now=now) == 1
    with pytest.raises(NotFound):
        store.get(old)
    assert store.get(new)["turns"] == 1
    for table in ("messages", "snapshots"):
        assert rows(store, f"SELECT consultation_id FROM {table}") == [(new,)]
    assert rows(store, "SELECT client FROM rate_limits") == [("ip:b",)]
    assert rows(store, "SELECT id FROM outbox") == [(fresh.id,)]


def test_owner_find_and_delete(database):
    store = Store(database)
    cid = store.create({}, owner="alice", channel="slack:C1")
    store.turn(cid, "m", _step("m"))
    assert store.owner(cid) == "alice"
    assert store.find("alice", "slack:C1") == cid and store.find("alice", "slack:C2") is None
    with pytest.raises(NotFound):
        store.owner("nope")
    assert store.delete(cid) and not store.delete(cid)
    assert rows(store, "SELECT count(*) FROM messages") == [(0,)]
    assert rows(store, "SELECT count(*) FROM snapshots") == [(0,)]


# ------------------------------------------------------------------ the outbox

def test_outbox_entry_is_taken_over_only_after_its_claim_lapses(database):
    store = Store(database)
    job = store.enqueue("turn", {"cid": "c"}, "https://hooks.slack.com/x", lease=60)
    assert store.claim_due(lease=60) is None  # its first worker still holds it
    later = time.time() + 61
    taken = store.claim_due(lease=60, now=later)
    assert taken.id == job.id and taken.args == {"cid": "c"} and taken.attempts == 2 and taken.message is None
    assert not store.settle(job, {"text": "late"})  # the first worker lost it: its result is not kept
    assert store.settle(taken, {"text": "x"}) and store.finish(taken)
    assert store.outbox_state(job.id) == "done"
    assert store.claim_due(lease=60, now=later + 120) is None


def test_a_settled_entry_is_delivered_by_whoever_takes_it(database):
    store = Store(database)
    job = store.enqueue("turn", {}, "https://hooks.slack.com/x", lease=60)
    assert store.settle(job, {"text": "the reply"})
    taken = store.claim_due(lease=60, now=time.time() + 61)
    assert taken.message == {"text": "the reply"}


def test_one_lapsed_entry_is_claimed_by_one_of_many(database):
    store = Store(database)
    job = store.enqueue("turn", {}, "https://hooks.slack.com/x", lease=0)
    now = time.time() + 1
    claims: list = []
    lock = threading.Lock()

    def claimer() -> None:
        mine = Store(database, migrate=False)
        got = mine.claim_due(lease=60, now=now)
        mine.close()
        with lock:
            claims.append(got)

    threads = [threading.Thread(target=claimer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [c for c in claims if c is not None]
    assert len(winners) == 1 and winners[0].id == job.id


@pytest.mark.server
def test_gunicorn_stops_at_start_with_the_message(tmp_path):
    """The app is preloaded, so the master reports a broken file once and exits before any worker starts."""
    from conftest import LiveServer

    path = tmp_path / "random.sqlite3"
    path.write_bytes(os.urandom(8192))
    server = LiveServer(tmp_path, env={"OOMDOCTOR_DATABASE": str(path)})
    try:
        with pytest.raises(RuntimeError) as info:
            server.start(deadline=60)
    finally:
        server.stop()
    output = str(info.value)
    assert "gunicorn exited" in output
    assert f"database {path} is not an SQLite database or is damaged" in output
    assert "Booting worker" not in output


def test_a_postgresql_server_gone_at_run_time_is_a_503_then_service_resumes(postgres, monkeypatch):
    """The server stops under a running app: requests get 503 without the URL, then work again once it is back."""
    import pgcluster
    from oomdoctor.storage import postgres as pg
    from oomdoctor.web import create_app

    monkeypatch.setattr(pg, "POOL_TIMEOUT", 2.0)
    with pgcluster.Cluster() as own:
        url = own.database()
        client = create_app({"TESTING": True, "DATABASE": url, "RATE_LIMIT_PER_MINUTE": 0}).test_client()
        cid = client.post("/api/v1/consultations", json={"message": LOG}).get_json()["id"]
        own._run(str(own.bin / "pg_ctl"), "-D", str(own.data), "-m", "fast", "-w", "stop")
        r = client.get(f"/api/v1/consultations/{cid}")
        assert r.status_code == 503 and "database is unavailable" in r.get_json()["error"]
        assert str(own.port) not in r.get_data(as_text=True)
        assert client.get("/healthz").status_code == 503
        own._run(str(own.bin / "pg_ctl"), "-D", str(own.data), "-l", str(own.log), "-w", "-o",
                 f"-c port={own.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=''", "start")
        r = client.get(f"/api/v1/consultations/{cid}")
        assert r.status_code == 200 and r.get_json()["turns"] == 1


def test_a_delivery_is_claimed_once_across_store_handles(database):
    """Two workers (two handles on one database) racing on one event id: exactly one wins."""
    first, second = Store(database), Store(database)
    try:
        assert first.first_delivery("lark:ev1", now=1000.0) is True
        assert second.first_delivery("lark:ev1", now=1001.0) is False
        assert second.first_delivery("lark:ev2", now=1001.0) is True
        # A key older than the keeping window is forgotten, so the platform's much later delivery counts again.
        assert first.first_delivery("lark:ev1", keep_seconds=10, now=1100.0) is True
    finally:
        first.close()
        second.close()
