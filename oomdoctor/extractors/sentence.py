"""Plain sentences: "llama3 8b lora bs 4 on a 4090", "Qwen2.5-7B 全参数微调, A100 40G".

Model and GPU names are matched against the catalogs; the rest are short
patterns in English and Chinese for the settings people state in words.
"""
from __future__ import annotations

import re
from typing import Iterator

from . import Finding, runs, snippet, unknown

NAME = "sentence"
PRODUCES = {"model.name", "model.params_b", "gpu.name", "train.method", "train.batch_size",
            "train.seq_len", "train.grad_checkpointing", "model.load_dtype", "dist.zero_stage",
            "dist.strategy", "train.objective", "log.notebook", "log.memory_grows", "train.optimizer",
            "train.precision", "lora.rank", "dist.offload_optimizer", "log.stated_memory", "phase", "data.in_memory",
            "eval.compute_metrics", "eval.samples", "eval.enabled", "log.after_eval", "log.after_steps", "log.one_rank", "log.repeated_runs",
            "model.new_tokens", "train.compile_mode", "data.num_workers", "log.failed_step", "eval.steps", "log.only_with_objective",
            "rl.vllm", "host.ram_total_gib", "data.preprocessing_workers", "train.attention",
            "rl.vllm_sleep", "train.eval_batch_size", "rl.vllm_memory_share", "train.grad_accum",
            "train.image_size", "train.images_per_sample", "lora.targets", "train.freeze_vision"}

_I = re.IGNORECASE
# Words are delimited by lookarounds on letters rather than \b, so that script and file names count:
# "lora_train.sh", "ds_z3_offload_config.json", "fsdp_config", "train_grpo.py".
# When several patterns of a fact match, the earliest match in the text wins (the user's own
# words come before the log they paste), and list order breaks a tie (a negation first).
# A from-to phrase between a key and its value: the value after it is the one now in use ("从 8192 降到 6144").
_FROM_TO = (r"\s{0,3}(?:从|from)\s{0,3}\d{1,6}\s{0,2}k?\s{0,3}(?:降到|减到|改到|改成|调到|调成|降为|减为|降低到|减少到|缩短到|增加到|提高到|升到|"
            r"->|→|to|down\s{1,3}to|up\s{1,3}to)\s{0,3}")
# What stands between a setting named in words and its value: "梯度累积设成 8", "lora rank is 64", "num_workers 开到 16".
_SET_TO = (r"\s{0,3}(?:=|:|：|of|is|was|为|是|设|设为|设成|设置为|设置成|改成|改为|调到|调成|开到|用的?是?|"
           r"(?:is\s{1,3}|was\s{1,3})?set\s{1,3}to)?\s{0,3}")
# What an evaluation set's size counts: its items, whatever they are called (not tokens, GPUs or steps).
_ITEMS = r"(?:samples|examples|rows|items|sentences|records|texts|documents|pairs|questions|prompts|conversations|images)\b"
# A vision-language model's image side, as people name it.
_VISION = (r"(?:vision[- _]?(?:tower|encoder|backbone|model|part)|visual[- _]?(?:tower|encoder|backbone)|image[- _]?encoder|"
           r"(?<![A-Za-z])vit(?![A-Za-z])|视觉\s{0,2}(?:塔|编码器|部分|模块|backbone|tower|encoder)|图像编码器)")
