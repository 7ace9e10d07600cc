"""Chat templates are user code (Jinja) read from a model's folder: they render under a time,
memory and size bound, and one that exceeds it is refused in one line naming its file."""

from __future__ import annotations

import json

import pytest

from deepunlearn.cli import main
from deepunlearn.probe import ModelLoadError, load_model
from deepunlearn.probe import chat_render

PLAIN = "{% for m in messages %}<s> Question: {{ m['content'] }}{% endfor %} Answer:"
MESSAGE = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
BOMBS = {
    "string repetition": "{{ 'x' * 1000000000 }}" + MESSAGE,
    "nested loops": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}" + MESSAGE,
    "long output": "{% for i in range(100000) %}xxxxxxxxxx{% endfor %}" + MESSAGE,
    "doubling": "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
                "{{ ns.s|length }}" + MESSAGE,
    "wide format": "{{ '%2000000000s'|format('x') }}" + MESSAGE,
}


@pytest.fixture
def quick(monkeypatch):
    """A 1 s time bound: the bound is what is tested, not its size."""
    monkeypatch.setattr(chat_render, "RENDER_SECONDS", 1.0)


def _set_template(folder, template: str) -> None:
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    cfg["chat_template"] = template
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))


@pytest.mark.parametrize("kind", sorted(BOMBS))
def test_a_template_over_the_bound_is_refused_naming_its_file(mini_copy, quick, kind):
    _set_template(mini_copy, BOMBS[kind])
    with pytest.raises(ModelLoadError) as e:
        load_model(mini_copy, device="cpu", answer_format="chat")
    f = mini_copy / "tokenizer_config.json"
    assert e.value.file == str(f) and e.value.field == "chat_template"
    assert str(e.value).startswith(f"--answer-format chat: the chat template in {f} exceeds the bound of a render "
                                   "(1 s, "), str(e.value)


def test_a_bomb_is_one_line_on_the_command_line(mini_copy, mini_kb_file, quick, capsys):
    _set_template(mini_copy, BOMBS["string repetition"])
    code = main(["probe", "--model", str(mini_copy), "--kb", str(mini_kb_file), "--answer-format", "chat",
                 "--device", "cpu", "--json"])
    out, err = capsys.readouterr()
    assert code == 1
    assert json.loads(out)["file"] == str(mini_copy / "tokenizer_config.json")
    assert err.count("\n") == 1 and "exceeds the bound of a render" in err


def test_a_template_file_beside_the_tokenizer_is_the_one_named(mini_copy, quick):
    (mini_copy / "chat_template.jinja").write_text(BOMBS["nested loops"])
    with pytest.raises(ModelLoadError) as e:
        load_model(mini_copy, device="cpu", answer_format="chat")
    assert e.value.file == str(mini_copy / "chat_template.jinja")


@pytest.mark.parametrize("how", ["fork", "subprocess"])
def test_a_plain_template_renders_as_transformers_renders_it(mini_copy, how, monkeypatch):
    _set_template(mini_copy, PLAIN)
    if how == "subprocess":  # the way taken where os.fork is missing
        monkeypatch.setattr(chat_render, "_can_fork", lambda: False)
    b = load_model(mini_copy, device="cpu", answer_format="chat")
    assert (b.prompt.question_start, b.prompt.question_end) == ("<s> Question: ", " Answer:")
    messages = [{"role": "user", "content": "hello"}]
    assert chat_render.render(b.tokenizer, messages) == b.tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=False)


def test_a_template_that_raises_is_still_named_with_its_reason(mini_copy):
    _set_template(mini_copy, "{{ raise_exception('no system role here') }}")
    with pytest.raises(ModelLoadError, match=r"cannot be rendered \(TemplateError: no system role here\)") as e:
        load_model(mini_copy, device="cpu", answer_format="chat")
    assert e.value.file == str(mini_copy / "tokenizer_config.json") and "the chat template in " in str(e.value)


def test_the_subprocess_render_is_bounded_too(mini_copy, quick, monkeypatch):
    monkeypatch.setattr(chat_render, "_can_fork", lambda: False)
    _set_template(mini_copy, BOMBS["nested loops"])
    with pytest.raises(ModelLoadError, match="exceeds the bound of a render"):
        load_model(mini_copy, device="cpu", answer_format="chat")


def test_a_template_writing_a_lone_surrogate_is_refused_naming_its_file(mini_copy):
    _set_template(mini_copy, "{{ '\\ud800' }}" + MESSAGE)
    with pytest.raises(ModelLoadError, match="writes a lone surrogate") as e:
        load_model(mini_copy, device="cpu", answer_format="chat")
    assert e.value.file == str(mini_copy / "tokenizer_config.json")
