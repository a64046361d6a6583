"""A loopback HTTP server that replays recorded provider exchanges
(`providers/tests/fixtures/*.jsonl`) in order, one per POST, and can stall one of them mid-body
(its headers and part of its body sent, then nothing until the server closes)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, List, Optional

FIXTURES = Path(__file__).resolve().parents[3] / "providers" / "tests" / "fixtures"

# One streamed conversation per API whose first answer calls the tool `add` (x=2, y=3) and
# whose second answers with text.
CASSETTES = {
    "anthropic": "anthropic/turn_termination_matrix/streaming_tool_turn_reports_tool_calls",
    "openai-chat": "openai/turn_termination_matrix/streaming_tool_turn_reports_tool_calls",
    "openai-responses":
        "openai/raw_capture_agent_matrix/responses_streamed_tool_run_records_distinct_raw",
}


def recorded(api: str) -> List[Dict[str, Any]]:
    """The exchanges of the API's tool conversation, in order."""
    with open(FIXTURES / f"{api}.jsonl") as f:
        found = [json.loads(line) for line in f if CASSETTES[api] in line]
    return sorted(found, key=lambda e: e["index"])


class Replay:
    """The server: `responses` are served one per POST; `stall_at` (an index into them) is sent
    only up to `stall_after` bytes of its body."""

    def __init__(self, responses: List[Dict[str, Any]], stall_at: Optional[int] = None,
                 stall_after: int = 0):
        self.responses = responses
        self.stall_at = stall_at
        self.stall_after = stall_after
        self.requests: List[Dict[str, Any]] = []
        self.stalled = threading.Event()
        self.release = threading.Event()
        replay = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"null")
                n = len(replay.requests)
                replay.requests.append({"path": self.path, "headers": dict(self.headers),
                                        "body": body})
                if n >= len(replay.responses):
                    self.send_error(500, "no more recorded responses")
                    return
                exchange = replay.responses[n]
                data = exchange["response"].encode()
                self.send_response(exchange["status"])
                self.send_header("content-type", exchange["content_type"])
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                if n == replay.stall_at:
                    self.wfile.write(data[: replay.stall_after])
                    self.wfile.flush()
                    replay.stalled.set()
                    replay.release.wait(120)
                    return
                # A few chunks, as a stream arrives.
                step = max(1, len(data) // 5)
                for i in range(0, len(data), step):
                    self.wfile.write(data[i:i + step])
                    self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "Replay":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
