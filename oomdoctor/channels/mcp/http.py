"""Streamable HTTP at POST /api/mcp, inside the Flask app that serves the REST API.

Mounted here rather than run as a process of its own because everything a shared
deployment needs is already on this path: /api/ takes the API token (OOMDOCTOR_API_TOKEN)
and the rate limits (web/security.py), the body is bounded, and the consultations are the
REST API's own, in the same SQLite file; `make serve` and the Docker image serve it with no
second command, port or process to keep alive.

The transport is the SDK's (StreamableHTTPSessionManager), stateless and answering in JSON:
a consultation's state lives in the store under its id, not in an MCP session, so any
gunicorn worker can answer any request, and nothing streams. Each request runs the SDK's
ASGI handler to completion on an event loop of its own in the worker's thread: no thread or
loop outlives a request (gunicorn forks its workers after the app is built), and the WSGI
request's body, read whole and bounded, is the ASGI request's only message.
"""
from __future__ import annotations

import asyncio
from typing import Any

import anyio
from flask import Blueprint, Response, current_app, request
from mcp.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from . import message_limit, server
from .tools import Tools

PATH = "/api/mcp"
bp = Blueprint("mcp", __name__)


@bp.record_once
def _build_server(state) -> None:
    app = state.app
    tools = Tools(app.extensions["oomdoctor.consultant"], app.config["DATABASE"], message_limit(app.config))
    app.extensions["oomdoctor.mcp"] = server.build(tools)


@bp.route(PATH, methods=["GET", "DELETE"])
def no_stream():
    # Stateless: there is no server-to-client stream to open and no session to end (the spec's 405).
    return Response("this MCP endpoint is stateless: POST JSON-RPC messages to it\n", status=405,
                    headers={"Allow": "POST"}, mimetype="text/plain")


@bp.post(PATH)
def endpoint():
    body = request.get_data(cache=False)  # bounded: over MAX_CONTENT_LENGTH it is a 413
    status, headers, content = asyncio.run(_serve(current_app.extensions["oomdoctor.mcp"], _scope(), body,
                                                  current_app.config["MAX_CONTENT_LENGTH"]))
    return Response(content, status=status, headers=headers)


def _scope() -> dict[str, Any]:
    host, _, port = request.host.partition(":")
    return {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
        "method": request.method, "scheme": request.scheme, "path": "/", "raw_path": b"/", "root_path": "",
        "query_string": request.query_string,
        "headers": [(name.lower().encode("latin-1"), value.encode("latin-1", "replace"))
                    for name, value in request.headers.items()],
        "client": (request.remote_addr or "", 0),
        "server": (host, int(port) if port.isdigit() else (443 if request.scheme == "https" else 80)),
    }


async def _serve(mcp_server: Server, scope: dict[str, Any], body: bytes, max_body: int
                 ) -> tuple[int, list[tuple[str, str]], bytes]:
    manager = StreamableHTTPSessionManager(
        app=mcp_server, json_response=True, stateless=True, max_request_body_size=max_body,
        # The Host/Origin allow-list guards an unauthenticated server on a developer's machine; here
        # the API token guards /api/ as it guards the REST API, and the Host a proxy forwards is the
        # deployment's to know.
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    answered = anyio.Event()
    delivered = False
    status, headers, chunks = 500, [], []

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", [])]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                answered.set()

    async with manager.run():
        await manager.handle_request(scope, receive, send)
    # Content-Length is Flask's to set for the body it sends.
    headers = [(k, v) for k, v in headers if k.lower() not in ("content-length", "transfer-encoding")]
    return status, headers, b"".join(chunks)