# Words that switch what follows off: "not", "un-", "没有", "不".
_VISION_NOT_FROZEN = (r"(?:\b(?:not|never|isn't|wasn't|aren't)\s{1,3}(?:being\s{1,3})?frozen|\b(?:unfreez\w{1,3}|unfrozen|trainable|trained)\b)")
# Abbreviations of gradient checkpointing people write in a hurry: "grad ckpt", "act ckpt", "gc" ("ckpt" alone is a saved checkpoint).
_GC_SHORT = r"(?<![\w.])(?:grad(?:ient)?[-_ ]?ckpt|act(?:ivation)?[-_ ]?ckpt|gc)"
# LoRA's target modules named in prose: "LoRA on q_proj and v_proj only", "target_modules 只有 q_proj、v_proj".
# Only names of projections are read (a letter shorthand such as "q,k,v,o" means other names in other models),
# never from code (a call "self.q_proj(" or an attribute "attn.q_proj"), never after a denial.
_MODULE = r"(?:[a-z][a-z0-9]{0,11}_proj|c_attn|query_key_value)"
_MODULE_LIST = _MODULE + r"(?:\s{0,2}(?:,|、|/|\+|\band\b|和|与|及|以及)\s{0,2}(?:the\s{1,3})?" + _MODULE + r"){0,9}"
_PATTERNS: list[tuple[str, re.Pattern, object]] = [
    ("train.method", re.compile(r"(?<![A-Za-z])q-?lora(?![A-Za-z])", _I), "qlora"),
    # LoRA over weights loaded in 4 bits is QLoRA, however it is worded: "4bit LoRA", "4-bit LoRA", "nf4 的 LoRA", "LoRA in 4-bit".
    ("train.method", re.compile(r"(?<![\w.-])(?:4[- ]?bits?|four[- ]bits?|nf4|int4|4\s{0,1}比特)\s{0,3}(?:量化\s{0,2})?(?:的\s{0,2})?lora(?![A-Za-z])|"
                                r"(?<![A-Za-z])lora\s{1,3}(?:in|on|with|over)\s{1,3}(?:a\s{1,3})?4[- ]?bit\b", _I), "qlora"),
    # A model a LoRA run produced ("lora_model", "LoRA-merged") is not how this job trains.
    ("train.method", re.compile(r"(?<![A-Za-z])lora(?![A-Za-z])(?![-_ ]?(?:merged|model\b))|低秩", _I), "lora"),
    ("train.method", re.compile(r"\bfull[- ]?(?:parameter[- ])?(?:fine[- ]?tun\w{0,4}|ft|sft|training)\b|全参|全量", _I), "full"),
    # Every weight trained, said in words: "pre-training of all weights", "fine-tuning all the parameters", "all parameters are
    # trainable", "所有参数都参与训练" (not "all weights frozen", nor loading or saving all of them).
    ("train.method", re.compile(r"\b(?:train(?:s|ed|ing)?|tun(?:e|es|ed|ing)|fine-?tun(?:e|es|ed|ing)|pre-?train(?:s|ed|ing)?|updat(?:e|es|ed|ing))"
                                r"\s{1,3}(?:of\s{1,3})?all\s{1,3}(?:of\s{1,3})?(?:the\s{1,3}|its\s{1,3}|the\s{1,3}model'?s\s{1,3})?(?:weights|parameters|params)\b|"
                                r"\ball\s{1,3}(?:the\s{1,3}|of\s{1,3}the\s{1,3})?(?:model'?s\s{1,3})?(?:weights|parameters|params)\s{1,3}(?:are|were)\s{1,3}(?:trainable|trained|updated)\b|"
                                r"(?:所有|全部)\s{0,2}(?:的)?\s{0,2}(?:参数|权重)\s{0,2}(?:都)?\s{0,2}(?:参与)?\s{0,2}(?:训练|更新|可训练)", _I), "full"),
    # Freezing a vision-language model's tower is no freeze-tuning method: "freeze the ViT", "冻结 vision tower".
    ("train.method", re.compile(r"\bfreeze\b(?!\s{1,3}(?:the\s{1,3}|its\s{1,3})?" + _VISION + r")|冻结(?!\s{0,2}(?:了|住)?\s{0,2}(?:the\s{1,3})?" + _VISION + r")", _I), "freeze"),
    ("model.params_b", re.compile(r"(?<![\w.])(\d{1,4}(?:\.\d{1,2})?)[Bb](?!\w|\s{0,2}(?:tokens?|samples?|examples?|steps?|bytes?)\b)"), "params"),
    # A from-to phrase states the value now in use: "cutoff_len 从 8192 降到 6144", "batch size from 8 to 2".
    ("train.batch_size", re.compile(r"(?<![A-Za-z])(?<!eval_)(?<!eval )(?<!评估)(?:per[-_]device[-_](?:train[-_])?)?(?:micro[- _]?)?(?:bs|batch[- _]?size|batch|mbs|批大小)"
                                    + _FROM_TO + r"(\d{1,4})(?!\d|[./-]\d)(?!\s{0,2}(?:gb|gib|g|k|tokens?)\b)", _I), int),
    # An evaluation batch ("per_device_eval_batch_size 8", "eval batch 32") is not the training one.
    ("train.eval_batch_size", re.compile(r"\b(?:eval|evaluation|validation)\s{1,3}(?:at|with|uses|used|runs\s{1,3}at)\s{1,3}(?:a\s{1,3})?batch[- _]?size\s{0,3}(?:of\s{1,3}|=\s{0,2})?(\d{1,4})(?!\d|[./-]\d)|"
                                         r"(?:评估|验证)\s{0,2}(?:的)?\s{0,2}(?:batch(?:[ _]?size)?|批大小)\s{0,3}(?:=|:|：|为|是|用)?\s{0,3}(\d{1,4})(?!\d|[./-]\d)", _I), int),
    ("train.batch_size", re.compile(r"(?<![A-Za-z])(?<!eval_)(?<!eval-)(?<!eval )(?<!test_)(?<!predict_)"
                                    r"(?:per[-_]device[-_](?:train[-_])?)?(?:micro[- _]?)?(?:bs|batch[- _]?size|batch|mbs)"
                                    r"\s{0,3}(?:=|:|of|is|为|是)?\s{0,3}(\d{1,4})\b(?!\s{0,2}(?:gb|gib|g|k|tokens?)\b)", _I), int),
    ("train.batch_size", re.compile(r"(?<!eval_)(?<!eval )(?<!评估)(?<!评估 )(?<!验证)(?<!验证 )(?:批大小|批次大小|批量大小|batch(?:[ _]?size)?|(?<![A-Za-z])(?:micro[- _]?)?bs)\s{0,3}(?:都|全|全部|也|统一|一律|已经|还是)?\s{0,2}"
                                    r"(?:=|:|：|为|是|开到|设为|设成|设置为|设置成|调到|调成|调为|改成|改为|降到|减到|降为|减为|用|已经是|只有|"
                                    # "batch 设 1", "batch size 调小到 2", "bs 减小到 1", "batch 加到 16"
                                    r"设|调小到|调小为|调低到|调大到|改到|减小到|减少到|缩小到|缩到|加到|增加到|增大到|提高到|升到|"
                                    r"(?:is\s{1,3}|was\s{1,3})?(?:set\s{1,3}to|lowered\s{1,3}to|reduced\s{1,3}to|down\s{1,3}to))?"
                                    r"\s{0,3}(\d{1,4})(?!\d|[./-]\d)", _I), int),
    ("train.seq_len", re.compile(r"(?<![A-Za-z])(?:seq(?:uence)?[- _]?(?:len(?:gth)?)?|(?:model[- _])?max[- _]?len(?:gth)?|cutoff[- _]?len|"
                                 r"max[- _]seq[- _]len(?:gth)?|序列长度|上下文长度)" + _FROM_TO + r"(\d{1,3}(?:,\d{3})?|\d{1,6})\s{0,2}(k)?\b", _I), "seq"),
    ("train.seq_len", re.compile(r"(?<![A-Za-z])(?:seq(?:uence)?[- _]?(?:len(?:gth)?)?|(?:model[- _])?max[- _]?len(?:gth)?|ctx|context(?:[- _]length)?|cutoff[- _]?len"
                                 r"|block[- _]?size)\s{0,3}(?:=|:|of|is|为)?\s{0,3}(\d{1,3}(?:,\d{3})?|\d{1,6})\s{0,2}(k)?\b", _I), "seq"),
    ("train.seq_len", re.compile(r"(?:序列长度|序列|长度|上下文)\s{0,3}(?:=|:|：|为|是|到|有|开到|设为|设成)?\s{0,3}(\d{1,6})\s{0,2}(k)?", _I), "seq"),
    # "cutoff_len 设成 10000", "max_length 改成 8192", "序列长度拉到 32k", "max_seq_length was raised to 4096"
    # (not ChatGLM's pre_seq_len, the length of the P-tuning prefix)
    ("train.seq_len", re.compile(r"(?<![A-Za-z_])(?<!max_new_)(?<!max_target_)(?<!max_source_)(?<!max_prompt_)(?:seq(?:uence)?[- _]?len(?:gth)?|(?:model[- _])?max[- _]?len(?:gth)?|"
                                 r"max[- _]seq(?:uence)?[- _]len(?:gth)?|cutoff[- _]?len|block[- _]?size|context[- _]length|序列长度|上下文长度|最大长度|上下文|长度)\s{0,3}(?:都|也|已经|统一)?\s{0,2}"
                                 r"(?:设|设成|设为|设置为|设置成|设置到|改成|改为|改到|调到|调成|调为|拉到|开到|加到|增加到|提到|提高到|升到|降到|减到|缩到|缩短到|用的?是?|"
                                 r"(?:is\s{1,3}|was\s{1,3}|been\s{1,3})?(?:set|raised|increased|bumped|lowered|reduced|cut|changed|extended)\s{1,3}to)"
                                 r"\s{0,3}(\d{1,3}(?:,\d{3})?|\d{1,6})\s{0,2}(k)?(?!\d|\.\d|[A-Za-z])", _I), "seq"),
    # "4096 tokens", "sequences of 1024 tokens": a length in tokens, not an amount of data ("trained on 500k tokens").
    ("train.seq_len", re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})?|\d{2,6})\s{0,2}(k)?[- ]?tokens?\b", _I), "seq_tokens"),
    ("train.seq_len", re.compile(r"\b(\d{1,3})\s{0,1}(k)\s{0,2}(?:context|ctx|tokens|seq(?:uence)?s?|长度|上下文)", _I), "seq"),
    ("train.grad_checkpointing", re.compile(r"\b(?:no|without|disabled?)\s{1,3}(?:gradient|grad|activation)[- _]?checkpointing|"
                                            r"(?<![A-Za-z])(?:(?:gradient|grad|activation)[- _]?)?checkpointing\s{1,3}(?:is\s{1,3}|was\s{1,3})?(?:off|disabled|not\s{1,3}(?:on|enabled|used))\b|"
                                            # the English name with Chinese or English words that switch it off: "gradient_checkpointing 关了", "activation checkpointing turned off"
                                            r"(?<![A-Za-z])(?:(?:use_|enable_)?(?:gradient|grad|activation)[- _]?)checkpointing\s{0,3}(?:也|都|已经|已)?\s{0,2}(?:没(?:有)?开(?:启)?|未开启|不开|关(?:闭|掉|了)|"
                                            r"(?:is\s{1,3}|was\s{1,3})?(?:turned|switched)\s{1,3}off\b)|"
                                            r"(?:没(?:有)?开(?:启)?|未开启|不开|关闭(?:了)?)\s{0,2}(?:梯度检查点|重计算)|(?:梯度检查点|重计算)\s{0,2}(?:没(?:有)?开|未开启|不开|关(?:闭|了))", _I), False),
    ("train.grad_checkpointing", re.compile(r"(?<!no )(?<!without )(?:gradient|grad|activation)[- _]?checkpointing|梯度检查点|重计算|"
                                            r"(?<![A-Za-z])checkpointing\s{1,3}(?:is\s{1,3}|was\s{1,3})?(?:on|enabled|true)\b", _I), True),
    # "grad ckpt on", "gc on", "ckpt 开了", "gc: off", "act ckpt 关了" (not "gc.collect() on each step", "ckpt on disk").
    ("train.grad_checkpointing", re.compile(_GC_SHORT + r"\s{0,3}(?:[:=]\s{0,2}|is\s{1,3}|was\s{1,3})?(?:off|disabled|false)(?=\s{0,3}(?:[,.;，。、)]|$|and\b))|"
                                            r"(?:" + _GC_SHORT + r"|(?<![\w.])ckpt)\s{0,2}(?:也|都)?\s{0,2}(?:没(?:有)?开(?:启)?|未开启|关(?:闭|掉|了))|"
                                            r"(?:没(?:有)?开(?:启)?|未开启|不开|关闭(?:了)?)\s{0,2}(?:grad(?:ient)?[-_ ]?ckpt|gc)(?![\w.])", _I), False),
    ("train.grad_checkpointing", re.compile(_GC_SHORT + r"\s{0,3}(?:[:=]\s{0,2}|is\s{1,3}|was\s{1,3})?(?:on|enabled|true)(?=\s{0,3}(?:[,.;，。、)]|$|and\b))|"
                                            r"(?:" + _GC_SHORT + r"|(?<![\w.])ckpt)\s{0,2}(?:也|都)?\s{0,2}(?:开了|开启了?|打开了?|是开的)|"
                                            r"(?:开了|开启了?|打开了?|用了)\s{0,2}(?:grad(?:ient)?[-_ ]?ckpt|gc)(?![\w.])", _I), True),
    # LoRA on every linear layer, said in words (peft's all-linear, axolotl's lora_target_linear, LLaMA-Factory's lora_target: all):
    # "QLoRA (r=64, all linear)", "LoRA on all linear layers", "LoRA 挂在所有线性层上", "target all modules" (not "not all linear layers").
    ("lora.targets", re.compile(r"(?<![A-Za-z])(?:q?lora|adapters?)\b[^.\n。;；]{0,40}?(?<!not )(?<!instead of )(?<!rather than )"
                                r"\ball[- _]linear(?:\s{1,3}(?:layers|modules|projections))?\b|"
                                r"\btarget(?:s|ing|ed)?\s{1,3}(?:=\s{0,2})?all\s{1,3}(?:the\s{1,3})?(?:linear\s{1,3})?(?:modules|layers|projections)\b|"
                                r"(?<![A-Za-z])q?lora(?![A-Za-z])[^。\n；]{0,24}?(?<!不是)(?<!没有)(?:所有|全部)\s{0,2}(?:的)?\s{0,2}(?:线性层|linear\s{0,2}(?:层|layers?)|(?:目标)?模块)", _I), ["all-linear"]),
    ("lora.targets", re.compile(r"(?<![A-Za-z])(?:q?lora|adapters?|target(?:s|ing|ed)?(?:[_ ]modules?)?)(?![A-Za-z])[^.\n。;；()=]{0,30}?"
                                r"(?<![\w.])(" + _MODULE_LIST + r")(?![\w(.])", re.IGNORECASE), "modules"),
    # The vision tower left out of training, said in words: "vision tower frozen", "冻结 vision tower", "freeze the ViT".
    ("train.freeze_vision", re.compile(_VISION + r"\s{0,3}(?:is\s{1,3}|was\s{1,3}|stays\s{1,3}|kept\s{1,3})?" + _VISION_NOT_FROZEN + "|"
                                       r"\b(?:unfreez\w{1,3}|train(?:s|ed|ing)?|tun(?:e|es|ed|ing))\s{1,3}(?:the\s{1,3}|its\s{1,3})?" + _VISION + "|"
                                       r"(?:(?:不|没(?:有)?|未)\s{0,2}冻结|解冻)\s{0,2}(?:了\s{0,2})?(?:the\s{1,3})?" + _VISION + "|" + _VISION + r"\s{0,2}(?:不|没(?:有)?|未)\s{0,2}冻结|"
                                       + _VISION + r"\s{0,2}(?:也|都)?\s{0,2}(?:参与训练|解冻|可训练)", _I), False),
    ("train.freeze_vision", re.compile(_VISION + r"\s{0,3}(?:is\s{1,3}|was\s{1,3}|stays\s{1,3}|kept\s{1,3})?frozen\b|"
                                       r"(?<![A-Za-z])(?:freez(?:e|es|ing)|froze)\s{1,3}(?:the\s{1,3}|its\s{1,3})?" + _VISION + "|"
                                       r"(?<![不没未解])冻结(?:了|住)?\s{0,2}(?:the\s{1,3})?" + _VISION + "|" + _VISION + r"\s{0,2}(?:是|也|都|已|已经)?\s{0,2}冻结", _I), True),
    ("model.load_dtype", re.compile(r"\b4[- ]?bit\b|\bnf4\b|4比特|四比特", _I), "nf4"),
    # "bf16 weights", "loaded in fp16", "权重 bf16 加载": the dtype of the weights, not only the training precision.
    ("model.load_dtype", re.compile(r"\b(bf16|bfloat16|fp16|float16|fp32|float32)\s{1,3}weights\b|"
                                    r"\bweights?\s{1,3}(?:are\s{1,3}|is\s{1,3})?(?:in|as)\s{1,3}(bf16|bfloat16|fp16|float16|fp32|float32)\b|"
                                    r"\bload(?:ed|ing|s)?\s{1,3}(?:the\s{1,3})?(?:model\s{1,3}|weights\s{1,3})?(?:in|as)\s{1,3}(bf16|bfloat16|fp16|float16|fp32|float32)\b|"
                                    r"(?:权重|模型)?\s{0,3}(?:用|以|按)?\s{0,3}(bf16|fp16|fp32)\s{0,3}(?:精度)?\s{0,3}加载", _I), "dtype"),
    ("model.load_dtype", re.compile(r"\b8[- ]?bit\b(?!\s{0,2}(?:adam|optim))|\bint8\b", _I), "int8"),
    # "zero stage 都设成 3", "ZeRO stage is set to 3": words between the key and its value.
    ("dist.zero_stage", re.compile(r"(?<![A-Za-z0-9])(?:zero|deepspeed)[- _]?stage\s{0,3}(?:都|全|全部|也|统一|一律)?\s{0,2}"
                                   r"(?:设成|设为|设置为|设置成|改成|改为|调成|调到|用的?是?|是|为|=|:|：|is|was|of|(?:is\s{1,3}|was\s{1,3})?set\s{1,3}to)"
                                   r"\s{0,3}([0-3])(?![0-9])", _I), "stage"),
    ("dist.zero_stage", re.compile(r"(?<![A-Za-z0-9])(?:zero|ds_z)[- _]?(?:stage[- _]?)?([0-3])(?![0-9])|"
                                   r"(?<![A-Za-z])(?:deepspeed|ds_config)[- _]{1,3}(?:zero[- _]?)?stage[- _]?([0-3])(?![0-9])", _I), "stage"),
    ("dist.offload_optimizer", re.compile(r"\b(?:no|without)\s{1,3}(?:cpu\s{1,3})?offload(?:ing)?\b|(?:没有?|未|不)\s{0,2}(?:开(?:启)?|配置?|用)?\s{0,2}offload|offload\s{0,2}(?:没开|没有开|未开启)", _I), "none"),
    ("dist.offload_optimizer", re.compile(r"(?<![A-Za-z])offload(?:s|ing|ed)?\s{1,3}to\s{1,3}nvme\b", _I), "nvme"),
    ("dist.offload_optimizer", re.compile(r"(?<![A-Za-z])offload(?:s|ing|ed)?[ _](?:the[ _])?optimizer|(?<![A-Za-z])(?:ds_)?z(?:ero)?[0-3]?_offload|"
                                          r"(?<![A-Za-z])offload(?:s|ing|ed)?\s{1,3}to\s{1,3}(?:the\s{1,3})?cpu\b|"
                                          # "ZeRO-3 with CPU offload", "开了 CPU offload", "优化器 offload 到 CPU", "CPU offload is on"
                                          r"(?:\b(?:with|using)\s{1,3}|\+\s{0,2}|用了\s{0,2}|开了\s{0,2}|开启了?\s{0,2}|加了\s{0,2})cpu[- ]?offload(?:ing)?(?![\w-])|"
                                          r"(?<![A-Za-z_])cpu[- ]offload(?:ing)?\s{1,3}(?:is\s{1,3}|was\s{1,3})?(?:on|enabled)\b|"
                                          r"(?:优化器|optimizer)\s{0,2}(?:状态\s{0,2})?(?:也\s{0,2})?offload\s{0,3}(?:到|至)\s{0,2}(?:cpu|内存)", _I), "cpu"),
    ("dist.strategy", re.compile(r"(?<![A-Za-z])fsdp(?![A-Za-z])|\btorchtune\b[^\n]{0,40}\bdistributed\b|\b(?:full|lora)_finetune_distributed\b", _I), "fsdp"),
    ("dist.strategy", re.compile(r"\bdeepspeed\b|(?<![A-Za-z])(?:zero[- _]?(?:stage|offload|init)|zero\.init|zero[- _]?[123](?![0-9])|ds_z[0-3])", _I), "deepspeed"),
    ("dist.strategy", re.compile(r"\bddp\b|DistributedDataParallel", _I), "ddp"),
    ("train.objective", re.compile(r"(?<![A-Za-z])dpo(?![A-Za-z])", _I), "dpo"),
    ("train.objective", re.compile(r"(?<![A-Za-z])kto(?![A-Za-z])", _I), "kto"),
    ("train.objective", re.compile(r"(?<![A-Za-z])ppo(?![A-Za-z])|(?<![\w/-])rlhf(?![\w-])", _I), "ppo"),
    ("train.objective", re.compile(r"(?<![A-Za-z])grpo(?![A-Za-z])|\bnum_generations\b", _I), "grpo"),
    ("train.objective", re.compile(r"(?<![A-Za-z])orpo(?![A-Za-z])", _I), "orpo"),
    ("train.objective", re.compile(r"(?<![A-Za-z])rloo(?![A-Za-z])", _I), "rloo"),
    # A reward model as what is trained ("training a reward model", "训练奖励模型", "RM 训练"), not one a PPO run uses.
    ("train.objective", re.compile(r"\b(?:train(?:ing|s)?|fine-?tun(?:e|es|ing))\s{1,3}(?:a\s{1,3}|an\s{1,3}|the\s{1,3}|my\s{1,3}|our\s{1,3})?reward\s{1,3}models?\b|"
                                   r"\breward[- ]model(?:ing)?\s{1,3}training\b|训练\s{0,2}(?:一个|个)?\s{0,2}(?:奖励模型|reward\s{0,2}model)|"
                                   r"(?:奖励模型|reward\s{0,2}model|(?<![A-Za-z])RM)\s{0,2}(?:的)?\s{0,2}训练", _I), "reward"),
    # Pre-training as the job, not a pre-trained model: "continued pre-training", "增量预训练", "做预训练".
    ("train.objective", re.compile(r"\b(?:continued|continual|continuing|further)\s{1,3}pre-?training\b|\bpre-?training\s{1,3}from\s{1,3}scratch\b|"
                                   r"(?:增量|继续|二次|持续)\s{0,2}预训练|(?:在做|做|跑|进行)\s{0,2}(?:增量\s{0,2})?预训练(?!\s{0,2}(?:的)?\s{0,2}(?:模型|权重))", _I), "pretrain"),
    # 预训练 as a noun is the job ("全量预训练 baichuan", "做全参数的预训练（stage pt）", "预训练阶段") unless it qualifies a model,
    # weights or data ("预训练模型", "预训练好的权重", "预训练语料"); in English the job needs a word that makes it one
    # ("pre-training of all weights", "pre-training a 7B model", "I'm pre-training", "pretraining run"), not "pre-trained model".
    ("train.objective", re.compile(r"(?<!未)(?<!经过)预训练(?!\s{0,2}(?:好|过|完|后)?\s{0,2}(?:的)?\s{0,2}(?:模型|权重|参数|checkpoint|ckpt|版本|基座|底座|语料|数据|corpus|model))|"
                                   r"\bpre-?training\s{1,3}(?:of|on)\s{1,3}(?:all|the\s{1,3}(?:whole|full|entire)|an?\s{1,3}\S)|"
                                   r"\bpre-?training\s{1,3}(?:a|an|my|our)\s{1,3}(?:\d{1,4}(?:\.\d)?\s{0,1}[BbMm]\b|[\w.-]{1,24}\s{1,3}model\b|model\b)|"
                                   r"\b(?:i'm|i\s{1,3}am|we're|we\s{1,3}are|while|when)\s{1,3}pre-?training\b|\bpre-?training\s{1,3}(?:run|job|script|stage)\b", _I), "pretrain"),
    # Where RL rollouts are generated, in words: "vLLM colocate mode", "colocated vLLM", "与训练共用 GPU 的 vLLM";
    # "trl vllm-serve", "a vLLM server", "vLLM 服务".
    ("rl.vllm", re.compile(r"(?<![A-Za-z])vllm(?![A-Za-z])[ \t_-]{0,3}(?:in[ \t]{1,3})?(?:colocated?|colocation)(?![A-Za-z])|"
                           r"(?<![A-Za-z])colocated?[ \t]{1,3}vllm(?![A-Za-z])|共用\s{0,2}GPU\s{0,2}的\s{0,2}vllm|"
                           # "vllm 和训练共用 GPU", "vLLM 与训练放在同一张卡上", "vllm colocate 模式"
                           r"(?<![A-Za-z])vllm(?![A-Za-z])\s{0,2}(?:和|与|跟)\s{0,2}(?:训练|训练进程|模型训练)\s{0,2}(?:共用|共享|放在同一张?|放在一起用)\s{0,2}(?:GPU|显卡|卡)", _I), "colocate"),
    ("rl.vllm", re.compile(r"(?<![A-Za-z])trl[ \t]{1,3}vllm-serve\b|(?<![A-Za-z])vllm(?![A-Za-z])[ \t_-]{0,3}(?:server|服务)", _I), "server"),
    ("train.attention", re.compile(r"(?:没(?:有)?(?:开|用|装)(?:启)?|未(?:开启|启用|使用|安装)|不(?:开|用)|关(?:闭|掉)(?:了)?|禁用(?:了)?)\s{0,2}(?:了\s{0,2})?"
                                   r"(?:flash[- _]?(?:attn|attention)|FA2?\b)|"
                                   r"\b(?:without|no|disabled?|disabling|turned\s{1,3}off|switched\s{1,3}off)\s{1,3}(?:the\s{1,3})?flash[- _]?(?:attn|attention)|"
                                   r"flash[- _]?(?:attn|attention)(?:[- _]?2)?\s{0,3}(?:is\s{1,3}|was\s{1,3})?(?:off|disabled|not\s{1,3}(?:on|used|enabled|installed))\b|"
                                   r"flash[- _]?(?:attn|attention)(?:[- _]?2)?\s{0,3}(?:没(?:有)?开|未开启|关(?:闭|掉|了)|不可用|用不了|装不上)|"
                                   r"(?<![A-Za-z0-9])(?:use_)?flash_attn\w{0,8}[\"']?\s{0,3}[=:]?\s{0,3}[\"']?(?:false|0|no|off|disabled|none)\b", _I), "not_flash"),
    # Flash attention stated as in use: a version named ("FlashAttention2", "flash_attention_2", "FA2") or said on.
    ("train.attention", re.compile(r"(?<![\w-])(?:flash[- _]?(?:attn|attention)[- _]?[23]|FA[23])(?![\w-])(?!\s{0,3}[=:]?\s{0,3}[\"']?(?:false|0|no|off|disabled|none)\b)"
                                   r"(?!\s{0,3}(?:is\s{1,3}|was\s{1,3})?(?:off|disabled|not|没|未|不|关))|"
                                   r"(?:\b(?:using|with)|用了|开了|开启了|启用了|加了)\s{0,3}flash[- _]?(?:attn|attention)\b(?!\s{0,3}(?:is\s{1,3}|was\s{1,3})?(?:off|disabled|not))|"
                                   r"flash[- _]?(?:attn|attention)\s{0,3}(?:is\s{1,3}|was\s{1,3})?(?:on|enabled)\b", _I), "flash"),
    # vLLM's sleep mode in words (it frees vLLM's memory while the trainer trains): off first, so that it wins a tie.
    ("rl.vllm_sleep", re.compile(r"\bsleep[- _]?mode\s{0,3}(?:is\s{1,3}|was\s{1,3})?(?:off|disabled|not\s{1,3}(?:on|enabled|used))\b|"
                                 # ("without sleep mode it works", "关掉 sleep 就好了" say what worked, not what failed: not read)
                                 r"(?:没(?:有)?开(?:启)?|未开启)\s{0,2}(?:vllm\s{0,2}(?:的\s{0,2})?)?sleep", _I), False),
    ("rl.vllm_sleep", re.compile(r"\bsleep[- _]?mode\s{0,3}(?:is\s{1,3}|was\s{1,3})?(?:on|enabled)\b|"
                                 r"\b(?:with|using)\s{1,3}(?:vllm(?:'s)?\s{1,3})?sleep[- _]?mode\b(?!\s{0,3}(?:is\s{1,3}|was\s{1,3})?(?:off|disabled|not))|"
                                 r"(?:开了|开启了?|启用了?|打开了?)\s{0,2}(?:vllm\s{0,2}(?:的\s{0,2})?)?sleep", _I), True),
    # vLLM's share of the card in words: "vllm_gpu_memory_utilization is left at its default of 0.9", "gpu_memory_utilization 设成 0.5".
    ("rl.vllm_memory_share", re.compile(r"(?<![A-Za-z])(?:vllm_)?gpu[_ ]memory[_ ]utili[sz]ation\s{0,3}(?:is\s{1,3}|was\s{1,3})?"
                                        r"(?:(?:left|kept|set)\s{1,3}(?:at|to)\s{1,3})?(?:its\s{1,3}|the\s{1,3})?(?:default\s{1,3}(?:of\s{1,3}|value\s{1,3}(?:of\s{1,3})?)?)?"
                                        r"(?:=|:|：|为|是|设成|设为|设置为|改成|调到|of)?\s{0,3}(0?\.\d{1,3}|1\.0{1,3})(?!\d|[./-]\d)", _I), "share"),
    ("log.notebook", re.compile(r"\bjupyter\b|\bnotebook\b|\bcolab\b|\bipykernel\b|\.ipynb\b", _I), True),
    ("log.memory_grows", re.compile(r"memory (?:usage )?(?:keeps|kept|is|was) (?:growing|increasing|rising|going up)|memory (?:grows|increases|creeps)|"
                                    r"(?:grows|increases|creeps up) (?:every|each|after each|with each|over) (?:step|iteration|epoch|time)|"
                                    r"memory leak|显存(?:一直|持续|不断|逐渐)(?:增长|增加|上涨|上升)|内存泄漏|显存泄漏|"
                                    # "显存占用一步步变大", "显存占用随着训练逐渐升高", "显存越来越大", "memory keeps climbing"
                                    r"显存\s{0,2}(?:占用|使用|用量|使用量)?\s{0,2}(?:会|在|也)?\s{0,2}(?:随着?\s{0,2}(?:训练|step|步数|迭代|时间)\S{0,3}\s{0,2})?"
                                    r"(?:一直|持续|不断|逐渐|一步步|一点点|慢慢|缓慢|越来越)\s{0,2}(?:地|的)?\s{0,2}(?:增长|增加|上涨|上升|变大|升高|增大|涨|大|多|高)|"
                                    r"显存\s{0,2}(?:占用|使用|用量|使用量)?\s{0,2}随着?\s{0,2}(?:训练|step|步数|迭代|时间)\S{0,3}\s{0,2}(?:增长|增加|上涨|上升|变大|升高|增大)|"
                                    r"\b(?:memory|vram|usage)(?:\s{1,3}(?:usage|use|footprint|consumption))?\s{1,3}(?:just\s{1,3})?"
                                    r"(?:keeps|kept|slowly|steadily|gradually|continuously|constantly)\s{1,3}(?:on\s{1,3})?"
                                    r"(?:growing|increasing|rising|climbing|creeping(?:\s{1,3}up)?|going\s{1,3}up|grows|increases|rises|climbs|creeps)\b", _I), True),
    ("log.repeated_runs", re.compile(r"hyperparameter[- _]search|\bmodel_init\b|\b(?:in|inside)\s{1,3}a\s{1,3}(?:for\s{1,3}|python\s{1,3}|training\s{1,3})?loop\b|"
                                     r"\bone\s{1,3}model\s{1,3}(?:per|for\s{1,3}each)\s{1,3}(?:data\s{1,3})?(?:split|fold|seed|dataset|task|language)\b|\bre-?(?:ran|run|running|executed?)\s{1,3}(?:the\s{1,3})?cell|"
                                     r"(?:several|multiple) (?:models|trainers) in (?:one|the same) (?:process|notebook)|\bcross[- ]validation\b|超参数?搜索|"
                                     r"连续训练|循环(?:里|中)(?:训练|微调)", _I), True),
    ("log.one_rank", re.compile(r"\b(?:only|just)\s{1,3}(?:on\s{1,3})?(?:one|a single|1)\s{1,3}(?:rank|gpu|card|process|worker)\b|"
                                r"\bone\s{1,3}(?:rank|gpu|card)\s{1,3}only\b|只有一张卡|只有一个rank|"
                                # "the other GPUs are almost empty", "其他几张卡几乎是空的": one card fills, the rest idle
                                r"\b(?:other|remaining)\s{1,3}(?:(?:two|three|four|five|six|seven|\d{1,2})\s{1,3})?(?:gpus|cards|devices)\s{1,3}"
                                r"(?:are|were|stay|stayed|remain|remained|look|looked|sit|sat|sitting)"
                                r"\s{1,3}(?:almost\s{1,3}|nearly\s{1,3}|mostly\s{1,3}|practically\s{1,3}|basically\s{1,3})?(?:empty|idle|unused)\b|"
                                r"其他\s{0,2}(?:几|的)?\s{0,2}(?:张|块)?\s{0,2}(?:卡|GPU|显卡)\s{0,2}(?:都|几乎|基本|差不多)?\s{0,2}(?:都|是)?\s{0,2}"
                                r"(?:是)?\s{0,2}(?:空的|空着|没怎么用|占用很少|很空)|"
                                r"只有\s{0,2}(?:第一|最后一|一)\s{0,2}(?:张|块)\s{0,2}(?:卡|GPU|显卡)\s{0,2}(?:显存)?\s{0,2}(?:爆|满|OOM)|"
                                # some of the cards fill while the rest have room: "只有部分卡占到 80G", "only some of the GPUs fill up"
                                r"只有\s{0,2}(?:部分|几张|某几张|个别)\s{0,2}(?:卡|GPU|显卡)\s{0,2}(?:的)?\s{0,2}(?:显存)?\s{0,2}(?:占到|占满|爆|满|OOM)|"
                                r"\bonly\s{1,3}(?:some|a\s{1,3}few|one\s{1,3}or\s{1,3}two)\s{1,3}(?:of\s{1,3}the\s{1,3})?(?:ranks|gpus|cards)\s{1,3}"
                                r"(?:fill(?:\s{1,3}up)?|run\s{1,3}out|hit|reach|go\s{1,3}oom|oom)\b", _I), True),
    ("log.stated_memory", re.compile(r"\bVRAM\b|显存|\bGPU\s{0,2}(?:memory|RAM|OOM)\b|\bCUDA\s{0,2}(?:OOM|out\s{1,3}of\s{1,3}memory)\b", _I), "gpu"),
    ("log.stated_memory", re.compile(r"\b(?:host|system|cpu|main)[- ]{0,2}(?:ram|memory)\b|\bRAM\b|主机内存|系统内存|(?<!显)内存不足|"
                                  r"(?<!显)(?<!GPU)(?<!GPU )(?<!显卡)内存\s{0,2}(?:OOM|爆了|溢出|不够)|"
                                  # "内存直接爆了", "内存一下就满了", "内存就被吃满", "内存又撑爆了": adverbs between the word and the verb
                                  r"(?<!显)(?<!GPU)(?<!GPU )(?<!显卡)(?<!卡)内存\s{0,2}(?:直接|就|又|都|也|一下子?|瞬间|马上|很快|立刻)\s{0,2}(?:就\s{0,2})?(?:被\s{0,2})?"
                                  r"(?:OOM|爆(?:了|掉|满)?|溢出|不够|满了|占满|撑爆|吃满|吃光|耗尽|用光)|"
                                  # an amount of 内存 (not 显存) in use: "内存就已经占了 248G", "内存占到 500 多 G"
                                  r"(?<!显)(?<!GPU)(?<!GPU )(?<!显卡)(?<!卡)内存\s{0,2}(?:就|都|也|已经|直接){0,3}\s{0,2}(?:占|用|吃)(?:了|到|掉)\s{0,2}\d{1,5}(?:\.\d{1,2})?\s{0,2}(?:多\s{0,2})?(?:G|GB|T|TB)(?![A-Za-z])|\b(?:ray|cpu|host)\s{0,2}(?:oom|out\s{1,3}of\s{1,3}memory)\b|"
                                  # the kernel's OOM killer only ever acts on host RAM: "killed by the OOM killer", "被 OOM killer 杀掉"
                                  r"\boom[- _]?killer\b", _I), "host"),
    ("phase", re.compile(r"\b(?:when|while|during|at)\s{1,3}(?:the\s{1,3})?(?:final\s{1,3}|last\s{1,3})?(?:sav(?:e|ing)|checkpoint(?:ing)?)\b|"
                         # "when the state_dict is saved", "while the checkpoint is being saved"
                         r"\b(?:when|while|as)\s{1,3}(?:the\s{1,3}|my\s{1,3})?(?:model|state_dict|state\s{1,3}dict|checkpoint|weights|adapter)"
                         r"\s{1,3}(?:is|are|gets|get|was|were)\s{1,3}(?:being\s{1,3})?sav(?:ed|ing)\b|"
                         r"(?:保存|存)\s{0,2}(?:模型|检查点|checkpoint|ckpt|权重)?\s{0,2}(?:时|的时候)|(?:save|saving)\s{0,2}(?:checkpoint|ckpt|model)?\s{0,2}(?:时|的时候|阶段)", _I), "saving"),
    # "during the first eval", "on the first evaluation", "in the second validation" (not "on the eval set").
    ("phase", re.compile(r"\b(?:when|while|during|at|in)\s{1,3}(?:the\s{1,3})?(?:eval|evaluation|evaluating|validation|predict(?:ion|ing)?)\b(?![-_ ]{1,2}(?:set|split|dataset|data)\b)|"
                         r"\b(?:when|while|during|at|in|on)\s{1,3}(?:the\s{1,3})?(?:first|second|next|initial|1st|2nd)\s{1,3}(?:eval|evaluation|validation)(?:\s{1,3}(?:run|pass|loop|step|round))?\b(?![-_ ]{1,2}(?:set|split|dataset|data)\b)|"
                         r"(?:第一次|首次|第\s{0,2}[一二1-9]\s{0,2}次)\s{0,2}(?:评估|验证|eval(?:uate|uation)?)\s{0,2}(?:时|的时候|就|阶段)|"
                         r"\b(?:evaluating|predicting)\s{1,3}(?:a|an|the|my|our)\b|"
                         # "whenever the trainer evaluates", "一到 evaluate 就"
                         r"\b(?:when|whenever|while|once)\s{1,3}(?:the\s{1,3})?(?:trainer|model)\s{1,3}(?:tries\s{1,3}to\s{1,3}|starts\s{1,3})?"
                         r"(?:evaluat(?:es|e|ing)|runs\s{1,3}(?:the\s{1,3})?(?:eval|evaluation|validation))\b|"
                         r"(?:一到|到了|一进入?|进入|一跑|刚进入?|一开始|刚开始)\s{0,2}(?:评估|验证|eval(?:uate|uation)?)|"
                         # the failure the moment evaluation ends, when its predictions are gathered: "评估一结束就爆显存",
                         # "验证快结束时 OOM", "as evaluation finishes it runs out of memory", "at the end of the eval loop"
                         r"(?:评估|验证|预测|eval(?:uate|uation)?|validation)\s{0,2}(?:(?:一|刚)\s{0,2}(?:结束|完成|跑完|做完)\s{0,2}就|(?:快)?\s{0,2}(?:结束|完成|跑完)\s{0,2}(?:时|的时候))"
                         r"\s{0,3}(?:就\s{0,2})?(?:爆|OOM|显存(?:不足|不够|溢出)|报错|挂)|"
                         r"\b(?:right\s{1,3}|just\s{1,3})?(?:as|when|once)\s{1,3}(?:the\s{1,3})?(?:eval|evaluation|validation|prediction)(?:\s{1,3}loop)?\s{1,3}"
                         r"(?:finishes|finished|ends|ended|completes|completed|is\s{1,3}(?:done|finishing|ending))\W{0,3}(?:it|we|I|the\s{1,3}(?:job|process|run))?\s{0,3}"
                         r"(?:runs?\s{1,3}out|ran\s{1,3}out|OOMs?|OOMed|goes\s{1,3}OOM|went\s{1,3}OOM|crash(?:es|ed)|dies|died)\b|"
                         r"\bat\s{1,3}the\s{1,3}(?:very\s{1,3})?end\s{1,3}of\s{1,3}(?:the\s{1,3}|an?\s{1,3}|each\s{1,3}|every\s{1,3})?(?:eval|evaluation|validation|prediction)(?:\s{1,3}(?:loop|run|phase|step))?\b|"
                         # "as soon as evaluation starts", "once validation kicks in", "the moment eval begins"
                         r"\b(?:as\s{1,3}soon\s{1,3}as|once|whenever|the\s{1,3}moment)\s{1,3}(?:the\s{1,3})?(?:eval|evaluation|validation)(?:\s{1,3}(?:loop|phase|step))?\s{1,3}"
                         r"(?:starts|started|begins|began|kicks\s{1,3}in|kicked\s{1,3}in|runs|ran)\b|"
                         r"(?:评估|验证|预测|eval(?:uate|uation)?|validation|predict(?:ion)?)\s{0,2}(?:时|的时候|阶段)|"
                         # "evaluation at batch size 4 runs out of CUDA memory", "validation OOMs"
                         r"\b(?:eval|evaluation|validation)\b(?:\s{1,3}(?:at|with)\s{1,3}(?:a\s{1,3})?batch[- _]?size\s{0,3}(?:of\s{1,3})?\d{1,4})?"
                         r"\s{1,3}(?:runs?\s{1,3}out|ran\s{1,3}out|OOMs?|OOMed|goes\s{1,3}OOM|went\s{1,3}OOM)\b", _I), "evaluation"),
    ("phase", re.compile(r"\b(?:when|while|during)\s{1,3}(?:the\s{1,3})?(?:model\s{1,3})?load(?:ing)?\b|"
                         # "OOM at model loading", "on checkpoint load", "in from_pretrained"
                         r"\b(?:at|on|during|in)\s{1,3}(?:the\s{1,3})?(?:model|checkpoint|weights?)\s{1,3}load(?:ing)?\b|\bin\s{1,3}from_pretrained\b|"
                         # "while the model is loading", "when the checkpoint shards are being loaded"
                         r"\b(?:when|while|as)\s{1,3}(?:the\s{1,3})?(?:(?:next|second|new|other|reference|reward|base|policy)\s{1,3})?(?:model|weights|checkpoint(?:\s{1,3}shards)?)\s{1,3}(?:is|are|was|were)"
                         r"\s{1,3}(?:being\s{1,3})?load(?:ing|ed)\b|"
                         r"加载\s{0,2}(?:模型|checkpoint(?:\s{0,2}shards)?|权重)?\s{0,2}(?:时|的时候|过程中|期间|到一半|阶段)|"
                         # "加载到第 18 个分片的时候": loading the checkpoint's shards
                         r"加载到\s{0,2}第\s{0,2}\d{1,4}\s{0,2}个?\s{0,2}(?:分片|shard)|一加载\s{0,2}(?:模型|权重|checkpoint)?\s{0,2}(?:进程)?\s{0,2}就|"
                         # what loading itself takes: "模型加载进内存最高要占 62G", "加载权重到显存时就爆了", "loading the model into RAM takes 60 GB"
                         # (not what comes after it: "模型加载进内存后", "after loading the model into RAM")
                         r"(?:(?:模型|权重|checkpoint|ckpt)\s{0,2}(?:在)?\s{0,2}加载|加载\s{0,2}(?:模型|权重|checkpoint|ckpt))\s{0,2}(?:进|到|至)\s{0,2}(?:内存|CPU|显存|GPU|显卡)"
                         r"\s{0,2}(?:里|中|上)?\s{0,2}(?:时|的时候|过程中|期间|阶段|最高|峰值|就|要|需要|直接|占|都|会)|"
                         r"\bloading\s{1,3}(?:the\s{1,3}|my\s{1,3})?(?:model|weights|checkpoint)\s{1,3}(?:in)?to\s{1,3}(?:the\s{1,3})?(?:ram|memory|cpu|host|gpu|vram)\b"
                         r"(?:\s{1,3}memory)?\s{1,3}(?:alone\s{1,3})?(?:takes|uses|needs|peaks|eats|fills|consumes|requires)\b|"
                         r"\b(?:model|weights?|checkpoint)\s{1,3}loading\s{1,3}(?:alone\s{1,3})?(?:takes|uses|needs|peaks|eats|fills|consumes|requires)\b|"
                         # before the weights reach the card: "模型还没放到 GPU 上", "weights not yet moved to the GPU"
                         r"(?:模型|权重|参数)\s{0,2}(?:都|也)?\s{0,2}还\s{0,2}没(?:有)?\s{0,2}(?:放|加载|搬|移|拷|load|to)\s{0,2}(?:到|进|上)\s{0,2}(?:GPU|显卡|卡|cuda)|"
                         r"\bbefore\s{1,3}(?:the\s{1,3})?(?:model|weights)\s{1,3}(?:is|are|was|were|even\s{1,3}gets?|gets?|got)\s{1,3}(?:even\s{1,3})?(?:moved|put|sent|copied|loaded)\s{1,3}(?:on|to|onto)\s{1,3}(?:the\s{1,3})?(?:gpus?|cuda|device)\b|"
                         # a kill the moment loading ends: "right after the checkpoint is loaded", "just after loading the weights"
                         r"\b(?:right|just|immediately|straight)\s{1,3}after\s{1,3}(?:(?:the\s{1,3}|my\s{1,3})?(?:model|checkpoint|weights|state\s{1,3}dict)"
                         r"\s{1,3}(?:is|are|was|were|has\s{1,3}been|have\s{1,3}been|gets?|got)\s{1,3}loaded|loading\s{1,3}(?:the\s{1,3}|my\s{1,3})?(?:model|checkpoint|weights|state\s{1,3}dict))\b|"
                         # host RAM filling while the weights load on the CPU: "在 CPU 上加载模型……内存直接爆了"
                         r"(?:在|用)\s{0,2}CPU\s{0,2}(?:上|里)?\s{0,2}加载\s{0,2}(?:模型|权重)[^。\n]{0,40}?(?<!显)内存[^。\n]{0,8}?(?:爆|满|不够|溢出|OOM)|"
                         r"\bload(?:s|ed|ing)?\s{1,3}(?:the\s{1,3})?(?:model|weights)\s{1,3}(?:on|in|into)\s{1,3}(?:the\s{1,3})?(?:cpu|ram)\b[^.\n]{0,60}?\b(?:ram|memory)\b[^.\n]{0,20}?"
                         r"\b(?:runs?\s{1,3}out|ran\s{1,3}out|fills?\s{1,3}up|filled\s{1,3}up|blows?\s{1,3}up|blew\s{1,3}up|explodes?|exploded|is\s{1,3}exhausted)", _I), "loading"),
    ("phase", re.compile(r"\b(?:when|while|during)\s{1,3}(?:the\s{1,3})?(?:tokeni[sz]\w{0,6}|preprocess\w{0,6}|data\s{1,3}loading)|"
                         r"分词(?:时|的时候)|预处理\s{0,2}(?:数据)?\s{0,2}(?:时|的时候|到一半)|"
                         # "Running tokenizer on dataset 阶段", "during the tokenization stage", "分词阶段"
                         r"(?:running\s{1,3}tokenizer\s{1,3}on\s{1,3}dataset|tokeni[sz]ation|tokeni[sz]ing|分词|预处理)\s{0,3}(?:阶段|过程中|期间|\s(?:stage|step|phase)\b)", _I), "data"),
    ("phase", re.compile(r"\b(?:at|in|during|on)\s{1,3}(?:the\s{1,3})?(?:first\s{1,3})?optimi[sz]er\s{1,3}step\b|"
                         r"\binitiali[sz]\w{0,3}\s{1,3}(?:the\s{1,3})?optimi[sz]er\b|优化器\s{0,2}(?:更新|初始化|step)|"
                         # the update in words: "到更新参数那一步", "参数更新的时候", "at the weight update", "when optimizer.step() runs"
                         r"(?:更新参数|参数更新|更新权重|权重更新|optimizer\.step\(\)|optimizer\s{0,2}step)\s{0,2}(?:的)?\s{0,2}(?:那一步|这一步|那步|这步|时|的时候|阶段|那里|这里)|"
                         r"\b(?:at|during|in|on)\s{1,3}(?:the\s{1,3})?(?:parameter|weight)s?\s{1,3}update\b|"
                         r"\b(?:when|while|once|as)\s{1,3}(?:the\s{1,3})?optimi[sz]er\s{1,3}(?:steps|stepped|updates|updated|runs|ran)\b|"
                         r"\b(?:at|in|during|on)\s{1,3}optimi[sz]er\.step\(\)", _I), "optimizer"),
    # "in the first backward", "during the backward pass", "反向传播时": the backward pass itself
    ("phase", re.compile(r"\b(?:in|during|at)\s{1,3}(?:the\s{1,3})?(?:first\s{1,3})?backward(?:\s{1,3}pass)?\b(?![\s-]{1,3}compat)|\bwhile\s{1,3}backpropagating\b|"
                         r"(?:反向传播|反向|backward)\s{0,2}(?:时|的时候|阶段|过程中)", _I), "backward"),
    # The rollout engine taking its share, or the generation itself: "as soon as vLLM starts", "vLLM fails to wake up",
    # "during rollouts", "vllm 唤醒时", "rollout 阶段", "生成的时候".
    ("phase", re.compile(r"\b(?:as\s{1,3}soon\s{1,3}as|when(?:ever)?|while|once)\s{1,3}(?:the\s{1,3})?(?:vllm|sglang|rollout|inference)(?:\s{1,3}engine)?\s{1,3}"
                         r"(?:starts?|started|starting|is\s{1,3}starting|launches|initiali[sz](?:es|ed|ing|e)|wakes?\s{1,3}up|woke\s{1,3}up|is\s{1,3}woken(?:\s{1,3}up)?)\b|"
                         r"\b(?:vllm|sglang)(?:\s{1,3}engine)?\s{1,3}(?:fails?|failed|cannot|can't|could\s{1,3}not)\s{1,3}(?:to\s{1,3})?(?:wake\s{1,3}up|start|initiali[sz]e)\b|"
                         r"\b(?:during|in)\s{1,3}(?:the\s{1,3})?(?:rollouts?|generation)(?:\s{1,3}(?:phase|stage|step))?\b(?!\s{1,3}(?:of|for)\s{1,3}(?:the\s{1,3})?(?:data|dataset|synthetic))|"
                         r"\bwhile\s{1,3}(?:generating|sampling)\s{1,3}(?:the\s{1,3})?(?:rollouts?|completions?|responses?)\b|"
                         r"(?:vllm|sglang|rollout|采样|生成)\s{0,2}(?:引擎)?\s{0,2}(?:启动|初始化|唤醒|wake[_ ]?up)?\s{0,2}(?:时|的时候|阶段|过程中)|"
                         r"(?:vllm|sglang)\s{0,2}(?:引擎)?\s{0,2}(?:一)?(?:启动|初始化|唤醒)\s{0,2}(?:就|失败)", _I), "generate"),
    # "on the very first step", "训练一开始就": the training step itself, as the question's own option words it.
    ("phase", re.compile(r"\b(?:on|at|in)\s{1,3}the\s{1,3}(?:very\s{1,3})?first\s{1,3}(?:training\s{1,3})?(?:step|iteration|batch)\b|"
                         r"\bat\s{1,3}the\s{1,3}(?:very\s{1,3})?(?:start|beginning)\b(?!\s{1,3}of\s{1,3}(?:the\s{1,3})?(?:eval\w{0,6}|validation|predict\w{0,3}|sav\w{1,3}|load\w{0,3}))|"
                         r"(?:训练|跑)\s{0,2}一开始就|一开始训练就|第一步就|"
                         # the model loaded and training about to start: "加载完模型就 OOM", "模型加载完之后就爆了"
                         r"(?:(?:模型|权重)\s{0,2}加载完(?:成|毕)?|加载完(?:成|毕)?\s{0,2}(?:模型|权重))\s{0,2}(?:了)?\s{0,2}(?:之后|以后|后)?\s{0,2}(?:一开始训练\s{0,2})?就\s{0,2}(?:OOM|爆|显存)|"
                         # verl's actor training step (update_actor), as against its rollouts (generate_sequences)
                         r"(?<![\w.])update_actor(?!\w)|\b(?:in|during|at)\s{1,3}(?:the\s{1,3})?actor\s{1,3}update\b|(?:actor|策略)\s{0,2}(?:更新|训练)\s{0,2}(?:时|的时候|阶段)", _I), "forward"),
    ("data.in_memory", re.compile(r"\b(?:whole|entire|full)\s{1,3}(?:tokeni[sz]ed\s{1,3})?dataset\s{1,3}in\s{1,3}(?:ram|memory)\b|"
                                  # "整个数据集都加载到内存里", "把全部数据读进内存"
                                  r"(?:整个|全部|所有)\s{0,2}(?:的)?\s{0,2}(?:数据集|数据)\s{0,3}(?:都)?\s{0,2}(?:加载|读|放|载入|存)(?:到|进|在)\s{0,2}(?:了\s{0,2})?(?<!显)内存", _I), True),
    # The training images' side: "图片分辨率 1024", "image size 448", "448x448 images", "分辨率 1344×1344" (a non-square size says no one side).
    ("train.image_size", re.compile(r"""(?:(?<![\w"'])(?:image|img|picture)s?[- ]?(?:size|resolution|side)(?![\w"'])|"""
                                    r"(?:图片|图像|输入图片?)\s{0,2}(?:尺寸|分辨率|大小|边长)|分辨率)" + _SET_TO +
                                    r"(\d{2,5})(?:\s{0,2}[x×*]\s{0,2}(\d{2,5}))?(?!\d|[./-]\d)(?!\s{0,2}(?:tokens?|images?|张|MB|KB|GB|M\b|K\b))|"
                                    r"(?<![\w.])(\d{2,5})\s{0,2}[x×*]\s{0,2}(\d{2,5})\s{0,2}(?:px\s{0,2}|pixels?\s{1,3}|像素\s{0,2})?(?:的\s{0,2})?(?:\bimages?\b|\bpictures?\b|\bphotos?\b|图片|图像)|"
                                    # the images named first: "4 images at 768x768", "photos of 1024×1024", "图片都是 768*768" (not "resized to")
                                    r"\b(?:images?|pictures?|photos?)\s{1,3}(?:at|of|sized|in)\s{1,3}(?:a\s{1,3})?(?:resolution\s{1,3}(?:of\s{1,3})?)?(\d{2,5})\s{0,2}[x×*]\s{0,2}(\d{2,5})(?!\d|\.\d)|"
                                    r"(?:图片|图像)\s{0,2}(?:都|也)?\s{0,2}(?:是|为)\s{0,2}(\d{2,5})\s{0,2}[x×*]\s{0,2}(\d{2,5})(?!\d|\.\d)", _I), "image_side"),
    # Images in one training example: "4 images per sample", "each example has 8 images", "每条样本 4 张图".
    ("train.images_per_sample", re.compile(r"(?<![\w.])(\d{1,3})\s{1,3}images?\s{1,3}(?:per|in\s{1,3}each|for\s{1,3}each|in\s{1,3}every)\s{1,3}(?:sample|example|conversation|row|item|prompt)\b|"
                                           r"\b(?:each|every)\s{1,3}(?:sample|example|conversation|row|item)\s{1,3}(?:has|contains|includes|carries)\s{1,3}(?:up\s{1,3}to\s{1,3})?(\d{1,3})\s{1,3}images?\b|"
                                           r"(?:每条|每个|每一条|每一个|单条|一条)\s{0,2}(?:训练)?\s{0,2}(?:样本|数据|对话|样例)\s{0,2}(?:都)?\s{0,2}(?:有|含|包含|带|带有)?\s{0,2}(?:最多)?\s{0,2}"
                                           r"(\d{1,3}|[一两二三四五六七八九十])\s{0,2}(?:张|幅)\s{0,2}(?:图|图片|图像)", _I), "small_count"),
    ("eval.compute_metrics", re.compile(r"\bcompute_(?:metrics?|accuracy)\b", _I), True),
    # The evaluation set's size with its noun: "an evaluation set of 469,530 sentences", "the validation set has 12k examples"
    # is read below by _EVAL_SET; here the count before the words.
    ("eval.samples", re.compile(r"\b(\d{1,3}(?:,\d{3}){1,2}|\d{1,7})\s{1,2}(?:eval(?:uation)?|validation|val|dev)\s{1,2}"
                                r"(?:samples|examples|rows|items|sentences|records|texts|documents|pairs|questions|prompts)\b|(?:评估集|验证集)\s{0,3}(?:有|为|共|是)?\s{0,3}(\d{1,7})(?![\d.,])"
                                # a count of samples, not of tokens, GPUs or steps, and never the first digits of a longer number
                                r"(?=\s{0,2}(?:条|个|样本|samples|examples))|(?:评估集|验证集)\s{0,3}(?:有|为|共|是)?\s{0,3}"
                                r"(\d{1,7})(?![\d.,])(?!\s{0,2}[\w%])",
                                _I), "count"),
    ("eval.samples", re.compile(r"\b(?:eval(?:uation)?|validation|val|dev)(?:[- _](?:set|split|dataset|data)|\s{1,3}dataset)\s{1,3}(?:of|with|has|had|contains|containing|holds|is)?"
                                r"\s{0,3}(\d{1,3}(?:,\d{3}){1,2}|\d{1,7})\s{1,3}" + _ITEMS + r"|"
                                r"\b(\d{1,3}(?:,\d{3}){1,2}|\d{1,7})\s{1,3}" + _ITEMS + r"\s{1,3}(?:in|for)\s{1,3}(?:the\s{1,3}|my\s{1,3}|our\s{1,3})?"
                                r"(?:eval(?:uation)?|validation|val|dev)(?:[- _](?:set|split|dataset|data)|\s{1,3}dataset)\b|"
                                r"(?<![\d.,])(\d{1,7})\s{0,2}(?:条|个)\s{0,2}(?:的)?\s{0,2}(?:评估|验证)\s{0,2}(?:数据|样本|集)", _I), "count"),
    ("eval.enabled", re.compile(r"\beval(?:uation)?\s{1,3}(?:runs|ran|starts|started|is\s{1,3}on|is\s{1,3}enabled)\b|开启(?:了)?评估", _I), True),
    ("log.after_eval", re.compile(r"\bafter\s{1,3}(?:an?\s{1,3}|the\s{1,3})?(?:first\s{1,3}|an?\s{1,3})?(?:eval|evaluation|validation)\b|评估(?:之)?后", _I), True),
    # The first step named by its number is a failure before any step completed: "OOM at step 0", "at step 1/1000"
    # (a 1-indexed counter's first), "第 0 步就爆"; "after step 1" has one behind it and is read below.
    ("log.after_steps", re.compile(r"\b(?:at|on|in|during)\s{1,3}(?:the\s{1,3})?(?:training\s{1,3})?(?:step|iteration|iter)\s{1,3}#?0{0,3}[01](?![\d.,])|"
                                   r"第\s{0,2}0{0,3}[01]\s{0,2}(?:步|个\s{0,2}step|次迭代)", _I), "first_step"),
    ("log.after_steps", re.compile(r"\bat\s{1,3}step\s{1,3}(?!0{0,3}[01](?![\d.,]))\d{1,7}\b|\bafter\s{1,3}step\s{1,3}(?!0{1,4}(?![\d.,]))\d{1,7}\b|"
                                   r"\bafter\s{1,3}\d{1,7}\s{1,3}(?:steps|iterations)\b|第\s{0,2}(?!0{0,3}[01](?!\d))\d{1,7}\s{0,2}步|"
                                   r"\b(?:at|in)\s{1,3}epoch\s{1,3}\d{1,5}\b|\b(?:on|at|in)\s{1,3}the\s{1,3}(?:second|2nd|third|3rd|\d{1,5}th)\s{1,3}(?:step|iteration|epoch)\b|"
                                   r"\b(?:ran|runs|run|trained|trains|went)\s{1,3}(?:fine\s{1,3}|ok\s{1,3}|well\s{1,3})?for\s{1,3}(?:about\s{1,3}|around\s{1,3}|~\s{0,1})?"
                                   r"(?:a\s{1,3}few|a\s{1,3}couple|several|some|many|hundreds|thousands|\d{1,7}|half|hours|a\s{1,3}while)\b|"
                                   r"(?:跑|训练|训)了?\s{0,2}(?:几十|几百|几千|两|\d{1,6}|一段时间|一会儿?|半天)\s{0,2}(?:步|个?\s{0,1}steps?|轮|个?\s{0,1}epochs?)?\s{0,2}(?:就|才|之后|以后|后)|"
                                   r"跑到一半|训练到一半|第\s{0,2}[二三四五六七八九十\d]{1,3}\s{0,2}个?\s{0,2}epoch|epoch\s{0,2}跑完|"
                                   # a whole epoch done before the failure: "the first epoch completes", "after one epoch", "第一轮跑完"
                                   r"\b(?:the\s{1,3})?first\s{1,3}(?:full\s{1,3})?epoch\s{1,3}(?:completes|completed|finishes|finished|ends|ended|runs\s{1,3}fine|ran\s{1,3}fine|"
                                   r"goes\s{1,3}(?:fine|through)|went\s{1,3}(?:fine|through)|is\s{1,3}fine|was\s{1,3}fine|trains\s{1,3}fine|trained\s{1,3}fine)\b|"
                                   r"\bafter\s{1,3}(?:the\s{1,3})?(?:first|one|1|an)\s{1,3}(?:full\s{1,3}|whole\s{1,3})?epoch\b|"
                                   r"\b(?:when|once|as)\s{1,3}(?:the\s{1,3})?(?:second|2nd|third|3rd|next)\s{1,3}epoch\s{1,3}(?:starts|begins|started|began)\b|"
                                   r"\bat\s{1,3}the\s{1,3}(?:start|beginning)\s{1,3}of\s{1,3}(?:the\s{1,3})?(?:second|2nd|third|3rd|next)\s{1,3}epoch\b|"
                                   r"第\s{0,2}(?:一|1)\s{0,2}(?:个|轮)\s{0,2}(?:epoch)?\s{0,2}(?:跑完|结束|训练完|完成|训完)|(?:一|1)\s{0,2}个\s{0,2}epoch\s{0,2}(?:之后|以后|后|跑完|结束)|"
                                   r"\btraining\s{1,3}(?:is|was|runs|ran|itself\s{1,3}(?:is|runs))\s{1,3}(?:fine|ok|okay|normally)\b|训练(?:是)?正常|训练没(?:有)?问题|训练都能跑", _I), True),
    ("log.after_steps", re.compile(r"\b(?:on|at|in)\s{1,3}the\s{1,3}(?:very\s{1,3})?first\s{1,3}(?:training\s{1,3})?(?:step|iteration|batch)\b|"
                                   r"\bat\s{1,3}the\s{1,3}(?:very\s{1,3})?(?:start|beginning)\b(?!\s{1,3}of\s{1,3}(?:the\s{1,3})?(?:eval\w{0,6}|validation|predict\w{0,3}|sav\w{1,3}|load\w{0,3}|epoch|the\s{1,3}second))|"
                                   r"\b(?:right|straight)\s{1,3}away\b|\bimmediately\b|(?:训练|跑)\s{0,2}一开始就|一开始训练就|第一步就|"
                                   r"^\s{0,3}一开始就|"
                                   r"(?:(?:模型|权重)\s{0,2}加载完(?:成|毕)?|加载完(?:成|毕)?\s{0,2}(?:模型|权重))\s{0,2}(?:了)?\s{0,2}(?:之后|以后|后)?\s{0,2}(?:一开始训练\s{0,2})?就\s{0,2}(?:OOM|爆|显存)", _I), False),
    ("train.optimizer", re.compile(r"\bpaged[- _]?adamw?[- _]?8[- _]?bit\b", _I), "paged_adamw_8bit"),
    ("train.optimizer", re.compile(r"\b(?:adamw?[- _]?8[- _]?bit|8[- _]?bit[- _]?adamw?)\b", _I), "adamw_8bit"),
    ("train.optimizer", re.compile(r"\bpaged[- _]?adamw?[- _]?32[- _]?bit\b", _I), "paged_adamw_32bit"),
    ("train.optimizer", re.compile(r"\b(?:lion[- _]?8[- _]?bit|8[- _]?bit[- _]?lion)\b", _I), "lion_8bit"),
    # An optimizer named beside the word for one: "optimizer is adafactor", "用的 Lion 优化器" (not a bare name in advice).
    ("train.optimizer", re.compile(r"(?:\boptimi[sz]er|优化器)" + _SET_TO + r"(adafactor|lion)(?![\w-])|"
                                   r"(?<![\w-])(adafactor|lion)\s{0,3}(?:optimi[sz]er\b|优化器)", _I), "named_optimizer"),
    ("train.precision", re.compile(r"\bbf16\b|\bbfloat16\b", _I), "bf16"),
    ("train.precision", re.compile(r"\bfp16\b|\bfloat16\b|半精度", _I), "fp16"),
    ("model.new_tokens", re.compile(r"\bnew[_ ]special[_ ]tokens?\b|\badd(?:ed|ing)?\s{1,3}(?:new\s{1,3})?(?:special\s{1,3})?tokens\b|\bresize_token_embeddings\b|"
                                    r"\bresiz\w{0,3}\s{1,3}(?:the\s{1,3})?(?:vocab\w{0,6}|embeddings?)\b|新(?:的)?\s{0,2}(?:special\s{0,2})?token|resize\s{0,2}了?\s{0,2}词表|扩(?:充)?词表", _I), True),
    ("train.compile_mode", re.compile(r"(?<![\w-])max-autotune(?!-)", _I), "max-autotune"),
    # DataLoader workers; not preprocessing_num_workers, the processes that tokenise the dataset.
    ("data.num_workers", re.compile(r"(?<![\w-])(?:dataloader[_-])?num[_-]workers\s{0,2}[=:]\s{0,2}(\d{1,3})\b", _I), int),
    ("data.num_workers", re.compile(r"(?<![\w-])(?:dataloader[_-])?num[_-]workers\s{0,3}(?:is|was|为|是|设|设为|设成|设置为|改成|调到|开到|"
                                    r"(?:is\s{1,3}|was\s{1,3})?set\s{1,3}to)\s{0,3}(\d{1,3})(?!\d|[./-]\d)", _I), int),
    # Gradient accumulation in words: "梯度累积设成 8", "gradient accumulation steps of 16", "grad accum 4".
    ("train.grad_accum", re.compile(r"(?<![A-Za-z])(?:gradient|grad)[-_ ]?(?:accumulation|accum|acc)(?:[-_ ]?steps?)?" + _SET_TO +
                                    r"(\d{1,4})(?!\d|[./-]\d)|梯度累[积加](?:步数)?" + _SET_TO + r"(\d{1,4})(?!\d|[./-]\d)", _I), int),
    # datasets' map processes, in words: "preprocessing_num_workers 设成 256", "preprocessing_num_workers=64".
    ("data.preprocessing_workers", re.compile(r"(?<![\w-])preprocessing[_-]num[_-]workers\s{0,2}(?:=|:|：|is|of|to|为|是|设成|设为|设置为|设置成|改成|开到)?"
                                              r"\s{0,3}(\d{1,4})(?!\d|[./-]\d)", _I), int),
    # The machine's RAM in words: "960 GB RAM", "RAM: 64GB", "512GB of system memory", "内存 320g", "CPU内存（252G）".
    ("host.ram_total_gib", re.compile(r"(?<![\w.])(\d{1,5}(?:\.\d)?)\s{0,2}(g|gb|gib|t|tb|tib)\s{0,2}(?:of\s{1,3})?"
                                      r"(?:(?:system|host|cpu|main)\s{1,3}(?:ram|memory)|ram|memory\s{0,2}\(ram\))(?![A-Za-z])|"
                                      r"\b(?:(?:system|host|cpu|main)\s{1,3}(?:ram|memory)|ram)\s{0,3}(?:of|is|:|=)?\s{0,3}(\d{1,5}(?:\.\d)?)\s{0,2}(g|gb|gib|t|tb|tib)\b|"
                                      r"(?<![\d.])(\d{1,5}(?:\.\d)?)\s{0,2}(g|gb|t|tb)\s{0,2}(?:的)?\s{0,2}(?:系统|主机|机器|服务器|CPU\s{0,2})?内存|"
                                      r"(?:系统|主机|机器|服务器|CPU\s{0,2})?内存\s{0,3}(?:[:：（(]|为|是|有|只有|共)?\s{0,3}(\d{1,5}(?:\.\d)?)\s{0,2}(?:个\s{0,2})?(g|gb|t|tb)(?![A-Za-z])", _I), "ram"),
    # "SFT with the same config fits, DPO OOMs": the objective's own models are what does not fit.
    ("log.only_with_objective", re.compile(r"\bsft\b[^.\n]{0,60}?\b(?:works|fits|runs|trains|is\s{1,3}fine|ok)\b[^.\n]{0,60}?\b(?:dpo|kto|orpo|ppo|grpo)\b|"
                                           r"sft[^。\n]{0,30}?(?:能跑|没问题|正常|可以跑)[^。\n]{0,30}?(?:dpo|kto|orpo|ppo|grpo)", _I), True),
    ("log.failed_step", re.compile(r"\b(?:at|on|in)\s{1,3}step\s{1,3}(\d{1,7})\b|第\s{0,2}(\d{1,7})\s{0,2}步", _I), "count"),
    ("eval.steps", re.compile(r"(?<![A-Za-z])eval[_ ]steps\s{0,2}(?:[=:：]|is|正好也是|也是|正好是|是|为)?\s{0,2}(\d{1,7})\b", _I), "count"),
    ("lora.rank", re.compile(r"\b(?:lora[- _]?)?(?:rank|r)\s{0,2}(?:=|:)\s{0,2}(\d{1,4})\b", _I), int),
    # The rank beside the word LoRA: "lora rank 设成 64", "LoRA 秩 16", "a LoRA of rank 64", "rank-16 LoRA", "rank 128 的 LoRA".
    ("lora.rank", re.compile(r"(?<![A-Za-z])lora[-_ ]?(?:rank|秩)" + _SET_TO + r"(\d{1,4})(?!\d|[./-]\d)|"
                             r"(?<![A-Za-z])lora\s{1,3}(?:of|with|at)\s{1,3}(?:a\s{1,3})?rank\s{0,3}(?:of\s{1,3})?(\d{1,4})(?!\d|[./-]\d)|"
                             r"\brank-(\d{1,4})\s{0,2}lora(?![A-Za-z])|\brank\s{0,2}(\d{1,4})\s{0,2}的\s{0,2}lora(?![A-Za-z])", _I), int),
]


