"""Peer for bench/run.sh: the official Python MCP SDK (mcp, pinned in requirements.txt) serving
Streamable HTTP in its stateless, JSON-response mode with one trivial tool.

Usage: python py_server.py PORT [WORKERS]
  WORKERS: uvicorn worker processes (default 1, the way `server.run("streamable-http")` runs).
"""

import os
import sys

import uvicorn
from mcp.server.mcpserver import MCPServer

server = MCPServer("bench-python")


@server.tool()
def echo(text: str) -> str:
    """Returns its input unchanged."""
    return text


app = server.streamable_http_app(json_response=True, stateless_http=True)

if __name__ == "__main__":
    port = int(sys.argv[1])
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    # No per-request access log: it would only slow this peer down (the benchmark gives the
    # peers every advantage; see BENCHMARKS.md).
    options = dict(host="127.0.0.1", port=port, log_level="warning", access_log=False)
    if workers == 1:
        uvicorn.run(app, **options)
    else:
        uvicorn.run("py_server:app", app_dir=os.path.dirname(os.path.abspath(__file__)),
                    workers=workers, **options)
