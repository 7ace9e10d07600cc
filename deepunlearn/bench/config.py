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

    [methods]                      # a method with an empty grid gets the model's default grid
    ga = [1, 2, 4, 8, 16]
    npo = []
    tv = [0.2, 0.5, 1, 5, 10]
    whp = []

    [targets]
    stratified = 1                 # N per relation; or refs = [272, "A|child|B"]; or all = true

Errors name the file and the field (``sweep.toml: field models.0.lr: ...``).

The runner's options are written in their groups' tables (``[probing] mode``, ...: :mod:`.config_groups`);
below they go by the flat names the configuration stores them under (``probe_mode``, ``sets``, ...).

The protocol (``deepunlearn.probe.protocol``) is ``protocol = "default"`` or ``"reference"`` (the
paper's public code), at the top level or per model; ``probe_mode``, ``k_mode``, ``sets`` and
``tie`` override its value for every model. The probe options (forms, checks, attacks) are in
:mod:`.config_probe`, accuracy in :mod:`.config_accuracy`, the oracle in :mod:`.oracle`, seeds in
:mod:`.config_run`. An empty grid in ``[methods]`` is the model's default (a GPT-2-family model
gets the reference's GPT2-XL grids under a protocol with ``family_grids``); a model overrides
grids with a preset (``grids = "gpt2-xl"``) or a ``[models.grids]`` table. docs/sweeps.md has
every option.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (Field, PrivateAttr, SerializeAsAny, ValidationError, ValidationInfo, field_serializer,
                      field_validator, model_validator)

from ..errors import UserError
from ..probe.protocol import PROTOCOL_NAMES, Protocol, get_protocol
from ..probe.modes import DESCRIPTIONS as MODE_DESCRIPTIONS, FACT_MODES, PROTOCOL_MODES, AnyMode, check_fact_mode
from ..unlearn.methods.params import MethodParams, typed_params
from .config_run import MDUS_HELP, RUN_HELP, MdusSeeds, RunOptions, Seed, Threads, check_seed, split_seeds
from .config_accuracy import ACCURACY_HELP, HOLDOUT_HELP, REFERENCE_HELP, SAMPLE_HELP, SCORES_HELP
from .config_files import describe_validation as _describe
from .config_files import read_config_data
from .config_params import PARAMS_HELP, param_tables
from .config_groups import SECTIONS, grouped_field, ungroup
from .config_checks import cross_checks, results_key
from .config_paths import SET_NAMES, resolve_paths as _resolve_paths
from .config_probe import ADVERSARIAL_HELP, ATTACKS_HELP, FORMS_HELP, UNLEARN_FORMS_HELP, AttackOptions
from .grids import GRID_PRESETS, PAPER_GRIDS, check_grid, family_default, is_gpt2_family, resolve_grids
from .grids import refuse_bools, unset_methods
from .modelspec import ModelSpec, protocol_name, StrictModel, prompt_format
from .oracle import ORACLE_HELP, ORACLE_SEEDS_HELP
from .point_controls import CHANCE_HELP
from .targets import TargetSpec
from .tracking import TRACKER_HELP

__all__ = ["ConfigError", "ModelSpec", "SweepConfig", "TargetSpec", "SET_NAMES", "PAPER_GRIDS", "GRID_PRESETS",
           "load_config", "parse_config", "prompt_format"]

class ConfigError(UserError, ValueError):
    """A sweep configuration cannot be read: the message names the file and the field."""


class SweepConfig(StrictModel):
    """Everything a sweep needs; the resolved copy is written next to the results."""

    kb: str = Field(description="KB file (deepunlearn JSON)")
    rules: str | None = Field(default=None, description="rule set name (family, edu-relat) or Datalog file; "
                              "None: the KB's own (its metadata 'rules'), else family")
    models: list[ModelSpec] = Field(min_length=1)
    methods: dict[str, list[int | float]] = Field(default_factory=lambda: {m: list(g) for m, g in PAPER_GRIDS.items()})
    targets: TargetSpec = Field(default_factory=TargetSpec)
    params: dict[str, SerializeAsAny[MethodParams]] = Field(default_factory=dict, description=PARAMS_HELP)
    protocol: str = Field(default="default", description="protocol preset of every model without its own: "
                          + ", ".join(repr(n) for n in PROTOCOL_NAMES) + " (deepunlearn.probe.protocol)")
    probe_mode: str | None = Field(
        default=None, description="override: how a probe answer counts as known: "
        + "; ".join(f"'{m}': {MODE_DESCRIPTIONS[m]}" for m in FACT_MODES) + "; None: the protocol's")
    forms: str | None = Field(default=None, description=FORMS_HELP)
    unlearn_forms: str | None = Field(default=None, description=UNLEARN_FORMS_HELP)
    adversarial: bool = Field(default=False, strict=True, description=ADVERSARIAL_HELP)
    adversarial_modes: list[AnyMode] | None = Field(  # type: ignore[valid-type]
        default=None, min_length=1, description="the modes of the adversarial aggregate (default: all four)")
    adversarial_calibration: str | None = Field(
        default=None, description="calibration file (probe --calibrate -o FILE) of the adversarial aggregate: a mode "
        "counts only above thresholds set on never-seen facts; None: the raw rule, uncalibrated")
    attacks: AttackOptions | None = Field(default=None, description=ATTACKS_HELP)
    model_derived: bool = Field(default=False, strict=True, description="at every point also ask the target's compose "
                                "questions and store deep_model (model-derived deep unlearning) beside the rules' deep")
    oracle: bool = Field(default=False, strict=True, description=ORACLE_HELP)
    oracle_seeds: list[Annotated[int, Field(ge=0, strict=True)]] = Field(default_factory=list,
                                                                           description=ORACLE_SEEDS_HELP)
    chance_calibration: str | None = Field(default=None, description=CHANCE_HELP)
    k_mode: Literal["probed", "dataset"] | None = Field(default=None, description="override; None: the protocol's")
    exact: bool | None = Field(default=None, description="override, older spelling: true = sets 'exact', "
                               "false = sets 'mdus'; None: the protocol's")
    sets: str | None = Field(default=None, description="override: 'exact', 'mdus', 'release' or a folder of stored "
                             "minimal sets (relative to the config file); None: the protocol's")
    tie: Literal["accuracy", "first"] | None = Field(default=None, description="override; None: the protocol's")
    accuracy: Literal["auto", "full", "sampled"] = Field(default="auto", description=ACCURACY_HELP)
    accuracy_sample: int = Field(default=300, ge=1, strict=True, description=SAMPLE_HELP)
    seed: Seed = Field(default=0, description="seed of the sweep: every job gets its own, derived from it")
    mdus_seeds: MdusSeeds = Field(default=100, description=MDUS_HELP)
    run: RunOptions | None = Field(default=None, description=RUN_HELP)
    batch_size: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        default="auto", description="probe batch size; 'auto': sized to free GPU memory on CUDA, 64 on CPU")
    threads: Threads | None = Field(default=None, description="torch intra-op threads per worker; None: torch's "
                                "default in-process, Ray's CPUs per worker under Ray")
    lora: bool = False
    scores: bool = Field(default=False, description=SCORES_HELP)
    holdout: str | None = Field(default=None, description=HOLDOUT_HELP)
    min_k: float = Field(default=20.0, gt=0, le=100, allow_inf_nan=False, description="Min-K% Prob's k, in percent of the tokens")
    reference: Literal["none", "retrain"] = Field(default="none", description=REFERENCE_HELP)
    output: str = Field(default="bench-results", description="results folder")
    cache_dir: str | None = Field(default=None, description="probe/minimal-set cache; default OUTPUT/cache")
    executor: Literal["local", "ray"] = "local"
    ray_address: str | None = Field(default=None, description="existing cluster ('auto', 'ray://host:10001'); None: local")
    tracker: str | None = Field(default=None, description=TRACKER_HELP + "; a path is relative to this file")

    _source: str | None = PrivateAttr(default=None)
    #: methods whose [methods] grid was left empty (they get each model's default grid)
    _unset: frozenset[str] = PrivateAttr(default=frozenset())
    #: the [params.<method>] tables as the file gave them: what the sweep records (config_params)
    _params_given: dict[str, dict[str, Any]] = PrivateAttr(default_factory=dict)
    _notes: tuple[str, ...] = PrivateAttr(default=())  # a flat key read in its group (config_groups)

    @property
    def notes(self) -> tuple[str, ...]:
        return self._notes  # printed by a sweep once its configuration passed every check

    def error(self, field: str, message: str) -> "ConfigError":
        """A :class:`ConfigError` naming this configuration's file (when it came from one) and the field."""
        where = f"{self._source}: " if self._source else ""
        return ConfigError(f"{where}field {field}: {message}", file=self._source, field=field)

    @model_validator(mode="wrap")
    @classmethod
    def _remember_unset(cls, data: Any, handler: Any) -> "SweepConfig":
        # ``methods`` is stored with the paper's grid where it was left empty; which ones were
        # empty decides each model's grids (a GPT-2 model gets GPT2-XL's), so it is kept aside
        # and written back as [] by model_dump (a dumped config reloads to the same sweep).
        data = split_seeds(data)  # the top-level ``seeds = N`` of older configs (config_run)
        if isinstance(data, dict) and any(g in data for g in SECTIONS):  # the groups' tables (config_groups)
            data = ungroup(data, "", lambda f, m: ValueError(f"field {f}: {m}"), lambda line: None)[0]
        unset = unset_methods(data) if isinstance(data, dict) else None
        given = data.get("params") if isinstance(data, dict) else None
        cfg = handler(data)
        if unset is not None:
            cfg._unset = unset
        if isinstance(given, dict):
            cfg._params_given = {m: dict(t) for m, t in given.items() if isinstance(t, dict)}
        check_seed(data, cfg)
        if cfg.run is not None and cfg.run.seeds and not (isinstance(data, dict) and "seed" in data):
            cfg.seed = cfg.run.seeds[0]
        return cfg

    @field_validator("methods", mode="before")
    @classmethod
    def _methods(cls, v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return {str(m): [] for m in v}
        refuse_bools(v)
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
                default = family_default(key, False)
                if default is None:
                    raise ValueError(f"method {name!r} has no default grid: give its parameters")
                grid = list(default)
            out[key] = check_grid(name, grid)
        return out

    @field_serializer("methods")
    def _dump_methods(self, v: dict[str, list[int | float]]) -> dict[str, list[int | float]]:
        return {m: ([] if m in self._unset else list(g)) for m, g in v.items()}

    @field_validator("params", mode="before")
    @classmethod
    def _params(cls, v: Any, info: ValidationInfo) -> Any:
        return typed_params(v, info.data.get("methods"))

    @field_serializer("params")
    def _dump_params(self, v: dict[str, MethodParams]) -> dict[str, dict[str, Any]]:
        return param_tables(v, self._params_given)

    @field_validator("protocol")
    @classmethod
    def _protocol(cls, v: str) -> str:
        return protocol_name(v)

    @field_validator("probe_mode", mode="before")
    @classmethod
    def _probe_mode(cls, v: Any) -> Any:
        return v if v is None else check_fact_mode(v)  # the registry's modes: a plug-in's is one

    @model_validator(mode="after")
    def _cross_checks(self) -> "SweepConfig":
        return cross_checks(self)  # config_checks

    # ------------------------------------------------------------------ per model
    def model(self, name: str) -> ModelSpec:
        return next(m for m in self.models if m.name == name)

    def protocol_for(self, model: ModelSpec | str) -> Protocol:
        """The model's protocol: its preset (or the sweep's) with the sweep's overrides. A sets
        folder counts as ``release`` here (stored sets); :meth:`sets_for` gives the folder."""
        m = self.model(model) if isinstance(model, str) else model
        sets = self.sets if self.sets in SET_NAMES else ("release" if self.sets else None)
        if sets is None and self.exact is not None:
            sets = "exact" if self.exact else "mdus"
        mode = self.probe_mode if self.probe_mode in PROTOCOL_MODES else None  # one the protocol can hold
        return get_protocol(m.protocol or self.protocol, probe_mode=mode,
                            k_mode=self.k_mode, sets=sets, tie=self.tie)

    def probe_mode_for(self, model: ModelSpec | str) -> str:
        """The model's probe mode: the sweep's override (any mode a fact is asked under), else its protocol's."""
        return self.probe_mode or self.protocol_for(model).probe_mode

    def sets_for(self, model: ModelSpec | str) -> str:
        """``exact``, ``mdus``, ``release`` or the (absolute) folder of stored minimal sets."""
        if self.sets is not None and self.sets not in SET_NAMES:
            return self.sets
        return self.protocol_for(model).sets

    def grids_for(self, model: ModelSpec | str) -> dict[str, list[int | float]]:
        """The model's grid of every method in [methods] (see the module docstring)."""
        return {method: grid for method, (grid, _) in self._grid_sources(model).items()}

    def grid_sources(self, model: ModelSpec | str) -> dict[str, str]:
        """Where each of the model's grids comes from: ``methods``, ``models.grids``, ``preset NAME``,
        ``paper`` (an empty grid) or ``auto gpt2-xl`` (an empty grid of a GPT-2-family model)."""
        return {method: src for method, (_, src) in self._grid_sources(model).items()}

    def _grid_sources(self, model: ModelSpec | str) -> dict[str, tuple[list[int | float], str]]:
        m = self.model(model) if isinstance(model, str) else model
        gpt2 = self.protocol_for(m).family_grids and is_gpt2_family(m.path)
        return resolve_grids(self.methods, self._unset, m.grids, gpt2)

    @property
    def measured(self) -> bool:
        """Whether points carry measures (``scores``, or a reference that needs them)."""
        return self.scores or self.reference != "none"

    def baseline_methods(self) -> list[str]:
        """The per-target baseline rows: ``original`` when measured, ``retrain`` with a reference."""
        return (["original"] if self.measured else []) + (["retrain"] if self.reference == "retrain" else [])

    # ------------------------------------------------------------------ derived
    @property
    def output_dir(self) -> Path:
        return Path(self.output)

    @property
    def cache_path(self) -> Path:
        return Path(self.cache_dir) if self.cache_dir else self.output_dir / "cache"

    def recorded(self) -> dict[str, Any]:
        """The configuration as a sweep records it (its store's ``config``, a tracker's params):
        the JSON dump, without ``chance_calibration`` and ``oracle_seeds`` when they are unset, so a
        sweep without them records what it did before those options existed."""
        unset = {k for k, v in (("chance_calibration", self.chance_calibration is None),
                                ("oracle_seeds", not self.oracle_seeds)) if v}
        return self.model_dump(mode="json", exclude=unset or None)

    def param_tables(self) -> dict[str, dict[str, Any]]:
        """Each method's ``[params.<method>]`` table as the file gave it (the run's workers make
        the method's ``Params`` of it again)."""
        return param_tables(self.params, self._params_given)

    def results_key(self, kb_fingerprint: str) -> dict[str, Any]:
        """The part of the configuration that decides the results (not where or how they run):
        per model its resolved protocol, sets and grids (not how they were spelled)."""
        return results_key(self, kb_fingerprint)  # config_checks

    def fingerprint(self, kb_fingerprint: str) -> str:
        """sha256 over :meth:`results_key`: a store written under another fingerprint holds
        results of another experiment and is never mixed with this one."""
        blob = json.dumps(self.results_key(kb_fingerprint), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

    def to_yaml(self) -> str:
        import yaml

        return yaml.safe_dump(self.recorded(), sort_keys=False, allow_unicode=True)


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
    file = None if source == "<config>" else source
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a table of settings at the top level, got {type(data).__name__}",
                          file=file)
    notes: list[str] = []  # the flat keys' notes, printed once the sweep passed its checks (an error is one line)
    data, grouped = ungroup(data, source, lambda f, m: ConfigError(f"{source}: field {f}: {m}", file=file, field=f),
                            notes.append)
    try:
        cfg = SweepConfig.model_validate(data)
    except ValidationError as e:
        msg, field = grouped_field(*_describe(e), grouped)  # the field as the file spells it
        raise ConfigError(f"{source}: {msg}", file=file, field=field) from None
    except RecursionError:  # pragma: no cover - load_config refuses deep documents before this
        raise ConfigError(f"{source}: configuration nested too deeply", file=file) from None
    if file is not None:
        cfg._source, cfg._notes = source, tuple(notes)
    if base is None:
        return cfg
    try:
        return _resolve_paths(cfg, Path(base))
    except (OSError, ValueError) as e:
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(f"{source}: a path in the configuration cannot be used: {e}", file=file) from None


def load_config(path: str | os.PathLike, **overrides: Any) -> SweepConfig:
    r"""Read a sweep configuration from ``.toml`` or ``.yaml``/``.yml`` (or ``.json``).

    Parameters
    ----------
    path : str or os.PathLike
        The configuration file; paths inside it are relative to its folder.
    **overrides
        Top-level fields that replace the file's before validation (the CLI's ``-o``,
        ``--executor``); their paths are taken as given (relative to the working directory).

    Returns
    -------
    SweepConfig
        The validated configuration, every path resolved.

    Raises
    ------
    ConfigError
        Any problem with the file: one message naming it and the field (see :mod:`.config_files`).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> cfg_file = pathlib.Path(tempfile.mkdtemp()) / "sweep.toml"
    >>> _ = cfg_file.write_text('kb = "kb.json"\n[[models]]\nname = "tiny"\npath = "tiny"\n[methods]\nga = [1, 4]\n')
    >>> cfg = load_config(cfg_file)
    >>> cfg.methods, cfg.models[0].name, pathlib.Path(cfg.kb).name
    ({'ga': [1, 4]}, 'tiny', 'kb.json')
    >>> _ = cfg_file.write_text('kb = "kb.json"\n[[models]]\nname = "tiny"\npath = "tiny"\n[methods]\nga = [0]\n')
    >>> load_config(cfg_file)
    Traceback (most recent call last):
    ...
    deepunlearn.bench.config.ConfigError: .../sweep.toml: field methods: method 'ga': grid value 0 is not a positive whole number of steps
    """
    p = Path(path)
    data = read_config_data(p, ConfigError)
    cfg = parse_config(data, source=str(p), base=p.resolve().parent)
    cfg._source = str(p)
    overrides = {k: v for k, v in overrides.items() if v is not None}
    notes = cfg._notes
    if overrides:
        try:
            cfg = SweepConfig.model_validate({**cfg.model_dump(), **overrides})
        except ValidationError as e:
            msg, field = _describe(e)
            raise ConfigError(f"{p} (with command-line options): {msg}", file=p, field=field) from None
        for key in ("output", "cache_dir"):
            if key in overrides:
                cfg = cfg.model_copy(update={key: str(Path(overrides[key]).resolve())})
        cfg._source, cfg._notes = str(p), notes
    return cfg