# Quantisation formats other than bitsandbytes': beside them a bare "4-bit"/"8-bit" names their bits, not NF4 or LLM.int8.
_OTHER_QUANTISATION = re.compile(r"(?<![A-Za-z])(?:gptq|awq|exl2|mlx|gguf|ggml|hqq|aqlm|eetq|marlin|int4|q[2-8]_k(?:_[msl])?|q[48]_[01])(?![A-Za-z])", _I)
# A mention right after a denial states nothing: "no DeepSpeed, no FSDP", "not 4-bit", "不用 deepspeed".
_DENIED = re.compile(r"(?:\b(?:no|not|without|nor|non)|不用|没用|没有用|没有|没开|不是|未用|未)\s{0,3}(?:using\s{1,3}|use\s{1,3}|用\s{0,2})?$", _I)
DENIABLE = {"dist.strategy", "dist.zero_stage", "train.method", "model.load_dtype", "train.objective", "dist.offload_optimizer",
            "train.precision", "log.notebook", "rl.vllm", "train.attention"}


# "evaluation at batch size 4": the batch that follows is the evaluation's, not training's.
_EVAL_BEFORE = re.compile(r"(?:\beval\w{0,6}|\bvalidation|评估|验证)\s{1,3}(?:at|with|uses|used|runs\s{1,3}at)\s{1,3}(?:a\s{1,3})?$", _I)


