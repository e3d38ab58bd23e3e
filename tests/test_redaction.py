"""Secrets and personal details are replaced before anything stores or echoes a message."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from oomdoctor.redaction import found, redact, secret_key

CORPUS = Path(__file__).parent / "corpus"

# (what, text with the secret in context, the secret itself, what must stay)
SECRETS = [
    ("hf token in env", "export HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
     "export HF_TOKEN="),
    ("hf token in login", "huggingface-cli login --token hf_QwErTyUiOpAsDfGhJkLzXcVbNm12345678 --add-to-git-credential",
     "hf_QwErTyUiOpAsDfGhJkLzXcVbNm12345678", "--add-to-git-credential"),
    ("hf token in python", 'model = AutoModel.from_pretrained("meta-llama/Llama-2-7b", token="hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa98765432")',
     "hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa98765432", "meta-llama/Llama-2-7b"),
    ("openai key", "OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789ab", "sk-abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789ab",
     "OPENAI_API_KEY="),
    ("openai project key", "client = OpenAI(api_key='sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90_Uv-Wx')",
     "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90_Uv-Wx", "client = OpenAI("),
    ("anthropic key", "ANTHROPIC_API_KEY=sk-ant-api03-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90Uv12Wx34-Yz56AA",
     "sk-ant-api03-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90Uv12Wx34-Yz56AA", "ANTHROPIC_API_KEY="),
    ("aws key id", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE", "aws_access_key_id"),
    ("aws secret", "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "aws_secret_access_key="),
    ("github classic", "git remote set-url origin https://ghp_1234567890abcdefghijklmnopqrstuvwxyzAB@github.com/me/repo.git",
     "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB", "github.com/me/repo.git"),
    ("github oauth", "GH_TOKEN: gho_16C7e42F292c6912E7710c838347Ae178B4a", "gho_16C7e42F292c6912E7710c838347Ae178B4a", "GH_TOKEN"),
    ("github fine-grained", "token github_pat_11AAAAAAA0aaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
     "github_pat_11AAAAAAA0aaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "token"),
    ("slack bot", "SLACK_BOT_TOKEN=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
     "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "SLACK_BOT_TOKEN="),
    ("slack user", "using xoxp-123456789012-123456789012-1234567890123-0123456789abcdef0123456789abcdef now",
     "xoxp-123456789012-123456789012-1234567890123-0123456789abcdef0123456789abcdef", "using"),
    ("slack app", "SLACK_APP_TOKEN=xapp-1-A0123456789-1234567890123-0123456789abcdef", "xapp-1-A0123456789-1234567890123-0123456789abcdef",
     "SLACK_APP_TOKEN"),
    ("slack webhook", "curl -X POST https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX -d x",
     "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX", "curl -X POST"),
    ("wandb env", "WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567 python train.py",
     "0123456789abcdef0123456789abcdef01234567", "python train.py"),
    ("wandb login", "$ wandb login 89abcdef0123456789abcdef0123456789abcdef", "89abcdef0123456789abcdef0123456789abcdef", "wandb login"),
    ("url password", "DATABASE_URL=postgresql://trainer:Sup3r-S3cret!@db.internal:5432/runs", "Sup3r-S3cret!",
     "db.internal:5432/runs"),
    ("url password https", "pip install git+https://alice:p4ssw0rd@git.example.org/ml/lib.git", "p4ssw0rd", "git.example.org/ml/lib.git"),
    ("password assignment", "db_password = 'correct horse battery'", "correct horse battery", "db_password"),
    ("token assignment", "token: 4f7a9c1e2b3d", "4f7a9c1e2b3d", "token:"),
    ("api_key assignment", '{"api_key": "AbC123xyz789"}', "AbC123xyz789", '"api_key"'),
    ("flag secret", "python run.py --hub_token abcDEF123456 --push_to_hub", "abcDEF123456", "--push_to_hub"),
    ("email", "Reported-by: Alice Smith <alice.smith+ml@example-lab.co.uk>", "alice.smith+ml@example-lab.co.uk", "Reported-by"),
    ("home linux", 'File "/home/alice/venv/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1501',
     "alice", "/venv/lib/python3.10/site-packages/torch/nn/modules/module.py"),
    ("home mac", "/Users/bob.jones/miniforge3/envs/mlx/bin/python", "bob.jones", "/miniforge3/envs/mlx/bin/python"),
    ("home windows", r"C:\Users\carol\AppData\Local\Programs\Python\Python311\python.exe", "carol", r"\AppData\Local"),
    ("home windows escaped", r'"C:\\Users\\dave\\train.py"', "dave", r"\\train.py"),
    ("jwt", "Authorization: Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
     "eyJzdWIiOiIxMjM0NTY3ODkwIn0", "Authorization: Bearer"),
    ("bearer opaque", "Authorization: Bearer 7f9a2c4e6b8d0f1a3c5e7b9d", "7f9a2c4e6b8d0f1a3c5e7b9d", "Authorization"),
    ("rsa private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
     "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n-----END RSA PRIVATE KEY-----\nTraceback (most recent call last):",
     "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun", "Traceback (most recent call last):"),
    ("openssh private key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
     "-----END OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ", ""),
    ("google api key", "GOOGLE_API_KEY=AIzaSyA-1234567890abcdefghijklmnopqrstu", "AIzaSyA-1234567890abcdefghijklmnopqrstu", "GOOGLE_API_KEY"),
]


@pytest.mark.parametrize("what, text, secret, kept", SECRETS, ids=[s[0] for s in SECRETS])
def test_each_secret_is_redacted(what, text, secret, kept):
    result = redact(text)
    assert secret not in result.text, result.text
    assert kept in result.text
    assert result.total >= 1
    assert sum(found(result.text).values()) >= 1
    assert len(result.text) <= len(text)
    # Redacting twice changes nothing more.
    assert redact(result.text).text == result.text


NOT_SECRETS = [
    "commit 3e9c2e4f0b6f8a6d1c2e3f4a5b6c7d8e9f0a1b2c (HEAD -> main)",
    "Merge: a75db93 cd0db90",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.64 GiB "
    "of which 1.06 GiB is free. Process 224 has 22.57 GiB memory in use.",
    "RuntimeError: CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be asynchronously reported",
    "| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2 |\n|  0  NVIDIA A100-SXM4-80GB  On | 00000000:07:00.0 Off |",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "/usr/lib/python3/dist-packages/torch/cuda/__init__.py /opt/conda/lib/python3.10/site-packages/deepspeed/runtime/engine.py",
    "/root/.cache/huggingface/hub/models--meta-llama--Llama-2-7b-hf /workspace/LLaMA-Factory/src/train.py",
    "pad_token=<unk> eos_token: '</s>' bos_token_id=1 max_new_tokens=512 tokenizer=llama use_auth_token=True",
    "--per_device_train_batch_size 4 --gradient_checkpointing True --learning_rate 2e-5 --lora_r 16",
    "git clone git@github.com:hiyouga/LLaMA-Factory.git",
    "@torch.no_grad()\ndef generate(self, input_ids):",
    "task_memcg=/user.slice/user-1000.slice/user@1000.service/app.slice",
    "token embeddings resized to 32001; special tokens: 2",
    "export HF_TOKEN=$HF_TOKEN; password: ${DB_PASSWORD}; api_key=<your key here>",
    "[2023-07-12 17:27:22,442] [INFO] [real_accelerator.py:110:get_accelerator] Setting ds_accelerator to cuda",
    "model.layers.31.self_attn.q_proj.lora_A.default.weight torch.Size([16, 4096])",
    "http://localhost:8000/api/v1/consultations/3e9c2e4f0b6f8a6d1c2e3f4a5b6c7d8e",
    "wandb: Run data is saved locally in /workspace/wandb/run-20240101_120000-abc123de",
]


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_what_is_not_a_secret_survives(text):
    result = redact(text)
    assert result.text == text, result.counts
    assert result.total == 0


def test_secret_keys():
    for key in ("password", "DB_PASSWORD", "hf_token", "HUGGING_FACE_HUB_TOKEN", "api_key", "OPENAI_API_KEY",
                "aws_secret_access_key", "client_secret", "--hub-token", "token", "WANDB_API_KEY", "secret"):
        assert secret_key(key), key
    for key in ("pad_token", "eos_token", "max_new_tokens", "tokenizer", "bos_token_id", "key", "monkey",
                "private_key_path", "password_file", "num_tokens", "token_type_ids"):
        assert not secret_key(key), key


def test_counts_by_kind():
    text = ("HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567\nmail bob@example.com and /home/bob/x.py, "
            "/home/bob/y.py")
    result = redact(text)
    # One user name seen twice is one value.
    assert result.counts == {"hf_token": 1, "email": 1, "user": 1}
    assert found(result.text) == {"email": 1, "hf_token": 1, "user": 1}


def test_the_corpus_keeps_its_meaning():
    """Redacting the real logs changes no fact the extractors read from them."""
    from oomdoctor import knowledge
    from oomdoctor.observation import observe

    kb = knowledge.default()
    changed = 0
    for path in sorted(CORPUS.glob("*.log")):
        text = path.read_text(encoding="utf-8")
        result = redact(text)
        if not result.total:
            continue
        changed += 1
        before = {(o.name, repr(o.value)) for o in observe(text, kb)}
        after = {(o.name, repr(o.value)) for o in observe(result.text, kb)}
        assert before == after, path.name
    assert changed >= 10  # many real logs hold a home directory


ADVERSARIAL = ["1", " ", "a", "a=", "a=b ", "eyJ", "eyJaaaaaaaa.", "sk-", "a@", "a@b.", "--token ", "/home/",
               "a://b:c", "-----BEGIN PRIVATE KEY-----\n", "Bearer ", "C:\\Users\\", "ghp_", "xoxb-", '"', "{",
               # Dense real finds: every unit is replaced, and the text must still not grow.
               "password=x\n", "a@b.co ", "/home/al/x ", "s://u:p@h ", "-----END PRIVATE KEY-----\n", "token: ab ",
               "login x password y\n", "wandb login " + "0123456789abcdef" * 2 + "01234567\n"]


@pytest.mark.parametrize("unit", ADVERSARIAL)
def test_adversarial_runs_are_bounded(unit):
    """Long runs of what the patterns start with: no error, output no longer than the input allows."""
    text = unit * (200_000 // len(unit))
    result = redact(text)
    assert isinstance(result.text, str)
    # A marker is never longer than what it replaces.
    assert len(result.text) <= len(text)
    assert redact(result.text).text == result.text


PIECES = ["token", "password", "api_key", "HF_TOKEN", "--", "-", ":", "=", " ", "  ", "\n", '"', "'", "$", "<", ">",
          "/home/", "/Users/", "C:\\Users\\", "@", ".", "com", "://", "hf_", "sk-", "ghp_", "xoxb-", "eyJ", "Bearer ",
          "wandb login ", "-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----", "true", "abc123", "x" * 40,
          "0123456789abcdef" * 3, "AKIA", "ABCDEFGHIJKLMNOP", ",", "{", "}", "[", "]",
          # What the detectors added in the second pass react to.
          "wandb.login(", "machine ", "login ", "password ",
          "AccountKey=", "&sig=", "?", "Authorization: ", "token ", "\\n", "\\", "clientSecret", "is ", "ENV ",
          "<password>", "</password>", "hf_AbCdEfGhIjKlMnOpQr", "Q~", ":AA", "-us1", "张", "密码：", "`", ";"]


def test_a_key_inside_another_keys_value_is_still_found():
    """Found by atheris: `dhh    l token": ce` once hid the token behind a `key value` match."""
    text = 'L/home/h  dhh    l token": ce, call'
    once = redact(text)
    assert "ce," not in once.text and redact(once.text).text == once.text


def test_a_key_right_after_a_replaced_quoted_value():
    """Found by atheris: `"token: "a"token: "b"` once redacted only the first."""
    once = redact('x"token: "aaaa"token: "bbbb":,1')
    assert "bbbb" not in once.text and redact(once.text).text == once.text


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(alphabet=st.sampled_from(list("aZ09_-.:=/@\\ \n\"'<>{}hfskxopABIJ")), max_size=400),
                 st.lists(st.sampled_from(PIECES), max_size=40).map("".join)))
def test_redaction_is_idempotent_and_total(text):
    once = redact(text)
    assert redact(once.text).text == once.text
    assert len(once.text.encode()) <= len(text.encode())
    assert (once.text != text) == (once.total > 0)


def _repeats(pattern: str):
    """(min, max, nested) for every repetition in a regex, read from Python's own parser."""
    import re._parser as parser

    def walk(items, depth):
        for op, arg in items:
            name = str(op)
            if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                low, high, sub = arg
                yield low, high, depth
                yield from walk(sub, depth + 1)
            elif name == "SUBPATTERN":
                yield from walk(arg[-1], depth)
            elif name == "BRANCH":
                for branch in arg[1]:
                    yield from walk(branch, depth)
            elif name in ("ASSERT", "ASSERT_NOT"):
                yield from walk(arg[1], depth)
    return list(walk(parser.parse(pattern).data, 0))


