"""How many GPUs the job trains on, in every form a paste states it.

Launchers first: torchrun / torch.distributed.launch (`--nproc_per_node 8 --nnodes 2` is 16),
the deepspeed launcher (`--num_gpus`, `--num_nodes`, `--include localhost:0,1,4,6`), accelerate
(`--num_processes`, the config's `num_processes:`, its "was set to a value of `2`" warning), the
environment (`NPROC_PER_NODE=8 NNODES=2`), Slurm (`--gres=gpu:4 --nodes=2`), litgpt's `devices`,
torchtune's single-device recipes; then what a run prints (the Trainer's banner, a DeepSpeed
batch that only adds up over N ranks); then the visible devices (`CUDA_VISIBLE_DEVICES=0,1,2,3`);
then words ("8 x A100", "8xH100", "2xT4", "7*V100", "4张L20", "共8张卡", "two GPUs", "单卡").
An earlier kind of source beats a later one; two of the same kind that disagree leave the count unknown.
A launcher whose count is a variable the paste does not define (`$NGPUS`, `auto`, a template) leaves it to
the later sources, which must agree with what the launcher does say (a known count per machine), else unknown.

The launchers that count per machine also give the machines: the DeepSpeed launcher's
`--num_gpus` is per node (`--num_nodes`, or the hosts of `--include`), as is Slurm's
`--gres=gpu:N` (`--nodes`). torchrun's and the environment's per-node counts are config keys
(knowledge/settings.yaml: nproc_per_node, nnodes).
"""
from __future__ import annotations

import re
from typing import Iterator

from . import Finding, snippet, unknown
from . import runs, variables

NAME = "gpu_count"
PRODUCES = {"dist.num_gpus", "dist.gpus_per_node", "dist.num_nodes"}

_MAX = 4096
_I = re.IGNORECASE
# A flag and its value, also inside a printed argv list: '--nproc_per_node', '8'.
_Q = r"""["']?"""
# A value ends at a blank, a quote, a comma, a shell `;` or full-width punctuation ("--nproc_per_node 4；").
_ARG = r"""(?:[ \t]{1,4}|=|["'],[ \t]{0,4}["'])([^\s"',;\\，。；：）]{1,80})"""


def _flag(*names: str) -> re.Pattern:
    alternatives = "|".join(name.replace("_", "[-_]") for name in names)
    return re.compile(r"(?<![\w-])" + _Q + r"--(?:" + alternatives + r")" + _ARG, _I)


_NPROC = _flag("nproc_per_node")
_NNODES = _flag("nnodes")
_NUM_GPUS = _flag("num_gpus", "num_processes", "devices")
_NUM_NODES = _flag("num_nodes")
_INCLUDE = re.compile(r"""(?<![\w-])(?:--include|-i)(?:[ \t]{1,4}|=)["']?([\w.-]{1,60}:[\d,]{1,80}(?:@[\w.-]{1,60}:[\d,]{1,80}){0,16})""")
_ENV_NPROC = re.compile(r"(?<![\w$])(?:NPROC_PER_NODE|GPUS_PER_NODE|NUM_GPUS|N_GPUS)=([^\s\\;，。；：）]{1,80})")
_ENV_NNODES = re.compile(r"(?<![\w$])(?:NNODES|NUM_NODES|NODE_COUNT)=([^\s\\;，。；：）]{1,80})")
# The DeepSpeed launcher as a command: `deepspeed --num_gpus 4 train.py`, `deepspeed \\n --include ...`.
_DEEPSPEED_LAUNCHER = re.compile(r"(?:^|[;&|`(])[ \t]{0,8}(?:[A-Z_][A-Z0-9_]{0,40}=[^\s]{0,200}[ \t]{1,4}){0,8}deepspeed"
                                 r"(?=[ \t]{1,4}(?:\\[ \t]{0,4}\n[ \t]{0,12})?-)", re.MULTILINE)
