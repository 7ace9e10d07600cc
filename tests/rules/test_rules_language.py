"""The rule language: parsing, errors with file/line/column, the shipped rule sets against the
release's family_rule.pt, and the release's raw text format."""

from __future__ import annotations

import pytest

from deepunlearn.kg.edu_relat import load_release_rules
from deepunlearn.rules import (
    RuleSet,
    RulesError,
    RuleSyntaxError,
    Var,
    load_rules,
    parse_datalog,
    parse_raw,
)

MALE_OBJECT = {"husband", "uncle", "father", "brother", "nephew"}
FEMALE_OBJECT = {"wife", "aunt", "mother", "sister", "niece"}


def reference_filter_atoms(head) -> set[str]:
    """The reference's filter on a derived fact r(X, Y), as atoms (docs/rules.md, the release's rules)."""
    r, (x, y) = head.relation, head.args
    atoms = set()
    if r in MALE_OBJECT:
        atoms.add(f"male({y})")
    if r in FEMALE_OBJECT:
        atoms.add(f"female({y})")
    if r == "husband":
        atoms.add(f"female({x})")
    if r == "wife":
        atoms.add(f"male({x})")
    return atoms


def test_edu_relat_is_family_rule_pt(edu_dir):
    """Rule k of edu-relat.dl is family_rule.pt[k-1] with (i, r, j) -> r(Xi, Xj), plus the
    reference's gender filter and no-self-loop condition as explicit atoms."""
    release = load_release_rules(edu_dir)
    rs = load_rules("edu-relat")
    assert len(rs) == len(release) == 48
    for rule, (body, (hi, hr, hj)) in zip(rs, release):
        assert str(rule.head) == f"{hr}(X{hi}, X{hj})"
        assert [str(a) for a in rule.relation_atoms] == [f"{r}(X{i}, X{j})" for i, r, j in body]
        assert {str(a) for a in rule.attribute_atoms} == reference_filter_atoms(rule.head)
        assert [(c.left, c.right) for c in rule.neq] == [(Var(f"X{hi}"), Var(f"X{hj}"))]


def test_family_fixes_exactly_the_release_quirks():
    edu, fam = load_rules("edu-relat"), load_rules("family")
    differ = [k for k, (a, b) in enumerate(zip(edu, fam), start=1) if a != b]
    assert differ == [6, 16, 19]
    assert "newphe" in edu.relations and "newphe" not in fam.relations
    # rule 6: the mother is the father's wife (edu-relat: the father is the mother's "wife")
    assert fam[5].to_datalog() == "wife(X2, X1) :- father(X0, X2), mother(X0, X1), female(X1), male(X2), X2 != X1."
    assert str(edu[5].head) == "wife(X1, X2)"
    assert [str(a) for a in fam[15].relation_atoms] == ["nephew(X0, X1)"]
    assert [str(a) for a in fam[18].relation_atoms] == ["nephew(X0, X1)"]


def _renaming(rule, head, body):
    """A renaming of ``rule``'s variables onto the release tuple indices, or None."""
    mapping: dict[str, int] = {}

    def same(atom, tup) -> bool:
        i, r, j = tup
        if atom.relation != r:
            return False
        for var, idx in zip(atom.args, (i, j)):
            if mapping.setdefault(var.name, idx) != idx:
                return False
        return True

    ok = same(rule.head, head) and len(rule.relation_atoms) == len(body) and all(
        same(a, t) for a, t in zip(rule.relation_atoms, body))
    return mapping if ok and len(set(mapping.values())) == len(mapping) else None


def test_raw_release_format_reads_as_family_rule_pt(edu_dir):
    """family_rule_raw.txt line k has the relation atoms of family_rule.pt[k-1] up to a renaming
    of variables: "(A, is wife of, B)" is wife(B, A), "B is A's wife"."""
    literal = parse_raw((edu_dir / "family_rule_raw.txt").read_text(), literal=True)
    raw = load_rules(edu_dir / "family_rule_raw.txt")
    release = load_release_rules(edu_dir)
    assert len(raw) == len(literal) == 48
    for k, (lit, rule, (body, head)) in enumerate(zip(literal, raw, release), start=1):
        assert _renaming(lit, head, body) is not None, k
        # read with the filter: the same relation atoms, then exactly the reference's filter
        mapping = _renaming(rule, head, body)
        assert mapping is not None, k
        x = {v: f"X{i}" for v, i in mapping.items()}
        assert {f"{a.relation}({x[a.args[0].name]})" for a in rule.attribute_atoms} == reference_filter_atoms(
            load_rules("edu-relat")[k - 1].head), k
        assert [(x[c.left.name], x[c.right.name]) for c in rule.neq] == [(f"X{head[0]}", f"X{head[2]}")], k
        # the file's own gender tuples are all implied by the filter
        assert set(lit.attribute_atoms) <= set(rule.attribute_atoms), k
    # the raw file spells out only some genders: rule 2 says the husband is male
    assert [str(a) for a in literal[1].attribute_atoms] == ["male(A)"]


def test_raw_rules_close_like_edu_relat(edu_kb, edu_dir):
    """The release's raw file reads as the reference computes: its closure is edu-relat's 562
    facts; read literally (no filter) it would be 1,180, with 222 self loops."""
    from deepunlearn.rules import closure

    c = closure(edu_kb, load_rules(edu_dir / "family_rule_raw.txt"))
    assert (c.n_base, len(c)) == (400, 562)
    assert set(c.facts) == set(closure(edu_kb, "edu-relat").facts)
    loose = closure(edu_kb, parse_raw((edu_dir / "family_rule_raw.txt").read_text(), literal=True))
    assert len(loose) == 1180 and len(loose.derived) == 780
    assert sum(1 for s, _, o in loose.facts if s == o) == 222


