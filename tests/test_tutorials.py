"""The tutorials run as written: every ``bash`` block of docs/tutorials/, page by page in the
order of the site's navigation, in one folder (each tutorial starts where the quick start left
off), against the tiny model on the CPU. A block preceded by ``<!-- not run: REASON -->`` is
skipped (the reason is required). Every sweep config shown in a ``toml`` block parses.

What the tutorials show a command printing (``text`` blocks) is checked against the tool without a
model: facts, sentences and rules against the quick start's KB and the family rules, ``rules
explain``'s lines as it prints them, ``evaluate``'s surviving derivation as the rules give it, and
the messages of the domain and import tutorials by running their commands.

One substitution keeps the test environment as it was: ``pip install -e PATH`` installs the
package into a folder of its own (``--target``, put on ``PYTHONPATH`` for the later blocks)
rather than into the environment the rest of the suite runs in."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "docs" / "tutorials"
BLOCK = re.compile(r"(?:<!-- not run: (?P<why>[^>]*?) -->\s*\n)?```(?P<lang>bash|toml)\n(?P<body>.*?)```", re.S)


def _nav_pages() -> list[Path]:
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    section = next(item["Tutorials"] for item in nav if isinstance(item, dict) and "Tutorials" in item)
    return [ROOT / "docs" / next(iter(entry.values())) for entry in section]


def test_every_tutorial_page_is_in_the_nav():
    assert sorted(_nav_pages()) == sorted(TUTORIALS.glob("*.md"))


def _shim_path(tmp_path: Path) -> str:
    """A PATH on which ``deepunlearn`` is the console script of the package under test and
    ``python`` the interpreter running the tests."""
    shim = tmp_path / "bin"
    shim.mkdir(exist_ok=True)
    (shim / "deepunlearn").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m deepunlearn "$@"\n')
    (shim / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    for f in shim.iterdir():
        f.chmod(0o755)
    return os.pathsep.join([str(shim), os.environ.get("PATH", "")])


def _blocks(page: Path):
    for m in BLOCK.finditer(page.read_text()):
        if m["why"] is not None:
            assert m["why"].strip(), f"{page.name}: a skipped block must say why"
            continue
        yield m["lang"], m["body"]


@pytest.mark.slow
def test_the_tutorials_run_as_written(tmp_path):
    from deepunlearn.bench.config import parse_config

    work, site = tmp_path / "work", tmp_path / "site"
    work.mkdir()
    site.mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "DEEPUNLEARN_CACHE": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "MPLBACKEND": "Agg"}
    env["PATH"] = _shim_path(tmp_path)
    ran = 0
    for page in _nav_pages():
        for lang, body in _blocks(page):
            if lang == "toml":
                data = tomllib.loads(body)
                if "models" in data:  # a sweep config: it must parse as one
                    parse_config(data, source=f"{page.name}", base=work)
                continue
            script = re.sub(r"pip install -e (\S+)",
                            rf"{sys.executable} -m pip install --quiet --no-deps --no-build-isolation --target {site} \1",
                            body)
            r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env,
                               capture_output=True, text=True, timeout=900)
            assert r.returncode == 0, f"{page.name}: block\n{body}\nexit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
            ran += 1
    assert ran >= 12


#: ``load_kb("kb.json").probe(N)  # "QUESTION"``: a question a tutorial shows in a comment
SHOWN_QUESTION = re.compile(r'load_kb\("kb\.json"\)\.probe\((\d+)\)\s*#\s*"([^"]+)"')


def test_the_questions_the_tutorials_show_are_the_kbs():
    """A question a tutorial names in a comment is the one the quick start's KB asks
    (``deepunlearn data generate --people 20 --seed 7``)."""
    import deepunlearn

    kb = deepunlearn.generate_family(20, seed=7)
    shown = [(page.name, int(m[1]), m[2]) for page in sorted(TUTORIALS.glob("*.md"))
             for m in SHOWN_QUESTION.finditer(page.read_text())]
    assert shown, "no tutorial shows a question any more: drop this test"
    assert [(page, i, q) for page, i, q in shown if kb.probe(i).question != q] == []


# --- what the tutorials show a command printing is what it prints ------------------------------

FENCE = re.compile(r"```(?P<lang>\w*)\n(?P<body>.*?)```", re.S)
#: ``[N] (S, R, O)``: a fact as the CLI prints it; ``[N] O is S's R`` and ``K: O is S's R``: its sentence
FACT = re.compile(r"\[(\d+)\] \(([^(),]+), (\w+), ([^(),]+)\)")
SENTENCE = re.compile(r"\[(\d+)\] (?:\([^)]*\)\s+K: )?([A-Z][\w ]*?) is ([A-Z][\w ]*?)'s (\w+)")
#: ``rule K (FILE:LINE): DATALOG`` (a surviving derivation) and ``rule K: DATALOG`` (rules explain)
RULE = re.compile(r"rule (\d+)(?: \(([\w.]+):(\d+)\))?: (.+)$", re.M)


def _fenced(page: Path) -> list[tuple[str, str]]:
    return [(m["lang"], m["body"]) for m in FENCE.finditer(page.read_text())]


def _shown(page: Path) -> list[tuple[str, str]]:
    """(the ``bash`` block before it, the ``text`` block) for every output a page shows."""
    out, before = [], ""
    for lang, body in _fenced(page):
        if lang == "bash":
            before = body
        elif lang == "text":
            out.append((before, body))
    return out


def _quickstart_kb():
    """The quick start's KB, from the command the quick start shows (``data generate --people N --seed S``)."""
    import deepunlearn

    cmd = re.search(r"data generate --people (\d+) --seed (\d+) -o kb\.json", (TUTORIALS / "quickstart.md").read_text())
    assert cmd, "the quick start no longer generates kb.json with --people and --seed"
    return deepunlearn.generate_family(int(cmd[1]), seed=int(cmd[2]))


