"""The sweep configuration: one pydantic model, loaded from TOML or YAML.

A sweep runs every (model, target, method) trajectory over the method's hyper-parameter grid
(paper section 5, appendix D). A minimal TOML file::

    kb = "kb.json"                 # relative paths are relative to this file
    rules = "family"               # rule set name or Datalog file (default: the KB's own)
    output = "results/tiny"

    [[models]]
    name = "tiny"
    path = "models/tiny"           # a hub name or a local checkpoint folder
    lr = 1e-4                      # unlearning lr scaled to how the model was trained

    [methods]                      # a method with an empty grid gets the paper's grid
    ga = [1, 2, 4, 8, 16]
    npo = []
    tv = [0.2, 0.5, 1, 5, 10]
    whp = []

    [targets]
    stratified = 1                 # N per relation; or refs = [272, "A|child|B"]; or all = true

Errors name the file and the field (``sweep.toml: field models.0.lr: ...``).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

#: The paper's grids (appendix D); used where a method's grid is left empty.
PAPER_GRIDS: dict[str, tuple[float, ...]] = {
    "ga": (1, 2, 4, 8, 16),
    "npo": (1, 2, 4, 8, 16),
    "tv": (0.2, 0.5, 1, 5, 10),
    "whp": (10, 1e3, 1e5, 1e7, 1e8),
}


class ConfigError(ValueError):
    """A sweep configuration cannot be read: the message names the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSpec(_Strict):
    """One model to evaluate: a hub name or a local folder, loaded with ``load_model``."""

    name: str = Field(description="label used in the results store, tables and plots")
    path: str = Field(description="hub name or checkpoint folder (relative to the config file)")
    prompt: str | dict[str, str] | None = Field(
        default=None, description="prompt format: a model family ('gpt2', 'phi', 'llama'), a template with "
        "{question}, or {template = ..., answer_prefix = ...}; None: the checkpoint's own or its family's")
    lr: float | None = Field(default=None, gt=0, description="unlearning learning rate; None: the method's default")
    dtype: str | None = None
    device: str | None = None

    @field_validator("prompt")
    @classmethod
    def _prompt(cls, v: str | dict[str, str] | None) -> str | dict[str, str] | None:
        if v is not None:
            prompt_format(v)  # raises ValueError naming what is wrong
        return v

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, v: Any) -> Any:
        # ``models = ["gpt2-xl", "runs/tiny"]``: a bare path, named by its last component.
        if isinstance(v, str):
            return {"name": Path(v.rstrip("/")).name or v, "path": v}
        if isinstance(v, dict) and "path" not in v and "name" in v:
            return {**v, "path": v["name"]}
        return v


def prompt_format(spec: str | dict[str, str] | None):
    """The probe layer's ``PromptFormat`` for a model's ``prompt`` setting (None stays None).

    >>> prompt_format("gpt2").text("Who is A to B?", "father")
    'Question: Who is A to B?\\n Answer: father'
    >>> prompt_format("Q: {question} A:").prompt("Who?")
    'Q: Who? A:'
    """
    if spec is None:
        return None
    from ..probe.prompts import PromptFormat

    if isinstance(spec, dict):
        return PromptFormat(**{"name": "custom", **spec})
    if "{question}" in spec:
        return PromptFormat(name="custom", template=spec)
    return PromptFormat.for_model(name=spec)


class TargetSpec(_Strict):
    """Which facts to unlearn, one at a time.

    Exactly one of: ``all`` (every target the KB lists; the default), ``stratified`` (N facts per
    relation, drawn with ``seed`` from the KB's targets, or from all family facts when the KB
    lists none), ``refs`` (fact indices or ``"S|r|O"`` strings).
    """

    all: bool = False
    stratified: int | None = Field(default=None, ge=1)
    refs: list[int | str] | None = None
    seed: int = 0

    @model_validator(mode="after")
    def _one_choice(self) -> "TargetSpec":
        chosen = [n for n, on in (("all", self.all), ("stratified", self.stratified is not None),
                                  ("refs", self.refs is not None)) if on]
        if len(chosen) > 1:
            raise ValueError(f"choose one of all / stratified / refs, not {' and '.join(chosen)}")
        if not chosen:
            self.all = True
        if self.refs is not None and not self.refs:
            raise ValueError("refs is empty: list fact indices or 'S|r|O' strings")
        return self

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, v: Any) -> Any:
        if v == "all" or v is None:
            return {"all": True}
        if isinstance(v, list):
            return {"refs": v}
        return v


