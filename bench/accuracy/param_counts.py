"""Reference parameter counts for every catalog model, from transformers itself.

Builds each knowledge/models.yaml entry on the meta device (no weights, no
downloads, no network) from the same config.json keys the catalog reads: with
``AutoModelForCausalLM.from_config``, or ``AutoModelForImageTextToText`` for a
vision-language model and ``AutoModelForSeq2SeqLM`` for T5; counts its
parameters and writes ``bench/accuracy/data/param_counts.json``; prints catalog
vs transformers for every model.  tests/test_catalog.py compares the catalog
against that file.

Gemma 3n is counted as its language model (Gemma3nForCausalLM from the text_config): the catalog leaves its vision
tower (timm's MobileNetV5) and audio encoder out, and says so in the estimate.

Remote-code architectures are counted with the transformers class whose
parameter layout is identical (see ``tf_config``):
  * chatglm (ChatGLM3-6B): GlmForCausalLM -- query_key_value == q/k/v_proj with
    bias, dense == o_proj (no bias), dense_h_to_4h == gate_up_proj, RMSNorms,
    untied output_layer.
  * baichuan (Baichuan2): LlamaForCausalLM -- W_pack == q/k/v_proj (no bias),
    NormHead == lm_head weight.
  * internlm2 (InternLM2.5): LlamaForCausalLM -- wqkv == q/k/v_proj, wo ==
    o_proj, w1/w3/w2 == gate/up/down_proj.
  * internlm (InternLM 1): LlamaForCausalLM with attention_bias -- q/k/v/o_proj
    with the config's bias, gate/up/down_proj without.
  * qwen (Qwen 1): Qwen2ForCausalLM -- c_attn == q/k/v_proj with bias, c_proj
    == o_proj without, w2/w1/c_proj == gate/up/down_proj at intermediate_size/2,
    RMSNorms, untied lm_head.

  * internvl_chat (InternVL 2.5 / 3 as their checkpoints' remote code builds
    them): InternVLForConditionalGeneration, transformers' own class for the
    converted (-hf) checkpoints -- the same InternViT, pixel shuffle and
    projector, its fused qkv split into q/k/v_proj, ls1/ls2 == lambda_1/2,
    mlp1 == multi_modal_projector (see ``internvl_native``).

Usage: bench/accuracy/.venv/bin/python bench/accuracy/param_counts.py [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "bench" / "accuracy" / "data" / "param_counts.json"

from oomdoctor.catalog import ModelShape, load_models, to_hf_config  # noqa: E402
from oomdoctor.catalog.hf_config import MULTIMODAL_TYPES  # noqa: E402
from oomdoctor.catalog.models import catalog_config  # noqa: E402

# remote-code model types -> transformers model type with the same parameter layout
SUBSTITUTES = {"chatglm": "glm", "baichuan": "llama", "internlm2": "llama", "internlm": "llama", "qwen": "qwen2"}
# model_type spellings of a config.json that transformers builds under another name (same layout)
RENAMED = {"kimi_k2": "deepseek_v3", "RefinedWebModel": "falcon", "RefinedWeb": "falcon"}
# key names of the first Falcon configs (tiiuae's RWConfig.attribute_map) that FalconConfig no longer maps
LEGACY_KEYS = {"falcon": {"n_head": "num_attention_heads", "n_layer": "num_hidden_layers", "n_head_kv": "num_kv_heads"}}


def tf_config(shape: ModelShape) -> tuple[str, dict]:
    """(transformers model_type, config kwargs) that rebuild this shape."""
    mt = shape.model_type
    if mt in SUBSTITUTES:
        target = SUBSTITUTES[mt]
        kw = dict(
            num_hidden_layers=shape.layers, hidden_size=shape.hidden, num_attention_heads=shape.heads,
            num_key_value_heads=shape.kv_heads, head_dim=shape.head_dim, intermediate_size=shape.intermediate,
            vocab_size=shape.vocab, tie_word_embeddings=shape.tied_embeddings,
            attention_bias=shape.attention_bias, max_position_embeddings=shape.max_position or 4096,
        )
        if target == "llama":
            if shape.attention_bias != shape.o_bias:
                raise ValueError(f"{shape.id}: LlamaConfig cannot express q/k/v bias without o bias")
            kw["mlp_bias"] = shape.mlp_bias
        if target == "qwen2" and not (shape.attention_bias and not shape.o_bias and not shape.mlp_bias):
            raise ValueError(f"{shape.id}: Qwen2Config has q/k/v biases only")
        return target, kw
    cfg = to_hf_config(shape)
    mt = cfg.pop("model_type")
    if not cfg.get("max_position_embeddings"):
        cfg["max_position_embeddings"] = 4096
    return mt, cfg


def internvl_native(kw: dict) -> dict:
    """An InternVL remote-code config (``internvl_chat``) as transformers' InternVLConfig keys: the vision block's
    keys under their native names, llm_config as text_config, the language model's tying said outright (the
    composite class ties by default)."""
    v, text = kw["vision_config"], dict(kw["llm_config"])
    vision = {"hidden_size": v["hidden_size"], "intermediate_size": v["intermediate_size"],
              "num_hidden_layers": v["num_hidden_layers"], "num_attention_heads": v["num_attention_heads"],
              "attention_bias": v.get("qkv_bias", False), "use_qk_norm": v.get("qk_normalization", False),
              "norm_type": v.get("norm_type", "layer_norm"), "num_channels": v.get("num_channels", 3),
              "image_size": kw.get("force_image_size") or v.get("image_size", 448), "patch_size": v.get("patch_size", 14)}
    return {"vision_config": vision, "text_config": text, "downsample_ratio": kw.get("downsample_ratio", 0.5),
            "tie_word_embeddings": bool(text.get("tie_word_embeddings", False))}


def from_catalog_config(shape: ModelShape) -> tuple[str, dict] | None:
    """(model_type, config kwargs) from the config.json keys a generated entry was built from."""
    config = catalog_config(shape.id)
    if config is None or shape.model_type in SUBSTITUTES:
        return None
    kw = {k: v for k, v in config.items() if k != "model_type"}
    mt = RENAMED.get(config["model_type"], config["model_type"])
    if mt == "mistral3" and "tie_word_embeddings" not in kw:
        # Mistral3Config (transformers 5.24) ties lm_head when the key is left out, but from_pretrained keeps the
        # separate lm_head every Mistral Small 3.x checkpoint stores (its text-only copies say false): count that
        kw["tie_word_embeddings"] = False
    if mt == "gemma3n":
        # Gemma 3n's vision tower is built by timm (which needs torchvision, not installed here) and the catalog does
        # not model its towers: the language model with its lm_head is what is compared (Gemma3nForCausalLM)
        text = dict(kw["text_config"])
        text.pop("model_type", None)
        text.setdefault("tie_word_embeddings", kw.get("tie_word_embeddings", True))
        return "gemma3n_text", text
    if mt == "internvl_chat":
        mt, kw = "internvl", internvl_native(kw)
    for old, new in LEGACY_KEYS.get(mt, {}).items():
        if old in kw:
            kw.setdefault(new, kw.pop(old))
    return mt, kw


def count(shape: ModelShape):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText, AutoModelForSeq2SeqLM

    mt, kw = from_catalog_config(shape) or tf_config(shape)
    kw.setdefault("pad_token_id", None)
    config = AutoConfig.for_model(mt, **kw)
    auto = (AutoModelForImageTextToText if mt in MULTIMODAL_TYPES and "vision_config" in kw
            else AutoModelForSeq2SeqLM if mt in ("t5", "mt5") else AutoModelForCausalLM)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.device("meta"):
            model = auto.from_config(config)
    n = sum(p.numel() for p in model.parameters())  # tied weights are yielded once
    return n, type(model).__name__, mt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only compare, do not write the JSON file")
    ap.add_argument("--only", nargs="*", help="catalog ids to count")
    args = ap.parse_args(argv)

    import torch
    import transformers
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    models = load_models()
    ids = args.only or list(models)
    results = {}
    mismatches = 0
    print(f"{'model':34} {'catalog':>17} {'transformers':>17}  class")
    for mid in ids:
        shape = models[mid]
        n, cls, mt = count(shape)
        ours = shape.param_count()
        flag = "" if n == ours else f"   MISMATCH ({ours - n:+,})"
        mismatches += bool(flag)
        print(f"{mid:34} {ours:>17,} {n:>17,}  {cls}{flag}")
        results[mid] = {
            "count": n,
            "class": cls,
            "transformers_model_type": mt,
            "catalog_model_type": shape.model_type,
            "substitute": shape.model_type in SUBSTITUTES,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
        }
    if not args.check:
        data = {
            "generated_by": "bench/accuracy/param_counts.py",
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "models": dict(sorted(results.items())) if not args.only else results,
        }
        if args.only and OUT.exists():
            old = json.loads(OUT.read_text())
            old["models"].update(results)
            data["models"] = dict(sorted(old["models"].items()))
        OUT.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        print(f"wrote {OUT.relative_to(ROOT)}")
    print(f"{len(ids)} models, {mismatches} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