_GRES = re.compile(r"--gres[= ]gpu:(?:[\w-]{1,20}:)?(\d{1,3})")
_SLURM_NODES = re.compile(r"(?<![\w-])(?:--nodes|-N)[= ](\d{1,4})(?![\d-])")
_YAML_PROCS = re.compile(r"""(?:^[ \t\-]{0,12}(?:num_processes|devices)|["'](?:num_processes|devices)["'])[ \t]{0,4}:[ \t]{0,4}(\d{1,4})(?![\d.])""",
                         re.MULTILINE)
_ACCELERATE_WARNING = re.compile(r"`--num_processes` was set to a value of `(\d{1,4})`")
_SINGLE_RECIPE = re.compile(r"(?<![A-Za-z])\w{0,40}_single_device\b")
_DS_ESTIMATE = re.compile(r"Setup with (\d{1,4}) nodes?, (\d{1,4}) GPUs? per node")
_DEVICE_LIST = re.compile(r"\b\d{1,3}/(\d{1,3}): cuda:\d{1,3}\b")
_BANNER_DEVICE = re.compile(r"Instantaneous batch size per device = (\d{1,6})")
_BANNER_TOTAL = re.compile(r"Total train batch size \(w\. parallel, distributed & accumulation\) = (\d{1,9})")
_BANNER_ACCUM = re.compile(r"Gradient Accumulation steps = (\d{1,6})", _I)
_VISIBLE = re.compile(r"""CUDA_VISIBLE_DEVICES(?:=|\s+is set to\s+)["']?(\d{1,3}(?:\s{0,2},\s{0,2}\d{1,3}){0,63})["']?""")

# --- words ---------------------------------------------------------------------------------------
# A card's name: A100, H100, T4, L40S, MI300X, RTX 4090, 3090 Ti, 910B; bare numbers only for consumer cards,
# so that "2 x 4096" (a tensor's shape) is not two GPUs.
_CARD = (r"(?:NVIDIA[ \t])?(?:GeForce[ \t])?(?:RTX[ \t]?|GTX[ \t]?|Tesla[ \t])?"
         r"(?:[A-Za-z]{1,6}[ \t]?\d{1,4}[A-Za-z]{0,4}|(?:[2-5]0[5-9]0|6000)(?:[ \t]?Ti)?|\d{3}[A-Za-z]{1,2})(?!\w|\.\d)")
