"""Build knowledge/models.yaml from real config.json files.

The inputs are listed in ``knowledge/catalog_sources.yaml``: for every model, the
public repository, commit and path where a copy of its Hugging Face
``config.json`` was found (or, for MLC LLM's presets, the preset's key in
``python/mlc_llm/model/model_preset.py``), its Hub id, family and the names people
call it.  The script reads each file from a local snapshot of that repository
(``git show <commit>:<path>`` under ``--mirrors``, as the ``fetch`` tool leaves
them: ``<owner>+<name>/repo``), keeps the keys the architecture depends on
(``ARCH_KEYS``: the catalog stores those figures, not the file), checks that
``oomdoctor.catalog`` reads them, and writes one entry per model with the
config's source.  Models whose config.json could not be found stay as the
hand-typed entries under ``typed:``, marked as such.

Usage::

    python scripts/build_catalog.py [--mirrors /work/.mirror] [--check]

``--check`` compares with the committed file instead of writing it.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from oomdoctor.catalog.hf_config import from_hf_config  # noqa: E402

SOURCES = ROOT / "knowledge" / "catalog_sources.yaml"
# Copies read from repositories too large to mirror (``vendored:`` items): their literal values, as data.
VENDORED = ROOT / "knowledge" / "catalog_configs"
OUT = ROOT / "knowledge" / "models.yaml"

# The keys of a config.json that decide the architecture (and so the parameter count and the memory), in
# every family the catalog reads; the rest (token ids, rope scaling, dropout, initialisation) is left out.
ARCH_KEYS = frozenset({
    "model_type", "architectures", "torch_dtype", "dtype", "pad_token_id",
    "hidden_size", "n_embd", "n_embed", "d_model", "intermediate_size", "intermediate_size_mlp", "ffn_dim",
    "ffn_hidden_size", "n_inner", "d_ff", "d_kv", "num_hidden_layers", "n_layer", "num_layers",
    "num_decoder_layers", "num_attention_heads", "n_head", "num_heads", "num_key_value_heads", "num_kv_heads",
    "n_head_kv", "multi_query", "multi_query_attention", "multi_query_group_num", "new_decoder_architecture",
    "use_qkv_bias", "use_bias", "no_bias", "qk_layernorm", "use_parallel_residual",
    "parallel_attn", "num_ln_in_parallel_attn", "head_dim", "kv_channels", "vocab_size", "padded_vocab_size",
    "tie_word_embeddings", "attention_bias", "bias", "mlp_bias", "qkv_bias", "add_qkv_bias", "add_bias_linear",
    "enable_bias", "lm_head_bias", "rmsnorm", "max_position_embeddings", "n_positions", "seq_length",
    "model_max_length", "sliding_window", "word_embed_proj_dim", "do_layer_norm_before",
    "_remove_final_layer_norm", "feed_forward_proj", "relative_attention_num_buckets", "num_local_experts",
    "num_experts", "num_experts_per_tok", "experts_per_token", "moe_intermediate_size",
    "shared_expert_intermediate_size", "decoder_sparse_step", "mlp_only_layers", "n_routed_experts",
    "n_shared_experts", "first_k_dense_replace", "moe_layer_freq", "q_lora_rank", "kv_lora_rank",
    "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "n_group", "topk_group", "use_qk_norm",
    "interleave_moe_layer_step", "moe_layers", "quantization_config", "text_config", "vision_config",
    "query_pre_attn_scalar", "dropout_rate", "output_router_logits", "mm_tokens_per_image", "vision_feature_select_strategy", "vision_feature_layer",
    "multimodal_projector_bias", "image_token_index", "image_token_id", "image_grid_pinpoints",
    # vision towers
    "depth", "embed_dim", "mlp_ratio", "in_channels", "num_channels", "patch_size", "image_size",
    "spatial_merge_size", "temporal_patch_size", "out_hidden_size", "fullatt_block_indexes", "window_size",
    "num_position_embeddings", "deepstack_visual_indexes", "vision_use_head",
    # Mllama: cross-attention layers in the language model; local and global layers, tiles and aspect ratios in
    # the vision encoder
    "cross_attention_layers", "num_global_layers", "attention_heads", "vision_output_dim", "max_num_tiles",
    "supported_aspect_ratios",
    # Gemma 3n: per-layer embeddings, AltUp, LAuReL, KV-sharing layers, the top-k sparsity of the first layers'
    # feed-forward; its towers (the timm architecture of the vision encoder, the audio encoder)
    "vocab_size_per_layer_input", "hidden_size_per_layer_input", "altup_num_inputs", "laurel_rank",
    "num_kv_shared_layers", "activation_sparsity_pattern", "audio_config", "architecture",
    # InternVL: the remote code's llm_config, InternViT's switches, the pixel shuffle and the tiling
    "llm_config", "downsample_ratio", "force_image_size", "dynamic_image_size", "min_dynamic_patch", "max_dynamic_patch",
    "use_thumbnail", "qkv_bias", "qk_normalization", "norm_type", "use_qk_norm", "use_mask_token", "use_mean_pooling",
})
# What of quantization_config matters: how the published weights are stored.
QUANT_KEYS = frozenset({"quant_method"})
# Keys MLC LLM adds to the configs it vendors (mlc_llm/model/model_preset.py); not part of the model's config.
MLC_KEYS = frozenset({"context_window_size", "prefill_chunk_size", "sliding_window_size", "attention_sink_size",
                      "tensor_parallel_shards", "max_batch_size"})


def architecture(config: dict[str, Any]) -> dict[str, Any]:
    """The architecture keys of a config (nested text and vision configs included), in file order."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if key not in ARCH_KEYS:
            continue
        if key in ("text_config", "vision_config", "audio_config", "llm_config") and isinstance(value, dict):
            value = architecture(value)
        elif key == "quantization_config" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k in QUANT_KEYS}
        out[key] = value
    return out


