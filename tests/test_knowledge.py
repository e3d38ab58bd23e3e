"""Knowledge-base lint: the YAML is complete, consistent and fully used."""
import shutil
from pathlib import Path

import pytest
import yaml

from oomdoctor import knowledge
from oomdoctor.extractors import config_keys, registry, symptoms
from oomdoctor.schema import KnowledgeError

KB = knowledge.default()
ROOT = Path(__file__).resolve().parent.parent
# Facts the estimator derives; the consultation asserts them from estimate_facts().
ESTIMATOR_FACTS = {name for name in KB.facts if name.startswith("estimate.")}


def produced_by_extractors() -> set[str]:
    out = set(symptoms.produced_facts(KB)) | set(config_keys.produced_facts(KB))
    for extractor in registry():
        out |= set(extractor.produces)
    return out


def asserted_by_rules() -> set[str]:
    return {a.target for r in KB.rules for a in r.then if a.kind == "assert"}


def test_every_fact_has_a_producer():
    producers = produced_by_extractors() | {q.fact for q in KB.questions.values()} | ESTIMATOR_FACTS | asserted_by_rules()
    missing = sorted(set(KB.facts) - producers)
    assert not missing, f"facts nothing produces: {missing}"


def test_extractors_produce_only_known_facts():
    unknown = sorted(produced_by_extractors() - set(KB.facts))
    assert not unknown


def test_every_fact_a_rule_tests_can_be_produced():
    producers = produced_by_extractors() | {q.fact for q in KB.questions.values()} | ESTIMATOR_FACTS | asserted_by_rules()
    for rule in KB.rules:
        assert rule.facts() <= producers, (rule.id, rule.facts() - producers)


def test_every_rule_explained_in_both_languages():
    for rule in KB.rules:
        assert rule.explain.get("en") and rule.explain.get("zh"), rule.id


def test_every_scenario_reachable_by_a_rule_and_has_remedies():
    concluded = {a.target for r in KB.rules for a in r.then if a.kind == "conclude"}
    for scenario in KB.scenarios.values():
        assert scenario.remedies
        assert scenario.id in concluded, f"no rule concludes {scenario.id}"


def test_every_question_is_asked_by_a_rule():
    asked = {a.target for r in KB.rules for a in r.then if a.kind == "ask"}
    assert set(KB.questions) <= asked


def test_every_remedy_used_and_concrete():
    used = {rid for s in KB.scenarios.values() for rid in s.remedies}
    used |= {a.target for r in KB.rules for a in r.then if a.kind == "recommend"}
    assert set(KB.remedies) <= used, set(KB.remedies) - used
    for remedy in KB.remedies.values():
        assert set(remedy.change) - {"note"}, remedy.id


def test_enum_values_tested_by_rules_exist():
    for rule in KB.rules:
        for cond in rule.when:
            stack = [cond]
            while stack:
                c = stack.pop()
                stack.extend(getattr(c, "parts", ()))
                if hasattr(c, "part"):
                    stack.append(c.part)
                if not hasattr(c, "op") or c.operand.fact:
                    continue
                spec = KB.facts[c.fact]
                if spec.type != "enum" or c.op not in ("eq", "ne", "in", "not_in"):
                    continue
                values = c.operand.literal if c.op in ("in", "not_in") else [c.operand.literal]
                for value in values:
                    assert value in spec.values, (rule.id, c.fact, value)


def _copy_kb(tmp_path: Path) -> tuple[Path, Path]:
    kdir, rdir = tmp_path / "knowledge", tmp_path / "rules"
    shutil.copytree(ROOT / "knowledge", kdir)
    shutil.copytree(ROOT / "rules", rdir)
    return kdir, rdir


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


@pytest.mark.parametrize("file, old, new, message", [
    ("knowledge/scenarios.yaml", "remedies: [gradient_checkpointing, reduce_batch_size", "remedies: [gradient_checkpoint, reduce_batch_size",
     "unknown remedy 'gradient_checkpoint' (did you mean 'gradient_checkpointing'?)"),
    ("knowledge/scenarios.yaml", "    oom_kind: gpu\n", "    oom_knd: gpu\n", "unknown key 'oom_knd' (did you mean 'oom_kind'?)"),
    ("knowledge/remedies.yaml", 'zh: "开启梯度检查点"', 'zz: "开启梯度检查点"', "missing translation ['zh']"),
    ("knowledge/questions.yaml", "fact: model.name", "fact: model.nam", "unknown fact 'model.nam' (did you mean 'model.name'?)"),
    ("knowledge/symptoms.yaml", "asserts: {error.kind: cuda_oom,", "asserts: {error.kind: cuda_om,", "is not a valid enum for fact 'error.kind' (did you mean 'cuda_oom'?)"),
    ("knowledge/facts.yaml", "      backward: {en: backward, zh: 反向传播}", "      backwards: {en: backward, zh: 反向传播}",
     "unknown value 'backwards' (did you mean 'backward'?)"),
    ("rules/gpu.yaml", "{fact: oom.tried_gib}", "{fact: oom.tried_gb}", "unknown fact 'oom.tried_gb' (did you mean 'oom.tried_gib'?)"),
    ("rules/gpu.yaml", "scenario: fragmentation,", "scenario: fragmentaton,", "unknown scenario 'fragmentaton' (did you mean 'fragmentation'?)"),
    ("rules/host.yaml", "    explain:\n      en: \"Optimizer", "    explain:\n      fr: x\n      en: \"Optimizer", "unknown language"),
])
def test_broken_knowledge_fails_with_file_entry_and_suggestion(tmp_path, file, old, new, message):
    kdir, rdir = _copy_kb(tmp_path)
    _edit(tmp_path / file, old, new)
    with pytest.raises(KnowledgeError) as err:
        knowledge.load(kdir, rdir)
    assert message in str(err.value)
    assert Path(file).name in str(err.value)


def test_invalid_yaml_names_the_file(tmp_path):
    kdir, rdir = _copy_kb(tmp_path)
    (kdir / "remedies.yaml").write_text("remedies: [\n", encoding="utf-8")
    with pytest.raises(KnowledgeError, match="remedies.yaml: not valid YAML"):
        knowledge.load(kdir, rdir)


def test_yaml_is_loaded_safely(tmp_path):
    kdir, rdir = _copy_kb(tmp_path)
    (kdir / "texts.yaml").write_text("texts: !!python/object/apply:os.system ['echo pwned']\n", encoding="utf-8")
    with pytest.raises(KnowledgeError):
        knowledge.load(kdir, rdir)


def test_reference_answer_topics_are_covered():
    """Everything the answer this project grew from says has a place here."""
    for scenario in ("zero_offload_host_ram", "dataloader_workers", "torch_compile_autotune", "activations_too_large",
                     "optimizer_states", "host_oom_killer"):
        assert scenario in KB.scenarios
    for remedy in ("gradient_checkpointing", "reduce_batch_size", "shorten_sequences", "use_lora", "use_qlora",
                   "bigger_gpu", "more_gpus", "zero_offload", "add_host_ram", "load_in_bf16"):
        assert remedy in KB.remedies
    assert {"full_ft_8b_40gb", "qlora_70b_24gb"} <= set(KB.claims)
