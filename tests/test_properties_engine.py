"""Properties of the rule engine over random rule sets and random facts.

Whatever the rules say, a run never raises and always stops: at quiescence (every
rule that matches the final memory has fired on exactly those facts) or at the
firing cap. The real knowledge base, on random facts, always reaches quiescence.
"""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from oomdoctor import knowledge
from oomdoctor.engine import ConclusionKind, Engine, Provenance, Vocabulary, WorkingMemory, parse_rule

FACTS = ["f0", "f1", "f2", "f3", "f4", "f5"]
VOCAB = Vocabulary(facts=set(FACTS), conclusions={"conclude": ConclusionKind("scenario", "confidence")},
                   languages=())
USER = Provenance("extractor", "test")

values = st.one_of(st.integers(-2, 3), st.booleans(), st.sampled_from(["x", "y", ""]), st.floats(-1, 2, allow_nan=False))
operand = st.one_of(values, st.lists(values, max_size=3),
                    st.builds(lambda f, k: {"fact": f, "times": k}, st.sampled_from(FACTS), st.sampled_from([1, 2, 0.5])))


def _test(fact, op, right):
    if op in ("present", "absent"):
        return {"fact": fact, op: bool(right)}
    if op in ("in", "not_in") and not isinstance(right, list):
        right = [right] if not isinstance(right, dict) else right
        if isinstance(right, dict):
            op = "eq"
    return {"fact": fact, op: right}


test_condition = st.builds(_test, st.sampled_from(FACTS),
                           st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge", "in", "not_in", "contains",
                                            "present", "absent"]), operand)
condition = st.recursive(
    test_condition,
    lambda inner: st.one_of(st.builds(lambda parts: {"any": parts}, st.lists(inner, min_size=1, max_size=3)),
                            st.builds(lambda parts: {"all": parts}, st.lists(inner, min_size=1, max_size=3)),
                            st.builds(lambda part: {"not": part}, inner)),
    max_leaves=6,
)
action = st.one_of(
    st.builds(lambda f, v: {"assert": {f: v}}, st.sampled_from(FACTS), values),
    st.builds(lambda s, c: {"conclude": {"scenario": s, "confidence": c}}, st.sampled_from(["s1", "s2"]),
              st.floats(0, 1)),
)
raw_rule = st.fixed_dictionaries({"when": st.lists(condition, max_size=3), "then": st.lists(action, min_size=1, max_size=3),
                                  "salience": st.integers(-5, 5)})
rule_sets = st.lists(raw_rule, max_size=12).map(
    lambda raws: [parse_rule({"id": f"r{i}", **raw}, "prop", VOCAB, i) for i, raw in enumerate(raws)])
memories = st.dictionaries(st.sampled_from(FACTS), values, max_size=6)


def _memory(facts: dict) -> WorkingMemory:
    memory = WorkingMemory()
    for name, value in facts.items():
        memory.assert_fact(name, value, USER)
    return memory


def _signature_now(rule, memory: WorkingMemory) -> tuple:
    return tuple(sorted((name, None if memory.get(name) is None else memory.get(name).version) for name in rule.facts()))


def _signature_fired(firing) -> tuple:
    return tuple(sorted([(f.name, f.version) for f in firing.facts] + [(name, None) for name in firing.absent]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules=rule_sets, facts=memories, cap=st.integers(1, 60))
def test_random_rules_always_stop_at_quiescence_or_the_cap(rules, facts, cap):
    memory = _memory(facts)
    before = {f.name: (f.value, f.version) for f in memory}
    result = Engine(rules, max_firings=cap).run(memory)
    assert {f.name: (f.value, f.version) for f in memory} == before  # the caller's memory is untouched
    assert len(result.firings) <= cap
    if result.capped:
        assert len(result.firings) == cap
        return
    fired = {(f.rule.id, _signature_fired(f)) for f in result.firings}
    for rule in rules:
        if rule.matches(result.memory):
            assert (rule.id, _signature_now(rule, result.memory)) in fired, f"{rule.id} matches but did not fire"
    # The same rules on the same facts fire in the same order.
    again = Engine(rules, max_firings=cap).run(_memory(facts))
    assert [f.rule.id for f in again.firings] == [f.rule.id for f in result.firings]


@settings(max_examples=100, deadline=None)
@given(facts=memories)
def test_a_rule_pair_that_flips_a_fact_is_stopped_by_the_cap(facts):
    rules = [parse_rule({"id": "on", "when": [{"fact": "f0", "ne": True}], "then": [{"assert": {"f0": True}}]}, "p", VOCAB, 0),
             parse_rule({"id": "off", "when": [{"fact": "f0", "eq": True}], "then": [{"assert": {"f0": False}}]}, "p", VOCAB, 1)]
    result = Engine(rules, max_firings=50).run(_memory(facts))
    assert result.capped and len(result.firings) == 50


KB = knowledge.default()
REAL = Engine(KB.rules)
_NUMBERS = st.one_of(st.integers(0, 2048), st.floats(0, 1e6, allow_nan=False, allow_infinity=False))


def _fact_value(spec):
    if spec.type == "enum":
        return st.sampled_from(list(spec.values))
    if spec.type == "boolean":
        return st.booleans()
    if spec.type == "integer":
        return st.integers(0, 1 << 20)
    if spec.type == "number":
        return _NUMBERS.map(float)
    if spec.type == "string":
        return st.sampled_from(["", "x", "llama-3-8b", "rtx-4090"])
    return st.lists(st.sampled_from(["q_proj", "v_proj", "x"]), max_size=3)


real_facts = st.lists(st.sampled_from(sorted(KB.facts)), max_size=25, unique=True).flatmap(
    lambda names: st.fixed_dictionaries({name: _fact_value(KB.facts[name]) for name in names}))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(facts=real_facts)
def test_the_real_rules_reach_quiescence_on_any_facts(facts):
    result = REAL.run(_memory(facts))
    assert not result.capped, [f.rule.id for f in result.firings[-10:]]
    for conclusion in result.conclusions:
        assert conclusion.kind in ("conclude", "recommend", "ask")