def test_raw_condition_outside_the_filter_is_refused(tmp_path):
    for cond in ('(A, is, "female")', '(A, is, "tall")', '(B, is, "male")'):
        p = tmp_path / "my_rules.txt"
        p.write_text(f"(B, is uncle of, A) + {cond} > (A, is nephew of, B)\n")
        with pytest.raises(RuleSyntaxError, match=r"my_rules.txt:1:23: .*cannot be read with the reference's "
                                                  r"semantics; write the rules as Datalog .* or use --rules edu-relat"):
            load_rules(p)


def test_datalog_round_trip(tmp_path):
    for name in ("edu-relat", "family"):
        rs = load_rules(name)
        p = tmp_path / f"{name}.dl"
        p.write_text(rs.to_datalog())
        back = load_rules(p)
        assert back.rules == rs.rules
        assert [r.label for r in back] == [r.label for r in rs]


def test_comments_constants_and_anonymous_variables():
    rs = parse_datalog("""
    # a hash comment
    local(X, "Ohio state") :- birthplace(X, "Ohio state"), male(X). % trailing comment
    parent(X, Y) :- child(Y, X), child(Y, _), X != bob.
    """)
    assert rs[0].to_datalog() == 'local(X, "Ohio state") :- birthplace(X, "Ohio state"), male(X).'
    assert str(rs[1].body[1]) == "child(Y, _1)"
    assert str(rs[1].neq[0]) == 'X != "bob"'
    assert rs.relations == {"local", "birthplace", "parent", "child"}
    assert rs.attributes == {"male"}


@pytest.mark.parametrize("text, line, col, fragment", [
    ("child(A, B) :- father(B, A)\nfather(A, B) :- child(B, A).", 2, 1, "expected ',' or '.'"),
    ("child(A, C) :- father(B, A).", 1, 1, "unsafe rule: head variable C"),
    ("child(A, B) :- father(B, A), male(C).", 1, 30, "variable C in male(C) is not bound"),
    ("child(A, B) :- father(B, A), A != C.", 1, 30, "variable C in A != C is not bound"),
    ("child(A, B) :- male(A), female(B).", 1, 1, "no relation atom in its body"),
    ("male(A) :- father(B, A).", 1, 1, "the head male(A) has one argument"),
    ("child(A, B).", 1, 12, "has no body"),
    ("child(A, B, C) :- father(B, A).", 1, 1, "has 3 arguments"),
    ("\n\n  child(A, B) :- father(B; A).", 3, 26, "unexpected character ';'"),
    ('child(A, B) :- father(B, "A).', 1, 26, "unterminated string"),
    ("Child(A, B) :- father(B, A).", 1, 1, "expected a relation name"),
])
def test_syntax_errors_name_file_line_and_column(text, line, col, fragment):
    with pytest.raises(RuleSyntaxError) as e:
        parse_datalog(text, source="my.dl")
    assert (e.value.source, e.value.line, e.value.column) == ("my.dl", line, col)
    assert fragment in e.value.message
    assert str(e.value).startswith(f"my.dl:{line}:{col}: ")


@pytest.mark.parametrize("text, line, fragment", [
    ("(A, is wife of, B) > (B, is husband of, A)\n(A, is wife of, B) (B, is husband of, A)", 2, "exactly one '>'"),
    ("(A, is wife of, B) + > (B, is husband of, A)", 1, "expected '>' between tuples, found '+ >'"),
    ("> (B, is husband of, A)", 1, "expected a tuple (A, is r of, B) to start the rule"),
    ("(A, is wife of, B) * (C, is wife of, B) > (B, is husband of, A)", 1, "expected '+' between tuples"),
    ('(A, is, male) > (B, is husband of, A)', 1, "quoted value"),
    ("(A, is wife of, B) > (B, is husband of, C)", 1, "unsafe rule: head variable C"),
    ("(a, is wife of, B) > (B, is husband of, a)", 1, "variable (upper-case)"),
])
def test_raw_format_errors(text, line, fragment):
    with pytest.raises(RuleSyntaxError) as e:
        parse_raw(text, source="raw.txt")
    assert e.value.source == "raw.txt" and e.value.line == line
    assert fragment in e.value.message


def test_unknown_relations_are_reported(edu_kb):
    warnings = load_rules("edu-relat").check(edu_kb)
    assert len(warnings) == 1
    assert "'newphe'" in warnings[0] and "rule 16 and rule 19 never fire" in warnings[0]
    assert load_rules("family").check(edu_kb) == []
    odd = parse_datalog("cousin(X, Y) :- sibling(X, Y), purple(Y).", name="odd")
    w = odd.check(edu_kb)
    assert any("'sibling'" in x for x in w) and any("'purple'" in x for x in w)
    # a relation some rule derives is not unknown in a body even if the KB lacks it; as a head
    # the KB lacks it, which gets its own warning (see tests/rules/test_budget_warnings.py)
    w = parse_datalog("p(X, Y) :- child(X, Y).\nq(X, Y) :- p(X, Y).").check(edu_kb)
    assert not any("neither in KB" in x for x in w)
    assert len(w) == 2 and "relation 'p', derived by rule 1 (<rules>:1)" in w[0]
    assert "relation 'q', derived by rule 2 (<rules>:2)" in w[1]


def test_load_rules_errors(tmp_path):
    with pytest.raises(RulesError, match="unknown rule set 'famly'"):
        load_rules("famly")
    with pytest.raises(RulesError, match="rule file not found"):
        load_rules(tmp_path / "missing.dl")
    empty = tmp_path / "empty.dl"
    empty.write_text("% nothing here\n")
    with pytest.raises(RulesError, match="no rules"):
        load_rules(empty)
    rs = load_rules("family")
    assert load_rules(rs) is rs
