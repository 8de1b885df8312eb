"""Every ``decider`` command the docs (README.md, docs/*.md) and the samples' docstrings show,
against what the tool does.

- Each command line of a fenced block is parsed by the real parser, then run as written (in
  this process, in a fresh directory holding a store of the traffic-fine sample, with the
  environment the file's ``export`` lines set) and must exit 0; a command that cannot run here
  is listed in :data:`NOT_RUN` with the reason (and still parsed), never skipped silently.
- A transcript (``$ decider ...`` followed by what it prints) is run and its output compared
  line for line, error messages included (exit status non-zero exactly when it prints
  ``decider: error:``).
- A command named in running text (`` `decider list --stuck` ``) names a subcommand that exists
  and only options it takes.

The store the commands run on (:func:`prepare`): a traffic-fine instance ``PR-1`` that is
running, its first command parked (the app ran without handlers), and ``PR-00001`` completed.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from decider import Lifecycle
from decider.processors import App, Service, by_correlation, list_parked, status
from decider.processors.cli import build_parser, main
from decider.processors.cli.loading import load_app
from decider.stores.sqlite import SqliteEventStore
from samples.traffic_fine.app import REPORTS_STREAM, _report_id
from samples.traffic_fine.messages import (
    ParkingViolation,
    PoliceReportPublished,
    SpeedingViolation,
    TrafficFineManualIdentificationCodeGenerated,
    TrafficFineSystemNumberGenerated,
)
from samples.traffic_fine.workflow import workflow

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

NOT_RUN = {
    "decider run ": "runs until SIGINT/SIGTERM: tests/service/test_svc_readme.py runs the "
    "README's block with it in a process, tests/service/test_svc_cli.py stops one by signals",
    "decider console ": "serves until SIGINT/SIGTERM: tests/console/ serve it",
    "3f1c0d9e-...": "a placeholder command id",
    "postgresql://app@db/prod": "a placeholder server",
    "APP WORKFLOW": "placeholders for an app and a workflow",
    '"PR-8", ...}': "JSON elided with ...",
}
"""Commands of the docs that are parsed but not run here, by a part of their line: why."""

ANSWERS = {"reset": "y\n"}
"""What an operator answers a command that asks (on stdin)."""


@attrs.frozen
class Example:
    """One command of a fenced block, and what it prints if the block is a transcript."""

    where: str
    line: str
    source: str
    """The whole line as the docs show it (with what a pipe feeds the command)."""
    env: dict[str, str]
    expected: list[str] | None
    block: int

    @property
    def argv(self) -> list[str]:
        """The arguments after ``decider``."""
        return shlex.split(self.line, comments=True)[1:]


def fenced_examples() -> list[Example]:
    """Every ``decider`` command line of the docs' fenced blocks (not Python, TOML, JSON)."""
    found = []
    for path in DOCS:
        text = path.read_text()
        env: dict[str, str] = {}
        for number, match in enumerate(re.finditer(r"```(\w*)\n(.*?)```", text, re.DOTALL)):
            if match.group(1) in ("python", "toml", "json"):
                continue
            first = text[: match.start()].count("\n") + 2
            lines = match.group(2).splitlines()
            for index, raw in enumerate(lines):
                where = f"{path.relative_to(ROOT)}:{first + index}"
                if raw.startswith("export "):
                    env.update(item.partition("=")[::2] for item in shlex.split(raw)[1:])
                elif raw.startswith("$ decider "):
                    output = []
                    for after in lines[index + 1 :]:
                        if after.startswith("$ "):
                            break
                        output.append(after)
                    found.append(Example(where, raw[2:], raw, dict(env), output, number))
                elif re.match(r"^(.*\| )?decider ", raw):
                    command = raw[raw.index("decider ") :]
                    found.append(Example(where, command, raw, dict(env), None, number))
    return found


EXAMPLES = fenced_examples()


def not_run(example: Example) -> str | None:
    """Why ``example`` is not run here (``None``: it is). A transcript always runs."""
    if example.expected is not None:
        return None
    return next((why for part, why in NOT_RUN.items() if part in example.source), None)


