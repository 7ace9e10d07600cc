"""The dataset card (``README.md``) of a ``data export --format hf`` folder: the hub's YAML header
(configs with their data files, licence, task categories, size category, tags) and prose saying
what each configuration holds, how the KB was made and how the forget sets were computed."""

from __future__ import annotations

from typing import Any

from .kb import KnowledgeBase

#: the hub's size categories, by number of rows (the facts)
_SIZES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
          (10_000_000, "1M<n<10M"))


def size_category(n: int) -> str:
    """The hub's ``size_categories`` value of ``n`` rows.

    >>> size_category(400), size_category(2500)
    ('n<1K', '1K<n<10K')
    """
    return next((name for bound, name in _SIZES if n < bound), "10M<n<100M")


def generator_command(kb: KnowledgeBase) -> str | None:
    """The command that makes the KB again, where its metadata records enough to say it."""
    m = kb.metadata
    gen, seed = m.get("generator"), m.get("seed")
    if gen == "deepunlearn.rules.generate.generate_domain" and isinstance(seed, int) and m.get("domain"):
        people = f" --people {m['people']}" if isinstance(m.get("people"), int) else ""
        share = f" --stored-derived {m['stored_derived']}" if isinstance(m.get("stored_derived"), float) else ""
        return f"deepunlearn data generate --domain {m['domain']}{people} --seed {seed}{share} -o kb.json"
    stats = m.get("stats") if isinstance(m.get("stats"), dict) else {}
    if isinstance(gen, str) and gen.endswith("generate_family") and isinstance(seed, int) and stats.get("people"):
        params = m.get("params") if isinstance(m.get("params"), dict) else {}
        extra = "".join(f" --{k} {params[k]}" for k in ("names",) if params.get(k) not in (None, "inherited"))
        extra += f" --questions {m['questions']}" if m.get("questions") not in (None, "relation") else ""
        return f"deepunlearn data generate --people {stats['people']} --seed {seed}{extra} -o kb.json"
    if m.get("rules") == "edu-relat" and "release_dir" in m:
        return "deepunlearn data import-edu-relat -o kb.json"
    return None


def _yaml_header(kb: KnowledgeBase, configs: dict[str, int], license: str) -> str:
    import yaml

    head: dict[str, Any] = {
        "configs": [{"config_name": name, "data_files": [{"split": "train", "path": f"data/{name}.parquet"}],
                     **({"default": True} if name == "facts" else {})} for name in configs],
        "license": license,
        "language": ["en"],
        "task_categories": ["question-answering", "text-generation"],
        "size_categories": [size_category(len(kb.facts))],
        "pretty_name": f"{kb.name} (deepunlearn)",
        "tags": ["unlearning", "machine-unlearning", "deep-unlearning", "knowledge-graph", "synthetic"],
    }
    return "---\n" + yaml.safe_dump(head, sort_keys=False, allow_unicode=True, width=1000) + "---\n"


def _made_lines(kb: KnowledgeBase, kb_file: str | None) -> list[str]:
    """The card's list of how the KB was made: generator or source, seed, rules, commands."""
    m = kb.metadata
    cmd = generator_command(kb)
    made = [f"- Generator: `{m['generator']}`" if m.get("generator") else f"- Source: {m.get('source', 'not recorded')}",
            f"- Seed: {m['seed']}" if "seed" in m else "- Seed: not recorded in the KB",
            f"- Rules: `{m.get('rules', 'family')}`"]
    if cmd:
        made.append(f"- Made again by: `{cmd}`")
    if kb_file:
        made.append(f"- Exported by: `deepunlearn data export {kb_file} --format hf -o DIR`")
    return made


def _config_rows(kb: KnowledgeBase, configs: dict[str, int], sets: dict) -> str:
    """The table rows of the configurations: name, rows and, for a forget/retain pair, its target."""
    def about(name: str) -> str:
        if not name.startswith(("forget_", "retain_")):
            return ""
        t = name.split("_", 1)[1]
        s, r, o = kb.facts[int(t)]
        info = sets[t]
        return (f"{o} is {s}'s {r}; set {info['set_id']} of {info['n_sets']}" if name.startswith("forget_")
                else f"the KB without forget_{t}")

    return "\n".join(f"| `{name}` | {n} | {about(name)} |" for name, n in configs.items())


