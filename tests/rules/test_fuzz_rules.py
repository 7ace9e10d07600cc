"""Fuzz the rule readers: random Datalog-like text, from the rule
language's own tokens mixed with random unicode, fed to the Datalog parser, the release's raw
format parser and ``load_rules`` (from a file) gives a rule set or a :class:`RulesError`, never
another exception type. Rule sets that parse are also checked against a KB and evaluated under
a small grounding budget (same contract: a result or a RulesError)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepunlearn.kg.kb import KnowledgeBase
from deepunlearn.rules import RuleSet, RulesError, closure, load_rules, parse_datalog, parse_raw

IDENT = st.sampled_from(["child", "father", "mother", "husband", "wife", "male", "female", "r", "p", "newphe", "x1"])
VAR = st.sampled_from(["X", "Y", "Z", "A", "B", "_", "X0", "_Y"])
PUNCT = st.sampled_from([":-", "(", ")", ",", ".", "!=", " ", "\n", "\t", ">", "+", "is", "of", "is wife of"])
OTHER = st.sampled_from(['"Ann"', "'Bob'", '"unterminated', "42", "-3.5", "0.7 :: ", "::", "1.5::", "% a comment\n", "# note\n", "\\", "\x00"])
TOKEN = st.one_of(IDENT, VAR, PUNCT, PUNCT, OTHER, st.text(max_size=3))
TEXT = st.lists(TOKEN, max_size=40).map("".join)

#: Rule-shaped text: atoms and conditions that often form whole rules, so the parser's later
#: checks (safety, heads, arity) and the evaluation are reached too.
RVAR = st.sampled_from(["X", "Y", "Z"])
REL = st.sampled_from(["child", "father", "mother", "husband", "wife", "r", "p"])
ARG = st.one_of(RVAR, RVAR, RVAR, st.sampled_from(['"Ann"', "bob", "42", "_"]))
ATOM = st.builds(lambda r, a, b: f"{r}({a}, {b})", REL, ARG, ARG)
BODY = st.one_of(ATOM, ATOM, ATOM, st.builds(lambda g, v: f"{g}({v})", st.sampled_from(["male", "female"]), RVAR),
                 st.builds(lambda a, b: f"{a} != {b}", RVAR, RVAR))
RULE = st.builds(lambda h, b0, body, end: f"{h} :- {', '.join([b0, *body])}{end}",
                 st.builds(lambda r, a, b: f"{r}({a}, {b})", REL, RVAR, RVAR), st.builds(
                     lambda r: f"{r}(X, Y)", REL), st.lists(BODY, max_size=3),
                 st.sampled_from([".\n", ".\n", ". % c\n", ".", ""]))
PROGRAM = st.one_of(st.lists(RULE, min_size=1, max_size=5).map("".join),
                    st.lists(st.one_of(RULE, RULE, TEXT), max_size=5).map("".join))

KB = KnowledgeBase.build(
    {"Ann": {"gender": "female"}, "Bob": {"gender": "male"}, "Cy": {"gender": "male"}, "Di": {"gender": "female"}},
    [("Ann", "husband", "Bob"), ("Cy", "mother", "Ann"), ("Cy", "father", "Bob"), ("Ann", "child", "Cy"),
     ("Bob", "child", "Di"), ("Di", "father", "Bob")])

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _ok_or_rules_error(fn, *args, **kw):
    try:
        out = fn(*args, **kw)
    except RulesError:
        return None
    return out


@FUZZ
@given(TEXT | PROGRAM)
def test_datalog_parser_gives_rules_or_rules_error(text):
    rs = _ok_or_rules_error(parse_datalog, text, source="fuzz.dl")
    if rs is not None:
        assert isinstance(rs, RuleSet)
        assert isinstance(rs.check(KB), list)
        c = _ok_or_rules_error(closure, KB, rs, max_groundings=5_000)
        assert c is None or len(c) >= 0


@FUZZ
@given(TEXT | PROGRAM)
def test_raw_parser_gives_rules_or_rules_error(text):
    rs = _ok_or_rules_error(parse_raw, text, source="fuzz.txt")
    assert rs is None or isinstance(rs, RuleSet)


@FUZZ
@given(TEXT | PROGRAM, st.sampled_from([".dl", ".txt"]), st.binary(max_size=8))
def test_load_rules_from_a_file_gives_rules_or_rules_error(tmp_path_factory, text, suffix, junk):
    path = tmp_path_factory.mktemp("fuzz") / f"rules{suffix}"
    path.write_bytes(text.encode("utf-8", "surrogatepass") + junk)
    rs = _ok_or_rules_error(load_rules, path)
    assert rs is None or (isinstance(rs, RuleSet) and len(rs) > 0)
