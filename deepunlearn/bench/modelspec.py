"""One model of a sweep (a ``[[models]]`` table) and its prompt setting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .grids import GRID_PRESETS, check_grid, refuse_bools


def protocol_name(v: str) -> str:
    from ..probe.protocol import PROTOCOL_NAMES

    key = v.lower()
    if key not in PROTOCOL_NAMES:
        raise ValueError(f"unknown protocol {v!r}; expected one of: {', '.join(PROTOCOL_NAMES)}")
    return key


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSpec(StrictModel):
    """One model to evaluate: a hub name or a local folder, loaded with ``load_model``."""

    name: str = Field(description="label used in the results store, tables and plots")
    path: str = Field(description="hub name or checkpoint folder (relative to the config file)")
    prompt: str | dict[str, str] | None = Field(
        default=None, description="prompt format: a model family ('gpt2', 'phi', 'llama'), a template with "
        "{question}, or {template = ..., answer_prefix = ...}; None: the checkpoint's own or its family's")
    # allow_inf_nan=False: ``lr = nan`` is refused as not finite, not as "not greater than 0"
    lr: float | None = Field(default=None, gt=0, allow_inf_nan=False, description="unlearning learning rate; None: the method's default")
    dtype: str | None = None
    device: str | None = None
    protocol: str | None = Field(default=None, description="this model's protocol preset; None: the sweep's")
    grids: str | dict[str, list[int | float]] | None = Field(
        default=None, description="a preset name (GRID_PRESETS) or per-method grids overriding [methods]")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        # the name becomes part of cache paths, file names and table rows (jobs.safe_name)
        if not v.strip():
            raise ValueError("a model name must not be empty")
        if not v.isprintable():
            raise ValueError(f"model name {v!r} has non-printable characters")
        if len(v) > 200:
            raise ValueError(f"model name is {len(v)} characters long; at most 200")
        return v

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        if not v.strip() or "\x00" in v:
            raise ValueError("a model path must be a non-empty hub name or folder")
        return v

    @field_validator("protocol")
    @classmethod
    def _protocol(cls, v: str | None) -> str | None:
        return None if v is None else protocol_name(v)

    @field_validator("grids", mode="before")
    @classmethod
    def _no_bools(cls, v: Any) -> Any:
        refuse_bools(v)
        return v

    @field_validator("grids")
    @classmethod
    def _model_grids(cls, v: str | dict[str, list[int | float]] | None) -> str | dict[str, list[int | float]] | None:
        if isinstance(v, str):
            key = v.lower()
            if key not in GRID_PRESETS:
                raise ValueError(f"unknown grid preset {v!r}; expected one of: {', '.join(GRID_PRESETS)}")
            return key
        if isinstance(v, dict):
            return {name.lower(): check_grid(name, grid) for name, grid in v.items()}
        return v

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
    """The probe layer's ``PromptFormat`` for a model's ``prompt`` setting (None stays None):
    a format name (``llama``, ``phi``, ``gpt2``, ``bare``), a template (``PromptFormat.parse``) or
    a table of its fields.

    >>> prompt_format("gpt2").text("Who is A to B?", "father")
    'Question: Who is A to B?\\n Answer:father'
    >>> prompt_format("Q: {question} A:").prompt("Who?")
    'Q: Who? A:'
    """
    if spec is None:
        return None
    from ..probe.prompts import PromptFormat

    return PromptFormat.parse(spec)
