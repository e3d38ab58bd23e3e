"""The web page without JavaScript: form post → question → answer → report, in both languages."""
from __future__ import annotations

import html
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TRACEBACK = (ROOT / "tests" / "corpus" / "alpaca-76-full-ft-4x-a10.log").read_text(encoding="utf-8")
LABEL = {"en": "Log, traceback or training arguments", "zh": "日志、traceback 或训练参数"}
MAX_QUESTIONS = 10


def _html(resp) -> str:
    return resp.get_data(as_text=True)


def token(client) -> str:
    """The CSRF token the page puts in its forms (its cookie comes with the same response)."""
    match = re.search(r'name="csrf_token" value="([^"]+)"', _html(client.get("/")))
    return match.group(1)


def post(client, url: str, data: dict, **kwargs):
    return client.post(url, data={"csrf_token": token(client), **data}, **kwargs)


def _start(client, lang: str = "en", **data) -> str:
    resp = post(client, f"/?lang={lang}", data={"message": TRACEBACK, **data})
    assert resp.status_code == 303, _html(resp)[:500]
    location = resp.headers["Location"]
    assert re.fullmatch(rf"/c/[0-9a-f]{{32}}\?lang={lang}", location)
    return location


def _first_choice(page: str) -> str | None:
    match = re.search(r'name="choice" id="choice-1" value="([^"]*)"', page)
    return html.unescape(match.group(1)) if match else None


def _to_report(client, url: str, skip: bool = False) -> tuple[str, list[str]]:
    """Answer every question with its first option (or skip) until the report; the page and the questions."""
    asked = []
    for _ in range(MAX_QUESTIONS):
        page = _html(client.get(url))
        if 'class="report"' in page:
            return page, asked
        legend = re.search(r"<legend>(.*?)</legend>", page, re.S)
        assert legend, page[:2000]
        asked.append(html.unescape(legend.group(1)))
        choice = _first_choice(page)
        data = {"skip": "1"} if skip or choice is None else {"choice": choice}
        resp = post(client, url, data=data)
        assert resp.status_code == 303 and resp.headers["Location"] == url
    raise AssertionError(f"no report after {MAX_QUESTIONS} questions: {asked}")


def test_index_is_an_accessible_form(client):
    page = _html(client.get("/?lang=en"))
    assert '<html lang="en">' in page
    assert f'<label for="message">{LABEL["en"]}</label>' in page
    assert 'id="message" name="message"' in page
    assert '<label for="logfile">' in page and 'type="file" id="logfile"' in page
    assert 'enctype="multipart/form-data"' in page
    assert 'hreflang="zh"' in page and 'aria-current="true"' in page
    # No inline script or style: a strict Content-Security-Policy will not need 'unsafe-inline'.
    assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", page) == []
    assert "style=" not in page and "<style" not in page and " on" + "click=" not in page
    assert client.get("/static/page.js").status_code == 200
    assert client.get("/static/page.css").status_code == 200


def test_index_in_chinese(client):
    page = _html(client.get("/?lang=zh"))
    assert '<html lang="zh-CN">' in page
    assert LABEL["zh"] in page and "开始诊断" in page


def test_language_from_the_browser(client):
    assert '<html lang="zh-CN">' in _html(client.get("/", headers={"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.5"}))
    assert '<html lang="en">' in _html(client.get("/", headers={"Accept-Language": "en-GB"}))


def test_question_is_a_form_with_options_free_text_and_skip(client):
    url = _start(client)
    page = _html(client.get(url))
    assert 'class="question"' in page
    assert "<fieldset>" in page and "<legend>" in page
    assert 'type="radio" name="choice" id="choice-1"' in page and '<label for="choice-1">' in page
    assert '<label for="message">' in page
    assert 'name="skip"' in page
    assert "CUDA out of memory" in page  # what the user sent stays on the page


def test_english_flow_to_report_with_chart(client):
    url = _start(client)
    page, asked = _to_report(client, url)
    assert asked, "the traceback alone should lead to at least one question"
    assert "OOM Doctor report" in page
    assert page.count("<svg") == 1 and 'role="img"' in page
    assert "GPU capacity" in page
    assert '<ol class="remedies">' in page and "<pre" in page
    # The transcript shows what was asked and answered.
    assert "OOM Doctor asked:" in page