# "ViT 冻结了", "视觉编码器不冻结": the word freeze said of the vision tower, which is train.freeze_vision.
_VISION_BEFORE = re.compile(_VISION + r"\s{0,3}(?:weights\s{1,3}|的\s{0,2}参数\s{0,2})?(?:是|也|都|已|已经|不|没有?|未|要|会)?\s{0,2}$", _I)


def _of_vision(fact: str, match: re.Match, text: str) -> bool:
    return fact == "train.method" and match.group(0) in ("冻结",) and bool(_VISION_BEFORE.search(text[max(0, match.start() - 40):match.start()]))


def _of_evaluation(fact: str, match: re.Match, text: str) -> bool:
    return fact == "train.batch_size" and bool(_EVAL_BEFORE.search(text[max(0, match.start() - 32):match.start()]))


# A stage said to work or be done is another run than the one that failed: "预训练和 SFT 都能跑，DPO 就 OOM",
# "PPO works fine, GRPO runs out of memory", "预训练跑完了，SFT 的时候爆显存".
# The same for a setting's value: "batch size 4 works, batch size 8 runs out" (the reader goes on to the next mention).
OF_A_RUN = {"train.objective", "train.batch_size", "train.seq_len", "train.grad_accum", "lora.rank", "dist.zero_stage",
            "train.eval_batch_size", "rl.num_generations", "lora.targets", "train.image_size", "train.images_per_sample", "data.num_workers"}


