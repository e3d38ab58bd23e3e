"""The toolkits people fine-tune with: which one a text belongs to, and what its own defaults do to the estimate.

Defaults checked in the toolkits' source: unsloth 2026.8.19 with unsloth_zoo 2026.8 (loader.py, llama.py,
_utils.py; gradient_checkpointing.py, fused_losses/cross_entropy_loss.py), verl v0.7
(verl/trainer/config/_generated_ppo_trainer.yaml, verl/workers/fsdp_workers.py), TRL 1.16 (trainer/base_config.py,
sft_config.py).
"""
from __future__ import annotations

import pytest

from oomdoctor import consultation
from oomdoctor.extractors import Unknown, launch, verl
from oomdoctor.estimate import estimate
from oomdoctor.estimate.from_facts import setup_from_facts


def toolkit_of(text):
    found = {f.name: f.value for f in launch.extract(text)}
    return found.get("toolkit"), found.get("toolkit.named")


def reply(text, lang="en"):
    return consultation.default().diagnose(text, lang=lang)


def facts_of(r):
    return {f["name"]: f["value"] for f in r["facts"]}


# --- which toolkit ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, toolkit", [
    ("from unsloth import FastLanguageModel\nmodel, tokenizer = FastLanguageModel.from_pretrained(\n"
     "    model_name='unsloth/llama-3-8b-bnb-4bit', max_seq_length=4096)", "unsloth"),
    ("model = FastLanguageModel.get_peft_model(model, r=16)", "unsloth"),
    ("model, processor = FastVisionModel.from_pretrained('unsloth/Qwen2-VL-7B-Instruct')", "unsloth"),
    ("==((====))==  Unsloth - 2x faster free finetuning | Num GPUs = 1", "unsloth"),
    ('  File "/usr/local/lib/python3.10/dist-packages/unsloth/models/llama.py", line 1004, in _CausalLM_fast_forward',
     "unsloth"),
    # an Unsloth notebook builds TRL's SFTConfig: Unsloth is the toolkit whose defaults apply
    ("from unsloth import FastLanguageModel\nfrom trl import SFTTrainer, SFTConfig\nargs = SFTConfig(max_steps=60)",
     "unsloth"),
    ("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo data.train_batch_size=1024", "verl"),
    ("ray job submit -- python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=8", "verl"),
    ('  File "/verl/verl/workers/fsdp_workers.py", line 782, in compute_log_prob', "verl"),
    ("    actor_rollout_ref.actor.fsdp_config.param_offload=True \\\n", "verl"),
    ("actor_rollout_ref:\n  actor:\n    ppo_micro_batch_size_per_gpu: 4\n", "verl"),
    ("trl sft --model_name_or_path Qwen/Qwen2.5-0.5B --dataset_name trl-lib/Capybara", "trl"),
    ("training_args = GRPOConfig(output_dir='out', num_generations=8)", "trl"),
    ("accelerate launch -m axolotl.cli.train examples/llama-3/qlora.yml", "axolotl"),
    ("axolotl train config.yml", "axolotl"),
    ("base_model: NousResearch/Llama-2-7b-hf\nsequence_len: 4096\nsample_packing: true\n", "axolotl"),
    ("tune run lora_finetune_single_device --config llama3_1/8B_lora_single_device", "torchtune"),
    ("loss:\n  _component_: torchtune.modules.loss.CEWithChunkedOutputLoss\n", "torchtune"),
])
def test_a_toolkits_command_or_config_says_its_defaults_apply(text, toolkit):
    assert toolkit_of(text) == (toolkit, None)


@pytest.mark.parametrize("text, toolkit", [
    ("Gemma-3-27B-it QLoRA with Unsloth on an A100 40GB, max_seq_length 2048, batch 2", "unsloth"),
    ("With unsloth on a T4, llama-3-8b", "unsloth"),
    ("用 unsloth 跑 qwen2.5-7b 的 lora，4090 爆显存", "unsloth"),
    ("unsloth微调 qwen2 报 OOM", "unsloth"),
    ("8×H800, verl GRPO on Qwen2.5-32B, OOM in update_actor", "verl"),
    ("verl 训练 Qwen2.5-7B 时显存不够", "verl"),
    ("我们用verl做 GRPO", "verl"),
    ("using TRL's SFTTrainer on two 3090s", "trl"),
    ("用 TRL 做 DPO", "trl"),
    ("fine-tuning with axolotl on 4x A100", "axolotl"),
    ("torchtune LoRA recipe on one 4090", "torchtune"),
])
def test_a_toolkit_named_in_words_is_only_named(text, toolkit):
    assert toolkit_of(text) == (None, toolkit)


