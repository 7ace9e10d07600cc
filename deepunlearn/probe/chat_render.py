"""Chat templates rendered under a time, memory and size bound.

A chat template is Jinja code read from a model's folder (``tokenizer_config.json``,
``chat_template.jinja`` or ``chat_template.json``). transformers renders it in jinja's sandbox,
which keeps it away from Python's internals but not from a loop of 10^10 steps or a string of
10^9 characters (``{{ 'x' * 1000000000 }}``). :func:`render` therefore hands the template, the
messages and the tokenizer's special tokens to a render worker, a child process that renders
them with transformers' own renderer (``render_jinja_template``, as ``apply_chat_template``
calls it): forked from this process on first use where the OS can fork and then kept (a render
costs a pipe's round trip, ~0.1 ms), else a fresh interpreter per render (seconds: it imports
transformers). A render gets :data:`RENDER_SECONDS` of wall time, the worker
:data:`RENDER_MEMORY` bytes of address space beyond what it starts with (where the OS enforces
``RLIMIT_AS``), and the text at most :data:`RENDER_CHARS` characters; a template over any bound
raises :class:`RenderBound` (and the worker is replaced), one that fails raises
:class:`RenderFailed` with its exception's type and message.
"""

from __future__ import annotations

import json
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

#: Wall-clock seconds a chat template may take to render (a real one takes a millisecond).
RENDER_SECONDS = 5.0
#: Bytes of memory a render may allocate beyond what the rendering process starts with.
RENDER_MEMORY = 512 << 20
#: Characters a rendered chat may hold (real prompts hold hundreds to a few thousand).
RENDER_CHARS = 100_000
#: Seconds a fresh interpreter may take to import transformers before it renders.
STARTUP_SECONDS = 120.0


