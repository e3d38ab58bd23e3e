"""A consultation reading its user's answers: whole, in their words, re-asked once, never looping,
in the language the consultation has; set-up questions held back when the answer does not need them."""
from pathlib import Path

from oomdoctor.conversation import Conversation

CORPUS = Path(__file__).parent / "corpus"
LITGPT = (CORPUS / "litgpt-303-adapter-3090-fragmentation.log").read_text(encoding="utf-8")
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "23.65 GiB of which 1.02 GiB is free. Of the allocated memory 20.88 GiB is allocated by PyTorch, and 0.28 GiB "
       "is reserved by PyTorch but unallocated.")
ZERO3 = ("Full fine-tuning Llama-3-8B with DeepSpeed ZeRO-3 on A100 40GB cards, seq 2048, micro batch 2, "
         "gradient checkpointing on. CUDA out of memory at the start.")


def talk(*messages, lang=None):
    conversation = Conversation(lang=lang)
    replies = []
    for message in messages:
        conversation.push(message)
        replies.append(conversation.pop())
    return conversation, replies


def facts(reply):
    return {f["name"]: f["value"] for f in reply["facts"]}


def test_an_answer_is_read_whole_and_nothing_it_states_is_reported_as_skipped():
    conversation, (first, *_) = talk("ChatGLM-6B LoRA fine-tuning on a V100 32GB.\n\n"
                                     + (CORPUS / "chatglmft-23-lora-v100-32g-max-len.log").read_text(encoding="utf-8"))
    assert first["questions"][0]["fact"] == "train.seq_len"
    conversation.push("4096 tokens, micro-batch 2, checkpointing enabled")
    reply = conversation.pop()
    got = facts(reply)
    assert got["train.seq_len"] == 4096 and got["train.batch_size"] == 2 and got["train.grad_checkpointing"] is True
    while reply["status"] == "question":
        conversation.push("skip")
        reply = conversation.pop()
    skipped = {a["fact"] for a in reply["assumptions"] if a["fact"] and a["value"] is None}
    assumed = {a["fact"] for a in reply["assumptions"] if a["fact"] and a["value"] is not None}
    stated = {"train.seq_len", "train.batch_size", "train.grad_checkpointing"}
    assert not stated & skipped and not stated & assumed


def test_bf16_answering_how_many_gpus_is_no_count_and_the_question_comes_back_in_other_words():
    conversation, (first,) = talk(ZERO3)
    assert first["questions"][0]["fact"] == "dist.num_gpus"
    conversation.push("bf16")
    again = conversation.pop()
    assert facts(again).get("dist.num_gpus") != 16 and "dist.num_gpus" not in facts(again)
    assert again["questions"][0]["fact"] == "dist.num_gpus" and again["questions"][0]["options"]
    assert again["questions"][0]["text"] != first["questions"][0]["text"] and again["notices"]
    conversation.push("两张")
    reply = conversation.pop()
    assert facts(reply)["dist.num_gpus"] == 2 and facts(reply)["train.precision"] == "bf16"


def test_a_question_is_asked_again_once_and_then_left_unknown_never_a_third_time():
    conversation, _ = talk(OOM, "hmm, the one from the wiki", "the wiki one")
    asked = conversation.state.asked
    assert asked.count("ask_model") == 2
    assert "model.name" in conversation.state.unknown
    assert "not_understood" in conversation.replies[-1]["notes"]


def test_an_explicit_skip_is_unknown_at_once_without_asking_again():
    conversation, (_, reply) = talk(OOM, "no idea")
    assert "model.name" in conversation.state.unknown and conversation.state.asked.count("ask_model") == 1
    assert not reply["questions"] or reply["questions"][0]["fact"] != "model.name"


def test_a_fact_stated_after_a_skip_is_known_and_not_reported_as_skipped():
    conversation, replies = talk(OOM, "skip")
    conversation.push("it's Llama 3 8B with LoRA")
    reply = conversation.pop()
    assert "model.name" not in conversation.state.unknown
    assert "model.name" not in {a["fact"] for a in reply["assumptions"] if a["value"] is None}


def test_a_mention_in_passing_does_not_rewrite_a_known_fact():
    conversation, (first,) = talk("Full fine-tune of Mistral-7B-v0.3 with FSDP on A100 40GB, bf16 weights, seq 4096, "
                                  "batch 2, gradient checkpointing enabled; OOM in the first step.")
    card = facts(first)["gpu.name"]
    conversation.push("A100")
    reply = conversation.pop()
    assert facts(reply)["gpu.name"] == card and facts(reply).get("dist.num_gpus") != 100


def test_short_ascii_answers_keep_a_chinese_consultation_chinese():
    conversation, replies = talk("训练的时候报了这个错，怎么办？\n\n" + OOM, "llama 3 8b", "lora", "2048", "yes", "bf16")
    assert [r["lang"] for r in replies] == ["zh"] * len(replies)


def test_fragmentation_answers_first_and_offers_to_sharpen_the_estimate():
    conversation, (reply,) = talk(LITGPT)
    assert reply["status"] == "report" and reply["diagnoses"][0]["id"] == "fragmentation"
    assert reply["remedies"][0]["id"] == "expandable_segments"
    offer = next(n for n in reply["notices"] if "sharper estimate" in n)
    assert "sequence length" in offer
    conversation.push("It's Llama 2 7B, micro batch 1, block size 512.")
    later = conversation.pop()
    assert facts(later)["model.name"] == "llama-2-7b" and facts(later)["train.seq_len"] == 512
    zh = talk(LITGPT, lang="zh")[1][0]
    assert any("更准确的估算" in n for n in zh["notices"])


def test_a_question_is_asked_only_when_its_answer_would_change_the_reply():
    # Weights alone exceed the card: no sequence length or batch changes what the reply leads with.
    _, (reply,) = talk("QLoRA of Llama-3-70B in 4-bit on my RTX 4090 with gradient checkpointing, batch 1, "
                       "CUDA out of memory")
    assert reply["status"] == "report"
    # Unknown checkpointing decides between the activations and the logits: worth one question.
    _, (asked,) = talk("Qwen2.5-7B LoRA on an RTX 4090, seq len 2048, per_device_train_batch_size 8, OOM right at the start.")
    assert asked["questions"][0]["fact"] == "train.grad_checkpointing"


def test_a_size_answers_which_gpu_as_the_question_invites_in_both_languages():
    """The GPU question's second wording asks "or how many GB each card has?": a size with its unit
    answers it (a bare A100 or V100 names no size), and the consultation goes on instead of asking again;
    a bare number is no size ("2" may be a count)."""
    for first, answer, size in [
        ("在 A100 上全参微调 Qwen2-7B，bf16，batch 4，序列 2048，开了梯度检查点，单卡，CUDA out of memory.", "80G 的", 80),
        ("Full fine-tune of Mistral-7B on a V100, fp16, batch 2, 1024 tokens, checkpointing on, one GPU: "
         "CUDA out of memory", "the 32GB one", 32),
    ]:
        conversation, (asked,) = talk(first)
        assert [q["fact"] for q in asked["questions"]] == ["gpu.name"]
        conversation.push(answer)
        reply = conversation.pop()
        assert facts(reply).get("gpu.memory_gib") == size
        assert all(q["fact"] != "gpu.name" for q in reply.get("questions", [])), reply["text"][:300]
        assert reply["lang"] == asked["lang"]