# transformers configuration classes -> model_type, for configs written as constructor calls
CONFIG_CLASSES = {"LlamaConfig": "llama", "Qwen2Config": "qwen2", "Qwen3Config": "qwen3", "Qwen3MoeConfig": "qwen3_moe",
                  "Gemma2Config": "gemma2", "Gemma3Config": "gemma3", "MixtralConfig": "mixtral",
                  "DeepseekV2Config": "deepseek_v2", "DeepseekV3Config": "deepseek_v3", "GptOssConfig": "gpt_oss"}


def _python_config(text: str, name: str, key: str | None = None) -> dict[str, Any]:
    """A config written in Python as ``name = {...}``, ``name = transformers.XConfig(key=value, ...)`` or
    ``name = r'''{config.json}'''``, or, with ``key``, the entry ``key`` of a table of configs
    ``name = {key: {...}, ...}``: its literal values (ast.literal_eval, json.loads; nothing is executed)."""
    for node in ast.walk(ast.parse(text)):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name):
            continue
        if isinstance(node.value, ast.Dict):
            table = ast.literal_eval(node.value)
            return table[key] if key is not None else table
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            # a config.json pasted into a string literal
            return json.loads(node.value.value)
        if isinstance(node.value, ast.Call) and not node.value.args:
            cls = ast.unparse(node.value.func).rsplit(".", 1)[-1]
            out = {kw.arg: ast.literal_eval(kw.value) for kw in node.value.keywords if kw.arg}
            out.setdefault("model_type", CONFIG_CLASSES[cls])
            return out
    raise KeyError(f"no literal config named {name!r}")


def _printed_config(text: str, name_or_path: str) -> dict[str, Any]:
    """A config as transformers prints it (``XConfig {...json...}``) inside a text file, picked out by
    its ``_name_or_path``: the JSON object around that key, parsed with json (nothing is executed)."""
    key = f'"_name_or_path": "{name_or_path}"'
    at = text.find(key)
    if at < 0 or text.find(key, at + 1) >= 0:
        raise KeyError(f"not exactly one printed config with _name_or_path {name_or_path!r}")
    start = text.rfind("{", 0, at)
    config, _ = json.JSONDecoder().raw_decode(text, start)
    return config


def _titled_config(text: str, title: str) -> dict[str, Any]:
    """A config.json pasted into a text file under a line that names it (``Qwen2.5-14B`` then ``{...}``): the
    JSON object that follows the one line equal to ``title``, parsed with json (nothing is executed)."""
    lines = text.splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if line.strip() == title]
    if len(at) != 1:
        raise KeyError(f"not exactly one line {title!r}")
    start = sum(len(line) for line in lines[:at[0] + 1])
    if not text[start:].lstrip().startswith("{"):
        raise KeyError(f"no JSON object right after the line {title!r}")
    config, _ = json.JSONDecoder().raw_decode(text, text.index("{", start))
    return config