KB_PAGES = ("quickstart.md", "evaluate.md")  # the tutorials whose outputs are of the quick start's kb.json


def test_the_facts_and_rules_the_tutorials_show_are_the_kbs():
    """Every fact id, fact, sentence and rule in the outputs the quick start and the evaluate
    tutorial show is the one the quick start's KB and the family rules hold."""
    import deepunlearn

    kb, rules = _quickstart_kb(), deepunlearn.load_rules("family")
    wrong, seen = [], 0
    for name in KB_PAGES:
        for _, text in _shown(TUTORIALS / name):
            for m in FACT.finditer(text):
                seen += 1
                if tuple(kb.facts[int(m[1])]) != (m[2], m[3], m[4]):
                    wrong.append((name, m[0], tuple(kb.facts[int(m[1])])))
            for m in SENTENCE.finditer(text):
                seen += 1
                s, r, o = kb.facts[int(m[1])]
                if (m[2], m[3], m[4]) != (o, s, r):
                    wrong.append((name, m[0], f"{o} is {s}'s {r}"))
            for m in RULE.finditer(text):
                seen += 1
                rule = rules.rules[int(m[1]) - 1]
                if rule.label != f"rule {m[1]}" or rule.to_datalog() != m[4].strip() or (
                        m[2] and (m[2], int(m[3])) != (rules.source, rule.line)):
                    wrong.append((name, m[0], f"{rule.label} ({rules.source}:{rule.line}): {rule.to_datalog()}"))
    assert seen >= 10, "the tutorials show fewer facts and rules than this test was written for"
    assert wrong == []


def _shown_lines(text: str) -> list[str]:
    """The lines of a shown output a command must print: ``...`` stands for lines left out."""
    return [line.rstrip() for line in text.splitlines() if line.strip() and line.strip() != "..."]


def test_the_explanation_the_quick_start_shows_is_what_rules_explain_prints(tmp_path, capsys):
    """The quick start's ``rules explain`` output, line by line in order (``...`` elides), as the
    command prints it when the model knows every fact; a set given with ``...`` for each fact's
    text is one of the target's minimal sets."""
    from deepunlearn.cli import main
    from deepunlearn.kg.io import save_kb

    (cmd, text), = [(c, t) for c, t in _shown(TUTORIALS / "quickstart.md") if "rules explain" in c]
    target = re.search(r"--target (\d+)", cmd)[1]
    save_kb(_quickstart_kb(), tmp_path / "kb.json")
    assert main(["rules", "explain", "--kb", str(tmp_path / "kb.json"), "--target", target]) == 0
    printed = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    at = 0
    for line in _shown_lines(text):
        assert line in printed[at:], f"quickstart.md shows a line rules explain does not print here:\n{line}"
        at = printed.index(line, at) + 1


def test_the_verdicts_the_evaluate_tutorial_shows_hold_for_the_kb():
    """``evaluate``'s shown verdicts: the target, the number of minimal sets, the accuracy groups,
    and the surviving derivation, which the rules give again from the facts it marks ``K``."""
    import deepunlearn
    from deepunlearn.rules.recall_inputs import deep_after

    kb, rules = _quickstart_kb(), deepunlearn.load_rules("family")
    (cmd, text), = _shown(TUTORIALS / "evaluate.md")
    target = int(re.search(r"--target (\d+)", cmd)[1])
    sets = deepunlearn.minimal_sets(deepunlearn.derivation_graph(kb, "family"), target)
    verdicts = re.split(r"\n\s*\n", text.strip())
    assert len(verdicts) == len(re.search(r"--unlearned (.+?) --", cmd)[1].split())
    for verdict in verdicts:
        assert re.search(rf"target \[{target}\] \({', '.join(kb.facts[target])}\):", verdict)
        n = re.search(r"over (\d+) minimal sets \((\w+)\)", verdict)
        assert (int(n[1]), n[2]) == (len(sets.sets), "exact" if sets.exact else "approximate")
        groups = re.search(r"accuracy [\d.]+ \(([^)]*)\)", verdict)[1]
        assert [g.split()[0] for g in groups.split(", ")] == sorted({r.group for r in kb.relations.values()},
                                                                    key=["family", "biography"].index)
        if "surviving derivation" in verdict:
            shown = verdict.split("rule by rule:\n", 1)[1]
            known_after = [int(m[1]) for m in re.finditer(r"\[(\d+)\] .*  K$", shown, re.M)]
            real = deep_after(kb, rules, known_after, target, None)
            assert real["superficial"] and real["surviving_text"].splitlines() == shown.rstrip().splitlines()


