"""docs/cli.md documents every option of the ``unified-memory`` command.

The global options (and ``-h``/``--help``) must appear in its "Global options"
section; each subcommand's own options in that command's section (``### `recall```);
and a section names no option its command does not have. An option added to the
parser without a line in docs/cli.md fails here.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from unified_memory.cli._parser import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "cli.md"
GLOBAL = "Global options"
_OPTION = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*")


def _sections() -> dict[str, str]:
    """docs/cli.md's ``###`` sections: the heading (backticks removed) -> its text."""
    parts = re.split(r"^### +(.+)$", DOC.read_text(), flags=re.MULTILINE)
    return {heading.strip().strip("`"): body for heading, body in zip(parts[1::2], parts[2::2], strict=True)}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _own_options(parser: argparse.ArgumentParser) -> set[str]:
    """The option strings a subcommand adds itself (not the global ones it shares, not -h), and
    those of its own actions (``keys create --admin``)."""
    own = {option for group in parser._action_groups if group.title != "global options"
           for action in group._group_actions if not isinstance(action, argparse._HelpAction)
           for option in action.option_strings}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for nested in action.choices.values():
                own |= _own_options(nested)
    return own


def _mentions(text: str, option: str) -> bool:
    return re.search(r"(?<![\w-])" + re.escape(option) + r"(?![\w-])", text) is not None


PARSER = build_parser()
COMMANDS = _subparsers(PARSER)
GLOBAL_OPTIONS = {option for action in PARSER._actions for option in action.option_strings}


def test_the_global_options_are_documented() -> None:
    section = _sections().get(GLOBAL)
    assert section is not None, f"docs/cli.md has no '### {GLOBAL}' section"
    missing = sorted(option for option in GLOBAL_OPTIONS if not _mentions(section, option))
    assert not missing, f"global options missing from docs/cli.md: {missing}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_of_the_command_is_documented(name: str) -> None:
    section = _sections().get(name)
    assert section is not None, f"docs/cli.md has no '### `{name}`' section"
    missing = sorted(option for option in _own_options(COMMANDS[name]) if not _mentions(section, option))
    assert not missing, f"options of {name!r} missing from its section of docs/cli.md: {missing}"
    known = _own_options(COMMANDS[name]) | GLOBAL_OPTIONS
    unknown = sorted(set(_OPTION.findall(section)) - known)
    assert not unknown, f"the {name!r} section of docs/cli.md names options {name!r} does not have: {unknown}"


def test_every_section_is_a_command() -> None:
    assert set(_sections()) - {GLOBAL} == set(COMMANDS)


def test_an_undocumented_option_is_caught() -> None:
    parser = build_parser()
    recall = _subparsers(parser)["recall"]
    recall.add_argument("--no-such-option", action="store_true")
    assert "--no-such-option" in _own_options(recall)
    assert not _mentions(_sections()["recall"], "--no-such-option")
    assert "--limit" in _own_options(recall) and "--db" not in _own_options(recall)