def read_source(mirrors: Path, repo: str, commit: str, path: str, preset: str | None,
                assigned: str | None = None, printed: str | None = None, titled: str | None = None,
                table: str | None = None) -> dict[str, Any]:
    git_dir = mirrors / repo.replace("/", "+") / "repo"
    text = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout
    if table is not None:
        # a JSON object of configs keyed by Hub id (gpu_poor's all_configs.json)
        configs = json.loads(text)
        if table not in configs:
            raise KeyError(f"no config for {table!r} in {repo}:{path}")
        return configs[table]
    if printed is not None:
        return _printed_config(text, printed)
    if titled is not None:
        return _titled_config(text, titled)
    if assigned is not None:
        return _python_config(text, assigned, preset)
    if preset is None:
        return json.loads(text)
    # MLC LLM's presets: one dict literal of config dicts (read with ast.literal_eval, nothing executed)
    tree = ast.parse(text)
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict):
            presets = ast.literal_eval(node.value)
            return {k: v for k, v in presets[preset].items() if k not in MLC_KEYS}
    raise KeyError(f"no preset table in {repo}:{path}")


def _figure(billions: float) -> str:
    """Three significant figures, never in exponent form: 0.6 -> 596M, 7.6, 46.7, 671, 1026."""
    if billions < 1:
        return f"{billions * 1000:.0f}M" if billions >= 0.1 else f"{billions * 1000:.1f}M"
    digits = max(0, 2 - int(f"{billions:e}".split("e")[1]))
    return f"{billions:.{digits}f}B"


def size_label(shape) -> str:
    label = _figure(shape.param_count() / 1e9)
    if shape.experts:
        label += f"-A{_figure(shape.active_param_count() / 1e9)}"
    return label


TRANSFORMERS_CONFIG_URL = ("https://github.com/huggingface/transformers/blob/v{version}/src/transformers/models/"
                           "{name}/configuration_{name}.py")


def transformers_defaults(item: dict[str, Any]) -> dict[str, Any]:
    """The config transformers' configuration class builds with no arguments (``defaults: <model_type>``), for a
    model whose config.json was not found but whose class docstring names it as the defaults' checkpoint; then
    the keys of ``set`` (``vision_config.image_size``: a value seen in a copy of that block, cited by
    ``set_source``).  The installed transformers must be the version the item names: the defaults change."""
    import transformers

    if transformers.__version__ != item["transformers"]:
        raise ValueError(f"{item['id']}: built from transformers {item['transformers']}'s defaults, "
                         f"{transformers.__version__} is installed")
    def present(block: dict[str, Any]) -> dict[str, Any]:      # None is "not set": what a config.json leaves out
        return {k: present(v) if isinstance(v, dict) else v for k, v in block.items() if v is not None}

    raw = present(transformers.AutoConfig.for_model(item["defaults"]).to_dict())
    if item.get("set") and not item.get("set_source"):
        raise ValueError(f"{item['id']}: 'set' needs 'set_source', where each value was read")
    for dotted, value in (item.get("set") or {}).items():
        *outer, key = dotted.split(".")
        block = raw
        for part in outer:
            block = block[part]
        if key not in block:
            raise ValueError(f"{item['id']}: 'set' names {dotted!r}, which the defaults do not have")
        block[key] = value
    return raw


def entry_for(item: dict[str, Any], sources: dict[str, Any], mirrors: Path) -> dict[str, Any]:
    if item.get("defaults"):
        raw = transformers_defaults(item)
        url = TRANSFORMERS_CONFIG_URL.format(version=item["transformers"], name=item["defaults"])
        return _entry(item, raw, url)
    src = sources[item["from"]]
    # an item names its own commit when its copy is no longer at the source's (removed or renamed since)
    commit = item.get("commit", src["commit"])
    if item.get("vendored"):
        # a repository too large to mirror here: the copy's literal values, kept as data under VENDORED
        raw = json.loads((VENDORED / item["vendored"]).read_text(encoding="utf-8"))
    else:
        raw = read_source(mirrors, src["repo"], commit, item["path"], item.get("preset"), item.get("assigned"),
                          item.get("printed"), item.get("titled"), item.get("table"))
    return _entry(item, _set_keys(item, raw), f"https://github.com/{src['repo']}/blob/{commit}/{item['path']}")


