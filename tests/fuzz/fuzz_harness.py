"""Runs one fuzz example through the CLI and judges it.

Every example is one command line. It runs in a forked copy of the test process (the default:
the imports are already done, so an example costs a tenth of a second, not the 2-4 s of a
fresh interpreter importing torch, yet the child has its own memory limit and is killed at the
time bound) or, with ``DEEPUNLEARN_FUZZ_MODE=subprocess``, as ``python -m deepunlearn`` in a
fresh interpreter (test_fuzz_special.py checks that both give the same answer).

The oracle: exit code 0, 1 or 2 (never 70, never killed); no traceback on stderr; on exit 1 or
2 exactly one error line (the lines starting with ``deepunlearn``; exit 2 may add argparse's
usage); done within the time bound and the memory bound; no pre-existing file's bytes changed.

Settings come from the environment: ``DEEPUNLEARN_FUZZ_EXAMPLES`` (examples per test, default
10), ``DEEPUNLEARN_FUZZ_TIMEOUT`` (seconds, default 20), ``DEEPUNLEARN_FUZZ_MEMORY_MB`` (default
2048), ``DEEPUNLEARN_FUZZ_MAX_FAILURES`` (a test stops running examples after this many, default
3), ``DEEPUNLEARN_FUZZ_LOG`` (append one JSON line per example; ``summarize.py`` reads it).

    python -m pytest -p no:cacheprovider tests/fuzz/                     # the small default budget
    DEEPUNLEARN_FUZZ_EXAMPLES=200 DEEPUNLEARN_FUZZ_MAX_FAILURES=30 DEEPUNLEARN_FUZZ_LOG=fuzz.jsonl \
        python -m pytest -p no:cacheprovider tests/fuzz/ && python tests/fuzz/summarize.py fuzz.jsonl
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import stat
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("DEEPUNLEARN_FUZZ_EXAMPLES", "10"))
TIME_BOUND = float(os.environ.get("DEEPUNLEARN_FUZZ_TIMEOUT", "20"))
MEMORY_BOUND = int(os.environ.get("DEEPUNLEARN_FUZZ_MEMORY_MB", "2048")) << 20
MODE = os.environ.get("DEEPUNLEARN_FUZZ_MODE", "fork")
MAX_FAILURES = int(os.environ.get("DEEPUNLEARN_FUZZ_MAX_FAILURES", "3"))
LOG = os.environ.get("DEEPUNLEARN_FUZZ_LOG")


def fuzz_settings(scale: float = 1.0) -> settings:
    """Hypothesis settings of a fuzz test: ``scale`` x the example budget, no shrinking (every
    failure is collected and reported with its command line, so shrinking would only cost time)."""
    return settings(max_examples=max(1, round(EXAMPLES * scale)), deadline=None, database=None,
                    phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=list(HealthCheck))


@dataclass
class Outcome:
    argv: list[str]
    code: int | None  # None: killed at the time bound
    stdout: str
    stderr: str
    seconds: float

    @property
    def last_line(self) -> str:
        lines = [ln for ln in self.stderr.splitlines() if ln.strip()]
        return lines[-1][:300] if lines else ""


def _limit_memory(extra: int) -> None:
    # the bound is on top of what the process already maps (a forked child starts with the
    # test process's imports, torch included)
    with open("/proc/self/status") as f:
        vm = next(int(ln.split()[1]) << 10 for ln in f if ln.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + extra, vm + extra))


def _child(argv: list[str], cwd: Path, out_fd: int, err_fd: int, memory: int) -> None:
    code = 99
    try:
        os.chdir(cwd)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        sys.stdin = open(os.devnull)
        # strict UTF-8, as the real interpreter's stdout: printing a lone surrogate must fail here too
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)
        _limit_memory(memory)
        from deepunlearn.cli import main

        try:
            code = main(list(argv))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
        except BaseException:  # what the real interpreter does with an uncaught exception
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        try:
            traceback.print_exc()
            sys.stderr.flush()
        finally:
            code = 98
    finally:
        os._exit(code if isinstance(code, int) and 0 <= code < 256 else 97)


def _run_fork(argv: list[str], cwd: Path, timeout: float, memory: int) -> Outcome:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            _child(argv, cwd, out.fileno(), err.fileno(), memory)
        code: int | None = None
        pause = 0.002
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(status)
                break
            if time.perf_counter() - t0 > timeout:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            time.sleep(pause)
            pause = min(pause * 1.5, 0.05)
        seconds = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        return Outcome(list(argv), code, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"),
                       seconds)


def _run_subprocess(argv: list[str], cwd: Path, timeout: float, memory: int) -> Outcome:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONPATH=str(ROOT),
               PYTHONIOENCODING="utf-8")
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-m", "deepunlearn", *argv], cwd=cwd, env=env, capture_output=True,
                           timeout=timeout, stdin=subprocess.DEVNULL,
                           preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (memory, memory)))
        code, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        code, out, err = None, e.stdout or b"", e.stderr or b""
    return Outcome(list(argv), code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                   time.perf_counter() - t0)


def run_cli(argv: list[str], cwd: Path, *, mode: str | None = None, timeout: float | None = None,
            memory: int | None = None) -> Outcome:
    """Run ``deepunlearn ARGV`` in ``cwd`` under the time bound and the memory bound (bytes; in a
    fresh interpreter the whole address space, in a forked child what it maps beyond the parent)."""
    torch = sys.modules.get("torch")
    # a forked child cannot use CUDA once this process has initialised it: a fresh interpreter can
    cuda = torch is not None and torch.cuda.is_initialized()
    run = _run_subprocess if (mode or MODE) == "subprocess" or cuda else _run_fork
    return run([str(a) for a in argv], Path(cwd), TIME_BOUND if timeout is None else timeout,
               MEMORY_BOUND if memory is None else memory)


def problems(o: Outcome, timeout: float = TIME_BOUND) -> list[str]:
    """What is wrong with an outcome (empty: it passes the oracle, files aside)."""
    out = []
    if o.code is None:
        out.append(f"no answer within {timeout:g} s")
    elif o.code not in (0, 1, 2):
        out.append(f"exit code {o.code}")
    if "Traceback" in o.stderr:
        out.append("traceback on stderr")
    if o.code in (1, 2):
        lines = o.stderr.splitlines()
        errors = [ln for ln in lines if ln.startswith("deepunlearn")]
        usage = [ln for ln in lines if ln.startswith("usage:")]
        if len(errors) != 1 or (usage and o.code != 2) or len(usage) > 1:
            out.append(f"{len(errors)} error lines and {len(usage)} usage lines on stderr, not one error line")
    return out


def snapshot(root: Path, *extra: Path) -> dict[str, str]:
    """What every entry under ``root`` (and each ``extra`` path) is: a file's sha256, a folder,
    a FIFO, a symlink and its target (never followed, so a FIFO is not opened)."""
    out: dict[str, str] = {}

    def one(p: Path) -> None:
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            out[str(p)] = "missing"
            return
        if stat.S_ISLNK(st.st_mode):
            out[str(p)] = "link -> " + os.readlink(p)
        elif stat.S_ISDIR(st.st_mode):
            out[str(p)] = "dir"
        elif stat.S_ISREG(st.st_mode):
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            out[str(p)] = f"special {stat.S_IFMT(st.st_mode):o}"

    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            one(Path(dirpath) / name)
    for p in extra:
        one(Path(p))
    return out


def changed(before: dict[str, str], after: dict[str, str], allow: tuple = ()) -> list[str]:
    """Pre-existing entries that changed or vanished (folders may gain entries; new files are
    fine), except those at or under an ``allow`` path (what the example itself wrote)."""
    ok = tuple(str(a) for a in allow)
    return [f"{p} changed ({before[p][:20]} -> {after.get(p, 'missing')[:20]})"
            for p in sorted(before) if after.get(p, "missing") != before[p]
            and not any(p == a or p.startswith(a + os.sep) for a in ok)]


def _log(record: dict) -> None:
    if LOG:
        with open(LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, ensure_ascii=True) + "\n")


@dataclass
class Fuzzer:
    """One test's examples: runs them, logs them, collects failures; ``finish`` fails the test
    with every failure found (command, exit code, last stderr line)."""

    fmt: str
    #: stop after this many failures (1 for a test marked as a known failure: it costs no more time)
    max_failures: int = MAX_FAILURES
    failures: list[str] = field(default_factory=list)
    tried: int = 0

    @property
    def stopped(self) -> bool:
        return len(self.failures) >= self.max_failures

    def check(self, argv: list, cwd: Path, *, protect: Path | None = None, extra: tuple = (), mode: str | None = None,
              timeout: float | None = None, memory: int | None = None, note: str = "",
              allow_change: tuple = ()) -> Outcome | None:
        """Run one example unless enough failures were found already; ``protect``: a folder
        whose pre-existing entries (and ``extra`` paths) must not change, except ``allow_change``."""
        if self.stopped:
            return None
        before = snapshot(protect, *extra) if protect else {}
        o = run_cli(argv, cwd, mode=mode, timeout=timeout, memory=memory)
        bad = problems(o, TIME_BOUND if timeout is None else timeout)
        if protect:
            bad += changed(before, snapshot(protect, *extra), allow_change)
        self.tried += 1
        _log({"format": self.fmt, "code": "timeout" if o.code is None else o.code, "seconds": round(o.seconds, 3),
              "ok": not bad, "problem": "; ".join(bad)[:300] or None, "note": note[:120],
              "argv": [a[:80] for a in o.argv][:12], "last_stderr": o.last_line[:300]})
        if bad:
            self.failures.append(f"{' '.join(a[:60] for a in o.argv)} [{note[:80]}]: {'; '.join(bad)}; "
                                 f"exit {o.code}; last stderr line: {o.last_line!r}")
        return o

    def finish(self) -> None:
        assert not self.failures, f"{self.fmt}: {len(self.failures)} failing inputs of {self.tried}:\n" + "\n".join(
            self.failures)
