"""``data export --format lm-eval`` and ``data import-lm-eval-samples`` without lm-eval itself:
the task folder's files, the documents' texts against the exact probe's tokens, the folder
policy, and the samples reader's verdicts and refusals. ``test_probe_lmeval_run.py`` runs
lm-eval on the exported tasks."""

from __future__ import annotations

import json

import pytest

from deepunlearn.cli import main


def _export(kb_file, out, *extra, json_out=True):
    return main(["data", "export", "--kb", str(kb_file), "--format", "lm-eval", "-o", str(out), *extra]
                + (["--json"] if json_out else []))


def _docs(folder):
    return [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.read_text().splitlines()]


def test_export_writes_one_task_per_group_and_a_group(mini_kb, mini_kb_file, mini_model_dir, tmp_path, capsys):
    out = tmp_path / "tasks"
    assert _export(mini_kb_file, out, "--model", str(mini_model_dir)) == 0
    ans = json.loads(capsys.readouterr().out)
    assert ans["prompt_format"]["spec"] == "llama" and ans["format_source"].endswith("deepunlearn.json")
    assert sum(ans["tasks"].values()) == len(mini_kb.facts)
    group = json.loads((out / "deepunlearn.yaml").read_text())  # JSON is YAML
    assert group["group"] == "deepunlearn" and group["task"] == list(ans["tasks"])
    for name in ans["tasks"]:
        cfg = json.loads((out / f"{name}.yaml").read_text())
        assert cfg["output_type"] == "loglikelihood" and cfg["target_delimiter"] == ""
        assert cfg["dataset_path"] == "json" and cfg["metric_list"][0]["metric"] == "acc"
        assert cfg["dataset_kwargs"]["data_files"]["test"] == str(out.resolve() / f"{name}.jsonl")
    docs = _docs(out)
    assert sorted(d["fact_id"] for d in docs) == list(range(len(mini_kb.facts)))
    assert ans["notes"] and "deepunlearn-hf" in ans["run"]  # llama's question part ends in a newline


def test_context_and_target_are_the_exact_probes_tokens(mini_kb, mini_kb_file, mini_model_dir, tmp_path):
    """lm-eval's pair cut (``deepunlearn-hf``: the full text tokenised with special tokens, cut
    after the context's own token count) gives encode_pairs' prompt and continuation ids."""
    from deepunlearn.probe import load_model
    from deepunlearn.probe.prompts import encode_pairs

    assert _export(mini_kb_file, tmp_path / "t", "--model", str(mini_model_dir), json_out=False) == 0
    bundle = load_model(mini_model_dir, device="cpu")
    tok = bundle.tokenizer
    for d in _docs(tmp_path / "t"):
        p = mini_kb.probe(d["fact_id"])
        assert d["context"] + d["target"] == bundle.prompt.text(p.question, p.answer)
        want = encode_pairs(tok, bundle.prompt, [p])[0]
        whole, ctx = tok.encode(d["context"] + d["target"]), tok.encode(d["context"])
        assert (ctx, whole[len(ctx):]) == (list(want[0]), list(want[1]))


def test_prompt_format_flag_and_its_errors(mini_kb_file, tmp_path, capsys):
    assert _export(mini_kb_file, tmp_path / "g", "--prompt-format", "gpt2") == 0
    ans = json.loads(capsys.readouterr().out)
    assert ans["notes"] == [] and ans["run"].startswith("lm_eval --model hf")
    assert all(d["context"].endswith("\n Answer:") for d in _docs(tmp_path / "g"))
    for extra, needle in ((["--prompt-format", "Q {nope}"], "--prompt-format"), ([], "--model"),
                          (["--model", str(tmp_path / "missing")], "--model"),
                          (["--prompt-format", "gpt2", "--task-prefix", "9x"], "--task-prefix")):
        assert _export(mini_kb_file, tmp_path / "e", *extra) == 1
        err = json.loads(capsys.readouterr().out)
        assert needle in err["error"] and "\n" not in err["error"]


def test_a_foreign_folder_is_refused_unless_forced_and_an_own_one_is_rewritten(mini_kb_file, tmp_path, capsys):
    out = tmp_path / "t"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert _export(mini_kb_file, out, "--prompt-format", "gpt2") == 1
    err = json.loads(capsys.readouterr().out)
    assert "--force" in err["error"] and err["field"] == "-o"
    assert _export(mini_kb_file, out, "--prompt-format", "gpt2", "--force") == 0
    capsys.readouterr()
    assert (out / "notes.txt").read_text() == "mine"  # --force writes beside, never deletes others' files
    assert _export(mini_kb_file, out, "--prompt-format", "gpt2", "--task-prefix", "other") == 0  # own folder
    names = {p.name for p in out.iterdir()}
    assert "other.yaml" in names and "deepunlearn.yaml" not in names  # the earlier export's files are replaced
    (tmp_path / "file").write_text("")
    assert _export(mini_kb_file, tmp_path / "file", "--prompt-format", "gpt2") == 1


