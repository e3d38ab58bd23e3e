"""A small forward-chaining rule engine. It knows nothing about memory or GPUs."""
from .conditions import RuleSyntaxError
from .engine import Conclusion, Engine, Firing, Result
from .facts import Fact, Provenance, WorkingMemory
from .rules import Rule, load_rules, parse_rule
from .vocabulary import ConclusionKind, Vocabulary

__all__ = [
    "Conclusion", "ConclusionKind", "Engine", "Fact", "Firing", "Provenance", "Result",
    "Rule", "RuleSyntaxError", "Vocabulary", "WorkingMemory", "load_rules", "parse_rule",
]