@pytest.mark.parametrize("text", [
    "unlike unsloth, plain transformers keeps the logits",
    "I tried this instead of verl and it still OOMs",
    "rather than TRL we wrote our own loop",
    "不用 unsloth 训练，直接用 transformers",
    "相比 verl 训练，这个更省显存",
    "see https://github.com/unslothai/unsloth/issues/465 and https://github.com/volcengine/verl/issues/302",
    "python /home/me/unsloth/train.py --model x",
    "model_name_or_path: /data/verl/checkpoints/step_100",
    "fine-tuning unsloth/llama-3-8b-bnb-4bit with peft on a T4",      # a checkpoint's repo, not the toolkit
    "trainer = SFTTrainer(model=model, args=TrainingArguments(output_dir='o'))",  # the Trainer's defaults
    "/opt/axolotl/outputs/run1/config.yaml",
])
def test_near_misses_stay_unread(text):
    assert toolkit_of(text) == (None, None)


# --- verl's settings at their full paths ------------------------------------------------------------------
VERL_COMMAND = """python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_batch_size=1024 \\
    data.max_prompt_length=512 \\
    data.max_response_length=1024 \\
    actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct \\
    actor_rollout_ref.actor.ppo_mini_batch_size=256 \\
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \\
    actor_rollout_ref.actor.use_kl_loss=True \\
    actor_rollout_ref.actor.kl_loss_coef=0.001 \\
    actor_rollout_ref.model.enable_gradient_checkpointing=False \\
    actor_rollout_ref.actor.fsdp_config.param_offload=True \\
    actor_rollout_ref.rollout.name=vllm \\
    actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \\
    actor_rollout_ref.rollout.n=5 \\
    critic.model.fsdp_config.optimizer_offload=True \\
    trainer.n_gpus_per_node=8 \\
    trainer.nnodes=2
"""


def test_verl_overrides_are_read_at_their_full_paths():
    found = {f.name: f.value for f in verl.extract(VERL_COMMAND)}
    assert found["train.objective"] == "grpo"
    assert found["train.batch_size"] == 8             # the per-GPU micro-batch, not data.train_batch_size
    assert found["rl.vllm_memory_share"] == 0.6 and found["rl.num_generations"] == 5
    assert found["rl.prompt_len"] == 512 and found["gen.max_new_tokens"] == 1024
    assert found["train.grad_checkpointing"] is False
    assert found["dist.num_gpus"] == 16
    assert found["rl.beta"] == 0.001
    # param_offload moves the actor's shards to the host only between phases (update_actor loads them back)
    assert isinstance(found["dist.offload_param"], Unknown) and found["dist.offload_param"].forbids("cpu")
    # the critic's optimizer offload is not the actor's
    assert "dist.offload_optimizer" not in found


def test_verl_yaml_is_read_by_nesting_not_by_leaf():
    text = ("actor_rollout_ref:\n  actor:\n    ppo_micro_batch_size_per_gpu: 4  # per GPU\n    fsdp_config:\n"
            "      param_offload: false\n  rollout:\n    gpu_memory_utilization: 0.4\n    free_cache_engine: false\n"
            "critic:\n  ppo_micro_batch_size_per_gpu: 16\ndata:\n  train_batch_size: 512\n")
    found = {f.name: f.value for f in verl.extract(text)}
    assert found["train.batch_size"] == 4
    assert found["rl.vllm_memory_share"] == 0.4 and found["rl.vllm_sleep"] is False


def test_verl_global_batch_is_not_a_per_gpu_batch():
    read = facts_of(reply("python3 -m verl.trainer.main_ppo data.train_batch_size=1024 "
                          "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct"))
    assert read.get("train.batch_size") != 1024


def test_fsdp2_offload_policy_is_a_training_time_offload():
    found = {f.name: f.value for f in verl.extract(
        "python -m verl.trainer.main_ppo actor_rollout_ref.actor.strategy=fsdp2 "
        "actor_rollout_ref.actor.fsdp_config.offload_policy=True")}
    assert found["dist.offload_param"] == "cpu" and found["dist.strategy"] == "fsdp"


# --- what the defaults do to the estimate ------------------------------------------------------------------
GEMMA = "Gemma-3-27B-it QLoRA {} on an A100 40GB, max_seq_length 2048, batch 2, CUDA out of memory"


