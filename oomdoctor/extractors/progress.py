"""Progress and history: did training run before it failed, on how many ranks, and how many runs in one process."""
from __future__ import annotations

import re
from typing import Iterator

from . import Finding, snippet

NAME = "progress"
PRODUCES = {"log.after_steps", "log.rank_count", "log.repeated_runs"}

# tqdm: " 12%|█▏        | 150/1250 [03:10<23:16,  1.27s/it]"
_TQDM = re.compile(r"\|\s{0,4}(\d{1,9})/(\d{1,9})\s{0,2}\[([^\]\n]{0,80})")
# Bars that count something other than training steps, by their description or their unit: loading shards,
# Map / Tokenizing / Generating train split / Saving the dataset, downloads, evaluation.
_NOT_TRAINING = re.compile(r"load|map\b|token|generat|sav|convert|extract|download|fetch|filter|resolv|shard|split|dataset|"
                           r"preprocess|process|eval|predict|valid|test|infer|sampl|merg|quantiz|pack|writ|upload|creat|comput|"
                           r"加载|分词|处理|评估|验证", re.IGNORECASE)
_DATA_UNIT = re.compile(r"examples/s|ba/s|[kMG]?B/s|files?/s|shards?/s")


def _training_bar(text: str, match: re.Match) -> bool:
    line_start = max(text.rfind("\n", 0, match.start()), text.rfind("\r", 0, match.start())) + 1
    description = text[max(line_start, match.start() - 200): match.start()]
    return not _NOT_TRAINING.search(description) and not _DATA_UNIT.search(match.group(3))
# A loss reported for a step means steps completed: the Trainer's "{'loss': 1.23", MLX "Iter 80: Train loss",
# litgpt "iter 3436 step 53: loss", fairseq "| epoch 001 | loss", "Epoch:[1/1](2/19994)".
_LOSS = re.compile(r"\{'loss':\s{0,2}\d|\bIter\s{1,2}\d{1,9}:\s{1,2}Train loss|\biter\s{1,2}\d{1,9}\s{1,2}step\s{1,2}\d{1,9}:"
                   r"\s{0,2}loss|\|\s{0,2}epoch\s{1,2}\d{1,5}\s{0,2}\|[^\n]{0,40}\bloss\b|Epoch:\s{0,2}\[\d{1,5}/\d{1,5}\]"
                   r"\((\d{1,9})/\d{1,9}\)", re.IGNORECASE)
_RANK = re.compile(r"\[(?:rank|Rank|RANK)\s{0,2}(\d{1,5})\]|\brank(\d{1,5})\]?:|\[default(\d{1,5})\]:")
# TensorFlow numbers every traced function; a train function with a six-digit id means the process has
# built and traced models over and over (training in a loop, or cell after cell in a notebook).
_TF_FUNCTION = re.compile(r"__inference_train_function_(\d{1,9})")
# Optuna / Ray Tune trials, or the Trainer's hyperparameter search: several models in one process.
_TRIAL = re.compile(r"\bTrial\s{1,2}\d{1,6}\s{1,2}(?:failed|finished)|hyperparameter_search\(|\boptuna\b")


def extract(text: str) -> Iterator[Finding]:
    steps = [(int(m.group(1)), m) for m in _TQDM.finditer(text) if _training_bar(text, m)]
    loss = _LOSS.search(text)
    if steps:
        done, match = max(steps, key=lambda s: s[0])
        yield Finding("log.after_steps", done > 1 or loss is not None, snippet(text, match.start(), match.end()))
    elif loss:
        after = loss.group(1) is None or int(loss.group(1)) > 1
        yield Finding("log.after_steps", after, snippet(text, loss.start(), loss.end()))
    ranks = {next(g for g in m.groups() if g is not None) for m in _RANK.finditer(text)}
    if len(ranks) > 1:
        yield Finding("log.rank_count", len(ranks), f"ranks {sorted(ranks, key=int)[:8]}")
    function = _TF_FUNCTION.search(text)
    if function and int(function.group(1)) >= 100_000:
        yield Finding("log.repeated_runs", True, snippet(text, function.start(), function.end()))
    else:
        trial = _TRIAL.search(text)
        if trial:
            yield Finding("log.repeated_runs", True, snippet(text, trial.start(), trial.end()))