def _set_keys(item: dict[str, Any], raw: dict[str, Any]) -> dict[str, Any]:
    """The copy with the keys of ``set`` replaced (``vision_config.num_hidden_layers``): a value the copy cut for a
    test, restored from where ``set_source`` says it was read.  Only keys the copy has can be set."""
    if not item.get("set"):
        return raw
    if not item.get("set_source"):
        raise ValueError(f"{item['id']}: 'set' needs 'set_source', where each value was read")
    raw = json.loads(json.dumps(raw))
    for dotted, value in item["set"].items():
        *outer, key = dotted.split(".")
        block = raw
        for part in outer:
            block = block[part]
        if key not in block:
            raise ValueError(f"{item['id']}: 'set' names {dotted!r}, which the copy does not have")
        block[key] = value
    return raw


def _entry(item: dict[str, Any], raw: dict[str, Any], url: str) -> dict[str, Any]:
    if item.get("model_type"):
        # a table whose dicts the repository hands to one configuration class, so they carry no model_type
        if raw.get("model_type"):
            raise ValueError(f"{item['id']}: the copy has a model_type; 'model_type' in the item is for copies without")
        raw = {"model_type": item["model_type"], **raw}
    for key in item.get("drop", []):
        # a key the vendoring repository edited (e.g. a context length cut for a device): left out, not guessed
        if key not in raw:
            raise ValueError(f"{item['id']}: 'drop' names {key!r}, which the copy does not have")
        raw = {k: v for k, v in raw.items() if k != key}
    config = architecture(raw)
    shape = from_hf_config(config, id=item["id"])        # the catalog must read what it ships
    whole = from_hf_config(raw, id=item["id"])
    if (whole.param_count(), whole.linear_layers()) != (shape.param_count(), shape.linear_layers()):
        # a key the reader takes is missing from ARCH_KEYS: the shipped keys would describe another model
        raise ValueError(f"{item['id']}: the kept keys give {shape.param_count():,} parameters, the whole copy "
                         f"{whole.param_count():,}; add the missing key to ARCH_KEYS")
    repo_name = item["hf_id"].split("/")[-1]
    names = [repo_name] + [n for n in item.get("names", []) if n != repo_name]
    out: dict[str, Any] = {"id": item["id"], "family": item["family"], "size": size_label(shape),
                           "hf_id": item["hf_id"], "names": names, "source": url}
    notes = []
    if item.get("defaults"):
        notes.append(f"no copy of its config.json was found: built from the defaults of transformers "
                     f"{item['transformers']}'s {item['defaults']} configuration class, whose docstring names "
                     f"{item['hf_id']} as their checkpoint")
    for dotted, value in (item.get("set") or {}).items():
        notes.append(f"{dotted} = {value!r} as read in {item['set_source']}")
    if item.get("vendored"):
        notes.append(f"the copy's literal values are kept in knowledge/catalog_configs/{item['vendored']}, its repository "
                     f"being too large to mirror")
    if item.get("preset") and not item.get("assigned"):
        notes.append(f"MLC LLM preset {item['preset']!r} (its copy of the model's config.json)")
    if item.get("assigned"):
        where = f"{item['assigned']}[{item['preset']!r}]" if item.get("preset") else item["assigned"]
        notes.append(f"{where} in that file (the config's values, written in Python)")
    if item.get("printed"):
        notes.append(f"the config transformers printed for {item['printed']!r}, pasted into that file")
    if item.get("titled"):
        notes.append(f"the config.json under the line {item['titled']!r} in that file")
    if item.get("table"):
        checked = ", ".join(f"{hub} ({cid})" for hub, cid in item["trimmed_check"].items())
        notes.append(f"the entry {item['table']!r} of that table, trimmed by it to the keys it sizes models with; the "
                     f"keys left out are read as the configuration class's defaults, and the same table's entries for "
                     f"{checked} give the parameters and layers of those models' full config.json copies in this catalog")
    if item.get("model_type"):
        notes.append(f"model_type {item['model_type']!r} is the configuration class the repository builds it with")
    if item.get("drop"):
        notes.append(f"left out, as this copy edited them: {', '.join(item['drop'])}")
    if item.get("base"):
        notes.append(f"read from the config.json of {item['base']}, not from its own")
    if item.get("note"):
        notes.append(item["note"])
    if shape.text_only:
        notes.append("the vendored config has no vision_config: the language model alone is counted")
    if notes:
        out["source_note"] = "; ".join(notes)
    out["config"] = config
    return out


