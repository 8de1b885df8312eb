"""The wheel, as a user installs it: beside a project with its own ``stores``, ``processors``
and ``samples`` packages, whose workflow runs as a service on SQLite through the CLI.

The wheel is built from a copy of the repository (setuptools leaves ``build/`` behind, whose
stale files would end up in a later wheel) and installed with ``[postgres-binary]`` into a
fresh venv, its dependencies from the package index. Where the time goes: ``python -m venv``
spends most of its ~15 s bootstrapping pip (``ensurepip``); the venv is made without pip and
this environment's pip installs into it (``pip --python``), and the wheel is built without
build isolation (``setuptools`` is in the dev extra), which saves ~10 s more. The venv gets no
system site-packages: a dependency missing from the metadata fails here.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from decider.stores.sqlite import SqliteEventStore
from tests.support.service import ROOT, ServiceProcess
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow  # ~20 s: a build, a venv, an install from the index, a service

PIP = [sys.executable, "-m", "pip"]
LEFT_OUT = [
    ".git",
    ".venv",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".*_cache",
    ".hypothesis",
    "*.db",
]
"""What the copy of the repository leaves out: what git ignores, that a build might pick up."""
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]

USER_PROJECT = {
    "stores/__init__.py": '"""The user\'s own stores: a ledger of greetings."""\n',
    "stores/ledger.py": """
ENTRIES: list[str] = []


def remember(text: str) -> int:
    ENTRIES.append(text)
    return len(ENTRIES)
""",
    "processors/__init__.py": '"""The user\'s own processors."""\n',
    "processors/greeting.py": """
def compose(name: str) -> str:
    return f"Hello, {name}!"
""",
    "samples/__init__.py": '"""The user\'s own samples."""\n',
    "samples/names.py": 'NAMES = ["Ada", "Grace"]\n',
    "user_app.py": """
from typing import Any

import attrs

import processors.greeting
import stores
import stores.ledger
from decider import Complete, Send, Workflow, message
from decider.processors import App, by_correlation


@message("user.GreetingRequested")
@attrs.frozen(kw_only=True)
class GreetingRequested:
    name: str


@message("user.ComposeGreeting")
@attrs.frozen(kw_only=True)
class ComposeGreeting:
    name: str


@message("user.GreetingComposed")
@attrs.frozen(kw_only=True)
class GreetingComposed:
    name: str
    text: str
    stores_file: str


def decide(message: Any, state: None) -> list[Any]:
    if isinstance(message, GreetingRequested):
        return [Send(ComposeGreeting(name=message.name))]
    if isinstance(message, GreetingComposed):
        return [Complete()]
    raise ValueError(f"unexpected {message!r}")


greeting = Workflow("Greeting", None, lambda state, event: state, decide)
app = App("user-greetings")
app.workflow(
    greeting,
    inputs={GreetingRequested: lambda m, _: m.name, GreetingComposed: by_correlation},
)


@app.handler(ComposeGreeting)
def compose(command: ComposeGreeting, command_id: str) -> list[object]:
    text = processors.greeting.compose(command.name)
    stores.ledger.remember(text)
    return [GreetingComposed(name=command.name, text=text, stores_file=stores.__file__)]
""",
    "publish.py": """
import json
import sys

import decider
import psycopg  # the [postgres-binary] extra

from decider.stores import open_store
from samples.names import NAMES
from user_app import GreetingRequested, app, greeting

store = open_store(sys.argv[1])
app.publish_many(store, [GreetingRequested(name=n) for n in NAMES], "greetings")
store.close()
print(json.dumps({
    "decider": decider.__file__,
    "psycopg": psycopg.__version__,
    "streams": [greeting.stream(n) for n in NAMES],
}))
""",
}


def run(command: list[str], cwd: Path, env: dict[str, str], timeout: float = 120) -> str:
    """Run ``command``; its stdout, or a failure with both streams."""
    result = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, f"{command}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of this repository, built from a clean copy of it."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    shutil.copytree(
        ROOT,
        source,
        symlinks=True,  # decider/stores -> ../stores, as in the repository
        ignore=shutil.ignore_patterns(*LEFT_OUT),
    )
    out = work / "dist"
    run(
        [*PIP, "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(source)],
        cwd=work,
        env=dict(os.environ),
    )
    (built,) = out.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv (no system site-packages) with the wheel and ``[postgres-binary]``."""
    home = tmp_path_factory.mktemp("venv") / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(home)], cwd=home.parent, env=_env())
    python = home / "bin" / "python"
    run(
        [*PIP, "--python", str(python), "install", "-q", f"{wheel}[postgres-binary]"],
        cwd=home.parent,
        env=_env(),
        timeout=300,
    )
    return home


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The user's project: its own ``stores``, ``processors`` and ``samples``, and an app."""
    root = tmp_path / "project"
    for name, text in USER_PROJECT.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text.lstrip())
    return root


def _env() -> dict[str, str]:
    """The environment of the venv's commands: nothing of this checkout's on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DECIDER_"))}
    env.pop("VIRTUAL_ENV", None)
    return env


def test_the_wheel_holds_one_import_root_and_the_license(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    dist_info = f"decider_workflows-{VERSION}.dist-info"
    assert {name.split("/")[0] for name in names} == {"decider", dist_info}
    assert f"{dist_info}/licenses/LICENSE" in names
    assert "decider/stores/sqlite/store.py" in names
    assert "decider/processors/cli/__init__.py" in names
    assert zipfile.ZipFile(wheel).read(f"{dist_info}/top_level.txt").split() == [b"decider"]


def test_decider_version_is_the_one_in_pyproject(venv: Path, tmp_path: Path) -> None:
    out = run([str(venv / "bin" / "decider"), "--version"], cwd=tmp_path, env=_env())
    assert out.split() == ["decider", VERSION]


@pytest.fixture
def service(project: Path, venv: Path) -> Iterator[ServiceProcess]:
    """``decider run user_app:app`` from the venv in the project, killed by pid at the end."""
    uri = f"sqlite:///{project / 'events.db'}"
    process = ServiceProcess(
        "user_app:app",
        uri,
        project / "service.log",
        _env(),
        command=[str(venv / "bin" / "decider")],
        cwd=project,
    )
    yield process
    process.cleanup()


def test_a_user_project_with_its_own_stores_runs_as_a_service(
    venv: Path, project: Path, service: ServiceProcess
) -> None:
    python, decider = str(venv / "bin" / "python"), str(venv / "bin" / "decider")
    published = json.loads(run([python, "publish.py", service.uri], cwd=project, env=_env()))
    assert Path(published["decider"]).is_relative_to(venv), "the installed decider is used"
    streams = published["streams"]

    service.start()
    store = SqliteEventStore(project / "events.db")
    try:
        wait_until(
            lambda: (
                service.check_alive()
                or all(
                    [e.type for e in store.read_stream(s)][-1:] == ["Completed"] for s in streams
                )
            ),
            60,
            "both greetings completed",
        )
    finally:
        store.close()
    assert service.terminate(signal.SIGTERM) == 0, service.tail()

    app = ["--app", "user_app:app", "--store", service.uri]
    status = run([decider, "status", *app], cwd=project, env=_env())
    assert "Greeting: running 0, completed 2" in status
    shown = run([decider, "show", streams[0], *app], cwd=project, env=_env())
    assert "completed" in shown.splitlines()[0]
    assert "Hello, Ada!" in shown
    assert str(project / "stores" / "__init__.py") in shown, "the user's own stores was used"
