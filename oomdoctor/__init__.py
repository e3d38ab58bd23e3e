"""OOM Doctor: diagnoses out-of-memory failures in LLM fine-tuning."""
