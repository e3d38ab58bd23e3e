"""The SQLite store: clear errors for broken files, turns that never overwrite each other, counters, expiry."""
from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from oomdoctor import storage
from oomdoctor.storage import NotFound, StorageError, Store

LOG = (Path(__file__).parent / "fixtures" / "logs" / "cuda_oom_new.txt").read_text()


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


def test_an_old_schema_gains_the_rate_limit_table(tmp_path):
    path = tmp_path / "v1.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE consultations (id TEXT PRIMARY KEY, created FLOAT, updated FLOAT, owner TEXT, "
                 "channel TEXT, lang TEXT, state TEXT, turns INTEGER)")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    store = Store(path)
    assert "rate_limits" in store.db.table_names()
    assert store.conn.execute("PRAGMA user_version").fetchone()[0] == storage.SCHEMA_VERSION
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# ------------------------------------------------------------------ turns

def _step(tag: str):
    def step(raw: dict) -> tuple[dict, dict]:
        seen = list(raw.get("seen", []))
        return {**raw, "seen": seen + [tag]}, {"tag": tag, "after": seen}
    return step


def test_a_turn_computed_on_a_stale_state_is_computed_again(tmp_path):
    path = tmp_path / "t.sqlite3"
    one, two = Store(path), Store(path, migrate=False)
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


def test_after_repeated_conflicts_the_turn_runs_under_the_lock(tmp_path):
    path = tmp_path / "t.sqlite3"
    one, two = Store(path), Store(path, migrate=False)
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


def test_a_consultation_deleted_during_a_turn(tmp_path):
    path = tmp_path / "t.sqlite3"
    one, two = Store(path), Store(path, migrate=False)
    cid = one.create({})

    def step(raw):
        two.delete(cid)
        return _step("x")(raw)

    with pytest.raises(NotFound):
        one.turn(cid, "x", step)
    assert one.conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 0


def test_concurrent_turns_on_one_consultation_lose_nothing(tmp_path):
    path = tmp_path / "t.sqlite3"
    Store(path).close()
    cid = Store(path, migrate=False).create({})
    errors = []

    def worker(n: int) -> None:
        store = Store(path, migrate=False)
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
    record = Store(path, migrate=False).get(cid)
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

def test_rate_counter_is_atomic_across_connections(tmp_path):
    path = tmp_path / "t.sqlite3"
    Store(path).close()
    seen: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        store = Store(path, migrate=False)
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


def test_expire_removes_only_old_consultations_and_stale_counters(tmp_path):
    store = Store(tmp_path / "t.sqlite3")
    old, new = store.create({}), store.create({})
    store.turn(old, "m", _step("m"))
    store.turn(new, "m", _step("m"))
    store.conn.execute("UPDATE consultations SET updated = updated - 1000 WHERE id = ?", (old,))
    now = time.time()
    store.hit("ip:a", int(now // 60) - 5)
    store.hit("ip:b", int(now // 60))
    assert store.expire(500, now=now) == 1
    with pytest.raises(NotFound):
        store.get(old)
    assert store.get(new)["turns"] == 1
    for table in ("messages", "snapshots"):
        ids = {r[0] for r in store.conn.execute(f"SELECT consultation_id FROM {table}")}
        assert ids == {new}
    assert [r[0] for r in store.conn.execute("SELECT client FROM rate_limits")] == ["ip:b"]


def test_owner(tmp_path):
    store = Store(tmp_path / "t.sqlite3")
    cid = store.create({}, owner="alice")
    assert store.owner(cid) == "alice"
    with pytest.raises(NotFound):
        store.owner("nope")


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
