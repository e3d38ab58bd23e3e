"""MCP: OOM Doctor's tools for LLM assistants (Model Context Protocol, the official `mcp` SDK).

Two transports over one server (server.py): stdio for desktop and IDE assistants
(`python -m oomdoctor mcp`), and streamable HTTP at /api/mcp inside the Flask app (http.py),
so a shared deployment serves it from the same gunicorn process, port, API token, rate limit
and SQLite store as the REST API. tools.py holds the tools over the application service;
schemas.py their arguments and results; lookup.py the catalog look-ups; resources.py the
knowledge base's scenarios as resources.
"""
from __future__ import annotations

# The tools are the API's, behind the same token: a consultation started over REST continues over MCP
# and the other way round (a consultation belongs to the channel that started it, see service.py).
CHANNEL = "api"


def message_limit(settings: dict) -> int:
    return min(settings["MAX_MESSAGE_BYTES"], settings["MCP_MAX_MESSAGE_BYTES"])


def command(args, out) -> int:
    """`python -m oomdoctor mcp`: the tools over stdio until the assistant closes it. Logs go to
    stderr; stdout carries only the protocol."""
    import anyio

    from ... import config
    from ...consultation import default
    from ...storage import StorageError, Store
    from . import server
    from .tools import Tools

    settings = config.from_environment()
    database = args.database or settings["DATABASE"]
    try:
        Store(database).close()  # creates or migrates the file; an unusable one stops here, said once
    except StorageError as exc:
        raise SystemExit(f"error: {exc}") from None
    tools = Tools(default(), database, message_limit(settings))
    anyio.run(server.serve_stdio, server.build(tools))
    return 0
