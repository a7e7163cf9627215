"""A scripted OpenAI-compatible chat server on 127.0.0.1 for the LLM tests (no network).

`ScriptedServer(["reply 1", "reply 2"])` answers `POST /v1/chat/completions` with the next scripted
text (the last one again when the script runs out), with token usage, and records every request
body; a reply given as `("sleep", seconds)` waits that long first (request timeouts)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ScriptedServer:
    def __init__(self, replies: list, prompt_tokens: int = 1000, completion_tokens: int = 200):
        self.replies = list(replies)
        self.requests: list[dict] = []
        self.usage = (prompt_tokens, completion_tokens)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                reply = server.replies[min(len(server.requests), len(server.replies)) - 1]
                if isinstance(reply, tuple):
                    time.sleep(reply[1])
                    reply = "late"
                p, c = server.usage
                data = json.dumps({
                    "id": f"cmpl-{len(server.requests)}", "object": "chat.completion", "created": 0,
                    "model": body.get("model", "test"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": reply}}],
                    "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c},
                }).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ScriptedServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