def _of_another_run(fact: str, match: re.Match, text: str) -> str | None:
    """'worked' for a mention in a clause that says its run worked, 'other' when that run is also from before or
    after ("之前 batch 开到 3 都能跑"); None otherwise. A run that worked may still be the only one the text gives a
    value for ("batch size 4 runs fine for 200 steps, then OOMs"): that value stands when no other mention does."""
    if fact not in OF_A_RUN:
        return None
    clause = runs.around(text, match.start(), runs.CLAUSE_END, 120)
    if not runs.worked(clause):
        return None
    return "other" if runs.OTHER_RUN.search(clause) else "worked"


# ... or a switching-off right after it: "deepspeed 也关了", "DeepSpeed disabled", "turned DeepSpeed off".
_DENIED_AFTER = re.compile(r"\s{0,3}(?:也|都|已经|已|就)?\s{0,2}(?:关了|关掉|关闭|去掉|禁用|停用|不开|没开)|"
                           r"\s{0,3}(?:is\s{1,3}|was\s{1,3}|got\s{1,3})?(?:off|disabled|removed|turned\s{1,3}off)\b", _I)


def _denied(fact: str, match: re.Match, text: str) -> bool:
    return fact in DENIABLE and bool(_DENIED.search(text[max(0, match.start() - 16):match.start()])
                                     or _DENIED_AFTER.match(text, match.end(), match.end() + 24))