def card_text(kb: KnowledgeBase, header: dict[str, Any], *, license: str, kb_file: str | None = None) -> str:
    """The whole ``README.md``."""
    configs: dict[str, int] = header["configs"]
    sets = header["sets"]
    exact = all(s.get("exact") for s in sets.values())
    made = _made_lines(kb, kb_file)
    rows = _config_rows(kb, configs, sets)
    groups = ", ".join(f"{g} {int(mask.sum())}" for g, mask in kb.group_masks.items())
    first = next(iter(sets), None)
    example = f"forget_{first}" if first is not None else "facts"
    return f"""{_yaml_header(kb, configs, license)}
# {kb.name}

A knowledge base of {len(kb.entities)} entities and {len(kb.facts)} stored facts ({groups}) with
{len(kb.targets)} unlearning targets, written by `deepunlearn data export --format hf`. A fact
`(o1, r, o2)` reads "o2 is o1's r"; rules (Datalog) derive further facts from the stored ones, so
unlearning a target *deeply* means forgetting a whole set of facts from which it can no longer be
derived (Wu et al., *Evaluating Deep Unlearning in Large Language Models*).

## Configurations

Each configuration has one split, `train` (as TOFU's). Load one with

```python
from datasets import load_dataset
facts = load_dataset("DIR", "facts")["train"]          # DIR: this folder, or the hub repository's id
forget = load_dataset("DIR", "{example}")["train"]
```

| configuration | rows | target |
| --- | --- | --- |
{rows}

- `facts`: one row per stored fact: `fact_id` (its index in the KB), `subject`, `relation`,
  `object`, `group`, `kind` (entity or value object), the primary `question` and `answer`, `split`
  (`unlearn` for a target, or the split an import gave it), `target`, `own_wording` (the KB's own
  question rather than the relation's template).
- `forms`: every probe form of every fact: the primary question, paraphrases (`qa1`...),
  statements to complete (`st1`...; `prompt` is the text before the answer), yes/no questions
  (`yes1`, and `no1` with a wrong answer), and the KB's own forms (`explicit`; `explicit_index`: their
  order in the KB), with their `split`.
- `paraphrased` (where the KB has them): the question forms other than the primary one.
- `forget_<t>` / `retain_<t>`, one pair per target fact id `t` (TOFU's forget/retain pairs, one per
  target): the facts of the minimal deep-unlearning set chosen for `t` (`is_target` marks `t`
  itself; `set_id` is the set's index among the target's minimal sets, in the order of their sorted
  fact ids) and every other stored fact, on which a method is judged for collateral damage.
- `holdout` (where exported with `--holdout`): facts of the same domain about entities the KB does
  not hold, for membership-inference calibration.
- `entities`, `relations`: each `entity` with a column per attribute; each relation's `name`, kind,
  group, question and statement templates and answer.

## How the KB and the sets were made

{chr(10).join(made)}
- Minimal sets: {header.get("sets_note") or "see deepunlearn.json"}; {"every target's sets were enumerated exactly" if exact else "some targets' sets come from sampling (MDUS), see deepunlearn.json"}.
  Each set is ⊆-minimal: removing it from the stored facts makes the target underivable under the
  rules, and no smaller subset does. The chosen one has the fewest facts, then the fewest other
  facts sharing an entity with them, then the smallest ids.

`deepunlearn.json` holds what the tables do not (the KB's name, metadata, target order, each
target's chosen set and how many minimal sets it has); `deepunlearn data import-hf DIR -o kb.json`
rebuilds the KB file from this folder.

## Publishing

The folder is ready for the hub as it is:

```python
from huggingface_hub import upload_folder
upload_folder(repo_id="you/{kb.name}", repo_type="dataset", folder_path="DIR")
```

or per configuration, `load_dataset("DIR", name).push_to_hub("you/{kb.name}", config_name=name)`.
"""
