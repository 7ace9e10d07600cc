"""What keeps a results folder to one sweep and one set of weights: an OS lock held for the
whole sweep, and an identity of every model's weights recorded in the store.

Why: two sweeps on one folder both computed and the second died on a duplicate point, and a
checkpoint replaced between a kill and a resume gave a "resumed" sweep with points from two
models.

* :class:`SweepLock` takes ``fcntl.flock`` on ``OUTPUT/.lock`` (non-blocking). The kernel drops
  it when the process ends, however it ends (``kill -9`` included), so a stale lock file never
  blocks anyone; the file only says who held it last (pid, host, start time). Re-entrant within
  one process (the demo holds it around its whole run, the sweep takes it again).
* :func:`model_identity` is cheap: per weight file (adapter weights included) its name, size and
  ``mtime_ns``; every other file (config, tokenizer files, ``deepunlearn.json`` with the answer
  format, generation config, adapter config, indexes) by the sha256 of its content, as any of
  them changes what the model answers. Re-saving a checkpoint changes it; reading one does not. A hub name is identified by its snapshot in the local HF cache, when
  there is one, else by its name.
* :func:`check_fit` refuses, before a model is loaded onto a GPU, a sweep whose memory plan
  (:mod:`deepunlearn.unlearn.plan`) does not fit the GPU's free memory.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import socket
import stat
from pathlib import Path
from typing import Any

from ..errors import UserError
from .store import StoreError

try:  # POSIX only; elsewhere the folder is not locked (documented, not silently wrong: see acquire)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".lock"

#: suffixes of files that hold weights (anything a loader may read tensors from)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".gguf", ".npz")
#: a non-weight file larger than this is identified by size and mtime, not hashed (reading it at
#: every resume would cost more than the check is worth; tokenizer files are a few MB)
HASH_LIMIT = 64 << 20

_HELD: dict[str, list[Any]] = {}  # resolved lock path -> [open file, depth] of this process


class SweepLock:
    """``with SweepLock(folder):`` holds the folder's lock or raises :class:`StoreError` naming the
    folder and the process that holds it."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.path = self.folder / LOCK_NAME

    def __enter__(self) -> "SweepLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self) -> None:
        key = str(self.path.resolve())
        if key in _HELD:
            _HELD[key][1] += 1
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        f = _open_lock(self.path, self.folder)
        if fcntl is not None:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.seek(0)
                holder = _describe_holder(f.read())
                f.close()
                raise StoreError(
                    f"{self.folder}: another sweep is running on this results folder ({holder}); wait for it "
                    "to finish or stop it, or choose another --output", file=self.folder, field="output") from None
        f.seek(0)
        f.truncate()
        f.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                            "started": _dt.datetime.now().isoformat(timespec="seconds")}) + "\n")
        f.flush()
        _HELD[key] = [f, 1]

    def release(self) -> None:
        key = str(self.path.resolve())
        held = _HELD.get(key)
        if held is None:
            return
        held[1] -= 1
        if held[1] == 0:
            del _HELD[key]
            held[0].close()  # closing the last descriptor releases the flock


