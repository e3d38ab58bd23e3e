"""The command line, run as users run it: a subprocess with files and pipes."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOGS = Path(__file__).parent / "fixtures" / "logs"


def run(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "oomdoctor", *args], cwd=ROOT, input=stdin, capture_output=True,
                          text=True, timeout=120)


def test_diagnose_file_json():
    out = run("diagnose", str(LOGS / "oom_killer.txt"), "--json")
    assert out.returncode == 0, out.stderr
    reply = json.loads(out.stdout)
    assert reply["oom_kind"] == "host" and reply["questions"] == []
    assert reply["diagnoses"][0]["id"] == "host_oom_killer"


def test_diagnose_stdin_in_chinese():
    out = run("diagnose", "-", "--lang", "zh", stdin=(LOGS / "cuda_oom_new.txt").read_text())
    assert out.returncode == 0
    assert "显存" in out.stdout and "## " in out.stdout


def test_diagnose_rejects_binary(tmp_path):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00\x01\x02" * 100)
    out = run("diagnose", str(junk))
    assert out.returncode != 0 and "NUL" in out.stderr


def test_estimate_json_answers_the_inputs():
    out = run("estimate", "--json", "--model", "Meta-Llama-3.1-8B", "--method", "full", "--batch-size", "1",
              "--seq-len", "2048", "--gpu", "a100 40g", "--optimizer", "adamw_8bit", "--zero-stage", "3",
              "--num-gpus", "4", "--strategy", "deepspeed", "--grad-checkpointing", "true")
    assert out.returncode == 0, out.stderr
    est = json.loads(out.stdout)["estimate"]
    assert est["gpu_capacity_gib"] < 41 and est["per_gpu_gib"] > 0
    assert set(est["breakdown"]) == {"weights", "gradients", "optimizer", "activations", "logits", "rollouts", "overhead"}


def test_estimate_8b_full_adamw_is_far_above_40gb():
    out = run("estimate", "--model", "llama-3-8b", "--method", "full", "--load-dtype", "bf16", "--strategy", "deepspeed")
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()[0]
    per_gpu = float(first.split("per GPU: ")[1].split(" GiB")[0])
    assert per_gpu > 100
    assert "16 B per trained parameter" in out.stdout


def test_estimate_bad_input():
    out = run("estimate", "--model", "definitely-not-a-model")
    assert out.returncode == 2 and "unknown model" in out.stderr


def test_chat_conversation_through_a_pipe():
    script = (LOGS / "cuda_oom_new.txt").read_text() + "\n\nllama-3-8b lora seq 2048 batch 4 on a 4090\n\nskip\n\nskip\n\n/quit\n"
    out = run("chat", stdin=script)
    assert out.returncode == 0, out.stderr
    assert "Which model" in out.stdout
    assert "Remedies" in out.stdout and "estimate after" in out.stdout


def test_estimate_evaluation_flags_price_the_kept_logits():
    base = ["estimate", "--json", "--model", "llama-3-8b", "--method", "lora", "--gpu", "a100-80gb", "--seq-len", "2048",
            "--eval-batch-size", "8", "--compute-metrics", "true", "--eval-samples", "500"]
    kept = json.loads(run(*base).stdout)
    bounded = json.loads(run(*base, "--eval-accumulation-steps", "2", "--preprocess-logits", "yes").stdout)
    assert kept["estimate"]["peak_moment"] == "evaluation" and kept["estimate"]["fits"] is False
    assert bounded["estimate"]["fits"] is True
    assert "eval_accumulation_steps" in [w["remedy"] for w in kept["whatif"]]
    out = run(*base, "--compute-metrics", "maybe")
    assert out.returncode == 2 and "expected true or false" in out.stderr


def test_estimate_text_follows_the_language_and_survives_a_closed_pipe():
    zh = run("estimate", "--model", "llama3-8b", "--method", "lora", "--gpu", "a100-80gb", "--lang", "zh")
    assert zh.returncode == 0 and zh.stdout.startswith("每卡：") and "权重" in zh.stdout and "假设" in zh.stdout
    piped = subprocess.run(f"{sys.executable} -m oomdoctor estimate --model llama3-8b | head -1", shell=True,
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert piped.stdout.startswith("per GPU:") and "Traceback" not in piped.stderr


def test_a_missing_or_unreadable_input_is_one_line_not_a_traceback(tmp_path):
    for target, said in ((tmp_path / "nope.txt", "no such file"), (tmp_path, "is a folder")):
        out = run("diagnose", str(target))
        assert out.returncode != 0 and said in out.stderr
        assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    out = run("estimate", "--model", "llama-3-8b", "--config", str(tmp_path / "missing.json"))
    assert out.returncode != 0 and "no such file" in out.stderr and "Traceback" not in out.stderr


def test_a_zero_stage_implies_deepspeed_and_contradicting_it_is_refused():
    base = ("estimate", "--json", "--model", "llama-3-8b", "--method", "full", "--num-gpus", "4")
    plain = json.loads(run(*base).stdout)
    zero = run(*base, "--zero-stage", "2")
    assert zero.returncode == 0, zero.stderr
    reply = json.loads(zero.stdout)
    assert {"name": "dist.strategy", "value": "deepspeed"} in reply["facts"]
    assert any(a["fact"] == "dist.strategy" and "zero_stage" in a["text"] for a in reply["assumptions"])
    # ZeRO-2 shards gradients and optimizer states over the 4 GPUs: far below DDP's full replica.
    assert reply["estimate"]["per_gpu_gib"] < 0.6 * plain["estimate"]["per_gpu_gib"]
    clash = run(*base, "--zero-stage", "2", "--strategy", "fsdp")
    assert clash.returncode == 2 and "'zero_stage' needs strategy 'deepspeed'" in clash.stderr


def test_estimate_help_says_values_units_and_defaults():
    out = run("estimate", "--help")
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    assert "--method {full,lora,qlora,freeze,prefix}" in text and "one of: full, lora, qlora, freeze, prefix" in text
    assert "implies --method prefix" in text
    assert "default: qlora with --load-dtype nf4/fp4/int8, else full" in text
    assert "--gpu-memory-gib X memory of one GPU; in GiB" in text
    assert "default: single with --num-gpus 1, else ddp" in text
    assert "implies --strategy deepspeed" in text
    assert "--json print the reply as JSON" in text
    assert "sets train.method" not in text