def test_unsloths_loss_and_offloaded_checkpoints_lower_the_estimate():
    plain, unsloth = reply(GEMMA.format("with peft")), reply(GEMMA.format("with Unsloth"))
    assert unsloth["estimate"]["per_gpu_gib"] < plain["estimate"]["per_gpu_gib"] / 2
    assert unsloth["estimate"]["breakdown"]["logits"] < plain["estimate"]["breakdown"]["logits"]
    assert unsloth["estimate"]["breakdown"]["activations"] < plain["estimate"]["breakdown"]["activations"]
    said = {a["fact"]: a for a in unsloth["assumptions"] if a.get("fact")}
    assert said["train.loss"]["value"] == "fused_linear" and said["train.activation_offload"]["value"] is True
    assert "UnslothFusedLoss" in said["train.loss"]["text"]


def test_unsloth_loads_in_4_bits_with_its_own_lora_defaults():
    s, notes = setup_from_facts({"toolkit.named": "unsloth", "model.name": "llama3-8b"})
    assert s.method == "qlora" and s.lora_rank == 16 and len(s.lora_targets) == 7
    assert s.grad_checkpointing and s.activation_offload and s.loss == "fused_linear"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_first_remedy_for_a_long_unsloth_run_is_not_the_chunked_loss_it_has(lang):
    r = reply("Llama-3-8B QLoRA with Unsloth on a T4, max_seq_length 16384, batch 1, CUDA out of memory", lang)
    assert r["remedies"] and r["remedies"][0]["id"] not in ("chunked_loss", "liger_fused_loss", "cut_cross_entropy",
                                                            "gradient_checkpointing", "activation_offloading")
    texts = " ".join(a["text"] for a in r["assumptions"])
    assert ("Unsloth" in texts) and (("假设" in texts) if lang == "zh" else ("assumed" in texts))


def test_verls_fsdp_shards_the_states_over_its_gpus():
    text = "8×H800, {} GRPO on Qwen2.5-32B, vLLM rollout gpu_memory_utilization 0.6, OOM"
    with_verl, without = reply(text.format("verl")), reply(text.format("a"))
    assert facts_of(with_verl).get("toolkit.named") == "verl"
    assert with_verl["estimate"]["breakdown"]["optimizer"] * 4 < without["estimate"]["breakdown"]["optimizer"]
    said = {a["fact"]: a["value"] for a in with_verl["assumptions"] if a.get("fact")}
    assert said["dist.strategy"] == "fsdp" and said["train.grad_checkpointing"] is True
    assert said["rl.vllm"] == "colocate" and said["rl.vllm_sleep"] is True
    assert with_verl["remedies"][0]["id"] != "use_qlora"


@pytest.mark.parametrize("lang, word", [("en", "verl"), ("zh", "verl")])
def test_verls_assumptions_are_said_in_both_languages(lang, word):
    r = reply("verl 训练 Qwen2.5-7B 的 GRPO，8 张 A100 80G，显存不够" if lang == "zh"
              else "verl GRPO on Qwen2.5-7B, 8x A100 80GB, CUDA out of memory", lang)
    texts = [a["text"] for a in r["assumptions"] if a.get("fact") == "dist.strategy"]
    assert texts and word in texts[0] and (("假设" in texts[0]) if lang == "zh" else ("assumed" in texts[0]))


def test_trl_configs_checkpoint_and_truncate_by_default():
    s, notes = setup_from_facts({"toolkit": "trl", "train.objective": "sft", "model.name": "llama3-8b"})
    assert s.grad_checkpointing is True and s.seq_len == 1024
    assert any("base_config.py" in n.text["en"] for n in notes if n.fact == "train.grad_checkpointing")
    # the plain Trainer keeps its own defaults
    s, _ = setup_from_facts({"train.objective": "sft", "model.name": "llama3-8b"})
    assert s.grad_checkpointing is False and s.seq_len == 2048


def test_a_stated_setting_beats_the_toolkits_default():
    s, _ = setup_from_facts({"toolkit.named": "unsloth", "model.name": "llama3-8b", "train.grad_checkpointing": False,
                             "train.loss": "full", "train.method": "full"})
    assert s.grad_checkpointing is False and s.loss == "full" and s.method == "full"