# Facts whose words also make up the names of folders and checkpoints: "Colab/SD_LoRA/train.py",
# "madebyollin/sdxl-vae-fp16-fix", "TheBloke/Llama-2-7B-fp16" name things and set nothing.
NAMED = {"train.method", "train.precision"}
_TOKEN_END = re.compile(r"""[\s"'`()\[\]{}<>,;=，。；：（）]""")
_FILE_NAME = re.compile(r"\.[A-Za-z]{1,5}$")
# Matches set aside as names before a fact's pattern stops looking (a log of ten thousand paths).
MAX_NAMES_SKIPPED = 64


def _in_a_name(match: re.Match, text: str) -> bool:
    """Whether the match sits inside a path or Hub id as part of a longer name.

    A word that is a whole path segment ("peft/LoRA", "saves/llama3/lora/sft") or sits in the file
    name a path ends with (a script or config file: "configs/train_lora.yaml") is read as it is
    anywhere; a directory or repository name that merely contains it is a name.
    """
    start, end = match.start(), match.end()
    before = _TOKEN_END.search(text[max(0, start - 300):start][::-1])
    left = start - before.start() if before else max(0, start - 300)
    after = _TOKEN_END.search(text, end, end + 300)
    right = after.start() if after else min(len(text), end + 300)
    token = text[left:right]
    if "/" not in token:
        return False
    offset = start - left
    seg_start = token.rfind("/", 0, offset) + 1
    seg_end = token.find("/", offset)
    segment = token[seg_start: seg_end if seg_end >= 0 else len(token)]
    if segment.lower() == match.group(0).lower():
        return False
    return not (seg_end < 0 and _FILE_NAME.search(segment))