class SweepConfig(_Strict):
    """Everything a sweep needs; the resolved copy is written next to the results."""

    kb: str = Field(description="KB file (deepunlearn JSON)")
    rules: str | None = Field(default=None, description="rule set name (family, edu-relat) or Datalog file; "
                              "None: the KB's own (its metadata 'rules'), else family")
    models: list[ModelSpec] = Field(min_length=1)
    methods: dict[str, list[int | float]] = Field(default_factory=lambda: {m: list(g) for m, g in PAPER_GRIDS.items()})
    targets: TargetSpec = Field(default_factory=TargetSpec)
    probe_mode: Literal["exact", "generate"] = Field(
        default="exact", description="how a probe answer counts as known: 'exact' (teacher-forced greedy answer) "
        "or 'generate' (the reference's substring test on greedy decoding)")
    k_mode: Literal["probed", "dataset"] = "probed"
    exact: bool = Field(default=True, description="enumerate all minimal sets exactly where the budget allows")
    seeds: int = Field(default=100, ge=1, description="DUS+RP seeds when sets are approximated (MDUS)")
    batch_size: int = Field(default=64, ge=1, description="probe batch size")
    threads: int | None = Field(default=None, ge=1, description="torch intra-op threads per worker; None: torch's "
                                "default in-process, Ray's CPUs per worker under Ray")
    lora: bool = False
    output: str = Field(default="bench-results", description="results folder")
    cache_dir: str | None = Field(default=None, description="probe/minimal-set cache; default OUTPUT/cache")
    executor: Literal["local", "ray"] = "local"
    ray_address: str | None = Field(default=None, description="existing cluster ('auto', 'ray://host:10001'); None: local")

    _source: str | None = PrivateAttr(default=None)

    def error(self, field: str, message: str) -> "ConfigError":
        """A :class:`ConfigError` naming this configuration's file (when it came from one) and the field."""
        where = f"{self._source}: " if self._source else ""
        return ConfigError(f"{where}field {field}: {message}")

    @field_validator("methods", mode="before")
    @classmethod
    def _methods(cls, v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return {str(m): [] for m in v}
        return v

    @field_validator("methods")
    @classmethod
    def _grids(cls, v: dict[str, list[int | float]]) -> dict[str, list[int | float]]:
        if not v:
            raise ValueError("no methods: name at least one (ga, npo, tv, whp, ...)")
        out = {}
        for name, grid in v.items():
            key = name.lower()
            if not grid:
                if key not in PAPER_GRIDS:
                    raise ValueError(f"method {name!r} has no default grid: give its parameters")
                grid = list(PAPER_GRIDS[key])
            if len(set(grid)) != len(grid):
                raise ValueError(f"method {name!r}: grid {grid} repeats a value")
            out[key] = [_num(x) for x in grid]
        return out

    @model_validator(mode="after")
    def _unique_models(self) -> "SweepConfig":
        names = [m.name for m in self.models]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"models: names must be unique, {sorted(dup)} repeat (set name = ...)")
        return self

    # ------------------------------------------------------------------ derived
    @property
    def output_dir(self) -> Path:
        return Path(self.output)

    @property
    def cache_path(self) -> Path:
        return Path(self.cache_dir) if self.cache_dir else self.output_dir / "cache"

    def results_key(self, kb_fingerprint: str) -> dict[str, Any]:
        """The part of the configuration that decides the results (not where or how they run)."""
        return {
            "kb": kb_fingerprint,
            "rules": _file_digest(Path(self.rules)) if self.rules and Path(self.rules).is_file() else self.rules,
            "models": [m.model_dump(exclude={"device"}) for m in self.models],
            "methods": self.methods,
            "targets": self.targets.model_dump(),
            "probe_mode": self.probe_mode,
            "k_mode": self.k_mode,
            "exact": self.exact,
            "seeds": self.seeds,
            "lora": self.lora,
        }

    def fingerprint(self, kb_fingerprint: str) -> str:
        """sha256 over :meth:`results_key`: a store written under another fingerprint holds
        results of another experiment and is never mixed with this one."""
        blob = json.dumps(self.results_key(kb_fingerprint), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

    def to_yaml(self) -> str:
        import yaml

        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


def _num(x: float) -> float | int:
    """Keep integral grid values integral (GA steps read better as 1, 2, 4 than 1.0, 2.0)."""
    f = float(x)
    return int(f) if f.is_integer() and abs(f) < 2**53 and not isinstance(x, float) else f


def _file_digest(p: Path) -> str:
    return "sha256:" + hashlib.sha256(p.read_bytes()).hexdigest()


def _describe(e: ValidationError) -> str:
    parts = []
    for err in e.errors()[:5]:
        loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"field {loc}: {msg}")
    more = f" (and {e.error_count() - 5} more)" if e.error_count() > 5 else ""
    return "; ".join(parts) + more


