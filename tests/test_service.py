"""The application service over a real SQLite file, with no channel in front of it."""
from __future__ import annotations

import pytest

from oomdoctor.consultation import default
from oomdoctor.service import Consultations, EstimateInputError, NotFound
from oomdoctor.storage import Store

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.64 GiB"


@pytest.fixture
def service(tmp_path):
    opened = []

    def open_store():
        opened.append(Store(tmp_path / "service.sqlite3"))
        return opened[-1]

    consultations = Consultations(default(), open_store)
    consultations.opened = opened
    yield consultations
    for store in opened:
        store.close()


def test_a_consultation_is_started_continued_and_stored(service):
    cid, first = service.start(OOM, channel="api", owner="alice")
    assert first["status"] == "question" and first["questions"][0]["id"] == "ask_model"
    second = service.reply(cid, "Llama-3-8B, LoRA, seq len 2048, batch 4", channel="api")
    assert second["estimate"] is not None and second["estimate"]["breakdown"]["weights"] > 10
    record = service.record(cid, channel="api")
    assert [m["seq"] for m in record["messages"]] == [1, 2]
    assert record["messages"][1]["reply"] == second
    assert service.find("alice", "api") == cid and service.find("bob", "api") is None


def test_the_language_is_kept_and_can_be_set(service):
    cid, reply = service.start("训练的时候显存不够了：" + OOM, channel="web")
    assert reply["lang"] == "zh" and service.lang(cid) == "zh"
    service.set_lang(cid, "en", said="lang en", channel="web")
    assert service.lang(cid) == "en"
    assert service.record(cid, channel="web")["messages"][-1]["reply"]["status"] == "setting"


def test_an_opened_consultation_has_no_turn_and_its_language(service):
    cid = service.open(channel="slack:C1", owner="T1:U1", lang="zh")
    assert service.lang(cid) == "zh" and service.record(cid, channel="slack:C1")["messages"] == []
    assert service.lang(None) is None


def test_unknown_ids_are_not_found_and_deletion_is_once(service):
    with pytest.raises(NotFound):
        service.reply("no-such-id", "hello", channel="api")
    cid, _ = service.start(OOM, channel="api")
    assert service.delete(cid, channel="api") is True and service.delete(cid, channel="api") is False
    with pytest.raises(NotFound):
        service.record(cid, channel="api")


def test_one_shot_answers_never_open_the_store(service):
    reply = service.diagnose(OOM + "\nLlama-3-8B full fine-tuning")
    assert reply["status"] == "report" and reply["questions"] == []
    estimate = service.estimate({"model": "llama-3-8b", "method": "lora", "gpu": "rtx-4090"})
    assert estimate["estimate"]["per_gpu_gib"] > 0
    with pytest.raises(EstimateInputError):
        service.estimate({"modle": "llama-3-8b"})
    assert service.opened == []


def test_a_first_turn_that_cannot_be_stored_takes_its_row_away(service, monkeypatch):
    from oomdoctor import storage

    def refuse(*_args, **_kwargs):
        raise storage.StorageError("disk full")

    monkeypatch.setattr(storage.Store, "turn", refuse)
    with pytest.raises(storage.StorageError):
        service.start(OOM, channel="api", owner="carol")
    assert service.find("carol", "api") is None


def test_a_first_turn_that_fails_stores_nothing(service, monkeypatch):
    def fail(*_args, **_kwargs):
        raise RuntimeError("the turn failed")

    monkeypatch.setattr(service.consultant, "take_turn", fail)
    with pytest.raises(RuntimeError):
        service.start(OOM, channel="api", owner="dave")
    assert service.opened == [] or service.find("dave", "api") is None


def test_a_consultation_belongs_to_the_channel_that_started_it(service):
    cid, _ = service.start(OOM, channel="api")
    for other in ("web", "slack:C1", "cli", "ap", "api "):
        with pytest.raises(NotFound):
            service.record(cid, channel=other)
        with pytest.raises(NotFound):
            service.reply(cid, "Llama-3-8B", channel=other)
        assert service.delete(cid, channel=other) is False
    assert len(service.record(cid, channel="api")["messages"]) == 1