def _seq(match: re.Match) -> int | None:
    number = int(match.group(1).replace(",", ""))
    if match.group(2):
        number *= 1024
    return number if 16 <= number <= 2_000_000 else None


PROSE_HEAD_LINES = 3000
PROSE_TAIL_LINES = 1000
PROSE_LINE_CHARS = 1000


def prose(text: str) -> str:
    """The part of a paste where people state their set-up in words, bounded in size.

    A 10 MiB training log is mostly repeated or numbered progress lines; the
    user's own sentences sit near the start or the end. Distinct lines only, each
    cut to a sentence's length, the first and last few thousand: the ~30 patterns
    below then cost the same for a 10 MiB log as for a 200 KiB one.
    """
    if len(text) <= PROSE_LINE_CHARS * 64:
        return text
    seen: set[str] = set()
    lines = []
    for line in text.splitlines():
        line = line[:PROSE_LINE_CHARS]
        if line.strip() and line not in seen:
            seen.add(line)
            lines.append(line)
    if len(lines) > PROSE_HEAD_LINES + PROSE_TAIL_LINES:
        lines = lines[:PROSE_HEAD_LINES] + lines[-PROSE_TAIL_LINES:]
    return "\n".join(lines)


# A consumer card named by its bare number in a list of set-up words ("qwen2.5-7b lora，4090，seq 2048").
_BARE_CARD = re.compile(r"(?<![\w.#/-])(?:rtx\s{0,1})?((?:2080|3090|4070)\s{0,1}ti|3060|3070|3080|3090|4060\s{0,1}ti|4070|4080|4090d?|5080|5090)"
                        r"(?![\w.]|\s{0,2}(?:steps?|samples?|examples?|tokens?|rows?|iterations?|it/s|mib|mb|gb|g\b))", _I)