# The card-name pattern, for readers that must tell a count of cards from other numbers (oomdoctor/answers.py).
CARD = _CARD
_ZH_NUM = {"单": 1, "一": 1, "两": 2, "二": 2, "双": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "十六": 16}
_EN_NUM = {"one": 1, "single": 1, "two": 2, "three": 3, "four": 4, "six": 6, "eight": 8, "sixteen": 16}
# Words before a count that pick cards out instead of counting them: the 7th, the last, one of, another, each.
_NOT_WHICH_CARDS = r"(?<!第)(?<!最后)(?<!其中)(?<!其他)(?<!另)(?<!每)(?<!同)(?<!哪)(?<!这)(?<!那)(?<!某)"
_PROSE = [
    # 8 x A100, 8xH100, 2 × 4090, 7*V100, 4 * NVIDIA A10G, 8*910B, 2x24GB
    re.compile(r"(?<![\w.-])(\d{1,3})[ \t]{0,2}[xX×*][ \t]{0,2}(?:" + _CARD + r"|\d{1,3}[ \t]?GB?\b)"),
    # V100 (16GB) X 2, 2080Ti X 2, v100*2, A100s (40G) x2
    re.compile(r"(?<![\w.])(?:[A-Za-z]{1,6}\d{2,4}s?|\d{4})[ \t]?(?:Ti[ \t])?(?:[(（]\d{1,3}[ \t]?GB?[)）][ \t]{0,2})?[xX×*][ \t]{0,2}(\d{1,2})(?![\w.])"),
    # 8 GPUs, 8 A100 40GB GPUs, 8 80GB GPUs, 4 gpus (not "ZeRO-3 on A100 cards": the words between describe the cards)
    re.compile(r"(?<![\w.-])(\d{1,3})[ \t](?:(?!(?:on|in|with|of|for|per|and|or|to|from|at|by|using|across|over|into|"
               r"while|whereas|but|the|other|others|when|where|which|that|because|so|then|is|are|was|were)[ \t])"
               r"\w[\w-]{0,13}[ \t]){0,3}(?:GPUs|gpus|GPU|gpu|graphics cards|cards)\b"),
    # 2 x 40GB A100s
    re.compile(r"(?<![\w.])(\d{1,3})[ \t]{0,2}[xX×*][ \t]{0,2}\d{1,3}[ \t]?GB[ \t][A-Za-z]{1,4}\d{2,4}s\b"),
    # 4张L20, 8张T4, 8卡3090, 4卡A100, 共8张卡, 单机8卡, 16卡 (but not 2张图片, nor 第 7 张卡: the 7th card)
    re.compile(_NOT_WHICH_CARDS + r"(?<!第[ \t])(?<![\d.])(\d{1,3})[ \t]{0,2}(?:(?:张|块)[ \t]{0,2}(?=[A-Za-z0-9]|卡|显卡|GPU|gpu)|卡)"),
    # 两块卡, 三张L40s, 单卡, 双卡 (not 第一张卡, 最后一张卡, 其中两张卡, 另一张卡, 每一张卡: which cards, not how many)
    # (a numeral that ends a longer one is no count: 十二张, 三十二卡 are not 2)
    # (单卡 before a per-card amount is "per card": 单卡显存 80G, 单卡 batch 4, 单卡占用 70G)
    re.compile(_NOT_WHICH_CARDS + r"(?<![一二三四五六七八九十百千])(单|一|两|二|双|三|四|五|六|七|八|十六)[ \t]{0,1}(?:(?:张|块)[ \t]{0,2}(?=[A-Za-z0-9]|卡|显卡|GPU|gpu)|卡)"
               r"(?!(?<=单卡)[ \t]{0,2}(?:的[ \t]{0,2})?(?:显存|占用|峰值|内存|batch|bs|micro|最多|最大|上限))"),
    # on 32 H100 80GB, across 8 A100s, using 4 L40S: a count of named cards after a word that places the job on them
    re.compile(r"\b(?:on|across|over|using|with)[ \t]{1,3}(\d{1,4})[ \t]{1,2}(?:NVIDIA[ \t])?(?:[A-Z]{1,2}\d{2,4}[A-Za-z]{0,3}|RTX[ \t]?\d{4}(?:[ \t]?Ti)?)"
               r"(?![\w.-]|[ \t]{0,2}(?:hours?|steps?|tokens?)\b)"),
    # 8 H100s, 4 RTX 3090s, 2 A6000s: a card's name in the plural is a count of cards wherever it stands
    re.compile(r"(?<![\w.-])(\d{1,3})[ \t]{1,2}(?:NVIDIA[ \t])?(?:GeForce[ \t])?(?:RTX[ \t]?|Tesla[ \t])?"
               r"(?:T4|[A-Z]{1,2}\d{2,4}[A-Za-z]{0,2}?|\d{4}(?:[ \t]?Ti)?)s(?![\w-])"),
    # two GPUs, one A100 GPU, single-A100, a single 4090, single GPU, single device, two 48G graphics cards, two Titan RTX cards
    re.compile(r"(?<!only )(?<!just )(?<!each )(?<!per )(?<!every )(?<!other )\b(one|single|two|three|four|six|eight|sixteen)"
               r"[ \t-]{1,2}(?:\d{2,3}[ \t]?GB?[ \t])?(?:" + _CARD + r"[ \t-]{0,2}(?:GPUs?|gpus?|cards?)?|"
               r"(?:GPUs?|gpus?|cards?|graphics cards|devices?)(?![\w])|"
               # a card the catalog lacks, named in capitals: "two 24GB Titan RTX cards" (never "one of the cards")
               r"(?:(?-i:[A-Z][A-Za-z0-9]{1,10})[ \t]){1,2}(?:GPUs?|gpus?|cards?)(?![\w]))", _I),
]
_NOT_A_COUNT = re.compile(r"\b(?:nodes?|machines?|servers?)\b", _I)
# A count said as the whole job's, even beside the machines: "16 台机器，共 128 张 A800", "128 GPUs in total".
_TOTAL_BEFORE = re.compile(r"(?:共|总共|一共|合计|总计|\btotal(?:\s{1,3}of)?|\bin\s{1,3}total)\s{0,3}$", _I)
# A count said per machine: "每台 8 卡", "每机8卡", "每个节点 8 张", "8 GPUs each", "8 GPUs per node", "8 cards on each node".
_PER_NODE_BEFORE = re.compile(r"(?:每|各)\s{0,2}(?:一)?\s{0,2}(?:台|个?节点|个?机器|机|个?服务器)\S{0,3}\s{0,3}$|"
                              # "两台机器各 8 张卡", "双机各8卡": each of the machines named before
                              r"(?:台|机器|节点|服务器|机)\S{0,2}\s{0,2}各\s{0,2}(?:有|用|插|配|带)?\s{0,3}$|"
                              r"\b(?:each|per|every)\s{1,3}(?:node|machine|server|host)\s{0,3}[,:]?\s{0,3}$", _I)