def test_chinese_flow_to_report_with_chart(client):
    url = _start(client, "zh")
    page, asked = _to_report(client, url)
    assert any(re.search(r"[\u4e00-\u9fff]", q) for q in asked)
    assert '<html lang="zh-CN">' in page
    assert "OOM Doctor 诊断报告" in page and "<svg" in page and "GPU 容量" in page


def test_skipping_every_question_still_reports(client):
    url = _start(client)
    page, asked = _to_report(client, url, skip=True)
    assert asked
    assert "OOM Doctor report" in page
    assert "Assumptions" in page


def test_report_can_take_more_details(client):
    url = _start(client)
    _to_report(client, url)
    resp = post(client, url, data={"message": "per_device_train_batch_size=1, gradient_checkpointing=True"})
    assert resp.status_code == 303
    page = _html(client.get(url))
    assert "gradient_checkpointing=True" in page


@pytest.mark.parametrize("lang, text, expected", [
    ("en", "   \n ", "The message is empty"),
    ("zh", "   \n ", "消息为空"),
    ("en", "oops\x00binary", "not text"),
])
def test_errors_keep_the_text(client, lang, text, expected):
    resp = post(client, f"/?lang={lang}", data={"message": text})
    assert resp.status_code == 400
    page = _html(resp)
    assert expected in page and 'role="alert"' in page and 'aria-invalid="true"' in page
    assert f">{html.escape(text, quote=False)}</textarea>" in page


def test_too_large_keeps_the_text(tmp_path):
    from oomdoctor.web import create_app

    app = create_app({"TESTING": True, "DATABASE": str(tmp_path / "db.sqlite3"), "MAX_MESSAGE_BYTES": 1000})
    text = "CUDA out of memory " * 60
    resp = post(app.test_client(), "/?lang=en", data={"message": text})
    assert resp.status_code == 413
    page = _html(resp)
    assert "the limit is 1000 bytes" in page
    assert text in page


def test_a_body_over_the_request_limit_gets_the_page_not_json(tmp_path):
    from oomdoctor.web import create_app

    app = create_app({"TESTING": True, "DATABASE": str(tmp_path / "db.sqlite3"), "MAX_MESSAGE_BYTES": 1000})
    resp = post(app.test_client(), "/?lang=en", data={"message": "x" * 200_000})
    assert resp.status_code == 413
    assert "text/html" in resp.content_type and "the limit is 1000 bytes" in _html(resp)


def test_file_upload(client):
    resp = post(client, "/?lang=en", data={"message": "", "logfile": (io.BytesIO(TRACEBACK.encode()), "train.log")},
                       content_type="multipart/form-data")
    assert resp.status_code == 303
    assert "23.70 GiB total capacity" in _html(client.get(resp.headers["Location"]))


def test_file_upload_is_appended_to_the_text(client):
    resp = post(client, "/?lang=en", data={"message": "Llama-2-7B full fine-tuning",
                                          "logfile": (io.BytesIO(TRACEBACK.encode()), "train.log")},
                       content_type="multipart/form-data")
    page = _html(client.get(resp.headers["Location"]))
    assert "Llama-2-7B full fine-tuning" in page and "23.70 GiB total capacity" in page


def test_binary_file_is_refused_with_the_text_kept(client):
    resp = post(client, "/?lang=en", data={"message": "my notes", "logfile": (io.BytesIO(b"\xff\xfe\x00\x01"), "x.bin")},
                       content_type="multipart/form-data")
    assert resp.status_code == 400
    assert "not text" in _html(resp) and ">my notes</textarea>" in _html(resp)


def test_answer_needs_something(client):
    url = _start(client)
    resp = post(client, url, data={"message": "  "})
    assert resp.status_code == 400
    page = _html(resp)
    assert "Choose an option" in page and 'class="question"' in page


def test_unknown_consultation(client):
    resp = client.get("/c/" + "0" * 32)
    assert resp.status_code == 404
    assert "No consultation with that id" in _html(resp)
    assert post(client, "/c/" + "0" * 32 + "?lang=en", data={"choice": "LoRA"}).status_code == 404