def test_provider_formats_are_bounded_and_flat():
    """Knowledge-base regexes: every quantifier bounded, none inside another, so each runs in linear time."""
    from oomdoctor.redaction.formats import catalog

    for fmt in catalog().formats:
        repeats = _repeats(fmt.regex.pattern)
        assert all(high <= 8192 for _, high, _ in repeats), fmt.regex.pattern
        assert all(depth == 0 for _, _, depth in repeats), fmt.regex.pattern


def test_every_regex_of_the_redaction_is_bounded():
    import re

    from oomdoctor.redaction import detectors, keys, markers

    patterns = [value for module in (detectors, keys, markers) for value in vars(module).values()
                if isinstance(value, re.Pattern)]
    patterns += [value for value in vars(detectors)["_QUOTED"].values()]
    assert len(patterns) > 30
    for pattern in patterns:
        assert all(high <= 65536 for _, high, _ in _repeats(pattern.pattern)), pattern.pattern


def test_every_kind_is_named_in_both_languages():
    from oomdoctor.redaction.formats import catalog

    labels = catalog().labels
    assert {fmt.kind for fmt in catalog().formats} <= set(labels)
    for kind in ("password", "secret", "api_key", "key", "token", "signature", "private_key", "email", "user"):
        assert kind in labels
    assert all(label["en"] and label["zh"] and label["en"] != label["zh"] or kind == "jwt"
               for kind, label in labels.items())