def _run_blocks(bodies: list[str], cwd: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p), "PATH": _shim_path(tmp_path)}
    return subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(bodies)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_import_errors_the_tutorial_shows_are_what_the_command_prints(tmp_path):
    """import-kg.md: the lines the first import prints about the table with mistakes."""
    blocks = _fenced(TUTORIALS / "import-kg.md")
    first = next(b for lang, b in blocks if lang == "bash")
    shown = next(b for lang, b in blocks if lang == "text")
    r = _run_blocks([first], tmp_path, tmp_path)
    assert r.returncode == 0 and "refused, nothing written" in r.stdout, r.stderr[-2000:]
    assert r.stderr.splitlines() == _shown_lines(shown)


def test_the_domain_messages_the_tutorial_shows_are_what_the_commands_print(tmp_path):
    """domain.md: the warning a draft asking the shown question gets, and the refusal of a rule
    over an undeclared relation."""
    blocks = [b for lang, b in _fenced(TUTORIALS / "domain.md") if lang in ("bash", "text")]
    texts = [b for lang, b in _fenced(TUTORIALS / "domain.md") if lang == "text"]
    write = blocks[0]
    assert _run_blocks([write], tmp_path, tmp_path).returncode == 0
    warning, refusal = (_shown_lines(t) for t in texts)
    # the draft: the relation the warning names asks the question it quotes
    m = re.search(r"relation '(\w+)' asks '([^']+)'", warning[0])
    toml = tmp_path / "library" / "domain.toml"
    section = toml.read_text().split(f"[relations.{m[1]}]", 1)
    toml.write_text(section[0] + f"[relations.{m[1]}]" + re.sub(r"questions = \[[^\]]*\]", f'questions = ["{m[2]}"]',
                                                                 section[1], count=1))
    r = _run_blocks(["deepunlearn data check-domain ./library"], tmp_path, tmp_path)
    assert warning[0] in r.stdout.splitlines() + r.stderr.splitlines(), r.stdout + r.stderr
    toml.write_text(section[0] + f"[relations.{m[1]}]" + section[1])
    broken = next(b for b in blocks if "broken" in b and "deepunlearn data generate" in b)
    r = _run_blocks([broken], tmp_path, tmp_path)
    assert r.returncode == 0 and "refused, as it should be" in r.stdout
    assert r.stderr.splitlines() == refusal


def test_the_kb_sizes_the_quick_start_states_are_the_kbs():
    """The quick start's counts of the KB: stored facts, targets, and each group's facts in the
    probe's summary line (``knows K of N facts (...; family a/F, biography b/B)``)."""
    from collections import Counter

    kb, text = _quickstart_kb(), (TUTORIALS / "quickstart.md").read_text()
    stated = re.search(r"(\d+) stored facts .*? and (\d+) targets", text, re.S)
    assert (int(stated[1]), int(stated[2])) == (len(kb.facts), len(kb.targets))
    probed = re.search(r"knows \d+ of (\d+) facts \([\d.]+%; ([^)]*)\)", text)
    groups = Counter(kb.relations[r].group for _, r, _ in kb.facts)
    assert int(probed[1]) == len(kb.facts)
    assert {g.split()[0]: int(g.split("/")[1]) for g in probed[2].split(", ")} == dict(groups)


def test_the_unlearn_tables_the_quick_start_shows_are_laid_out_as_unlearn_prints_them():
    """Each row of the quick start's ``unlearn`` tables, fed back as a point, prints as shown:
    the header, the columns and their widths are the command's own (only the figures come from
    the tutorial's run)."""
    from deepunlearn.unlearn.cli.unlearn import _table

    kb = _quickstart_kb()
    (cmd, text), = [(c, t) for c, t in _shown(TUTORIALS / "quickstart.md") if "deepunlearn unlearn" in c]
    target = int(re.search(r"--target (\d+)", cmd)[1])
    header = next(line for line in text.splitlines() if line.split()[:1] == ["param"])
    groups = {"fam": "family", "bio": "biography"}
    rows = [line for line in text.splitlines() if re.match(r"\s+\d", line)]
    assert len(rows) >= 4
    for row in rows:
        param, recall, acc, fam, bio, forgot, target_state, deep = row.split()
        point = {"param": float(param), "recall": float(recall), "accuracy": float(acc),
                 "accuracy_groups": {groups["fam"]: float(fam), groups["bio"]: float(bio)},
                 "forgotten": list(range(int(forgot))), "target_forgotten": target_state == "forgotten",
                 "deep": deep == "yes", "notes": {}}
        printed = _table({"method": "ga", "index": target, "target": kb.facts[target], "lr": 1e-4,
                          "points": [point], "summary": {}}).splitlines()
        assert printed[1:3] == [header, row]