def _samples(path, rows):
    path.write_text("".join(json.dumps({"doc_id": i, "doc": {"fact_id": f, "prompt_format": "llama"},
                                        "resps": [[["-1.0", str(bool(a))]]], "acc": a}) + "\n"
                            for i, (f, a) in enumerate(rows)))
    return path


def test_import_samples_writes_what_probe_o_writes(mini_kb, mini_kb_file, tmp_path, capsys):
    from deepunlearn.rules.recall_inputs import probe_output_kind, read_known_after

    files = [_samples(tmp_path / "samples_a.jsonl", [(0, 1)]), _samples(tmp_path / "samples_b.jsonl", [(1, 0)])]
    out = tmp_path / "known.json"
    assert main(["data", "import-lm-eval-samples", "--kb", str(mini_kb_file), *map(str, files), "-o", str(out),
                 "--json"]) == 0
    doc = json.loads(out.read_text())
    assert doc["known"] == 1 and doc["total"] == 2 and doc["fact_ids"] == [0]
    assert doc["facts"] == [list(mini_kb.facts[0])] and doc["prompt_format"]["spec"] == "llama"
    assert probe_output_kind(doc) is not None and read_known_after(mini_kb, out) == [0]
    assert json.loads(capsys.readouterr().out)["known"] == 1


@pytest.mark.parametrize("rows, needle", [
    ([(5, 1)], "fact_id 5 is not in the KB"),
    ([(0, 1), (0, 0)], "two different verdicts"),
    ([(0, 0.5)], "'acc' must be 0 or 1"),
    ([], "no samples"),
])
def test_bad_samples_are_one_line_errors(mini_kb_file, tmp_path, capsys, rows, needle):
    f = _samples(tmp_path / "samples.jsonl", rows)
    assert main(["data", "import-lm-eval-samples", "--kb", str(mini_kb_file), str(f), "-o",
                 str(tmp_path / "k.json"), "--json"]) == 1
    err = json.loads(capsys.readouterr().out)
    assert needle in err["error"] and "\n" not in err["error"]
    assert not (tmp_path / "k.json").exists()


def test_a_line_that_is_not_a_sample_names_file_and_line(mini_kb_file, tmp_path, capsys):
    for text, needle in (('{"results": {}}\n', "not an lm-eval sample"), ("{oops\n", "not a JSON line"),
                         ('{"doc": {"x": 1}, "acc": 1}\n', "doc has no fact_id")):
        f = tmp_path / "s.jsonl"
        f.write_text(text)
        assert main(["data", "import-lm-eval-samples", "--kb", str(mini_kb_file), str(f), "-o",
                     str(tmp_path / "k.json"), "--json"]) == 1
        err = json.loads(capsys.readouterr().out)
        assert needle in err["error"] and f"{f}:1" in err["error"]


def test_every_lm_eval_flag_has_help():
    from deepunlearn.cli import build_parser

    data = build_parser()._subparsers._group_actions[0].choices["data"]
    dsub = next(a for a in data._actions if a.__class__.__name__ == "_SubParsersAction")
    for action in ("export", "import-lm-eval-samples"):
        missing = [a.option_strings or a.dest for a in dsub.choices[action]._actions if not a.help]
        assert missing == [], f"data {action}: flags without help {missing}"


def test_deepunlearn_hf_without_lm_eval_is_one_line():
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = ("import sys, runpy; sys.modules['lm_eval'] = None; "
            "runpy.run_module('deepunlearn.probe.lmeval_model', run_name='__main__')")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 1 and done.stderr.strip().count("\n") == 0 and "lm-eval is not installed" in done.stderr


def test_lm_eval_options_without_the_format_are_usage_errors(mini_kb_file, tmp_path, capsys):
    for extra in (["--model", "m"], ["--task-prefix", "x"], ["--prompt-format", "gpt2"]):
        with pytest.raises(SystemExit) as e:
            main(["data", "export", str(mini_kb_file), "-o", str(tmp_path / "g.graphml"), *extra])
        assert e.value.code == 2 and "only with --format lm-eval" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["data", "export", str(mini_kb_file), "--kb", str(mini_kb_file), "-o", str(tmp_path / "g.graphml")])
    assert e.value.code == 2 and "give the KB file once" in capsys.readouterr().err
    assert not (tmp_path / "g.graphml").exists()