def test_user_text_is_escaped(client):
    resp = post(client, "/?lang=en", data={"message": TRACEBACK + "\n<script>alert(1)</script>"})
    page = _html(client.get(resp.headers["Location"]))
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_json_for_javascript(client):
    resp = post(client, "/?lang=en", data={"message": TRACEBACK}, headers={"Accept": "application/json"})
    assert resp.status_code == 200
    body = resp.get_json()
    assert re.fullmatch(r"[0-9a-f]{32}", body["id"])
    assert body["url"] == f"/c/{body['id']}?lang=en"
    assert body["status"] in ("question", "report")
    assert 'id="reply-heading"' in body["html"] and "<html" not in body["html"]
    assert body["title"].endswith("— OOM Doctor")

    bad = post(client, "/?lang=zh", data={"message": " "}, headers={"Accept": "application/json"})
    assert bad.status_code == 400 and bad.get_json()["error"].startswith("消息为空")


def test_page_consultations_are_in_the_store(app, client):
    url = _start(client)
    cid = url.split("/")[2].split("?")[0]
    from oomdoctor.storage import Store

    store = Store(app.config["DATABASE"], migrate=False)
    try:
        record = store.get(cid)
    finally:
        store.close()
    assert record["channel"] == "web" and record["turns"] == 1


def test_form_without_the_csrf_token_is_refused_with_the_text_kept(client):
    client.get("/")  # the cookie, but no token in the post
    resp = client.post("/?lang=en", data={"message": "my traceback"})
    assert resp.status_code == 400
    page = _html(resp)
    assert "This form had expired" in page and ">my traceback</textarea>" in page
    resp = client.post("/?lang=zh", data={"message": "x"}, headers={"Accept": "application/json"})
    assert resp.status_code == 400 and "表单已过期" in resp.get_json()["error"]


def test_security_headers_allow_the_page(client):
    resp = client.get("/?lang=en")
    csp = resp.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp


def _stored(app, reply: dict) -> str:
    """A consultation whose one reply is a hand-written fixture (tests/fixtures/web)."""
    from oomdoctor.storage import Store

    store = Store(app.config["DATABASE"], migrate=False)
    try:
        cid = store.create({"lang": reply["lang"]}, owner="", channel="web")
        store.turn(cid, "fixture", lambda raw: (raw, reply))
    finally:
        store.close()
    return cid


@pytest.mark.parametrize("name", ["report_en", "report_zh"])
def test_fixture_report_renders_everything(app, client, name):
    import json

    reply = json.loads((ROOT / "tests" / "fixtures" / "web" / f"{name}.json").read_text(encoding="utf-8"))
    reply["estimate"].update(smallest_gpu={"id": "h100-80gb", "memory_gib": 79.65}, max_batch_size=2, min_gpus=6)
    reply["plans"] = [{"remedies": ["a", "b"], "titles": ["Plan A", "Plan B"], "estimate_after_gib": 20.1,
                       "fits_after": True, "batch_size": 2, "grad_accum": 8}]
    reply["estimate"]["remarks"] = ["FAILED-MOMENT 43.17"]
    reply["remedies"][0]["failed_moment_after"] = "MOMENT-AFTER 16.26"
    page = _html(client.get(f"/c/{_stored(app, reply)}"))
    assert "FAILED-MOMENT 43.17" in page and "MOMENT-AFTER 16.26" in page
    assert f'<html lang="{"zh-CN" if name.endswith("zh") else "en"}">' in page
    for d in reply["diagnoses"]:
        assert html.escape(d["title"], quote=False) in page
    for r in reply["remedies"]:
        assert html.escape(r["title"], quote=False) in page
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in page
    assert "h100-80gb (79.65 GiB)" in page and "Plan A + Plan B" in page
    assert "gradient_accumulation_steps=8" in page
    assert page.count("<svg") == 1 and "<desc" in page
    for a in reply["assumptions"]:
        assert html.escape(a["text"], quote=False) in page


