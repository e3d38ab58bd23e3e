"""The MCP server driven by the SDK's own client: over stdio (`python -m oomdoctor mcp` in a subprocess)
and over streamable HTTP (a real gunicorn serving /api/mcp with an API token), and in process for the
schema checks. The consultations are the REST API's: an id from one continues on the other."""
from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from oomdoctor import knowledge
from oomdoctor.channels.mcp import resources, server
from oomdoctor.channels.mcp.tools import DESCRIPTIONS, Tools
from oomdoctor.consultation import default
from oomdoctor.named_inputs import INPUTS
from oomdoctor.storage import Store

ROOT = Path(__file__).resolve().parent.parent
TRACEBACK = (ROOT / "tests" / "corpus" / "alpaca-76-full-ft-4x-a10.log").read_text(encoding="utf-8")
TOKEN = "mcp-test-token-0123456789"
KB = knowledge.default()


def run(coroutine_function, *args):
    return anyio.run(coroutine_function, *args)


async def exercise(client: Client) -> dict:
    """List the tools, call each, and hold a two-turn consultation; what came back, for the asserts."""
    seen: dict = {}
    listed = await client.list_tools()
    seen["tools"] = {tool.name: tool for tool in listed.tools}
    seen["diagnose"] = await client.call_tool("diagnose", {"text": TRACEBACK, "lang": "zh"})
    seen["estimate"] = await client.call_tool("estimate", {"model": "Llama 3 8B", "method": "lora", "batch_size": 4,
                                                           "seq_len": 2048, "gpu": "4090"})
    seen["models"] = await client.call_tool("models", {"query": "llama 3 8b", "limit": 3})
    seen["gpus"] = await client.call_tool("gpus", {"query": "A100"})
    first = await client.call_tool("consult", {"message": TRACEBACK})
    cid = first.structured_content["consultation_id"]
    seen["consult"] = (first, await client.call_tool("consult", {"message": "2", "consultation_id": cid}))
    seen["bad"] = await client.call_tool("estimate", {"model": "llama3-8b", "batch_size": "four", "colour": "red"})
    seen["unknown"] = await client.call_tool("consult", {"message": "LoRA", "consultation_id": "0" * 32})
    return seen


def check(seen: dict) -> str:
    """The asserts every transport must pass; the consultation's id."""
    assert set(seen["tools"]) == {"diagnose", "consult", "estimate", "models", "gpus"}
    for tool in seen["tools"].values():
        assert tool.input_schema["type"] == "object" and tool.output_schema["type"] == "object"
        assert len(tool.description) > 150
    diagnosis = seen["diagnose"]
    assert not diagnosis.is_error
    assert diagnosis.structured_content["status"] == "report" and diagnosis.structured_content["lang"] == "zh"
    assert diagnosis.content[0].text.startswith("**" + KB.text("report.title", "zh"))
    assert "trace" not in diagnosis.structured_content["diagnoses"][0]
    estimate = seen["estimate"]
    assert not estimate.is_error and estimate.structured_content["estimate"]["per_gpu_gib"] > 0
    assert {"name": "model.name", "value": "llama-3-8b"} in estimate.structured_content["facts"]
    assert KB.text("report.estimate", "en") in estimate.content[0].text
    assert seen["models"].structured_content["match"]["id"] == "llama-3-8b"
    a100 = seen["gpus"].structured_content
    assert a100["match"]["id"].startswith("a100") and a100["match"]["score"] < 100
    assert {c["id"] for c in a100["candidates"]} >= {"a100-40gb-sxm"}
    first, second = seen["consult"]
    question = first.structured_content["reply"]["questions"][0]
    assert first.structured_content["status"] == "question"
    assert f"\n2. {question['options'][1]['label']}" in first.content[0].text
    assert first.structured_content["consultation_id"] in first.content[0].text
    assert second.structured_content["consultation_id"] == first.structured_content["consultation_id"]
    model = next(f for f in second.structured_content["reply"]["facts"] if f["name"] == "model.name")
    assert model["value"] == question["options"][1]["value"] and model["source"]["kind"] == "answer"
    bad = seen["bad"]
    assert bad.is_error and "batch_size" in bad.content[0].text and "colour" in bad.content[0].text
    assert seen["unknown"].is_error and "consult without consultation_id" in seen["unknown"].content[0].text
    return first.structured_content["consultation_id"]