# --- what a log shows beats the toolkit's default ------------------------------------------------------------
UNSLOTH_BANNER = """==((====))==  Unsloth - 2x faster free finetuning | Num GPUs used = 1
   \\\\   /|    Num examples = 102 | Num Epochs = 5 | Total steps = 60
O^O/ \\_/ \\    Batch size per device = 2 | Gradient accumulation steps = 4
\\        /    Data Parallel GPUs = 1 | Total batch size (2 x 4 x 1) = 8
 "-____-"     Trainable parameters = 41,943,040 of 8,072,204,288 (0.52% trained)
"""


def test_unsloths_banner_gives_the_per_device_batch_not_the_total():
    from oomdoctor.extractors import unsloth
    assert {f.name: f.value for f in unsloth.extract(UNSLOTH_BANNER)} == {"train.batch_size": 2, "train.grad_accum": 4}
    assert facts_of(reply(UNSLOTH_BANNER + "torch.OutOfMemoryError: CUDA out of memory."))["train.batch_size"] == 2
    # the same words without the banner are someone else's log
    assert not list(unsloth.extract("Batch size per device = 2 | Gradient accumulation steps = 4"))


def test_logits_that_ran_out_under_unsloth_mean_it_computes_the_full_loss():
    log = ("from unsloth import FastLanguageModel\nunsloth/llama-3-8b-bnb-4bit QLoRA, max_seq_length 18000\n"
           "    780     def _convert_to_fp32(tensor):\n--> 781         return tensor.float()\n"
           "OutOfMemoryError: CUDA out of memory. Tried to allocate 9.47 GiB. GPU 0 has a total capacity of 14.75 GiB "
           "of which 3.78 GiB is free.")
    r = reply(log)
    read = facts_of(r)
    assert read["oom.site"] == "logits"
    assert read["train.loss"] == "full"
    assert r["remedies"][0]["id"] in ("chunked_loss", "liger_fused_loss", "cut_cross_entropy", "shorten_sequences")


def test_trls_cli_says_the_objective_and_its_defaults_follow():
    read = facts_of(reply("trl sft --model_name_or_path meta-llama/Meta-Llama-3-8B --dataset_name trl-lib/Capybara "
                          "--per_device_train_batch_size 4 on one A100 40GB: CUDA out of memory"))
    assert read["toolkit"] == "trl" and read["train.objective"] == "sft"
    r = reply("trl sft --model_name_or_path meta-llama/Meta-Llama-3-8B --per_device_train_batch_size 4 "
              "on one A100 40GB: CUDA out of memory")
    said = {a["fact"]: a["value"] for a in r["assumptions"] if a.get("fact")}
    assert said["train.seq_len"] == 1024 and said["train.grad_checkpointing"] is True


@pytest.mark.parametrize("recipe, loss", [
    ("lora_finetune_single_device --config llama3_1/8B_lora_single_device", "chunked"),
    ("lora_dpo_single_device --config llama2/7B_lora_dpo_single_device", "full"),
])
def test_torchtunes_shipped_fine_tuning_configs_chunk_the_loss(recipe, loss):
    r = reply(f"tune run {recipe}\nLlama-3-8B on a 4090: CUDA out of memory")
    said = {a["fact"]: a for a in r["assumptions"] if a.get("fact")}
    assert facts_of(r)["toolkit"] == "torchtune"
    assert (said["train.loss"]["value"] if "train.loss" in said else "full") == loss


def test_verl_dynamic_batches_are_packed_by_tokens_not_rows():
    found = {f.name: f.value for f in verl.extract(
        "python3 -m verl.trainer.main_ppo actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 "
        "actor_rollout_ref.actor.use_dynamic_bsz=True actor_rollout_ref.actor.ppo_max_token_len_per_gpu=24000 "
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload=False")}
    assert isinstance(found["train.batch_size"], Unknown)
    assert found["dist.offload_optimizer"] == "none"


@pytest.mark.parametrize("text, toolkit", [("用的是 verl，8 卡 H800", "verl"), ("我们用的 unsloth", "unsloth")])
def test_which_toolkit_is_used_in_chinese_phrasings(text, toolkit):
    assert toolkit_of(text) == (None, toolkit)


def test_unsloth_keeps_short_rows_on_the_gpu():
    short = facts_of(reply("Llama-3-8B QLoRA with Unsloth on a T4, max_seq_length 256, batch 4, CUDA out of memory"))
    long = facts_of(reply("Llama-3-8B QLoRA with Unsloth on a T4, max_seq_length 4096, batch 4, CUDA out of memory"))
    assert short["train.activation_offload"] is False
    assert "train.activation_offload" not in long      # an assumption there, not a fact
