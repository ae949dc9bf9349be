"""A real OpenAI-compatible `/v1/chat/completions` server for tests, on 127.0.0.1.

Text comes from a tiny randomly initialised GPT-2 (transformers) over bytes: the prompt's
last bytes are the context, sampled continuation bytes are the reply (decoded as latin-1).
Each choice i is sampled with seed `seed + i`, so `generate_text` reproduces the server.
A model named "no-n" ignores `n` (like llama.cpp), returning one choice per request.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch
import transformers

_LOCK = threading.Lock()


def tiny_model() -> transformers.GPT2LMHeadModel:
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(
        vocab_size=256,
        n_positions=128,
        n_embd=32,
        n_layer=1,
        n_head=2,
        bos_token_id=0,
        eos_token_id=0,
    )
    return transformers.GPT2LMHeadModel(cfg).eval()


def generate_text(model, messages: list[dict], max_tokens: int, seed: int) -> str:
    prompt = "\n".join(m["content"] for m in messages).encode()[-64:] or b" "
    ids = torch.tensor([list(prompt)])
    with _LOCK, torch.no_grad():
        torch.manual_seed(seed)
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=True,
            max_new_tokens=max_tokens,
            min_new_tokens=max_tokens,
            top_k=0,
            pad_token_id=0,
        )
    return bytes(out[0, ids.shape[1] :].tolist()).decode("latin-1")


class Server:
    """Starts on a free port; `url` is the base URL; `requests` records what arrived."""

    def __init__(self, seed: int = 1234) -> None:
        self.model = tiny_model()
        self.seed = seed
        self.requests: list[dict] = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"body": body, "auth": self.headers.get("Authorization")})
                n = 1 if body["model"] == "no-n" else int(body.get("n") or 1)
                k = min(int(body.get("max_tokens") or 16), 32)
                choices = [
                    {
                        "index": i,
                        "finish_reason": "length",
                        "message": {
                            "role": "assistant",
                            "content": generate_text(
                                server.model, body["messages"], k, server.seed + i
                            ),
                        },
                    }
                    for i in range(n)
                ]
                self._send(
                    200,
                    {
                        "id": "chatcmpl-test",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body["model"],
                        "choices": choices,
                        "usage": {
                            "prompt_tokens": 1,
                            "completion_tokens": k * n,
                            "total_tokens": 1 + k * n,
                        },
                    },
                )

            def _send(self, code: int, obj: dict) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
