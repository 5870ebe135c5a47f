"""Drives a lore server with the real Python MCP SDK (`mcp==2.3.0`), unmodified.

Usage: python py_client.py '<json spec>'

spec: {
  "url": "http://127.0.0.1:PORT/mcp",
  "token": "lore_...",
  "mode": "auto" | "legacy" | "2026-07-28",        (default "auto")
  "steps": [                                        (run in order)
    {"op": "list_tools"},
    {"op": "save", "args": {...save_memory arguments...}},
    {"op": "search", "args": {...search_memory arguments...}},
    {"op": "call", "name": "...", "args": {...}, "meta": {...}?}
  ]
}

Prints one JSON document on stdout:
  {"protocol_version", "server_info", "steps": [<one entry per step>]}
where a tool step's entry is the CallToolResult as wire JSON (structuredContent, isError, ...)
or {"exception": {"type", "code"?, "message"}} if the call raised.
"""

import json
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def describe_exception(exc: BaseException) -> dict:
    out = {"type": type(exc).__name__, "message": str(exc)}
    code = getattr(exc, "code", None)
    if code is None and getattr(exc, "error", None) is not None:
        code = getattr(exc.error, "code", None)
    if isinstance(code, int):
        out["code"] = code
    return out


async def run_step(client: Client, step: dict) -> dict:
    op = step["op"]
    try:
        if op == "list_tools":
            return dump(await client.list_tools())
        if op == "save":
            return dump(await client.call_tool("save_memory", step.get("args", {})))
        if op == "search":
            return dump(await client.call_tool("search_memory", step.get("args", {})))
        if op == "call":
            return dump(
                await client.call_tool(step["name"], step.get("args", {}), meta=step.get("meta"))
            )
        raise ValueError(f"unknown op {op!r}")
    except Exception as exc:  # reported to the node test, which decides what is expected
        return {"exception": describe_exception(exc)}


async def main(spec: dict) -> dict:
    headers = {"Authorization": f"Bearer {spec['token']}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http:
        transport = streamable_http_client(spec["url"], http_client=http)
        async with Client(transport, mode=spec.get("mode", "auto")) as client:
            info = client.server_info
            result = {
                "protocol_version": client.protocol_version,
                "server_info": dump(info) if info is not None else None,
                "steps": [],
            }
            for step in spec.get("steps", []):
                result["steps"].append(await run_step(client, step))
            return result


if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    output = anyio.run(main, spec)
    sys.stdout.write(json.dumps(output) + "\n")
