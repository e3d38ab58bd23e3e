"""The MCP server: the tools and the scenario resources on the SDK's low-level `Server`.

The low-level server rather than MCPServer's decorators: the estimate's argument schema is
built from the knowledge base at start, and every schema is written out for a language
model to read. Arguments are checked against their schema before a tool runs (a clear
tool error the assistant can correct, never a crash); the tools run in a worker thread,
since a diagnosis is CPU work that would stall the event loop.
"""
from __future__ import annotations

import logging
from typing import Any

import anyio
import jsonschema
from mcp import types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from ...knowledge import KnowledgeBase
from . import resources, schemas
from .tools import DESCRIPTIONS, TITLES, Result, ToolError, Tools

log = logging.getLogger(__name__)

NAME = "oomdoctor"
VERSION = "1.0.0"
INSTRUCTIONS = (
    "OOM Doctor diagnoses out-of-memory failures in LLM fine-tuning and estimates memory. When a user shares a "
    "traceback, nvidia-smi output, a training config or describes a set-up that runs out of memory, call consult "
    "with their text and relay its question (with the numbered options) or its report; pass their answer back with "
    "the consultation_id. Use estimate for 'will this fit' questions without a log, and models / gpus to check names. "
    "Replies follow the user's language (English or Chinese).")
# How much of a bad argument a tool error quotes back.
QUOTE_CHARS = 160


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


def _problems(validator: jsonschema.Draft202012Validator, arguments: dict[str, Any]) -> list[str]:
    said = []
    for problem in sorted(validator.iter_errors(arguments), key=lambda p: list(map(str, p.absolute_path))):
        where = "/".join(map(str, problem.absolute_path)) or "arguments"
        message = problem.message
        said.append(f"{where}: {message[:QUOTE_CHARS] + '…' if len(message) > QUOTE_CHARS else message}")
    return said[:5]


def build(tools: Tools) -> Server:
    kb: KnowledgeBase = tools.kb
    arguments = schemas.arguments(kb)
    validators = {name: jsonschema.Draft202012Validator(schema) for name, schema in arguments.items()}
    listed = [types.Tool(name=name, title=TITLES[name], description=DESCRIPTIONS[name], input_schema=arguments[name],
                         output_schema=schemas.RESULTS[name],
                         annotations=types.ToolAnnotations(read_only_hint=name != "consult", destructive_hint=False,
                                                           idempotent_hint=name != "consult", open_world_hint=False))
              for name in DESCRIPTIONS]
    scenario_resources = [types.Resource(uri=resources.uri(s), name=s.id, title=s.title["en"],
                                         description=s.summary["en"], mime_type="text/markdown")
                          for s in kb.scenarios.values()]

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        name, given = params.name, params.arguments or {}
        if name not in validators:
            return _error(f"no tool named {name!r}; the tools are {', '.join(DESCRIPTIONS)}")
        problems = _problems(validators[name], given)
        if problems:
            return _error("invalid arguments: " + "; ".join(problems))
        try:
            result: Result = await anyio.to_thread.run_sync(tools.call, name, given)
        except ToolError as exc:
            return _error(str(exc))
        except Exception:
            log.exception("MCP tool %s failed", name)
            return _error("internal error; it has been logged")
        return types.CallToolResult(content=[types.TextContent(type="text", text=result.text)],
                                    structured_content=result.data)

    async def list_resources(ctx, params) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=scenario_resources)

    async def read_resource(ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        scenario = kb.scenarios.get(resources.scenario_id(str(params.uri)) or "")
        if scenario is None:
            uri = str(params.uri)[:200]
            raise MCPError(code=types.INVALID_PARAMS, message=f"no resource {uri}; resources/list names them",
                           data={"uri": uri})
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=str(params.uri), mime_type="text/markdown", text=resources.scenario_markdown(scenario, kb))])

    return Server(NAME, version=VERSION, title="OOM Doctor", instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool,
                  on_list_resources=list_resources, on_read_resource=read_resource)


async def serve_stdio(server: Server) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