class RenderBound(Exception):
    """A chat template that exceeds a render bound; ``what`` is ``time``, ``memory`` or ``size``."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


class RenderFailed(Exception):
    """A chat template whose render raised ``kind``: ``message`` (jinja's error, raise_exception())."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind, self.message = kind, message


def bounds_text() -> str:
    """The bounds in words, for messages: ``5 s, 512 MiB, 100000 characters``."""
    return f"{RENDER_SECONDS:g} s, {RENDER_MEMORY >> 20} MiB, {RENDER_CHARS} characters"


def render(tokenizer, messages: list[dict], *, chat_template: str | None = None, tools=None, **kwargs: Any) -> str:
    """``tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
    **kwargs)``, rendered by the bounded worker (module docstring)."""
    kwargs.setdefault("add_generation_prompt", True)
    try:
        from transformers.utils.chat_template_utils import _normalize_chat_messages

        messages = _normalize_chat_messages(messages)
    except ImportError:  # older transformers: messages are plain dicts already
        pass
    job = {"messages": messages, "template": tokenizer.get_chat_template(chat_template, tools),
           "kwargs": {**{k: v for k, v in tokenizer.special_tokens_map.items()}, "tools": tools, **kwargs}}
    data = json.dumps(job, ensure_ascii=True, default=str).encode()
    result = _WORKER.ask(data) if _can_fork() else _render_subprocess(data)
    if "text" in result:
        return result["text"]
    if "bound" in result:
        raise RenderBound(result["bound"])
    kind, message = result.get("error") or ("Error", "the render worker ended without an answer")
    raise RenderFailed(str(kind), str(message))


def _can_fork() -> bool:
    return hasattr(os, "fork") and sys.platform != "win32"


def _limit_memory(extra: int) -> None:
    """Cap this process's address space at what it maps now plus ``extra`` (Linux; elsewhere
    the time and size bounds remain)."""
    try:
        import resource

        with open("/proc/self/status") as f:
            vm = next(int(ln.split()[1]) << 10 for ln in f if ln.startswith("VmSize:"))
        resource.setrlimit(resource.RLIMIT_AS, (vm + extra, vm + extra))
    except (ImportError, OSError, StopIteration, ValueError):
        pass


def _outcome(job: dict) -> dict:
    """One job's answer: ``{"text"}``, ``{"bound"}`` or ``{"error": [type, message]}``."""
    from transformers.utils.chat_template_utils import render_jinja_template

    try:
        text = render_jinja_template(conversations=[job["messages"]], chat_template=job["template"],
                                     **job["kwargs"])[0][0]
    except MemoryError:
        return {"bound": "memory"}
    except Exception as e:  # noqa: BLE001 - a template is user code; any failure is its own
        return {"error": [type(e).__name__, " ".join(str(e).split())[:500]]}
    if not isinstance(text, str):
        return {"error": ["TypeError", f"the render gave {type(text).__name__}, not text"]}
    if len(text) > RENDER_CHARS:
        return {"bound": "size"}
    return {"text": text}


def _send(fd: int, data: bytes) -> None:
    data = struct.pack("<Q", len(data)) + data
    while data:
        data = data[os.write(fd, data):]


def _read(fd: int, n: int, deadline: float | None) -> bytes | None:
    """``n`` bytes from ``fd``; ``None`` at end of file; TimeoutError past ``deadline``."""
    out = b""
    while len(out) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if not select.select([fd], [], [], left)[0]:
                continue
        chunk = os.read(fd, n - len(out))
        if not chunk:
            return None
        out += chunk
    return out


def _recv(fd: int, deadline: float | None) -> bytes | None:
    head = _read(fd, 8, deadline)
    return None if head is None else _read(fd, struct.unpack("<Q", head)[0], deadline)


def _serve(rfd: int, wfd: int) -> None:
    """The worker's loop: one job in, one answer out, until end of file; after a bound it ends
    (memory it ran out of is not trusted again)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; EOF ends the worker
    _limit_memory(RENDER_MEMORY)
    while True:
        job = _recv(rfd, None)
        if job is None:
            return
        out = _outcome(json.loads(job))
        _send(wfd, json.dumps(out, ensure_ascii=True).encode())
        if "bound" in out:
            return


class _Worker:
    """The forked render worker of this process (a forked child of this process starts its own)."""

    def __init__(self) -> None:
        self.pid = self.owner = None
        self.rfd = self.wfd = -1
        self.lock = threading.Lock()  # one job at a time on the pipe

    def _start(self) -> None:
        job_r, job_w = os.pipe()
        out_r, out_w = os.pipe()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # "fork() of a multi-threaded process": the
            pid = os.fork()  # worker runs Python only, no thread pool, and ends with os._exit
        if pid == 0:
            code = 0
            try:
                os.close(job_w)
                os.close(out_r)
                _serve(job_r, out_w)
            except BaseException:  # noqa: BLE001 - nothing may escape a forked child
                code = 1
            finally:
                os._exit(code)
        os.close(job_r)
        os.close(out_w)
        self.pid, self.owner, self.rfd, self.wfd = pid, os.getpid(), out_r, job_w

    def _close(self) -> None:
        for fd in (self.rfd, self.wfd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.rfd = self.wfd = -1

    def forget(self) -> None:
        """In a forked child: the parent's worker is not this process's (its pipes closed here, so
        that it ends with the parent)."""
        self._close()
        self.__init__()

    def stop(self) -> None:
        if self.pid is None or self.owner != os.getpid():
            self.pid = None
            return
        self._close()
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        self.pid = None

    def ask(self, data: bytes) -> dict:
        with self.lock:
            return self._ask(data)

    def _ask(self, data: bytes, retry: bool = True) -> dict:
        if self.pid is None or self.owner != os.getpid():
            self.pid = None
            self._start()
        try:
            _send(self.wfd, data)
            reply = _recv(self.rfd, time.monotonic() + RENDER_SECONDS)
        except TimeoutError:
            self.stop()
            return {"bound": "time"}
        except BrokenPipeError:  # the worker is gone (killed from outside): once more with a new one
            self.stop()
            return self._ask(data, retry=False) if retry else {"error": ["Error", "the render worker is gone"]}
        except BaseException:  # Ctrl-C mid-render: the worker may be mid-job; a new one next time
            self.stop()
            raise
        out = _parse(reply)
        if "text" not in out and "error" not in out:
            self.stop()
        return out


_WORKER = _Worker()
if hasattr(os, "register_at_fork"):  # a forked child starts its own worker, with a lock nobody holds
    os.register_at_fork(after_in_child=_WORKER.forget)


def _parse(data: bytes | None) -> dict:
    if not data:  # killed by the OS (memory) before it could answer
        return {"bound": "memory"}
    try:
        out = json.loads(data)
    except ValueError:
        return {"bound": "memory"}
    return out if isinstance(out, dict) else {"error": ["Error", "an unreadable answer"]}


#: The fresh interpreter's side (where os.fork is missing): one job, under a watchdog thread.
_CHILD = r"""
import json, os, sys, threading
from deepunlearn.probe.chat_render import RENDER_MEMORY, _limit_memory, _outcome
import transformers.utils.chat_template_utils
sys.stdout.write("ready\n"); sys.stdout.flush()
job = json.loads(sys.stdin.readline())
_limit_memory(RENDER_MEMORY)
def bound():
    sys.stdout.write(json.dumps({"bound": "time"}) + "\n"); sys.stdout.flush(); os._exit(0)
threading.Timer(job.pop("seconds"), bound).start()
sys.stdout.write(json.dumps(_outcome(job), ensure_ascii=True) + "\n"); sys.stdout.flush(); os._exit(0)
"""


def _render_subprocess(data: bytes) -> dict:
    """One render in a fresh interpreter: :data:`STARTUP_SECONDS` for its imports, then
    :data:`RENDER_SECONDS` for the answer (it also bounds itself, and is killed past that)."""
    import queue

    job = json.loads(data)
    job["seconds"] = RENDER_SECONDS
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                                        os.environ.get("PYTHONPATH", "")])}
    p = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env)
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in p.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    try:
        if lines.get(timeout=STARTUP_SECONDS) != b"ready\n":
            return {"error": ["Error", "the render process could not start"]}
        try:
            p.stdin.write(json.dumps(job).encode() + b"\n")
            p.stdin.close()
        except OSError:
            return {"error": ["Error", "the render process could not start"]}
        return _parse(lines.get(timeout=RENDER_SECONDS + 0.5))
    except queue.Empty:
        return {"bound": "time"}
    finally:
        p.kill()
        p.wait()
