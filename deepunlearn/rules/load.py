"""Find a rule set by name or read it from a file.

Named rule sets: ``edu-relat`` (the release's rules, package data ``rulesets/edu-relat.dl``) and
the ``rules.dl`` of every built-in domain folder (``family``: ``kg/domains/family/rules.dl``).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from ..errors import MAX_SMALL_FILE_BYTES, read_text
from .errors import RulesError
from .language import RuleSet
from .parser import parse_datalog, parse_raw

#: Rule sets shipped in ``rulesets/<name>.dl`` (not domains: the release's own rules).
RULESETS = ("edu-relat",)


def _domain_rules() -> dict[str, Path]:
    """The built-in domains' rule files by domain name (the kg layer owns the domain folders)."""
    from ..kg.domain import builtin_domains, builtin_folder

    root = builtin_folder()
    return {n: root / n / "rules.dl" for n in builtin_domains() if (root / n / "rules.dl").is_file()}


def builtin_names() -> tuple[str, ...]:
    """Every named rule set: ``rulesets/`` then the built-in domains, sorted."""
    return tuple(sorted(RULESETS + tuple(_domain_rules())))


#: The named rule sets when the package was imported (``edu-relat``, ``family``, ...).
BUILTIN = builtin_names()


def builtin_text(name: str) -> str:
    """The text of a shipped rule set."""
    if name in RULESETS:
        return (resources.files("deepunlearn.rules") / "rulesets" / f"{name}.dl").read_text(encoding="utf-8")
    domains = _domain_rules()
    if name not in domains:
        raise RulesError(f"unknown rule set {name!r}: expected one of {', '.join(builtin_names())} "
                         "or a path to a rule file")
    return domains[name].read_text(encoding="utf-8")


def _description(text: str) -> str:
    """The leading comment block of a rule file (shown by ``to_datalog``)."""
    lines = []
    for line in text.splitlines():
        s = line.strip()
        if not s.startswith(("%", "#")):
            break
        body = s.lstrip("%#")
        body = body[1:] if body.startswith(" ") else body
        if not (not lines and body.startswith("rule set:")):
            lines.append(body.rstrip())
    return "\n".join(lines).strip()


def _name_of(path: Path) -> str:
    """A rule file's name: its stem, or for the ``rules.dl`` of a domain folder the domain's name
    (every domain's file is called ``rules.dl``)."""
    if path.name == "rules.dl" and (path.parent / "domain.toml").is_file():
        from ..kg.domain import DomainError, read_domain

        try:
            return read_domain(path.parent).name
        except DomainError:  # the rules are still readable; the domain's own problem shows where it is used
            return path.parent.name
    return path.stem


def _is_raw(text: str) -> bool:
    for line in text.splitlines():
        s = line.strip()
        if s and not s.startswith(("%", "#")):
            return s.startswith("(")
    return False


def load_rules(name_or_path: str | Path | RuleSet) -> RuleSet:
    """Load a rule set by name or from a file.

    Parameters
    ----------
    name_or_path : str, Path or RuleSet
        A shipped name (``edu-relat``, or a built-in domain's: ``family``, ``org``, ``geo``,
        ``regions``), a Datalog file (``*.dl``) or a file in the release's raw format
        (``family_rule_raw.txt``, recognised by its first rule starting with ``(``; read with the
        reference's gender and self-loop filter, see :func:`~.parser.parse_raw`). A RuleSet is
        returned as is.

    Returns
    -------
    RuleSet
        The rules in file order, each with its label (``rule N``) and line, the set's name and
        the file's leading comment as its description.

    Raises
    ------
    RulesError
        An unknown name, a missing or unreadable file, a syntax error (file, line and column) or
        a file without rules.

    Examples
    --------
    >>> rs = load_rules("edu-relat")
    >>> len(rs), rs.name
    (48, 'edu-relat')
    >>> load_rules("no-such-rules")
    Traceback (most recent call last):
    ...
    deepunlearn.rules.errors.RulesError: unknown rule set 'no-such-rules': expected one of edu-relat, family, geo, org, regions or a path to a rule file
    """
    if isinstance(name_or_path, RuleSet):
        return name_or_path
    if isinstance(name_or_path, str) and name_or_path in BUILTIN and not Path(name_or_path).is_file():
        text = builtin_text(name_or_path)
        rs = parse_datalog(text, name=name_or_path, source=f"{name_or_path}.dl")
        return RuleSet(rs.name, rs.rules, rs.source, _description(text), rs.warnings)
    path = Path(name_or_path)
    if not path.exists():
        if path.suffix or "/" in str(name_or_path):
            raise RulesError(f"{path}: rule file not found", file=path)
        raise RulesError(f"unknown rule set {str(name_or_path)!r}: expected one of {', '.join(builtin_names())} or a path to a rule file")
    # a regular file of at most 16 MiB: a FIFO or /dev/zero is refused before it is opened
    text = read_text(path, error=RulesError, limit=MAX_SMALL_FILE_BYTES)
    description = _description(text)
    if path.suffix != ".dl" and _is_raw(text):
        rs = parse_raw(text, name=path.stem, source=str(path))
        description = "\n".join(filter(None, [description, (
            "Read from the release's raw format with the reference's filter on every derived fact "
            "(gender atoms and no self loop), as edu-relat.dl spells it out.")]))
    else:
        rs = parse_datalog(text, name=_name_of(path), source=str(path))
    if not rs.rules:
        raise RulesError(f"{path}: no rules in the file", file=path)
    return RuleSet(rs.name, rs.rules, rs.source, description, rs.warnings)