def _resolve_paths(cfg: SweepConfig, base: Path) -> SweepConfig:
    """Paths in a config file are relative to that file; model paths only where such a folder
    exists (otherwise they are hub names)."""

    def rel(p: str | None) -> str | None:
        if p is None or Path(p).is_absolute():
            return p
        return str((base / p).resolve()) if p else p

    models = []
    for m in cfg.models:
        cand = base / m.path
        models.append(m.model_copy(update={"path": str(cand.resolve())}) if not Path(m.path).is_absolute() and cand.exists() else m)
    rules = cfg.rules
    if rules and ((base / rules).is_file() or rules.endswith((".dl", ".pl", ".txt"))):
        rules = rel(rules)
    return cfg.model_copy(update={
        "kb": rel(cfg.kb), "output": rel(cfg.output), "cache_dir": rel(cfg.cache_dir), "models": models, "rules": rules,
    })


def parse_config(data: Any, source: str = "<config>", base: str | os.PathLike | None = None) -> SweepConfig:
    """Validate a decoded configuration; relative paths are resolved against ``base``.

    >>> cfg = parse_config({"kb": "kb.json", "models": ["runs/tiny"], "methods": {"ga": [1, 2]}}, base="/x")
    >>> cfg.models[0].name, cfg.methods, cfg.targets.all, cfg.kb
    ('tiny', {'ga': [1, 2]}, True, '/x/kb.json')
    >>> parse_config({"kb": "kb.json", "models": ["m"], "methods": ["tv"]}).methods
    {'tv': [0.2, 0.5, 1, 5, 10]}
    >>> parse_config({"kb": "k.json", "models": []}, source="s.toml")
    Traceback (most recent call last):
    ...
    deepunlearn.bench.config.ConfigError: s.toml: field models: List should have at least 1 item after validation, not 0
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a table of settings at the top level, got {type(data).__name__}")
    try:
        cfg = SweepConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"{source}: {_describe(e)}") from None
    return _resolve_paths(cfg, Path(base)) if base is not None else cfg


def load_config(path: str | os.PathLike, **overrides: Any) -> SweepConfig:
    """Read a sweep configuration from ``.toml`` or ``.yaml``/``.yml`` (or ``.json``).

    ``overrides`` replace top-level fields before validation (the CLI's ``-o``, ``--executor``);
    their paths are taken as given (relative to the working directory).
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: no such configuration file")
    text = p.read_text(encoding="utf-8")
    suffix = p.suffix.lower()
    try:
        if suffix == ".toml":
            import tomllib

            data = tomllib.loads(text)
        elif suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:
            raise ConfigError(f"{p}: unknown configuration format {suffix!r}: use .toml, .yaml or .json")
    except ConfigError:
        raise
    except Exception as e:  # tomllib.TOMLDecodeError, yaml.YAMLError, json.JSONDecodeError
        raise ConfigError(f"{p}: cannot parse {suffix[1:].upper()}: {e}") from None
    cfg = parse_config(data, source=str(p), base=p.resolve().parent)
    cfg._source = str(p)
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if overrides:
        try:
            cfg = SweepConfig.model_validate({**cfg.model_dump(), **overrides})
        except ValidationError as e:
            raise ConfigError(f"{p} (with command-line options): {_describe(e)}") from None
        for key in ("output", "cache_dir"):
            if key in overrides:
                cfg = cfg.model_copy(update={key: str(Path(overrides[key]).resolve())})
        cfg._source = str(p)
    return cfg
