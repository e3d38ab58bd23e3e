"""Block Kit rendering: questions as buttons or a menu, reports with bars and changes, Slack's limits held."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from oomdoctor.knowledge import default as default_kb
from oomdoctor.render import blocks
from oomdoctor.render.text import change_text

FIXTURES = Path(__file__).parent / "fixtures" / "web"
CID = "0123456789abcdef0123456789abcdef"


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def kb():
    return default_kb()


def texts_of(message: dict) -> list[str]:
    """Every mrkdwn/plain_text string in the message."""
    out = []

    def walk(node):
        if isinstance(node, dict):
            if node.get("type") in ("mrkdwn", "plain_text"):
                out.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(message["blocks"])
    return out


def assert_within_limits(message: dict) -> None:
    assert message["text"].strip(), "a plain-text fallback is always there"
    assert len(message["text"]) <= blocks.MAX_FALLBACK
    assert 1 <= len(message["blocks"]) <= blocks.MAX_BLOCKS
    for block in message["blocks"]:
        if block["type"] == "header":
            assert block["text"]["type"] == "plain_text" and len(block["text"]["text"]) <= blocks.MAX_HEADER
        if block["type"] == "section":
            assert len(block["text"]["text"]) <= blocks.MAX_SECTION
        if block["type"] == "context":
            assert len(block["elements"]) <= blocks.MAX_CONTEXT_ELEMENTS
            assert all(len(e["text"]) <= blocks.MAX_SECTION for e in block["elements"])
        if block["type"] == "actions":
            assert len(block["elements"]) <= blocks.MAX_ACTION_ELEMENTS
            assert len(block["block_id"]) <= 255
            for element in block["elements"]:
                assert len(element["action_id"]) <= 255
                if element["type"] == "button":
                    assert len(element["text"]["text"]) <= blocks.MAX_BUTTON_TEXT
                    assert len(element["value"]) <= blocks.MAX_BUTTON_VALUE
                if element["type"] == "static_select":
                    assert len(element["options"]) <= blocks.MAX_SELECT_OPTIONS
                    for option in element["options"]:
                        assert len(option["text"]["text"]) <= blocks.MAX_OPTION_TEXT
                        assert len(option["value"]) <= blocks.MAX_OPTION_VALUE
    json.dumps(message)  # serialisable as it is posted


def test_question_with_few_options_is_buttons(kb):
    message = blocks.render(fixture("question_en"), kb, CID)
    assert message["response_type"] == "ephemeral"
    assert_within_limits(message)
    actions = [b for b in message["blocks"] if b["type"] == "actions"]
    assert len(actions) == 1
    assert actions[0]["block_id"] == f"answer:{CID}:ask_method"
    buttons = actions[0]["elements"]
    assert [b["text"]["text"] for b in buttons] == ["Full fine-tuning", "LoRA", "QLoRA (4-bit)", "Skip (I don't know)"]
    assert [b["value"] for b in buttons] == ["full", "lora", "qlora", "skip"]
    assert len({b["action_id"] for b in buttons}) == len(buttons)
    text = "\n".join(texts_of(message))
    assert "Full fine-tuning, LoRA or QLoRA?" in text
    assert "/oom &lt;your answer&gt;" in text  # Slack's control characters escaped


def test_question_with_many_options_is_a_menu(kb):
    reply = fixture("question_en")
    reply["questions"][0]["options"] = [{"value": i, "label": f"option {i}"} for i in range(1, 8)]
    message = blocks.render(reply, kb, CID)
    assert_within_limits(message)
    elements = next(b for b in message["blocks"] if b["type"] == "actions")["elements"]
    assert elements[0]["type"] == "static_select" and elements[0]["action_id"] == blocks.SELECT_ACTION
    assert [o["value"] for o in elements[0]["options"]] == [str(i) for i in range(1, 8)]
    assert elements[1]["action_id"] == blocks.SKIP_ACTION


def test_free_question_without_options_still_offers_skip(kb):
    reply = fixture("question_en")
    reply["questions"][0]["options"] = []
    elements = next(b for b in blocks.render(reply, kb, CID)["blocks"] if b["type"] == "actions")["elements"]
    assert [e["action_id"] for e in elements] == [blocks.SKIP_ACTION]


def test_question_in_chinese(kb):
    message = blocks.render(fixture("question_zh"), kb, CID)
    text = "\n".join(texts_of(message))
    assert "全参数微调、LoRA 还是 QLoRA？" in text and "原因：" in text
    skip = next(b for b in message["blocks"] if b["type"] == "actions")["elements"][-1]
    assert skip["value"] == "跳过"


def test_report_layout(kb):
    reply = fixture("report_en")
    message = blocks.render(reply, kb, CID)
    assert_within_limits(message)
    kinds = [b["type"] for b in message["blocks"]]
    assert kinds[0] == "header" and message["blocks"][0]["text"]["text"] == "OOM Doctor report"
    text = "\n".join(texts_of(message))
    assert "Full fine-tuning a 7B model needs far more memory than one 24 GB card" in text
    # The breakdown as text bars in a code block, with the capacity marked.
    bars = next(t for t in texts_of(message) if t.startswith("*Memory estimate*"))
    assert "```" in bars and "optimizer states" in bars and "█" in bars and "┤" in bars and "23.70 GiB" in bars
    assert "does not fit" in bars
    # Remedies with their exact change, pasteable.
    first = next(t for t in texts_of(message) if "Train a QLoRA adapter" in t and "```" in t)
    snippet = first.split("```\n", 1)[1].rsplit("\n```", 1)[0]
    assert snippet == blocks.escape(change_text(reply["remedies"][0]["change"]))
    assert "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in text
    share = [e for b in message["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert [(e["action_id"], e["value"]) for e in share] == [(blocks.SHARE_ACTION, CID)]


def test_failed_moment_is_stated_beside_the_peak_and_per_remedy(kb):
    reply = fixture("report_en")
    reply["estimate"]["remarks"] = ["at evaluation, where it failed: 43.17 GiB"]
    reply["remedies"][0]["failed_moment_after"] = "evaluation: 16.26 GiB"
    message = blocks.render(reply, kb, CID)
    assert_within_limits(message)
    bars = next(t for t in texts_of(message) if t.startswith("*Memory estimate*"))
    assert "• at evaluation, where it failed: 43.17 GiB" in bars
    assert any("; evaluation: 16.26 GiB" in t for t in texts_of(message) if "Train a QLoRA adapter" in t)


def test_shared_report_is_in_channel_without_buttons(kb):
    message = blocks.render(fixture("report_en"), kb, CID, shared_by="U123")
    assert message["response_type"] == "in_channel"
    assert not [b for b in message["blocks"] if b["type"] == "actions"]
    assert "Shared by <@U123>" in "\n".join(texts_of(message))


def test_report_in_chinese_aligns_bars(kb):
    message = blocks.render(fixture("report_zh"), kb, CID)
    from oomdoctor.render.bars import width

    chart = next(t for t in texts_of(message) if "```" in t and "█" in t)
    lines = chart.split("```\n", 1)[1].rsplit("\n```", 1)[0].splitlines()
    # CJK labels count double in a monospace font: the numbers line up.
    columns = {width(line.split(" GiB")[0]) for line in lines if " GiB" in line}
    assert len(columns) == 1
    assert "分享到频道" in "\n".join(texts_of(message))


def test_user_text_is_escaped(kb):
    reply = fixture("report_en")
    reply["diagnoses"][0]["title"] = "<!channel> & <@U999>"
    text = "\n".join(texts_of(blocks.render(reply, kb, CID)))
    assert "<!channel>" not in text and "&lt;!channel&gt; &amp; &lt;@U999&gt;" in text


def huge(reply: dict) -> dict:
    reply = copy.deepcopy(reply)
    reply["diagnoses"] = [dict(reply["diagnoses"][0], title="T" * 500, summary="S" * 5000, why=["W" * 400] * 30)
                          for _ in range(8)]
    remedy = reply["remedies"][0]
    reply["remedies"] = [dict(remedy, title=f"remedy {i} " + "R" * 300,
                              change={"code": "x = 1\n" * 2000, "note": "N" * 500}) for i in range(40)]
    reply["estimate"]["derivation"] = ["D" * 200] * 200
    reply["assumptions"] = [{"fact": "f", "value": 1, "text": "A" * 300}] * 100
    reply["claims"] = [{"claim": "C" * 300, "truth": "T" * 300}] * 50
    reply["text"] = "X" * 100_000
    return reply


def test_huge_report_is_trimmed_to_slack_limits(kb):
    reply = huge(fixture("report_en"))
    message = blocks.render(reply, kb, CID)
    assert_within_limits(message)
    text = "\n".join(texts_of(message))
    # The diagnosis is never dropped; the least important parts go first.
    assert "T" * 100 in text
    assert "A" * 300 not in text, "assumptions go before anything else"
    assert "Some parts were left out" in text
    # The top remedy stays, with its code block still closed.
    top = next(t for t in texts_of(message) if "remedy 0 " in t)
    assert top.count("```") == 2 and top.endswith("```")
    # Lower remedies went before higher ones.
    kept = [i for i in range(40) if f"remedy {i} " in text]
    assert kept == list(range(len(kept)))


def test_many_remedies_shown_at_most_five(kb):
    reply = fixture("report_en")
    reply["remedies"] = [dict(reply["remedies"][1], title=f"remedy {i}") for i in range(12)]
    text = "\n".join(texts_of(blocks.render(reply, kb, CID)))
    assert "remedy 4" in text and "remedy 5" not in text


def test_huge_question_is_within_limits(kb):
    reply = fixture("question_en")
    reply["questions"][0].update(text="Q" * 4000, why="Y" * 4000,
                                 options=[{"value": "v" * 500, "label": "L" * 300} for _ in range(300)])
    reply["diagnoses"][0]["title"] = "T" * 5000
    message = blocks.render(reply, kb, CID)
    assert_within_limits(message)


def test_header_is_clipped(kb):
    class LongTitle:
        texts = kb.texts

        def text(self, key, lang, **values):
            return "H" * 400 if key == "report.title" else kb.text(key, lang, **values)

    message = blocks.render(fixture("report_en"), LongTitle(), CID)
    assert len(message["blocks"][0]["text"]["text"]) == blocks.MAX_HEADER


def test_notice_and_unescape():
    assert blocks.unescape("a &lt;b&gt; &amp;lt;") == "a <b> &lt;"
    message = blocks.notice("*hi*")
    assert message["response_type"] == "ephemeral" and message["blocks"][0]["text"]["text"] == "*hi*"


def test_fit_drops_least_important_first_and_says_so():
    small = lambda label: [blocks.section(label)]  # noqa: E731
    groups = [(blocks.KEEP_ALWAYS, small("diagnosis"))]
    groups += [(40 - i / 100, small(f"remedy {i}")) for i in range(60)]
    groups += [(10, small("assumptions"))]
    out = blocks._fit(groups, "trimmed")
    texts = [b["text"]["text"] if b["type"] == "section" else b["elements"][0]["text"] for b in out]
    assert len(out) == blocks.MAX_BLOCKS
    assert texts[0] == "diagnosis" and texts[-1] == "trimmed"
    assert "assumptions" not in texts
    assert texts[1:-1] == [f"remedy {i}" for i in range(blocks.MAX_BLOCKS - 2)]


def test_fit_never_drops_what_must_stay():
    groups = [(blocks.KEEP_ALWAYS, [blocks.section(f"d{i}")]) for i in range(70)]
    assert len(blocks._fit(groups, "trimmed")) == blocks.MAX_BLOCKS


def with_limits_and_plans(reply: dict) -> dict:
    reply["estimate"].update(smallest_gpu={"id": "h100-80gb", "memory_gib": 79.65}, max_batch_size=2,
                             max_seq_len=1024, min_gpus=6)
    reply["plans"] = [{"remedies": ["a", "b"], "titles": ["Plan A", "Plan B"], "estimate_after_gib": 20.1,
                       "fits_after": True, "batch_size": 2, "grad_accum": 8}]
    return reply


def test_report_shows_limits_and_plans(kb):
    text = "\n".join(texts_of(blocks.render(with_limits_and_plans(fixture("report_en")), kb, CID)))
    assert "smallest single GPU that fits: h100-80gb (79.65 GiB)" in text
    assert "largest micro-batch that fits: 2" in text and "longest sequence that fits: 1024 tokens" in text
    assert "fewest GPUs of this kind that fit: 6" in text
    assert ("Plan A + Plan B (per_device_train_batch_size=2, gradient_accumulation_steps=8) — "
            "estimate after: 20.1 GiB") in text
