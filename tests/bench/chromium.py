"""Headless Chromium driven over the DevTools protocol through a pipe (``--remote-debugging-pipe``:
JSON messages ending in NUL on file descriptors 3 and 4), with no package beyond the standard
library: open a page, collect its console errors and exceptions, evaluate JavaScript, take a
screenshot. Tests import it by name (like bench_helpers)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-pipe", "--window-size=1280,2000"]


def find_chromium() -> str:
    """The browser binary, or an AssertionError saying how to install it (never a skip)."""
    for name in (os.environ.get("CHROMIUM"), *CHROMIUM_CANDIDATES):
        if name and (path := shutil.which(name)):
            return path
    raise AssertionError("report.html is tested in a real browser: install Chromium (Debian/Ubuntu: "
                         "apt-get install -y chromium) or point $CHROMIUM at a Chromium/Chrome binary")


class Browser:
    """One headless Chromium with one page attached (flattened session)."""

    def __init__(self, timeout: float = 60.0):
        self.timeout = timeout
        binary = find_chromium()
        self.profile = tempfile.mkdtemp(prefix="chromium-profile-")
        to_child_r, self._w = os.pipe()
        self._r, from_child_w = os.pipe()

        def fds() -> None:  # the protocol's descriptors: 3 reads commands, 4 writes answers
            import fcntl

            a, b = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child_r, from_child_w))  # out of 3 and 4's way
            os.dup2(a, 3)  # inheritable: they survive exec, the pipes' own ends (close-on-exec) do not
            os.dup2(b, 4)

        self.proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     preexec_fn=fds, close_fds=False)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=True)

    def _read(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        while True:
            m = self._read()
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method: str) -> dict[str, Any]:
        for m in self.events:
            if m.get("method") == method:
                return m
        while True:
            m = self._read()
            self.events.append(m)
            if m.get("method") == method:
                return m

    def open(self, path: Path) -> None:
        self.call("Page.navigate", session=True, url=Path(path).resolve().as_uri())
        self.wait_event("Page.loadEventFired")

    def js(self, expression: str) -> Any:
        r = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def screenshot(self) -> bytes:
        return base64.b64decode(self.call("Page.captureScreenshot", session=True, format="png",
                                          captureBeyondViewport=True)["data"])

    def requests(self) -> list[str]:
        """The URLs the page asked for so far."""
        return [m["params"]["request"]["url"] for m in self.events if m.get("method") == "Network.requestWillBeSent"]

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries seen so far."""
        out = []
        for m in self.events:
            p = m.get("params", {})
            if m.get("method") == "Runtime.exceptionThrown":
                out.append(json.dumps(p.get("exceptionDetails", {}))[:500])
            elif m.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif m.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(p["entry"].get("text", ""))
        return out

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError, TimeoutError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._r)
        os.close(self._w)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
