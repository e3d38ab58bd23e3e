"""The rule engine on its own: no knowledge base, no OOM."""
import pytest

from oomdoctor.engine import (ConclusionKind, Engine, Provenance, RuleSyntaxError, Vocabulary, WorkingMemory,
                              load_rules, parse_rule)
from oomdoctor.engine.explain import trace

VOCAB = Vocabulary(
    facts={"a", "b", "c", "d", "n", "m", "loop"},
    conclusions={"conclude": ConclusionKind("scenario", "confidence"), "ask": ConclusionKind("question", "priority", high=100)},
    targets={"conclude": {"s1", "s2"}, "ask": {"q1"}},
    languages=(),
)
USER = Provenance("extractor", "test")


def rule(raw, order=0):
    return parse_rule(raw, "test", VOCAB, order)


def memory(**facts):
    m = WorkingMemory()
    for k, v in facts.items():
        m.assert_fact(k, v, USER)
    return m


def test_chains_to_quiescence_and_records_provenance():
    rules = [
        rule({"id": "r1", "when": [{"fact": "a", "gt": 3}], "then": [{"assert": {"b": True}}]}, 0),
        rule({"id": "r2", "when": [{"fact": "b", "eq": True}], "then": [{"assert": {"c": "x"}}]}, 1),
        rule({"id": "r3", "when": [{"fact": "c", "eq": "x"}], "then": [{"conclude": {"scenario": "s1", "confidence": 0.7}}]}, 2),
    ]
    result = Engine(rules).run(memory(a=5))
    assert [f.rule.id for f in result.firings] == ["r1", "r2", "r3"]
    assert result.memory.get("c").source == Provenance("rule", "r2")
    (conclusion,) = result.conclusions
    tree = trace(conclusion.firing, result)
    assert tree["facts"][0]["because"]["rule"] == "r2"
    assert tree["facts"][0]["because"]["facts"][0]["because"]["facts"][0]["source"]["kind"] == "extractor"


def test_salience_orders_the_agenda_and_load_order_breaks_ties():
    rules = [
        rule({"id": "low", "salience": 1, "when": [{"fact": "a", "present": True}], "then": [{"assert": {"n": 1}}]}, 0),
        rule({"id": "high", "salience": 9, "when": [{"fact": "a", "present": True}], "then": [{"assert": {"m": 1}}]}, 1),
        rule({"id": "tie_b", "salience": 5, "when": [{"fact": "a", "present": True}], "then": [{"assert": {"d": 1}}]}, 3),
        rule({"id": "tie_a", "salience": 5, "when": [{"fact": "a", "present": True}], "then": [{"assert": {"c": 1}}]}, 2),
    ]
    result = Engine(rules).run(memory(a=1))
    assert [f.rule.id for f in result.firings] == ["high", "tie_a", "tie_b", "low"]


def test_refraction_fires_once_per_match_but_again_for_new_facts():
    rules = [rule({"id": "count", "when": [{"fact": "a", "ge": 0}], "then": [{"conclude": {"scenario": "s1"}}]})]
    engine = Engine(rules)
    result = engine.run(memory(a=1))
    assert len(result.conclusions) == 1
    m = result.memory
    m.assert_fact("a", 2, USER)
    assert len(engine.run(m).conclusions) == 1  # a new run sees a new version


def test_firing_cap_stops_a_loop():
    rules = [
        rule({"id": "up", "when": [{"fact": "loop", "eq": 0}], "then": [{"assert": {"loop": 1}}]}, 0),
        rule({"id": "down", "when": [{"fact": "loop", "eq": 1}], "then": [{"assert": {"loop": 0}}]}, 1),
    ]
    result = Engine(rules, max_firings=50).run(memory(loop=0))
    assert result.capped and len(result.firings) == 50