HEADER = """\
# OOM Doctor model catalog.  GENERATED by scripts/build_catalog.py from knowledge/catalog_sources.yaml:
# do not edit by hand.
#
# Each entry's `config` holds the keys of the model's real config.json that decide its architecture, read
# from the copy named by `source` (a public repository at a fixed commit); oomdoctor.catalog reads them
# with the same code as a pasted config.json or one fetched from the Hub.  Parameter counts are never
# stored: they are computed, and bench/accuracy/param_counts.py checks every one against transformers on
# the meta device.  Entries without `config` were typed by hand from the sources they cite, because no
# copy of their config.json was found (see catalog_sources.yaml, `typed:`).
"""


# What a base's copy must share with the hand-typed figures of the fine-tune it stands for.
_SHAPE_METADATA = frozenset({"id", "names", "hf_id", "source", "notes", "family", "size", "source_config"})


def check_base(item: dict[str, Any], entry: dict[str, Any], typed: dict[str, dict[str, Any]]) -> None:
    """An item read from its base model's copy (``base``) stands for a fine-tune whose own config.json was seen
    but not found in a repository; the figures typed from it (``typed:``, same id) must be the base copy's."""
    from oomdoctor.catalog.models import _entry_to_shape

    if item["id"] not in typed:
        raise ValueError(f"{item['id']}: 'base' needs the fine-tune's typed figures (same id under typed:) to check")
    own = dataclasses.asdict(_entry_to_shape("typed", 0, typed[item["id"]]))
    read = dataclasses.asdict(from_hf_config(entry["config"], id=item["id"]))
    differ = {k: (own[k], read[k]) for k in own if k not in _SHAPE_METADATA and own[k] != read[k]}
    if differ:
        raise ValueError(f"{item['id']}: {item['base']}'s copy differs from the fine-tune's own config: {differ}")


def check_trimmed(item: dict[str, Any], sources: dict[str, Any], mirrors: Path,
                  by_id: dict[str, dict[str, Any]]) -> None:
    """A config from a table that trims configs to some keys (``table``) is used only where the same table's entries
    for models of the family whose full config.json the catalog has (``trimmed_check``: Hub id -> catalog id) give
    those models' parameters and layers: the keys it drops then leave the family's count unchanged."""
    checks = item.get("trimmed_check")
    if not checks:
        raise ValueError(f"{item['id']}: 'table' needs 'trimmed_check' (Hub id -> catalog id read from a full copy)")
    src = sources[item["from"]]
    for hub, cid in checks.items():
        if cid not in by_id or by_id[cid].get("source", "").startswith(f"https://github.com/{src['repo']}/"):
            raise ValueError(f"{item['id']}: trimmed_check names {cid!r}, which is not a catalog entry read from "
                             f"another repository")
        raw = read_source(mirrors, src["repo"], item.get("commit", src["commit"]), item["path"], None, table=hub)
        trimmed, full = trimmed_and_full(item["model_type"], raw, by_id[cid]["config"])
        if trimmed != full:
            raise ValueError(f"{item['id']}: the table's {hub} gives {trimmed[0]:,} parameters, its full "
                             f"copy ({cid}) {full[0]:,}: the trimmed keys matter for this family")


def trimmed_and_full(model_type: str, trimmed: dict[str, Any], full: dict[str, Any]) -> tuple[tuple, tuple]:
    """(parameters, linear layers) of a trimmed table entry read as ``model_type``, and of a full copy."""
    a = from_hf_config({"model_type": model_type, **trimmed})
    b = from_hf_config(full)
    return (a.param_count(), a.linear_layers()), (b.param_count(), b.linear_layers())


def build(mirrors: Path) -> str:
    data = yaml.safe_load(SOURCES.read_text(encoding="utf-8"))
    sources = data["sources"]
    entries = [entry_for(item, sources, mirrors) for item in data["configs"]]
    typed_by_id = {e["id"]: e for e in data.get("typed", [])}
    by_id = {e["id"]: e for e in entries}
    for item, entry in zip(data["configs"], entries):
        if item.get("base"):
            check_base(item, entry, typed_by_id)
        if item.get("table"):
            check_trimmed(item, sources, mirrors, by_id)
    ids = {e["id"] for e in entries}
    typed = [e for e in data.get("typed", []) if e["id"] not in ids]
    body = yaml.safe_dump({"models": entries + typed}, sort_keys=False, allow_unicode=True, width=120)
    return HEADER + body


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    text = build(args.mirrors)
    if args.check:
        same = OUT.read_text(encoding="utf-8") == text
        print("models.yaml is up to date" if same else "models.yaml differs from what the sources give")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    n = text.count("\n- id: ")
    print(f"wrote {OUT.relative_to(ROOT)}: {n} models")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