@pytest.mark.parametrize("name", ["question_en", "question_zh"])
def test_fixture_question_renders_options(app, client, name):
    import json

    reply = json.loads((ROOT / "tests" / "fixtures" / "web" / f"{name}.json").read_text(encoding="utf-8"))
    page = _html(client.get(f"/c/{_stored(app, reply)}"))
    q = reply["questions"][0]
    assert f"<legend>{html.escape(q['text'], quote=False)}</legend>" in page
    for i, option in enumerate(q["options"], 1):
        assert f'<label for="choice-{i}">{html.escape(option["label"], quote=False)}</label>' in page


def test_every_channel_string_is_in_texts_and_used():
    """The page's and Slack's strings live in knowledge/texts.yaml, in both languages, and none is dead."""
    from oomdoctor.knowledge import default

    texts = default().texts
    channels = ROOT / "oomdoctor" / "channels"
    sources = [*(channels / "page" / "templates").glob("*.html"), *(channels / "page").glob("*.py"),
               ROOT / "oomdoctor" / "render" / "svg.py", ROOT / "oomdoctor" / "render" / "blocks.py",
               *(channels / "slack").glob("*.py")]
    code = "\n".join(p.read_text(encoding="utf-8") for p in sources)
    used = set(re.findall(r"""["']((?:ui|slack|report|part|kind|error)\.[a-z_.]+[a-z_])["']""", code))
    missing = sorted(k for k in used if k not in texts)
    assert not missing, f"used but not in knowledge/texts.yaml: {missing}"
    for key in used:
        assert texts[key].get("en") and texts[key].get("zh"), key
    ours = {k for k in texts if k.startswith(("ui.", "slack."))}
    dynamic = {f"ui.lang.{code}" for code in ("en", "zh")}
    dead = sorted(ours - used - dynamic)
    assert not dead, f"texts no channel uses: {dead}"


def test_a_consultation_with_a_setting_turn_still_renders(app, client):
    import json

    reply = json.loads((ROOT / "tests" / "fixtures" / "web" / "question_en.json").read_text(encoding="utf-8"))
    cid = _stored(app, reply)
    from oomdoctor.storage import Store

    store = Store(app.config["DATABASE"], migrate=False)
    try:  # what Slack's `/oom lang zh` stores
        store.turn(cid, "lang zh", lambda raw: ({**raw, "lang": "zh"}, {"status": "setting", "lang": "zh", "text": "lang zh"}))
    finally:
        store.close()
    page = _html(client.get(f"/c/{cid}"))
    assert "<legend>Full fine-tuning, LoRA or QLoRA?</legend>" in page


def test_redaction_notice_is_shown_on_the_page(tmp_path):
    from oomdoctor.web import create_app
    app = create_app({"TESTING": True, "DATABASE": str(tmp_path / "n.sqlite3"), "CSRF_ENABLED": False})
    client = app.test_client()
    text = "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB\ntoken=ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
    page = client.post("/", data={"message": text}, follow_redirects=True).get_data(as_text=True)
    assert 'class="notices"' in page and "ghp_AbCdEf" not in page


def test_each_kind_of_change_is_its_own_block_and_the_note_is_prose(app, client):
    """A remedy whose change is Python and DeepSpeed JSON and a note: two blocks (each copied alone, so
    each must parse on its own) and a paragraph, not one block that mixes languages."""
    import json
    import re as regex

    reply = json.loads((ROOT / "tests" / "fixtures" / "web" / "report_en.json").read_text(encoding="utf-8"))
    reply["remedies"][0]["change"] = {"training_args": {"gradient_checkpointing": True},
                                      "deepspeed": {"zero_optimization": {"stage": 3}},
                                      "note": "NOTE-TEXT for the user"}
    page = _html(client.get(f"/c/{_stored(app, reply)}"))
    rid = reply["remedies"][0]["id"]
    blocks = dict(regex.findall(rf'<pre id="change-{regex.escape(rid)}-(\w+)" data-language="\w+"><code>(.*?)</code></pre>',
                                page, regex.S))
    assert set(blocks) == {"training_args", "deepspeed"}, blocks
    compile(html.unescape(blocks["training_args"]), "change", "exec")
    assert json.loads(html.unescape(blocks["deepspeed"])) == {"zero_optimization": {"stage": 3}}
    assert '<p class="note">NOTE-TEXT for the user</p>' in page
