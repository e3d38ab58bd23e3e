"""Schemathesis against /api/openapi.json, in process: whatever it sends, never a server error.

Each operation is fuzzed with requests that follow the schema (positive) and with
requests that break it (negative: wrong types, missing and extra fields, NUL bytes).
Bounded: OOMDOCTOR_API_FUZZ_EXAMPLES examples per operation and mode (100 by default,
seconds on two cores); docs/hardening.md has the figures of a longer run.
"""
from __future__ import annotations

import os
import tempfile

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402

from oomdoctor.web import create_app  # noqa: E402

EXAMPLES = int(os.environ.get("OOMDOCTOR_API_FUZZ_EXAMPLES", "100"))
APP = create_app({"TESTING": True, "DATABASE": f"{tempfile.mkdtemp(prefix='oomdoctor-api-fuzz-')}/fuzz.sqlite3",
                  "RATE_LIMIT_PER_MINUTE": 0})
SCHEMA = schemathesis.openapi.from_wsgi("/api/openapi.json", APP)
SCHEMA.config.generation.update(allow_x00=True)
OPERATIONS = {op.ok().label: op.ok() for op in SCHEMA.get_all_operations()}
MODES = list(schemathesis.GenerationMode)


def test_the_document_lists_the_api():
    assert {"POST /api/v1/consultations", "POST /api/v1/diagnose", "POST /api/v1/estimate"} <= set(OPERATIONS)


@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
@pytest.mark.parametrize("label", sorted(OPERATIONS))
def test_no_server_error(label, mode):
    operation = OPERATIONS[label]

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
    @given(case=operation.as_strategy(generation_mode=mode))
    def fuzz(case):
        response = case.call()
        case.validate_response(response, checks=(not_a_server_error,))
        assert response.status_code < 500, response.text[:500]
        assert "Traceback" not in response.text

    try:
        fuzz()
    except Unsatisfiable:
        pytest.skip(f"{label} has no {mode.value} requests to make")  # e.g. GET /healthz takes no input