# --- stdio ----------------------------------------------------------------------------

def test_stdio(tmp_path):
    database = tmp_path / "mcp.sqlite3"
    params = StdioServerParameters(command=sys.executable, args=["-m", "oomdoctor", "mcp", "--database", str(database)],
                                   cwd=str(ROOT))

    async def session():
        async with Client(params) as client:
            seen = await exercise(client)
            listed = await client.list_resources()
            seen["resources"] = listed.resources
            seen["scenario"] = await client.read_resource(listed.resources[0].uri)
            return seen

    seen = run(session)
    cid = check(seen)
    assert len(seen["resources"]) == len(KB.scenarios)
    text = seen["scenario"].contents[0].text
    scenario = KB.scenarios[seen["resources"][0].name]
    assert scenario.title["en"] in text and scenario.title["zh"] in text
    # Stored where the web service would store it.
    store = Store(database, migrate=False)
    try:
        record = store.get(cid)
    finally:
        store.close()
    # The API's channel: the tools are the API's, so the REST API may continue it (and nothing else may).
    assert record["channel"] == "api" and record["turns"] == 2


def test_stdio_with_an_unusable_database_says_so(tmp_path):
    import subprocess

    (tmp_path / "db").mkdir()
    done = subprocess.run([sys.executable, "-m", "oomdoctor", "mcp", "--database", str(tmp_path / "db")], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode != 0 and "error: " in done.stderr and "Traceback" not in done.stderr


# --- streamable HTTP ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def token_server(tmp_path_factory):
    """One gunicorn for the module's HTTP tests: each starts its own consultations and counts what it stored."""
    from conftest import LiveServer

    live = LiveServer(tmp_path_factory.mktemp("mcp"), env={"OOMDOCTOR_API_TOKEN": TOKEN}).start()
    yield live
    live.stop()


def rest(live, method: str, path: str, body: dict | None = None, token: str | None = TOKEN) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(live.url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


@pytest.mark.server
@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_streamable_http_with_the_token(token_server, mode):
    async def session():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http:
            async with Client(streamable_http_client(token_server.url + "/api/mcp", http_client=http), mode=mode) as c:
                return await exercise(c)

    cid = check(run(session))
    # The same consultation over REST: two turns taken over MCP, a third here.
    status, record = rest(token_server, "GET", f"/api/v1/consultations/{cid}")
    assert status == 200 and record["turns"] == 2
    status, body = rest(token_server, "POST", f"/api/v1/consultations/{cid}/messages", {"message": "LoRA"})
    assert status == 200 and body["id"] == cid


@pytest.mark.server
def test_a_consultation_started_over_rest_continues_over_mcp(token_server):
    status, body = rest(token_server, "POST", "/api/v1/consultations", {"message": TRACEBACK})
    assert status == 201

    async def session():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http:
            async with Client(streamable_http_client(token_server.url + "/api/mcp", http_client=http)) as c:
                return await c.call_tool("consult", {"message": "1", "consultation_id": body["id"]})

    result = run(session)
    assert not result.is_error
    option = body["reply"]["questions"][0]["options"][0]["value"]
    assert any(f["name"] == "model.name" and f["value"] == option and f["source"]["kind"] == "answer"
               for f in result.structured_content["reply"]["facts"])


@pytest.mark.server
@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_streamable_http_refuses_a_call_without_the_token(token_server, token):
    async def session():
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            async with Client(streamable_http_client(token_server.url + "/api/mcp", http_client=http)) as c:
                await c.call_tool("models", {"query": "llama"})

    stored = _consultations(token_server)
    with pytest.raises(BaseException) as caught:
        run(session)
    # The SDK's client reports the refused request as an error response (it does not quote the status).
    assert "MCPError: Server returned an error response" in _all_messages(caught.value)
    # The raw request says why, and nothing was stored.
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "consult", "arguments": {"message": TRACEBACK}}}
    status, body = rest(token_server, "POST", "/api/mcp", message, token=token)
    assert status == 401 and "token" in body["error"]
    assert _consultations(token_server) == stored