def prepare(directory: Path) -> None:
    """``events.db`` in ``directory``: PR-1 running with a parked command, PR-00001 completed."""
    bare = App("traffic-fines")  # the sample's name and workflow, without its handlers
    bare.workflow(
        workflow,
        inputs={
            PoliceReportPublished: _report_id,
            TrafficFineSystemNumberGenerated: by_correlation,
            TrafficFineManualIdentificationCodeGenerated: by_correlation,
        },
    )
    store = SqliteEventStore(directory / "events.db")
    try:
        reports = [
            PoliceReportPublished(
                police_report_id="PR-1",
                offense=SpeedingViolation(maximum_speed="50 km/h", measured_speed="72 km/h"),
            ),
            PoliceReportPublished(
                police_report_id="PR-00001", offense=ParkingViolation(location="Meir")
            ),
        ]
        bare.publish_many(store, reports, REPORTS_STREAM)
        with Service(bare, store) as service:

            def ready() -> bool:
                states = {i.stream: i.status for i in status(store, bare)}
                return len(list_parked(store, bare)) == 1 and states == {
                    workflow.stream("PR-1"): Lifecycle.RUNNING,
                    workflow.stream("PR-00001"): Lifecycle.COMPLETED,
                }

            assert service.wait_until(ready, 30)
            assert service.wait_idle(30)
    finally:
        store.close()


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh directory with the prepared store, as the current one; no DECIDER_ variables."""
    monkeypatch.delenv("DECIDER_APP", raising=False)
    monkeypatch.delenv("DECIDER_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))  # samples, as in a checkout
    prepare(tmp_path)
    yield tmp_path


def run(
    example: Example, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str, str]:
    """``example`` run in-process with its environment; status, stdout, stderr."""
    for name, value in example.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("sys.stdin", io.StringIO(ANSWERS.get(example.argv[0], "")))
    try:
        code = main(example.argv)
    except SystemExit as exc:  # argparse's own refusal
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_docs_show_commands_and_transcripts() -> None:
    # Guards the extraction itself: the operator's guide and the README are read.
    assert sum(e.where.startswith("docs/service.md") for e in EXAMPLES) >= 20
    assert sum(e.expected is not None for e in EXAMPLES) >= 5
    # Every exception still matches a command of the docs (none is left over).
    for part, why in NOT_RUN.items():
        assert any(not_run(e) == why for e in EXAMPLES), f"NOT_RUN {part!r} matches nothing"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.where)
def test_every_documented_command_parses(example: Example) -> None:
    try:
        build_parser().parse_args(example.argv)
    except SystemExit as exc:
        raise AssertionError(f"{example.where}: {example.line!r} does not parse") from exc


BLOCKS = sorted({(e.where.partition(":")[0], e.block) for e in EXAMPLES if e.expected is None})


@pytest.mark.parametrize(("doc", "block"), BLOCKS, ids=[f"{d}#{b}" for d, b in BLOCKS])
def test_every_documented_command_runs(
    doc: str,
    block: int,
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    examples = [e for e in EXAMPLES if e.where.startswith(f"{doc}:") and e.block == block]
    for example in examples:
        if not_run(example) is not None:
            continue
        code, _, err = run(example, capsys, monkeypatch)
        assert code == 0, f"{example.where}: {example.line}\n{err}"


TRANSCRIPTS = sorted(
    {(e.where.partition(":")[0], e.block) for e in EXAMPLES if e.expected is not None}
)


@pytest.mark.parametrize(("doc", "block"), TRANSCRIPTS, ids=[f"{d}#{b}" for d, b in TRANSCRIPTS])
def test_every_transcript_prints_what_the_docs_quote(
    doc: str,
    block: int,
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    examples = [e for e in EXAMPLES if e.where.startswith(f"{doc}:") and e.block == block]
    for example in examples:
        assert example.expected is not None
        code, out, err = run(example, capsys, monkeypatch)
        printed = (out + err).splitlines()
        assert printed == example.expected, f"{example.where}: {example.line}"
        failed = any(line.startswith("decider: error: ") for line in example.expected)
        assert (code != 0) == failed, f"{example.where}: exit status {code}"


# -- commands named in running text, and in the samples' docstrings ---------------------------


def _subcommands() -> dict[str, set[str]]:
    """Each subcommand's options (a subcommand with actions: the union of theirs)."""
    options: dict[str, set[str]] = {}

    def collect(parser: argparse.ArgumentParser, into: set[str]) -> None:
        for action in parser._actions:
            into.update(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    collect(sub, into)

    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                collect(sub, options.setdefault(name, set()))
    return options


def inline_commands() -> list[tuple[str, str]]:
    """Every `` `decider SUBCOMMAND ...` `` of the docs' running text, with where it is."""
    found = []
    for path in DOCS:
        text = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)
        for match in re.finditer(r"`(decider [^`=]*)`", text):
            found.append((str(path.relative_to(ROOT)), " ".join(match.group(1).split())))
    return found


def test_commands_in_running_text_name_real_subcommands_and_options() -> None:
    subcommands = _subcommands()
    inline = inline_commands()
    assert len(inline) > 50
    wrong = []
    for where, command in inline:
        words = command.split()
        name = words[1]
        if name in ("--version", "..."):
            continue
        if name not in subcommands:
            wrong.append(f"{where}: `{command}`: no subcommand {name!r}")
            continue
        flags = [w for w in words[2:] if w.startswith(("--", "[--"))]
        options = {w.strip("[]").partition("=")[0] for w in flags}
        wrong += [
            f"{where}: `{command}`: {name} takes no {option}"
            for option in sorted(options - subcommands[name])
        ]
    assert wrong == []


def sample_commands() -> list[tuple[str, str]]:
    """Every ``decider ...`` command the samples' docstrings show."""
    found = []
    for path in sorted((ROOT / "samples").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for match in re.finditer(r"``(decider [^`]*)``", node.value):
                    found.append((str(path.relative_to(ROOT)), match.group(1)))
    return found


def test_the_samples_docstrings_show_commands_that_work() -> None:
    commands = sample_commands()
    assert len(commands) >= 5
    subcommands = _subcommands()
    for where, command in commands:
        argv = shlex.split(command)[1:]
        if len(argv) == 1:  # a mention: ``decider cancel``
            assert argv[0] in subcommands, f"{where}: {command!r}"
            continue
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:
            raise AssertionError(f"{where}: {command!r} does not parse") from exc
        spec = getattr(args, "app_given", None) or args.app
        assert spec, f"{where}: {command!r} names no app"
        load_app(spec)  # the app it names exists
