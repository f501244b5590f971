"""A local OpenAI-compatible chat-completions server for the served-backend tests (``http.server``).

Each request's user message carries ``id=<question id>``; ``plan[qid]`` is a list of faults served to
that question's successive requests before a normal answer: ``"429"`` (with ``Retry-After: 1``),
``"500"``, ``"stall"`` (no answer for ``stall_s`` seconds), ``"malformed"`` (a 200 whose body is not
JSON); ``"down"`` fails with 500 on every request (a permanent failure). Hostile servers (the same
``plan`` entries): ``"echo_auth"`` answers with the request's ``Authorization`` header in the text (and in
``id`` and ``model``); ``"drip"`` sends a 200 with a chunked body that never ends (one byte every 0.2 s
until the stub is closed); ``"surrogate"`` answers with a lone surrogate (``\\ud800``) in the text;
``"bad_usage"`` reports ``usage.prompt_tokens`` as ``"12abc"``; ``"forever"`` marks a fault served on every
request of that question (``["forever", "surrogate"]``). Every request is recorded (time, question ID,
body, authorization header).
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LETTERS = "ABCDEFGHIJ"


class StubServer:
    def __init__(self, key: str, plan: dict[str, list[str]] | None = None, no_logprobs: set[str] | None = None,
                 answers: dict[str, list[tuple[str, float]]] | None = None, reject_logprobs: bool = False,
                 stall_s: float = 3.0, model: str = "stub-model-2026-01"):
        self.key = key
        self.plan = {k: list(v) for k, v in (plan or {}).items()}
        self.no_logprobs = set(no_logprobs or ())
        self.answers = answers or {}
        self.reject_logprobs = reject_logprobs
        self.stall_s = stall_s
        self.model = model
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def by_question(self) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {}
        for r in self.requests:
            out.setdefault(r["qid"], []).append(r)
        return out

    # ------------------------------------------------------------------------------------------------
    def top_logprobs(self, qid: str, n_options: int, yes_no: bool) -> list[tuple[str, float]]:
        if qid in self.answers:
            return self.answers[qid]
        if yes_no:
            return [(" Yes", -0.3), ("No", -1.6), (" no", -2.5), ("Maybe", -4.0)]
        j = sum(map(ord, qid)) % n_options
        top = [(" " + LETTERS[j], -0.2), (LETTERS[j], -2.2)]
        top += [(LETTERS[x], -3.0 - x) for x in range(n_options) if x != j]
        return top + [("The", -6.0)]

    def _handler(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, status: int, payload, headers: dict | None = None, raw: bytes | None = None):
                body = raw if raw is not None else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_POST(self):  # noqa: N802
                n = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(n) or b"{}")
                content = body["messages"][0]["content"]
                m = re.search(r"id=(\w+)", content if isinstance(content, str) else json.dumps(content))
                qid = m.group(1) if m else "?"
                with stub.lock:
                    stub.requests.append({"t": time.monotonic(), "qid": qid, "body": body,
                                          "auth": self.headers.get("Authorization")})
                    fault = None
                    if self.headers.get("Authorization") != f"Bearer {stub.key}":
                        fault = "401"
                    elif stub.plan.get(qid):
                        steps = stub.plan[qid]
                        if steps[0] == "down":
                            fault = "down"
                        elif steps[0] == "forever":
                            fault = steps[1]
                        else:
                            fault = steps.pop(0)
                err = {"error": {"message": "stub fault", "type": "server_error"}}
                if fault == "401":
                    given = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                    return self._send(401, {"error": {"message": f"Incorrect API key provided: {given}", "type":
                                                      "invalid_request_error", "code": "invalid_api_key"}})
                if fault == "429":
                    return self._send(429, {"error": {"message": "Rate limit reached", "type": "requests"}},
                                      {"Retry-After": "1"})
                if fault in ("500", "down"):
                    return self._send(500, err)
                if fault == "stall":
                    stub.release.wait(stub.stall_s)
                    return self._send(500, err)
                if fault == "malformed":
                    return self._send(200, None, raw=b'{"id": "x", "choices": [ {"message": ')
                if fault == "drip":
                    return self._drip()
                if stub.reject_logprobs and body.get("logprobs"):
                    return self._send(400, {"error": {"message": "logprobs is not supported with this model",
                                                      "type": "invalid_request_error", "param": "logprobs"}})
                yes_no = "yes or no" in content.lower()
                n_opt = len(re.findall(r"^[A-J]\. ", content, flags=re.M))
                top = stub.top_logprobs(qid, max(n_opt, 1), yes_no)
                first = top[0][0]
                text = f"{first.strip()}." if qid not in stub.no_logprobs else f"The answer is ({first.strip()})."
                choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                if body.get("logprobs") and qid not in stub.no_logprobs:
                    k = int(body.get("top_logprobs") or 0)
                    choice["logprobs"] = {"content": [{"token": first, "logprob": top[0][1], "bytes": None,
                                                       "top_logprobs": [{"token": t, "logprob": lp, "bytes": None}
                                                                        for t, lp in top[:k]]}]}
                else:
                    choice["logprobs"] = None
                usage = {"prompt_tokens": 40, "completion_tokens": 2, "total_tokens": 42}
                payload = {"id": "cmpl-1", "object": "chat.completion", "created": 0, "model": stub.model,
                           "choices": [choice], "usage": usage}
                if fault == "echo_auth":
                    auth = self.headers.get("Authorization") or ""
                    choice["message"]["content"] = f"You sent {auth}; key {auth.removeprefix('Bearer ')}. {text}"
                    choice["logprobs"] = None
                    payload["id"] = auth
                    payload["model"] = auth.removeprefix("Bearer ")
                elif fault == "surrogate":
                    choice["message"]["content"] = "broken \ud800 answer " + text
                    choice["logprobs"] = None
                elif fault == "bad_usage":
                    usage["prompt_tokens"] = "12abc"
                self._send(200, payload)

            def _drip(self):
                """A 200 whose chunked body never ends (one byte every 0.2 s until the stub closes)."""
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    self.wfile.write(b"1\r\n{\r\n")
                    self.wfile.flush()
                    while not stub.release.wait(0.2):
                        self.wfile.write(b"1\r\n \r\n")
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True

        return Handler
