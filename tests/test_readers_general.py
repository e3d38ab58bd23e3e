"""Readers proven general: each class of wording a blind set showed unread, tried on wordings of our own
(English and Chinese), with the near misses that must stay unread. A wrong fact is worse than a missing one."""
import pytest

from oomdoctor import knowledge
from oomdoctor.extractors import Unknown, gpu_count
from oomdoctor.observation import observe

KB = knowledge.default()


def facts(extractor, text):
    return {f.name: f.value for f in extractor.extract(text) if not isinstance(f.value, Unknown)}


def observed(text):
    return {o.name: o.value for o in observe(text, KB)}


# --- a launcher whose count the paste leaves open says nothing against a count in words ------------------

@pytest.mark.parametrize("text, count", [
    ("torchrun --nproc_per_node auto train.py\nrunning on 8x A100 80GB", 8),
    ("torchrun --nproc_per_node $NGPUS finetune.py\nIt runs on two GPUs.", 2),
    ("GPUS_PER_NODE=8\nNNODES=${WORLD_SIZE}\ntorchrun $DISTRIBUTED_ARGS pretrain_gpt.py\nOn 8x A100 40GB.", 8),
    ("NPROC_PER_NODE={int(nproc_per_node)} swift sft --model qwen\n8 卡 V100 跑的", 8),
    ("accelerate launch --num_processes $N train.py\n四张 4090", 4),
    ("deepspeed --num_gpus ${GPUS} train.py\n共 16 张卡", 16),
    # 8 per machine with the machines left open: 16 stated in words is two machines' worth.
    ("torchrun --nnodes $NNODES --nproc_per_node 8 train.py\n16 张 A800", 16),
])
def test_an_unresolved_launcher_count_leaves_the_count_to_the_words(text, count):
    assert facts(gpu_count, text)["dist.num_gpus"] == count


@pytest.mark.parametrize("text", [
    "torchrun --nproc_per_node auto train.py",                                   # nothing else says a count
    "torchrun --nnodes $NNODES --nproc_per_node 8 train.py\non 4x A100",          # 4 is no multiple of 8 per machine
    "NNODES=$WORLD_SIZE GPUS_PER_NODE=8 bash run.sh\n用 6 张卡",
    "torchrun --nproc_per_node 4 a.py\ntorchrun --nproc_per_node $N b.py\n8 x A100",  # a stated 4 beside an open one
])
def test_a_count_that_contradicts_the_launcher_or_is_absent_stays_unknown(text):
    assert "dist.num_gpus" not in facts(gpu_count, text)