def _consultations(live) -> int:
    store = Store(live.database, migrate=False)
    try:
        return store.conn.execute("SELECT count(*) FROM consultations").fetchone()[0]
    finally:
        store.close()


def _all_messages(exc: BaseException) -> str:
    parts = [f"{type(exc).__name__}: {exc}"]
    for inner in getattr(exc, "exceptions", ()):
        parts.append(_all_messages(inner))
    if exc.__cause__ is not None:
        parts.append(_all_messages(exc.__cause__))
    return "\n".join(parts)


def test_the_http_endpoint_in_process(client):
    """No token configured: open, like the REST API; GET and DELETE are the spec's 405 (stateless)."""
    assert client.get("/api/mcp").status_code == 405
    assert client.delete("/api/mcp").status_code == 405
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": "gpus", "arguments": {"query": "4090"}}}
    resp = client.post("/api/mcp", json=message, headers={"Accept": "application/json, text/event-stream",
                                                           "MCP-Protocol-Version": "2025-11-25"})
    assert resp.status_code == 200, resp.data[:500]
    result = resp.get_json()["result"]
    assert result["structuredContent"]["match"]["id"] == "rtx-4090"
    assert resp.headers["Cache-Control"] == "no-store"
    # Not JSON-RPC: the SDK's 4xx, not a crash.
    bad = client.post("/api/mcp", data=b"{not json", content_type="application/json",
                      headers={"Accept": "application/json, text/event-stream"})
    assert 400 <= bad.status_code < 500


# --- schemas, in process --------------------------------------------------------------------

def test_the_estimate_schema_follows_the_named_inputs_and_the_facts():
    tools = Tools(default(), ":memory:", 2**20)
    built = server.build(tools)

    async def listed():
        async with Client(built) as c:
            return (await c.list_tools()).tools

    schema = next(t for t in run(listed) if t.name == "estimate").input_schema
    assert set(schema["properties"]) == set(INPUTS) | {"lang"}
    assert schema["additionalProperties"] is False
    for name, fact in INPUTS.items():
        spec = KB.facts[fact]
        if spec.type == "enum":
            assert schema["properties"][name]["enum"] == list(spec.values)
        else:
            assert schema["properties"][name]["type"] == {"integer": "integer", "number": "number", "boolean": "boolean",
                                                          "string": "string", "list": "array"}[spec.type]
    assert set(DESCRIPTIONS) == {"diagnose", "consult", "estimate", "models", "gpus"}


def test_every_scenario_reads_as_a_resource_in_both_languages():
    for scenario in KB.scenarios.values():
        assert resources.scenario_id(resources.uri(scenario)) == scenario.id
        text = resources.scenario_markdown(scenario, KB)
        assert scenario.summary["en"] in text and scenario.summary["zh"] in text
        for remedy in scenario.remedies:
            assert KB.remedies[remedy].title["zh"] in text
    assert resources.scenario_id("file:///etc/passwd") is None


def _rpc(method: str, params: dict) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()


@pytest.mark.parametrize("body", [
    b"[" * 200_000 + b"]" * 200_000,
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"diagnose","arguments":{"text":"\xff\xfe"}}}',
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"diagnose","arguments":{"text":"\\ud800"}}}',
    _rpc("tools/call", {"name": "diagnose", "arguments": {"text": "CUDA out of memory\x00"}}),
    _rpc("tools/call", {"name": "estimate", "arguments": {"model": "llama3-8b", "batch_size": 10**30}}),
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"estimate","arguments":{"params_b":NaN}}}',
    _rpc("tools/call", {"name": "consult", "arguments": {"message": "x", "consultation_id": "../../etc/passwd"}}),
    _rpc("tools/call", {"name": "no_such_tool", "arguments": {}}),
    _rpc("resources/read", {"uri": "oomdoctor://scenarios/../../etc/passwd"}),
    json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]).encode(),
])
def test_hostile_requests_get_an_error_not_a_crash(client, body):
    resp = client.post("/api/mcp", data=body, content_type="application/json",
                       headers={"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"})
    assert resp.status_code < 500
    answer = resp.get_json()
    assert "error" in answer or answer["result"]["isError"] is True
    assert "Traceback" not in resp.get_data(as_text=True)