def _open_lock(path: Path, folder: Path):
    """The lock file, opened without following a link: a ``.lock`` link to another file must not
    make the sweep write (or truncate) that file."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
    except OSError as e:
        what = "is a symbolic link" if os.path.islink(path) else f"cannot be opened ({e.strerror or e})"
        raise StoreError(f"{path}: the results folder's lock file {what}; remove it, or choose another --output",
                         file=path, field="output") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise StoreError(f"{path}: the results folder's lock file is not a regular file; remove it, or choose "
                         "another --output", file=path, field="output")
    return os.fdopen(fd, "a+", encoding="utf-8")


def _describe_holder(text: str) -> str:
    try:
        info = json.loads(text)
        return f"process {int(info['pid'])} on {info.get('host', '?')}, started {info.get('started', '?')}"
    except (ValueError, KeyError, TypeError):
        return "another process"


# --------------------------------------------------------------------------------------------- output folder

#: what a sweep writes into its results folder (a folder holding any of them but no store is another's; the
#: lock is not among them: it holds nothing, and SweepLock refuses a link or a special file there)
SWEEP_NAMES = ("results.sqlite", "config.yaml", "manifest.json", "report", "cache")


#: files that mark a model folder (a checkpoint, an adapter): a results folder is never one
MODEL_FILES = ("config.json", "deepunlearn.json", "adapter_config.json", "model.safetensors", "pytorch_model.bin")

#: a results folder's fixed children and what each must be: never a link (nothing is written
#: through one), never the other kind (a file named ``report`` is refused before anything is written).
#: The probe cache (``cache/``) is not among them: linking it to another disk is the user's choice.
FIXED_CHILDREN = {"results.sqlite": "file", "results.sqlite-wal": "file", "results.sqlite-shm": "file",
                  "results.sqlite-journal": "file", "config.yaml": "file", "manifest.json": "file",
                  "report": "folder"}


def results_folder(names: tuple[str, ...] = SWEEP_NAMES, markers: tuple[str, ...] = ("results.sqlite",), *,
                   strict: bool = False):
    """The ``ours`` test of :func:`deepunlearn.outputs.check_output` for a results folder: it holds
    a marker (a sweep's store), or (unless ``strict``: then only an empty folder) none of the names
    a sweep writes and no model's files (nothing of another's would be replaced)."""
    def ours(p: Path) -> bool:
        if any(os.path.isfile(p / m) and not os.path.islink(p / m) for m in markers):
            return True
        if strict:
            return not any(p.iterdir())
        return not any(os.path.lexists(p / n) for n in names + MODEL_FILES)
    return ours


def check_children(out: Path, where: str) -> None:
    """Refuse (:class:`~deepunlearn.outputs.OutputError`, one line) a results folder whose fixed
    children (:data:`FIXED_CHILDREN`) are links or of the wrong kind, before anything is written."""
    from ..outputs import OutputError

    flag = where.split(" ")[0]
    for name, kind in FIXED_CHILDREN.items():
        child = out / name
        try:
            st = os.lstat(child)
        except OSError:
            continue  # missing (or out itself missing or unreadable: the writer says so)
        if stat.S_ISLNK(st.st_mode):
            raise OutputError(f"{where}: {child} is a symbolic link; refusing to write through it (remove it)",
                              file=child, field=flag)
        if (kind == "folder") != stat.S_ISDIR(st.st_mode) or (kind == "file" and not stat.S_ISREG(st.st_mode)):
            raise OutputError(f"{where}: {child} exists and is not a {kind}; refusing to replace it (remove it)",
                              file=child, field=flag)


def overlaps_model(folder: Path, models: dict[str, str]) -> str | None:
    """The name of the model whose local folder holds ``folder`` (or is it): a sweep writing
    there would change the model it resumes over, so every rerun would find it changed."""
    real = Path(os.path.realpath(folder))
    for name, path in models.items():
        m = Path(path).expanduser()
        if not m.is_dir():
            continue
        rm = Path(os.path.realpath(m))
        if real == rm or rm in real.parents:
            return name
    return None


# --------------------------------------------------------------------------------------------- model identity


def _folder_identity(folder: Path) -> dict[str, Any]:
    files: dict[str, Any] = {}
    for f in sorted(folder.rglob("*")):
        rel = str(f.relative_to(folder))
        if not f.is_file() or any(part.startswith(".") for part in Path(rel).parts):
            continue  # hidden files (a download's .cache/) do not change what the model answers
        st = f.stat()  # through symlinks: the HF cache links snapshot files to blobs
        if f.name.endswith(WEIGHT_SUFFIXES) or st.st_size > HASH_LIMIT:
            files[rel] = {"bytes": st.st_size, "mtime_ns": st.st_mtime_ns}
        else:
            files[rel] = {"sha256": hashlib.sha256(f.read_bytes()).hexdigest()}
    return files


def _hub_snapshot(name: str) -> Path | None:
    """The snapshot folder of a hub model in the local HF cache (nothing is downloaded)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover
        return None
    try:
        hit = try_to_load_from_cache(name, "config.json")
    except Exception:  # an invalid repo id: it is not in any cache
        return None
    return Path(hit).parent if isinstance(hit, str) else None


def model_identity(path: str) -> dict[str, Any]:
    """What identifies a model's weights (see the module docstring): ``{"folder": ..., "files":
    {...}}`` for a local folder or a cached hub snapshot, ``{"hub": name}`` otherwise."""
    p = Path(path).expanduser()
    if p.is_dir():
        return {"folder": str(p.resolve()), "files": _folder_identity(p)}
    snap = _hub_snapshot(path)
    if snap is not None:
        return {"hub": path, "snapshot": snap.name, "files": _folder_identity(snap)}
    return {"hub": path}


