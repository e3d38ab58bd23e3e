"""The knowledge base's scenarios as MCP resources: what a cause is, how to confirm it, and its
remedies with their change, so an assistant can answer follow-ups without another diagnosis."""
from __future__ import annotations

from ...knowledge import KnowledgeBase, Scenario
from ...language import LANGUAGES
from ...render.markdown import fenced
from ...render.text import change_text

PREFIX = "oomdoctor://scenarios/"


def uri(scenario: Scenario) -> str:
    return PREFIX + scenario.id


def scenario_id(address: str) -> str | None:
    return address[len(PREFIX):] if address.startswith(PREFIX) else None


def scenario_markdown(scenario: Scenario, kb: KnowledgeBase) -> str:
    """The scenario in both languages, English first."""
    sections = []
    for lang in LANGUAGES:
        t = lambda key, **kw: kb.text(key, lang, **kw)  # noqa: E731
        lines = [f"# {scenario.title[lang]}", "", scenario.summary[lang], "",
                 f"**{t('report.verify')}**: {scenario.verify[lang]}", "", f"**{t('report.remedies')}**", ""]
        for i, remedy_id in enumerate(scenario.remedies, 1):
            remedy = kb.remedies[remedy_id]
            cost = t("ui.cost", speed=remedy.cost_speed[lang], quality=remedy.cost_quality[lang])
            lines += [f"{i}. **{remedy.title[lang]}**: {remedy.effect[lang]}",
                      f"   _{t('ui.labelled', label=t('report.cost'), value=cost)}_"]
            snippet = change_text(remedy.change)
            if snippet.strip():
                lines += ["", fenced(snippet), ""]
        if scenario.sources:
            lines += ["", t("ui.labelled", label=t("mcp.sources"), value="; ".join(scenario.sources))]
        sections.append("\n".join(lines).rstrip())
    return "\n\n---\n\n".join(sections) + "\n"
