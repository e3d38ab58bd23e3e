"""Vision towers of multimodal models, read from their config.json (placeholder, filled in below)."""
from __future__ import annotations


def read_tower(config, mt, text_cfg):
    return None
