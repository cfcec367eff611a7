"""The `grammask serve` process the end-to-end suites talk to (test_server.py, test_clients.py).

`Server(*flags)` starts the release binary built with `--features server` ($GRAMMASK_BIN) on the
real SmolLM2 model ($GRAMMASK_MODEL) on a free loopback port with an API key, waits for
`/health`, and gives an `openai.OpenAI` client, raw HTTP requests, the RSS and a clean SIGTERM
stop. pytest puts this folder on `sys.path` (no `__init__.py`), so the suites import it by name.
"""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import openai

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("GRAMMASK_BIN", os.path.join(ROOT, "target/release/grammask"))
MODEL = os.environ.get(
    "GRAMMASK_MODEL", os.path.join(ROOT, "../shared/models/smollm2-135m-instruct-q4_1.gguf")
)
MASKBENCH = os.path.join(ROOT, "../shared/maskbench-dev")
KEY = "test-key"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, *extra):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [BIN, "serve", "--model", MODEL, "--port", str(self.port), "--api-key", KEY,
             "--threads", "2", "--context", "2048", "--shutdown-grace", "3", *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if json.load(r)["status"] == "ok":
                        break
            except OSError:
                time.sleep(0.2)
        else:
            self.proc.kill()
            raise RuntimeError("the server did not come up: " + self.proc.stderr.read())
        self.client = openai.OpenAI(base_url=self.url + "/v1", api_key=KEY, max_retries=0,
                                    timeout=120)

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def raw(self, path, body, headers=None, method="POST"):
        """(status, headers, parsed JSON body) of a raw request."""
        h = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
        h.update(headers or {})
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, headers=h, method=method)
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, dict(r.headers), json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), json.loads(e.read() or b"null")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