@pytest.mark.parametrize("broken, complaint", [
    ("formats: [{kind: nobody, prefix: 'x_', regex: '[a-z]{4}'}]", "without a label"),
    ("formats: [{kind: password, prefix: 'x_', regex: '[a-z]{4}', left: '[0-9]+'}]", "one class and a count"),
])
def test_a_broken_formats_file_is_refused(tmp_path, broken, complaint):
    from oomdoctor.redaction.formats import catalog

    path = tmp_path / "secrets.yaml"
    path.write_text("kinds: {password: {en: password, zh: 密码}}\n" + broken + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=complaint):
        catalog(path)


def test_json_is_redacted_in_context_at_any_depth():
    from oomdoctor.redaction import redact_json

    body = {"model": ["llama", "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"], "n": 3,
            "config": {"hub_token": "abc123", "pad_token": "<pad>", "argv": ["--password", "hunter2", "--bf16"],
                       "deep": [[{"clientSecret": "s3cr3t-value"}]]},
            "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": True}
    out = redact_json(body)
    text = str(out)
    for secret in ("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", "abc123", "hunter2", "s3cr3t-value"):
        assert secret not in text
    assert out["n"] == 3 and out["config"]["pad_token"] == "<pad>" and out["config"]["argv"][-1] == "--bf16"
    assert out["model"][0] == "llama"