def identity_digest(identity: dict[str, Any]) -> str:
    """sha256 of an identity (what the store keeps per model)."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def check_models(store: Any, models: dict[str, str], *, overwrite: bool) -> bool:
    """Compare each model's identity with the one the store recorded (``model_identity:NAME``).
    A changed model in a store holding results raises :class:`StoreError` unless ``overwrite``;
    returns True when results must be discarded (``overwrite`` and a changed model)."""
    if not store.count_points() and not store.jobs():
        return False
    for name, path in models.items():
        have = store.meta(f"model_identity:{name}")
        if have is not None and have != identity_digest(model_identity(path)) and have != _legacy_digest(path):
            if overwrite:
                return True
            raise StoreError(
                f"model {name!r} at {path} changed since this sweep started (its weights, config, tokenizer or "
                f"answer format differ); use --overwrite to start over, or a new --output (results in "
                f"{store.folder})", file=path, field=f"models.{name}")
    return False


#: the files the identity of stores written by earlier versions hashed (weights: size and mtime)
_LEGACY_HASHED = ("config.json", "model.safetensors.index.json", "pytorch_model.bin.index.json", "adapter_config.json")


def _legacy_digest(path: str) -> str | None:
    """The digest a store written by an earlier version recorded (fewer files hashed), so that
    its sweep still resumes; :func:`record_models` then records the full identity."""
    p = Path(path).expanduser()
    folder = p if p.is_dir() else _hub_snapshot(path)
    if folder is None:
        return None
    files: dict[str, Any] = {}
    for f in sorted(folder.rglob("*")):
        if not f.is_file():
            continue
        rel = str(f.relative_to(folder))
        if f.name in _LEGACY_HASHED:
            files[rel] = {"sha256": hashlib.sha256(f.read_bytes()).hexdigest()}
        elif f.name.endswith(WEIGHT_SUFFIXES):
            st = f.stat()
            files[rel] = {"bytes": st.st_size, "mtime_ns": st.st_mtime_ns}
    ident = {"folder": str(p.resolve())} if p.is_dir() else {"hub": path, "snapshot": folder.name}
    return identity_digest({**ident, "files": files})


def record_models(store: Any, models: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Record each model's identity in the store's meta; returns the identities (for the manifest)."""
    ids = {name: model_identity(path) for name, path in models.items()}
    store.set_meta({f"model_identity:{name}": identity_digest(i) for name, i in ids.items()})
    return ids


# --------------------------------------------------------------------------------------------- memory fit


class ModelFitError(UserError):
    """A model the sweep would load cannot fit the GPU: the message names the model, the planned
    and the available memory, and the fix."""


def gpu_free_bytes(device: str) -> int:
    """Free memory of a CUDA device as torch can use it (only called for a CUDA device)."""
    from ..probe.batching import cuda_free_bytes

    return cuda_free_bytes(device)


#: how the fix is named in a sweep: its config fields (the training batch is one target: not offered)
SWEEP_FIX_NAMES = {"lora": "LoRA (lora = true in the config)", "batch": "",
                   "probe_batch": "a smaller probe batch (batch_size = {} in the config)"}


def check_fit(name: str, path: str, *, methods: Any, lora: bool, dtype: str | None = None,
              device: str | None = None, batch_size: Any = 64, free_bytes: int | None = None,
              params: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Refuse a model that cannot fit the GPU it is about to be loaded on.

    For every method of the sweep (each has a memory profile in the method catalogue), plan
    the run from the model's config (no weights are read) with the sweep's
    ``lora`` setting, probe batch (one row when it is sized to memory) and each method's
    ``params`` that hold memory (``sam_rho``, du_loop's ``guard``), and compare the largest
    peak with the GPU's free memory (``torch.cuda.mem_get_info``; ``free_bytes`` injects it). Too
    large: :class:`ModelFitError` naming the model, planned and available GiB and the fix.
    Returns ``{"planned_gib", "available_gib", "method"}`` when it fits.

    On CPU (``device`` cpu, or None on a machine without CUDA) there is no check and CUDA is
    never touched: host memory is not planned.
    """
    from ..unlearn.plan import GiB, PlanError, RunShape, load_config, memory_params, plan_memory, suggest_fix

    import torch

    from ..probe.models import resolve_dtype

    if device is None and free_bytes is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device is None or not str(device).startswith("cuda"):
        return None
    todo = [m for m in methods if m != "finetune"]
    if not todo:
        return None
    try:  # the dtype the model will load in (any spelling load_model takes), named as the plan names it
        dt = {torch.float16: "fp16", torch.float32: "fp32"}.get(resolve_dtype(dtype or "bf16", str(device)), "bf16")
    except ValueError:  # load_model refuses it with its own error
        dt = "bf16"
    probe_batch = batch_size if isinstance(batch_size, int) and not isinstance(batch_size, bool) else 1
    try:  # the config is read once for every method's plan and the fix
        _, config = load_config(path)
        plans = [plan_memory(config, m, RunShape(lora=lora, dtype=dt, probe_batch=probe_batch,
                                                 **memory_params((params or {}).get(m, {}))), fix_for=None)
                 for m in todo]
    except PlanError as e:
        raise ModelFitError(f"model {name!r}: cannot plan its memory before loading it: {e}", file=path,
                            field=f"models.{name}") from None
    worst = max(plans, key=lambda p: p.peak)
    free = gpu_free_bytes(str(device)) if free_bytes is None else int(free_bytes)
    if worst.peak > free:
        fix = suggest_fix(worst, config, None, free, names=SWEEP_FIX_NAMES)
        mode = "LoRA" if lora else "full weights"
        raise ModelFitError(
            f"model {name!r} ({path}) does not fit {device}: the sweep ({', '.join(todo)}; {mode}, {dt}) needs "
            f"{worst.peak_gib:.1f} GiB at its peak ({worst.method}), {free / GiB:.1f} GiB are free; fix: {fix}",
            file=path, field=f"models.{name}")
    return {"planned_gib": round(worst.peak_gib, 3), "available_gib": round(free / GiB, 3), "method": worst.method}