_COUNTED = re.compile(r"(?:steps?|iter\w{0,6}|epochs?|batch(?:es)?|samples?|rows?|第|of|/)\s{0,2}[:#=]?\s{0,2}$", re.I)


def _bare_card(text: str):
    from ..catalog import resolve_gpu_id

    for match in _BARE_CARD.finditer(text):
        if _COUNTED.search(text[max(0, match.start() - 16):match.start()]):
            continue  # "step 4090", "第 3090 步"
        gpu = resolve_gpu_id("rtx " + " ".join(match.group(1).split()))
        if gpu is not None:
            return gpu, match.group(0)
    return None


# A launch names more models than the one it trains: OpenRLHF's --reward_pretrain/--critic_pretrain/--ref_pretrain,
# TRL's --reward_model_path/--ref_model, verl's critic.model.path/reward_model.model.path. Only the policy
# (--pretrain, actor_rollout_ref.model.path, --model_name_or_path) is model.name; the others' values are blanked.
_OTHER_MODEL = re.compile(r"(?<![\w.-])(?:--)?(?:(?:reward|critic|ref|reference)_pretrain|(?:reward|critic|ref|reference)_model"
                          r"(?:_name_or_path|_path|_name)?|(?:critic|ref|reward_model|rm)\.model\.path)"
                          r"""(?:[ \t]{1,4}|[ \t]{0,2}[=:][ \t]{0,2})["']?([^\s"',;]{1,300})""", _I)


def _without_other_models(text: str) -> str:
    if "_pretrain" not in text and "_model" not in text and "model.path" not in text:
        return text
    return _OTHER_MODEL.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)] + " " * len(m.group(1)), text)


def extract(text: str) -> Iterator[Finding]:
    from ..catalog import find_gpu_mentions, find_model_mentions, find_model_names

    text = _without_other_models(text)
    model = next(iter(find_model_mentions(text)), None) or next(iter(find_model_names(prose(text))), None)
    if model is not None:
        model_id, matched = model
        yield Finding("model.name", model_id, matched)
    gpu = next(iter(find_gpu_mentions(text)), None)
    if gpu is not None:
        # The card's memory comes from the catalog through gpu.name; gpu.memory_gib is left
        # to what PyTorch or nvidia-smi measured, which is closer to what the job could use.
        gpu_id, _, matched = gpu
        yield Finding("gpu.name", gpu_id, matched)
    elif (bare := _bare_card(prose(text))) is not None:
        yield Finding("gpu.name", *bare)
    text = prose(text)
    best: dict[str, tuple[int, int, object, re.Match]] = {}
    worked: dict[str, tuple[int, int, object, re.Match]] = {}
    for order, (fact, pattern, kind) in enumerate(_PATTERNS):
        names = 0
        for match in pattern.finditer(text):
            if fact in best and best[fact][0] <= match.start():
                break
            named = fact in NAMED and _in_a_name(match, text)
            names += named
            if names > MAX_NAMES_SKIPPED:
                break
            value = None if _denied(fact, match, text) or named or _of_evaluation(fact, match, text) or _of_vision(fact, match, text) \
                else _value(kind, match, text)
            if value is None:
                continue
            another = _of_another_run(fact, match, text)
            if another == "worked":
                worked.setdefault(fact, (match.start(), order, value, match))
            if another is None:
                best[fact] = (match.start(), order, value, match)
                break
    for fact, mention in worked.items():
        best.setdefault(fact, mention)
    plain = _plain_launch(text) if "dist.strategy" not in best else None
    if plain is not None:
        best["dist.strategy"] = (plain.start(), len(_PATTERNS), "ddp", plain)
    if best.get("model.load_dtype", (0, 0, None))[2] in ("nf4", "int8") and _OTHER_QUANTISATION.search(text):
        # "GPTQ-4bit", "AWQ in 4-bit", "mlx-community/...-4bit": 4 bits of another format, not bitsandbytes' NF4.
        del best["model.load_dtype"]
    for fact, (_, _, value, match) in sorted(best.items(), key=lambda item: item[1][:2]):
        if value == "not_flash":
            # Without flash attention the kernel is eager or SDPA, which the words do not say.
            value = unknown("flash")
        yield Finding(fact, value, snippet(text, match.start(), match.end()))


_LAUNCHER = re.compile(r"\btorchrun\b|--nproc[-_]per[-_]node|\baccelerate\s{1,3}launch\b|torch\.distributed\.(?:launch|run)\b", _I)
_NO_SHARDING = re.compile(r"\b(?:no|without|not|nor)\s{1,3}(?:using\s{1,3})?(?:deepspeed|fsdp|zero)\b|(?:不用|没用|没有用|没有)\s{0,2}(?:deepspeed|fsdp|zero)", _I)


def _plain_launch(text: str) -> re.Match | None:
    """Several processes launched with ZeRO and FSDP denied in so many words: plain DDP."""
    if _LAUNCHER.search(text) is None:
        return None
    return _NO_SHARDING.search(text)


# Words right before a memory size that make it the GPU's: "GPU 内存", "显卡内存", "单卡".
_GPU_BEFORE = re.compile(r"(?:gpu|cuda|vram|显卡|显存|卡|npu)\s{0,2}$", re.I)
_GPU_AFTER = re.compile(r"\s{0,2}的\s{0,3}(?:显卡|卡|gpu|[a-z]{0,6}\s{0,2}\d{2,4})", re.I)

# Words before "N tokens" that make it an amount of data or output, not a sequence length.
_NOT_A_LENGTH = re.compile(r"(?:trained|training|train|dataset|corpus|total|over|on|of\s{1,3}data|new|generat\w{0,3}|output|max_new|"
                           r"per\s{1,3}second|/s)\W{0,3}$", re.I)


_LATER_EPOCH = re.compile(r"\bepoch\s{0,3}[:#=]?\s{0,2}(?:0{0,3}[2-9]|[1-9]\d{1,4})\b|\b(?:second|third|next|later|2nd|3rd|\d{1,4}th)\s{1,3}epoch|"
                          r"第\s{0,2}[二三四五六七八九十2-9]\s{0,2}(?:个\s{0,2})?(?:epoch|轮)|(?:下一个|后面的?)\s{0,2}(?:epoch|轮)", re.IGNORECASE)


_ZH_SMALL = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10}


def _value(kind, match: re.Match, text: str):
    """The fact's value a match means, or None when it means none."""
    if kind == "seq":
        return _seq(match)
    if kind == "seq_tokens":
        if _NOT_A_LENGTH.search(text[max(0, match.start() - 24):match.start()]):
            return None
        return _seq(match)
    if kind == "dtype":
        word = next(g for g in match.groups() if g).lower()
        return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(word, word)
    if kind == "stage":
        return int(next(g for g in match.groups() if g))
    if kind == "count":
        return int(next(g for g in match.groups() if g).replace(",", "")) or None
    if kind == "ram":
        if _GPU_BEFORE.search(text[max(0, match.start() - 12):match.start()]) or _GPU_AFTER.match(text, match.end()):
            return None  # "GPU 内存 24G", "显卡内存", "24G 内存的 4090": the card's memory, not the machine's
        number, unit = (g for g in match.groups() if g)
        gib = float(number) * (1024 if unit.lower().startswith("t") else 1)
        return gib if 1 <= gib <= 65536 else None
    if kind == "image_side":
        groups = [g for g in match.groups() if g]
        sides = {int(g) for g in groups}
        return sides.pop() if len(sides) == 1 and 16 <= min(sides) <= 16384 else None
    if kind == "small_count":
        word = next(g for g in match.groups() if g)
        number = int(word) if word.isdigit() else _ZH_SMALL.get(word)
        return number if number and number <= 512 else None
    if kind == "first_step":
        # the first step of a later epoch has the epochs before it behind it: "at step 1 of epoch 3", "第二个 epoch 的第 1 步"
        return None if _LATER_EPOCH.search(runs.around(text, match.start(), runs.SENTENCE_END, 80)) else False
    if kind == "modules":
        if re.search(r"(?:\b(?:not|never|except|instead\s{1,3}of|rather\s{1,3}than|but\s{1,3}not)|不是|没有|除了|而不是)\W{0,3}(?:on\s{1,3}|at\s{1,3}|只\s{0,2})?$",
                     text[max(0, match.start(1) - 24):match.start(1)], re.IGNORECASE):
            return None  # "not q_proj and v_proj", "除了 q_proj"
        return list(dict.fromkeys(m.lower() for m in re.findall(_MODULE, match.group(1), re.IGNORECASE)))
    if kind == "named_optimizer":
        return next(g for g in match.groups() if g).lower()
    if kind == "share":
        value = float(match.group(1))
        return value if 0 < value <= 1 else None
    if kind == "params":
        value = float(match.group(1))
        return value if 0.05 <= value <= 2000 else None
    if isinstance(kind, list):
        return list(kind)  # a fresh list each time: facts are handed on and may be changed
    if kind is int:
        value = int(next(g for g in match.groups() if g))
        return value if value > 0 else None
    return kind