def test_rule_retracted_from_agenda_when_condition_stops_holding():
    rules = [
        rule({"id": "first", "salience": 10, "when": [{"fact": "a", "present": True}], "then": [{"assert": {"b": False}}]}, 0),
        rule({"id": "needs_b_absent", "when": [{"fact": "b", "absent": True}], "then": [{"conclude": {"scenario": "s2"}}]}, 1),
    ]
    result = Engine(rules).run(memory(a=1))
    assert [f.rule.id for f in result.firings] == ["first"]


@pytest.mark.parametrize("cond, facts, expected", [
    ({"fact": "a", "eq": 1}, {"a": 1}, True),
    ({"fact": "a", "ne": 1}, {}, True),
    ({"fact": "a", "in": [1, 2]}, {"a": 2}, True),
    ({"fact": "a", "not_in": [1, 2]}, {"a": 3}, True),
    ({"fact": "a", "lt": 1}, {"a": "0"}, False),
    ({"fact": "a", "contains": "q_proj"}, {"a": ["q_proj", "v_proj"]}, True),
    ({"fact": "a", "gt": {"fact": "b"}}, {"a": 3, "b": 2}, True),
    ({"fact": "a", "gt": {"fact": "b", "times": 2}}, {"a": 3, "b": 2}, False),
    ({"fact": "a", "gt": {"fact": "b"}}, {"a": 3}, False),
    ({"any": [{"fact": "a", "eq": 1}, {"fact": "b", "eq": 1}]}, {"b": 1}, True),
    ({"not": {"fact": "a", "present": True}}, {}, True),
])
def test_conditions(cond, facts, expected):
    r = rule({"id": "r", "when": [cond], "then": [{"conclude": {"scenario": "s1"}}]})
    assert bool(Engine([r]).run(memory(**facts)).conclusions) is expected


def test_rules_matching_empty_memory_fire():
    r = rule({"id": "r", "when": [{"fact": "a", "absent": True}], "then": [{"ask": {"question": "q1", "priority": 40}}]})
    (c,) = Engine([r]).run(WorkingMemory()).conclusions
    assert (c.kind, c.target, c.weight) == ("ask", "q1", 40)


def test_stronger_source_is_not_overwritten_by_weaker():
    m = WorkingMemory()
    m.assert_fact("a", 1, Provenance("answer", "q"))
    assert m.assert_fact("a", 2, Provenance("extractor", "x")) is None
    assert m.value("a") == 1


@pytest.mark.parametrize("text, message", [
    ("rules:\n  - id: r\n    whne: []\n    then: [{conclude: s1}]\n", "unknown key 'whne' (did you mean 'when'?)"),
    ("rules:\n  - id: r\n    when: [{fact: aa, eq: 1}]\n    then: [{conclude: s1}]\n", "unknown fact 'aa' (did you mean 'a'?)"),
    ("rules:\n  - id: r\n    when: [{fact: a, eqq: 1}]\n    then: [{conclude: s1}]\n", "needs exactly one operator"),
    ("rules:\n  - id: r\n    when: []\n    then: [{conclude: s11}]\n", "unknown scenario 's11' (did you mean 's1'?)"),
    ("rules:\n  - id: r\n    when: []\n    then: [{concude: s1}]\n", "unknown action 'concude' (did you mean 'conclude'?)"),
    ("rules:\n  - id: r\n    when: []\n    then: [{conclude: {scenario: s1, confidence: 2}}]\n", "from 0.0 to 1.0"),
    ("rules: [\n", "not valid YAML"),
    ("rules:\n  - id: r\n    when: []\n    then: [{conclude: s1}]\n  - id: r\n    when: []\n    then: [{conclude: s1}]\n", "defined twice"),
])
def test_broken_rule_files_fail_with_file_entry_and_hint(tmp_path, text, message):
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    with pytest.raises(RuleSyntaxError) as err:
        load_rules([path], VOCAB)
    assert message in str(err.value)
    assert "broken.yaml" in str(err.value)
