"""Which facts a sweep unlearns (the ``[targets]`` table of a sweep config)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .config_run import Seed


class TargetSpec(BaseModel):
    """Which facts to unlearn, one at a time.

    Exactly one of: ``all`` (every target the KB lists; the default), ``stratified`` (N facts per
    relation, drawn with ``seed`` from the KB's targets, or from all family facts when the KB
    lists none), ``refs`` (fact indices or ``"S|r|O"`` strings).

    How they are requested: one at a time (default); ``batch = N``: the selected targets in
    order, N at a time, each group forgotten in one run (method rows labelled ``METHOD@bN``);
    ``sequential = true``: served one after another without restoring the weights in between
    (rows labelled ``METHOD@seq``, gradient methods only). With ``sequential``: ``min_accuracy``
    (the accuracy guard: a request that would take accuracy below it is undone and marked
    skipped; ``on_guard = "stop"`` also ends the sequence there), ``recheck`` (after each
    request, earlier targets that came back through the rules are unlearned again) and
    ``heal_steps`` (after each request, finetuning on K outside every kept target's set wins back
    the accuracy it cost), as the ``unlearn`` command's ``--min-accuracy``, ``--recheck`` and
    ``--heal-steps``; ``protect = false`` (``--no-protect``) lets a request's retain term train on
    the kept targets' sets.
    """

    model_config = ConfigDict(extra="forbid")

    all: bool = False
    stratified: int | None = Field(default=None, ge=1)
    refs: list[int | str] | None = None
    seed: Seed = 0
    batch: list[int] | None = Field(default=None, description="forget N targets together per run; a list of "
                                    "sizes runs each (batch = [1, 5, 55]: rows METHOD@b1, @b5, @b55)")
    sequential: bool = Field(default=False, description="serve the targets one after another, weights kept")
    min_accuracy: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False, description="sequential: undo a request that "
                                       "would take accuracy below this (the accuracy guard)")
    on_guard: Literal["skip", "stop"] = Field(default="skip", description="sequential, with min_accuracy: skip the "
                                              "guarded request and go on, or stop the sequence there")
    recheck: bool | Literal["each", "batch"] = Field(
        default=False, description="sequential: after each request, unlearn again the earlier targets it brought "
        "back through the rules (true or 'each': one after another; 'batch': together, as one batch request)")
    protect: bool = Field(default=True, description="sequential: a request's retain term and du_loop's healing never "
                          "train on the kept targets nor their chosen sets (false: K outside the request's own sets)")
    heal_steps: int = Field(default=0, ge=0, description="sequential: after each request, up to this many finetuning "
                            "steps on K outside every kept target's set win back the accuracy it cost (0: off)")

    @model_validator(mode="after")
    def _one_choice(self) -> "TargetSpec":
        chosen = [n for n, on in (("all", self.all), ("stratified", self.stratified is not None),
                                  ("refs", self.refs is not None)) if on]
        if len(chosen) > 1:
            raise ValueError(f"choose one of all / stratified / refs, not {' and '.join(chosen)}")
        if not chosen:
            self.all = True
        if self.batch is not None and (not self.batch or any(isinstance(b, bool) or b < 1 for b in self.batch)):
            raise ValueError(f"batch: sizes must be whole numbers >= 1, got {self.batch}")
        if self.batch is not None and self.sequential:
            raise ValueError("choose batch = N or sequential = true, not both")
        guard = [n for n, on in (("min_accuracy", self.min_accuracy is not None), ("on_guard", self.on_guard != "skip"),
                                 ("recheck", self.recheck), ("heal_steps", self.heal_steps > 0),
                                 ("protect", not self.protect)) if on]
        if guard and not self.sequential:
            raise ValueError(f"{guard[0]}: applies to sequential requests only; set sequential = true")
        if self.on_guard != "skip" and self.min_accuracy is None:
            raise ValueError("on_guard: there is no guard to act on; set min_accuracy")
        if self.refs is not None and not self.refs:
            raise ValueError("refs is empty: list fact indices or 'S|r|O' strings")
        return self

    def sequential_options(self) -> dict[str, Any]:
        """The guard, re-check and healing of sequential requests (``run_sequential``'s keywords)."""
        return {"min_accuracy": self.min_accuracy, "on_guard": self.on_guard, "recheck": self.recheck,
                "heal_steps": self.heal_steps, "protect": self.protect}

    def results_key(self) -> dict[str, Any]:
        """The fields that decide results; the guard and re-check only when set (a sweep without
        them keeps its fingerprint), ``protect`` only with sequential requests."""
        unset = {k for k, v in (("min_accuracy", None), ("on_guard", "skip"), ("recheck", False), ("heal_steps", 0))
                 if getattr(self, k) == v}
        if not self.sequential:
            unset.add("protect")
        return self.model_dump(exclude=unset)

    @field_validator("refs", mode="before")
    @classmethod
    def _strict_refs(cls, v: Any) -> Any:
        # ``true`` became fact 1, ``4.0`` fact 4 and ``"4"`` fact 4 without a word:
        # the same strictness as ``deepunlearn.kg.refs.resolve_item``
        if isinstance(v, (list, tuple)):
            for i, item in enumerate(v):
                if isinstance(item, bool) or not isinstance(item, (int, str)):
                    raise ValueError(f"item {i}: expected a fact index (a whole number) or 'S|r|O', found {item!r}")
                if isinstance(item, str) and item.strip().lstrip("-").isdigit():
                    raise ValueError(f"item {i}: fact index given as a string {item!r}; write it as a number")
                if isinstance(item, int) and item < 0:
                    raise ValueError(f"item {i}: fact index {item} is negative")
        return v

    @field_validator("batch", mode="before")
    @classmethod
    def _batch_list(cls, v: Any) -> Any:
        return [v] if isinstance(v, int) and not isinstance(v, bool) else v

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, v: Any) -> Any:
        if v == "all" or v is None:
            return {"all": True}
        if isinstance(v, list):
            return {"refs": v}
        return v