_PER_NODE_AFTER = re.compile(r"^\s{0,3}(?:each\b|apiece\b|(?:on\s{1,3}|in\s{1,3})?(?:each|per|every)\s{1,3}(?:node|machine|server|host)\b|/\s{0,2}(?:node|machine)\b)", _I)
# (the look-behind is ASCII-only: a numeral after a CJK word still counts, "我们用两台机器"; "第二台" is which machine)
_NODE_COUNT = re.compile(r"(?<![A-Za-z0-9_.])(?<!第)(\d{1,4}|one|two|three|four|eight|sixteen|[单一两二双三四五六七八]|十六)\s{0,2}"
                         r"(?:台(?:机器|服务器|节点)?|个(?:节点|机器|服务器)|节点|机(?=\s{0,2}(?:各|每|\d|[一两二三四五六七八]\s{0,2}(?:卡|张)))|nodes?\b|machines?\b|servers?\b|hosts?\b)", _I)


def _per_node(text: str, m: re.Match) -> bool:
    return bool(_PER_NODE_BEFORE.search(text[max(0, m.start() - 16): m.start()])
                or _PER_NODE_AFTER.search(text[m.end(): m.end() + 24]))


# The cards a job uses out of more that are there: "8 张卡里只用了 2 张", "配了其中 3 张", "2 of the 8 GPUs",
# "4 out of 8 cards", "8 GPUs, but I only use 4 of them". The used count is the job's; the larger one is not.
_ZH_FEW = r"(?:\d{1,3}|[一两二三四五六七八])"
_EN_FEW = r"(?:\d{1,3}|one|two|three|four|six|eight)"
_SUBSET = [
    re.compile(r"(?<![\d.])" + _ZH_FEW + r"[ \t]{0,2}(?:张|块)[ \t]{0,2}(?:卡|显卡|GPU|gpu|[A-Za-z]{1,6}\d{2,4}[A-Za-z]{0,3})?[ \t]{0,2}"
               r"(?:里面?|中|当中|之中)[ \t]{0,2}(?:的)?[^，。,.;；\n\d]{0,8}?(?:用|使用|跑|配|分配|选|拿)(?:了)?[ \t]{0,2}(?:其中)?[ \t]{0,2}(?:的)?[ \t]{0,2}"
               r"(?P<used>" + _ZH_FEW + r")[ \t]{0,2}(?:张|块|个)"),
    re.compile(r"(?:用|使用|配|分配|选|跑|拿)(?:了)?[ \t]{0,2}其中[ \t]{0,2}(?:的)?[ \t]{0,2}(?P<used>" + _ZH_FEW + r")[ \t]{0,2}(?:张|块|个)"),
    # (said with using: "one of the 8 GPUs runs out", "two of the four cards get memory" count no cards in use)
    re.compile(r"\b(?:use|uses|using|used|utili[sz](?:e|es|ed|ing)|train(?:ing|s)?[ \t]{1,3}on|run(?:ning|s)?[ \t]{1,3}on)[ \t]{1,3}(?:only[ \t]{1,3}|just[ \t]{1,3})?"
               r"(?P<used>" + _EN_FEW + r")[ \t]{1,3}(?:out[ \t]{1,3})?of[ \t]{1,3}(?:the[ \t]{1,3}|my[ \t]{1,3}|our[ \t]{1,3}|its[ \t]{1,3}|all[ \t]{1,3})?"
               + _EN_FEW + r"[ \t]{1,3}(?:[\w-]{1,14}[ \t]{1,3}){0,2}(?:GPUs|gpus|cards|devices)\b|"
               r"(?<![\w.])(?P<used2>" + _EN_FEW + r")[ \t]{1,3}(?:out[ \t]{1,3})?of[ \t]{1,3}(?:the[ \t]{1,3}|my[ \t]{1,3}|our[ \t]{1,3}|its[ \t]{1,3}|all[ \t]{1,3})?"
               + _EN_FEW + r"[ \t]{1,3}(?:[\w-]{1,14}[ \t]{1,3}){0,2}(?:GPUs|gpus|cards|devices)[ \t]{1,3}(?:are|were|get|got)[ \t]{1,3}(?:used|in[ \t]use|utili[sz]ed)\b", _I),
    re.compile(r"\b(?:use|uses|using|used|train(?:ing|s)?[ \t]{1,3}on|run(?:ning|s)?[ \t]{1,3}on)[ \t]{1,3}(?:only[ \t]{1,3}|just[ \t]{1,3})?"
               r"(?P<used>" + _EN_FEW + r")[ \t]{1,3}of[ \t]{1,3}them\b", _I),
]
def _the_failed_run(text: str, found: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Of counts that disagree, those of the run that failed, when the words tell it apart; else all of them:
    not one that works ("单卡能跑", "with 2 GPUs it fits"), not one from before or after ("以前两张就够了", "后来换
    5 张也一样"), and one in a sentence that says the failure over one in a sentence that says none."""
    steps = (
        lambda p: not runs.worked(runs.around(text, p, runs.CLAUSE_END)),
        lambda p: not runs.OTHER_RUN.search(runs.around(text, p, runs.CLAUSE_END)),
        lambda p: bool(runs.FAILS.search(runs.around(text, p, runs.SENTENCE_END))),
    )
    for keep in steps:
        if len({n for n, _, _ in found}) <= 1:
            break
        kept = [f for f in found if keep(f[1])]
        if kept:
            found = kept
    return found


def _subsets(text: str) -> list[tuple[int, re.Match]]:
    out = []
    for pattern in _SUBSET:
        for m in pattern.finditer(text):
            word = m.group("used") or m.groupdict().get("used2")
            n = int(word) if word.isdigit() else _ZH_NUM.get(word) or _EN_NUM.get(word.lower())
            if n:
                out.append((n, m))
    return out


def _nodes(text: str) -> int | None:
    """The machines a paste names in words ("两台机器", "2 nodes"); None when none or different ones."""
    found = set()
    for m in _NODE_COUNT.finditer(text):
        word = m.group(1)
        found.add(int(word) if word.isdigit() else _ZH_NUM.get(word) or _EN_NUM.get(word.lower()))
    return found.pop() if len(found) == 1 and None not in found else None


class _Counts:
    """Candidate counts by how directly they are stated (lower tier = more direct)."""

    def __init__(self) -> None:
        self.by_tier: dict[int, list[tuple[int | None, str]]] = {}
        # What an unresolved launcher still says: the machines it runs on each hold this many (a total is a multiple).
        self.multiple_of: set[int] = set()

    def add(self, tier: int, count: int | None, detail: str, multiple_of: int | None = None) -> None:
        if count is None or 0 < count <= _MAX:
            self.by_tier.setdefault(tier, []).append((count, detail))
        if count is None and multiple_of:
            self.multiple_of.add(multiple_of)

    def decide(self) -> Finding | None:
        unresolved = None
        for tier in sorted(self.by_tier):
            found = self.by_tier[tier]
            counts = {count for count, _ in found}
            if counts == {None}:
                # A launcher whose count the paste does not resolve (`--nproc_per_node auto`, `$NGPUS`, a template)
                # says nothing against a count stated less directly ("8x A100"), so long as it fits what the
                # launcher does say (8 per machine: the total is a multiple of 8).
                unresolved = unresolved or Finding("dist.num_gpus", unknown(), found[0][1])
                continue
            if None in counts:
                return Finding("dist.num_gpus", unknown(), next(d for c, d in found if c is None))
            if len(counts) == 1:
                count = counts.pop()
                if unresolved and any(count % n for n in self.multiple_of):
                    return unresolved
                return Finding("dist.num_gpus", count, found[0][1])
            return Finding("dist.num_gpus", unknown(), "the paste gives different GPU counts: " +
                           ", ".join(sorted({d for _, d in found}))[:120])
        return unresolved


def _value(raw: str, names: dict) -> int | None:
    resolved = variables.resolve(raw, names)
    if resolved is None or not re.fullmatch(r"\d{1,5}", resolved):
        return None
    return int(resolved)


def _launch(text: str, names: dict, counts: _Counts) -> None:
    lowered = text.lower()
    if not any(word in lowered for word in ("nproc", "--num", "--include", "-i ", "nnodes", "gres", "num_processes",
                                            "devices", "single_device", "gpus_per_node", "num_gpus", "n_gpus")):
        return  # a cheap look before a dozen patterns: most logs launch nothing in their text
    per_node = [(m, _value(m.group(1), names)) for m in _NPROC.finditer(text)]
    nodes = [(m, _value(m.group(1), names)) for m in _NNODES.finditer(text)]
    for m, n in per_node:
        node_counts = {c for _, c in nodes}
        if None in node_counts or len(node_counts) > 1:
            counts.add(0, None, "--nnodes is not a number here", multiple_of=n)
            continue
        total = None if n is None else n * (node_counts.pop() if node_counts else 1)
        counts.add(0, total, snippet(text, m.start(), m.end()))
    for m in _NUM_GPUS.finditer(text):
        if text[max(0, m.start() - 1): m.start()] == "`":
            continue  # "please pass in `--num_processes=1`": advice in a message, not the launch
        n = _value(m.group(1), names)
        nodes_ = [_value(x.group(1), names) for x in _NUM_NODES.finditer(text)]
        if nodes_ and (None in nodes_ or len(set(nodes_)) > 1):
            counts.add(0, None, "--num_nodes is not a number here", multiple_of=n if m.group(0).lower().count("gpus") else None)
            continue
        counts.add(0, None if n is None else n * (nodes_[0] if nodes_ else 1), snippet(text, m.start(), m.end()))
    for m in _INCLUDE.finditer(text):
        gpus = sum(len(host.split(":", 1)[1].split(",")) for host in m.group(1).split("@"))
        counts.add(0, gpus, m.group(0))
    env_nodes = [_value(m.group(1), names) for m in _ENV_NNODES.finditer(text)]
    for m in _ENV_NPROC.finditer(text):
        n = _value(m.group(1), names)
        if env_nodes and (None in env_nodes or len(set(env_nodes)) > 1):
            counts.add(0, None, "NNODES is not a number here", multiple_of=n)
            continue
        counts.add(0, None if n is None else n * (env_nodes[0] if env_nodes else 1), snippet(text, m.start(), m.end()))
    gres = _GRES.search(text)
    if gres:
        nodes_ = _SLURM_NODES.search(text)
        counts.add(0, int(gres.group(1)) * (int(nodes_.group(1)) if nodes_ else 1), snippet(text, gres.start(), gres.end()))
    for m in _ACCELERATE_WARNING.finditer(text):
        counts.add(0, int(m.group(1)), m.group(0))
    for m in _SINGLE_RECIPE.finditer(text):
        counts.add(0, 1, m.group(0))
    for m in _YAML_PROCS.finditer(text):
        counts.add(1, int(m.group(1)), m.group(0).strip())


def _printed(text: str, counts: _Counts, whole: str) -> None:
    """What a run prints about its own size (`whole`: the paste as it came, for a DeepSpeed JSON's layout)."""
    if not any(word in text for word in ("Setup with", ": cuda:", "Instantaneous batch size", "train_batch_size")):
        return
    for m in _DS_ESTIMATE.finditer(text):
        counts.add(1, int(m.group(1)) * int(m.group(2)), m.group(0))
    listed = {int(m.group(1)) for m in _DEVICE_LIST.finditer(text)}
    if len(listed) == 1:
        counts.add(1, listed.pop(), "the device listing")
    device, total, accum = _BANNER_DEVICE.search(text), _BANNER_TOTAL.search(text), _BANNER_ACCUM.search(text)
    if device and total and accum:
        per_step = int(device.group(1)) * int(accum.group(1))
        if per_step and int(total.group(1)) % per_step == 0:
            counts.add(1, int(total.group(1)) // per_step, "the Trainer's total batch over the per-device batch and accumulation")
    from .deepspeed import parse_config

    parsed = parse_config(whole)
    if parsed:
        config = parsed[0]
        total, micro, accum = (config.get(k) for k in ("train_batch_size", "train_micro_batch_size_per_gpu",
                                                        "gradient_accumulation_steps"))
        if all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (total, micro, accum)) \
                and total % (micro * accum) == 0:
            counts.add(1, total // (micro * accum), "DeepSpeed's train_batch_size over micro batch x accumulation")


def _visible(text: str, counts: _Counts) -> None:
    from .config_keys import vllm_engine_spans

    # `CUDA_VISIBLE_DEVICES=0,1 trl vllm-serve ...` gives the rollout server its GPUs, not the training job.
    engines = [start for start, _ in vllm_engine_spans(text)]
    for m in _VISIBLE.finditer(text):
        if any(start >= m.end() and "\n" not in text[m.end():start] for start in engines):
            continue
        counts.add(2, len(re.findall(r"\d{1,3}", m.group(1))), m.group(0))


def _words(text: str, counts: _Counts) -> None:
    subsets = _subsets(text)
    # A count in the sentence of a subset is the whole that the cards in use were picked from.
    picked_from = [runs.around(text, m.start(), runs.SENTENCE_END) for _, m in subsets]
    direct: list[tuple[int, int, str]] = []
    for pattern in _PROSE:
        for m in pattern.finditer(text):
            word = m.group(1)
            n = int(word) if word.isdigit() else _ZH_NUM.get(word) or _EN_NUM.get(word.lower())
            around = text[max(0, m.start() - 24): m.end() + 16]
            if n is None or _NOT_A_COUNT.search(m.group(0)):
                continue
            if any(s.start() <= m.start() < s.end() for _, s in subsets) or \
                    subsets and runs.around(text, m.start(), runs.SENTENCE_END) in picked_from:
                continue
            if _per_node(text, m):
                # A count per machine is the job's only once the machines are known: 2 machines x 8 = 16.
                nodes = _nodes(text)
                counts.add(3, None if nodes is None else n * nodes, m.group(0).strip() + " per node")
                continue
            if re.search(r"\d\s{0,2}(?:nodes?|机|台)", around) and not _TOTAL_BEFORE.search(text[max(0, m.start() - 12): m.start(1)]):
                counts.add(3, None, "a count per node on several nodes")
                continue
            direct.append((n, m.start(), m.group(0).strip()))
    direct += [(n, m.start(), m.group(0).strip()) for n, m in subsets]
    for n, _, detail in _the_failed_run(text, direct):
        counts.add(3, n, detail)


# Machines said in words that name them as machines: "两台机器", "4 个节点", "2 nodes", "two machines", "双机各 8 卡"
# (English "servers"/"hosts" may be a rollout or inference server's; "第二台" names one machine, not how many).
# Only several: one machine is what is assumed without a word, and "one node failed" names a machine of many.
_MACHINES = re.compile(r"(?<![A-Za-z0-9_.])(?<!第)(?<!第[ \t])(\d{1,4}|two|three|four|eight|sixteen|[两二双三四五六七八]|十六)[ \t-]{0,2}"
                       r"(?:台[ \t]{0,2}(?:机器|服务器|节点|主机)|个[ \t]{0,2}(?:节点|机器|服务器)|节点|"
                       r"机(?=[ \t]{0,2}(?:各|每|\d|[一两二三四五六七八][ \t]{0,2}(?:卡|张)))|nodes?\b|machines?\b)", _I)


def _machines_in_words(text: str) -> tuple[int, str] | None:
    found = {}
    printed = [(m.start(), m.end()) for m in _DS_ESTIMATE.finditer(text)]
    for m in _MACHINES.finditer(text):
        if any(a <= m.start() < b for a, b in printed):
            continue  # DeepSpeed's memory estimate prints the set-up it assumed, not the job's
        word = m.group(1)
        n = int(word) if word.isdigit() else _ZH_NUM.get(word) or _EN_NUM.get(word.lower())
        if not n or n < 2 or _PER_NODE_AFTER.search(text[m.end(): m.end() + 24]):
            return None  # "8 GPUs per node" is no count of nodes, and an unreadable one leaves it open
        found.setdefault(n, m.group(0))
    return next(iter(found.items())) if len(found) == 1 else None


def _one(values: list[int | None]) -> int | None:
    return values[0] if values and None not in values and len(set(values)) == 1 else None


def _machines(text: str, names: dict) -> Iterator[Finding]:
    """GPUs per machine and machines, from the launchers that say them per machine."""
    if _DEEPSPEED_LAUNCHER.search(text):
        per_node = [_value(m.group(1), names) for m in _NUM_GPUS.finditer(text) if m.group(0).lstrip("\"'").startswith("--num")
                    and "gpus" in m.group(0)]
        nodes = [_value(m.group(1), names) for m in _NUM_NODES.finditer(text)]
        hosts = [m.group(1).split("@") for m in _INCLUDE.finditer(text)]
        if hosts and not per_node:
            per_node = [len(host.split(":", 1)[1].split(",")) for group in hosts for host in group]
        if hosts and not nodes:
            nodes = [len(group) for group in hosts]
        if (n := _one(per_node)) is not None:
            yield Finding("dist.gpus_per_node", n, "the DeepSpeed launcher's GPUs per node")
        if (n := _one(nodes)) is not None:
            yield Finding("dist.num_nodes", n, "the DeepSpeed launcher's nodes")
    gres = [int(m.group(1)) for m in _GRES.finditer(text)]
    if gres:
        if (n := _one(gres)) is not None:
            yield Finding("dist.gpus_per_node", n, "Slurm --gres=gpu")
        if (n := _one([int(m.group(1)) for m in _SLURM_NODES.finditer(text)])) is not None:
            yield Finding("dist.num_nodes", n, "Slurm --nodes")


def launched(text: str) -> int | None:
    """The count a launcher or the visible devices state, for readers that need the world size."""
    from .config_keys import _uncomment
    from .config_keys import distinct

    text = _uncomment(distinct(text))
    counts = _Counts()
    _launch(text, variables.assignments(text), counts)
    _visible(text, counts)
    decided = counts.decide()
    return decided.value if decided and isinstance(decided.value, int) else None


def extract(text: str) -> Iterator[Finding]:
    from .config_keys import _uncomment

    from .config_keys import distinct

    whole = text
    text = _uncomment(distinct(text))
    names = variables.assignments(text)
    counts = _Counts()
    _launch(text, names, counts)
    _printed(text, counts, whole)
    _visible(text, counts)
    _words(text, counts)
    decided = counts.decide()
    if decided:
        yield decided
    launched_nodes = False
    for finding in _machines(text, names):
        launched_nodes |= finding.name == "dist.num_nodes"
        yield finding
    if not launched_nodes and (said := _machines_in_words(text)) is not None:
        yield Finding("dist.num_nodes", *said)
