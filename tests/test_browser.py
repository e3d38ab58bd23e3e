"""The web page in a real headless Chromium against real gunicorn, with JavaScript on and off.

Playwright drives Debian's /usr/bin/chromium (scripts/install-browser.sh installs both).
Without them these tests skip with the reason, except in CI (CI=true), where they fail.
Screenshots of each state go to $OOMDOCTOR_SCREENSHOTS (default /tmp/oomdoctor-screenshots).
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.browser, pytest.mark.server]

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
SHOTS = Path(os.environ.get("OOMDOCTOR_SCREENSHOTS", "/tmp/oomdoctor-screenshots"))
TRACEBACK = (ROOT / "tests" / "corpus" / "alpaca-76-full-ft-4x-a10.log").read_text(encoding="utf-8")
MAX_QUESTIONS = 10


def _missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed (.venv/bin/pip install playwright, or sh scripts/install-browser.sh)"
    if not os.access(CHROMIUM, os.X_OK):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium, or sh scripts/install-browser.sh)"
    return None


@pytest.fixture(scope="module")
def browser():
    reason = _missing()
    if reason:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"browser tests cannot run in CI: {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def live_server(tmp_path_factory):
    """One gunicorn for the module: every test opens a fresh browser context and starts its own consultation,
    so none sees another's state, and a server started per test cost each one a start and a stop."""
    from conftest import LiveServer

    server = LiveServer(tmp_path_factory.mktemp("page")).start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _server_output_on_failure(request):
    yield
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed and "live_server" in request.fixturenames:
        print("---- gunicorn output ----\n" + request.getfixturevalue("live_server").output())


def _page(browser, js: bool, locale: str = "en-US"):
    context = browser.new_context(java_script_enabled=js, locale=locale, viewport={"width": 1000, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    return context, page


def _shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def _answer_until_report(page, shot_prefix: str) -> int:
    """Pick the first option (or skip) until the report shows; returns how many questions were asked."""
    for asked in range(MAX_QUESTIONS):
        page.wait_for_selector("article.report, section.question")
        if page.locator("article.report").count():
            return asked
        if asked == 0:
            _shot(page, f"{shot_prefix}-question")
        question = page.locator("section.question")
        before = question.locator("legend").inner_text()
        radios = question.locator("input[name=choice]")
        if radios.count():
            radios.first.check()
            question.locator("button.primary").click()
        else:
            question.locator("button[name=skip]").click()
        page.wait_for_function(
            "before => !document.querySelector('section.question legend') || "
            "document.querySelector('section.question legend').textContent !== before", arg=before)
    raise AssertionError("no report after %d questions" % MAX_QUESTIONS)


def _check_report(page) -> None:
    report = page.locator("article.report")
    assert report.is_visible()
    chart = page.locator("svg.chart")
    assert chart.count() == 1 and chart.is_visible()
    assert chart.get_attribute("role") == "img"
    assert chart.locator("rect title").count() >= 3
    assert page.locator("ol.remedies > li").count() >= 1
    assert page.locator(".code pre").count() >= 1
    assert re.search(r"/c/[0-9a-f]{32}", page.url)


def test_paste_answer_report_with_javascript(browser, live_server):
    context, page = _page(browser, js=True)
    page.goto(live_server.url + "/?lang=en")
    assert page.locator("html").get_attribute("lang") == "en"
    _shot(page, "js-en-index")
    page.get_by_label("Log, traceback or training arguments").fill(TRACEBACK)
    page.get_by_role("button", name="Diagnose").click()
    asked = _answer_until_report(page, "js-en")
    assert asked >= 1
    _check_report(page)
    # JavaScript added copy buttons; focus moved to the new heading for screen readers.
    assert page.locator(".code button.copy").count() == page.locator(".code pre").count()
    assert page.evaluate("document.activeElement.id") == "reply-heading"
    assert page.title().startswith("OOM Doctor report")
    _shot(page, "js-en-report")
    # The language switch follows the new address; the conversation reloads in Chinese chrome.
    page.get_by_role("link", name="中文").click()
    page.wait_for_selector("html[lang=zh-CN]")
    assert "/c/" in page.url and page.locator("article.report").count() == 1
    # Back goes to the previous state of the page.
    page.go_back()
    page.wait_for_selector("article.report")
    context.close()


def test_paste_answer_report_without_javascript(browser, live_server):
    context, page = _page(browser, js=False)
    page.goto(live_server.url + "/?lang=en")
    page.get_by_label("Log, traceback or training arguments").fill(TRACEBACK)
    page.get_by_role("button", name="Diagnose").click()
    _answer_until_report(page, "nojs-en")
    _check_report(page)
    assert page.locator(".code button.copy").count() == 0  # no script ran
    _shot(page, "nojs-en-report")
    context.close()


@pytest.mark.parametrize("js", [True, False], ids=["js", "nojs"])
def test_chinese(browser, live_server, js):
    context, page = _page(browser, js=js, locale="zh-CN")
    page.goto(live_server.url + "/?lang=zh")
    assert page.locator("html").get_attribute("lang") == "zh-CN"
    page.get_by_label("日志、traceback 或训练参数").fill(TRACEBACK)
    page.get_by_role("button", name="开始诊断").click()
    _answer_until_report(page, f"{'js' if js else 'nojs'}-zh")
    _check_report(page)
    assert "诊断报告" in page.locator("#reply-heading").inner_text()
    assert "每卡" in page.locator("svg.chart desc").text_content()
    _shot(page, f"{'js' if js else 'nojs'}-zh-report")
    context.close()


def test_browser_language_picks_chinese(browser, live_server):
    context, page = _page(browser, js=True, locale="zh-CN")
    page.goto(live_server.url + "/")
    assert page.locator("html").get_attribute("lang") == "zh-CN"
    context.close()


@pytest.mark.parametrize("js", [True, False], ids=["js", "nojs"])
def test_error_keeps_the_text(browser, live_server, js):
    context, page = _page(browser, js=js)
    page.goto(live_server.url + "/?lang=en")
    page.get_by_label("Log, traceback or training arguments").fill("   \n  ")
    page.get_by_role("button", name="Diagnose").click()
    error = page.locator("#error")
    error.wait_for(state="visible")
    assert "empty" in error.inner_text()
    assert page.get_by_label("Log, traceback or training arguments").input_value() == "   \n  "
    assert page.get_by_label("Log, traceback or training arguments").get_attribute("aria-invalid") == "true"
    assert "error" in page.get_by_label("Log, traceback or training arguments").get_attribute("aria-describedby").split()
    _shot(page, f"{'js' if js else 'nojs'}-en-error")
    context.close()


def test_file_chooser_and_drop_fill_the_text_box(browser, live_server, tmp_path):
    context, page = _page(browser, js=True)
    page.goto(live_server.url + "/?lang=en")
    log = tmp_path / "train.log"
    log.write_text(TRACEBACK, encoding="utf-8")
    page.set_input_files("input[type=file]", str(log))
    box = page.get_by_label("Log, traceback or training arguments")
    page.wait_for_function("() => document.getElementById('message').value.includes('CUDA out of memory')")
    assert page.locator("input[type=file]").input_value() == ""  # not sent twice
    box.fill("")
    page.evaluate("""text => {
        const dt = new DataTransfer();
        dt.items.add(new File([text], 'dropped.log', {type: 'text/plain'}));
        const box = document.getElementById('message');
        box.dispatchEvent(new DragEvent('dragover', {dataTransfer: dt, bubbles: true, cancelable: true}));
        box.dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true}));
    }""", "torch.OutOfMemoryError: CUDA out of memory. dropped")
    page.wait_for_function("() => document.getElementById('message').value.includes('dropped')")
    context.close()


def test_file_upload_without_javascript(browser, live_server, tmp_path):
    context, page = _page(browser, js=False)
    page.goto(live_server.url + "/?lang=en")
    log = tmp_path / "train.log"
    log.write_text(TRACEBACK, encoding="utf-8")
    page.set_input_files("input[type=file]", str(log))
    page.get_by_role("button", name="Diagnose").click()
    page.wait_for_selector("article.report, section.question")
    assert "CUDA out of memory" in page.locator(".transcript").inner_text()
    context.close()


def test_keyboard_and_labels(browser, live_server):
    context, page = _page(browser, js=True)
    page.goto(live_server.url + "/?lang=en")
    unlabelled = page.evaluate("""() => [...document.querySelectorAll('input:not([type=hidden]), textarea, select')]
        .filter(el => !(el.labels && el.labels.length)).map(el => el.outerHTML)""")
    assert unlabelled == []
    assert page.locator("script:not([src])").count() == 0
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    page.keyboard.press("Enter")
    for _ in range(8):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "message":
            break
    assert page.evaluate("document.activeElement.id") == "message"
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("", "none")
    page.keyboard.type("Llama-2-7B full fine-tuning on one RTX 4090, batch 4, seq 2048: CUDA out of memory")
    # To the submit button: past the file input.
    for _ in range(4):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.tagName") == "BUTTON":
            break
    page.keyboard.press("Enter")
    page.wait_for_selector("article.report, section.question")
    context.close()
