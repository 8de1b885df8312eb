"""One way to name the app for every command (``--app``, ``$DECIDER_APP``, and the documented
positional ``APP`` of ``run`` and ``diagram``), and ``list --stuck``'s hint when no workflow
declares a ``progress_within``."""

from __future__ import annotations

from pathlib import Path

import pytest

from decider.processors.cli import main

APP = "samples.traffic_fine:app"
WORKFLOW = "IssueTrafficFineForSpeedingViolation"
NOSUCH = "no module named 'nosuch' (app 'nosuch.module:app')"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DECIDER_APP", raising=False)
    monkeypatch.delenv("DECIDER_STORE", raising=False)
    monkeypatch.chdir(tmp_path)


def error_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    captured = capsys.readouterr()
    assert captured.out == ""
    return code, captured.err


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "nosuch.module:app"],
        ["run", "--app", "nosuch.module:app"],
        ["run"],  # $DECIDER_APP
        ["diagram", "nosuch.module:app", WORKFLOW],
        ["diagram", WORKFLOW, "--app", "nosuch.module:app"],
        ["diagram", WORKFLOW],  # $DECIDER_APP
        ["status"],  # $DECIDER_APP, as before
    ],
    ids=" ".join,
)
def test_every_command_takes_the_app_from_app_or_the_environment(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if "nosuch.module:app" not in argv:
        monkeypatch.setenv("DECIDER_APP", "nosuch.module:app")
    code, err = error_of([*argv, "--store", "sqlite:///events.db"], capsys)
    assert (code, err) == (2, f"decider: error: {NOSUCH}\n")
    assert not Path("events.db").exists()


def test_run_and_diagram_refuse_two_different_apps(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["run", APP, "--app", "other:app"], ["diagram", APP, WORKFLOW, "--app", "o:a"]):
        code, err = error_of(argv, capsys)
        assert code == 2 and err.startswith("decider: error: two apps named: ")
    with pytest.raises(SystemExit) as refused:  # argparse's own refusal
        main(["diagram", APP, WORKFLOW, "extra"])
    assert refused.value.code == 2
    assert "unrecognized arguments: extra" in capsys.readouterr().err


def test_diagram_takes_the_app_by_option_and_by_position_alike(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["diagram", APP, WORKFLOW]) == 0
    positional = capsys.readouterr().out
    assert positional.startswith("stateDiagram-v2")
    assert main(["diagram", WORKFLOW, "--app", APP]) == 0
    assert capsys.readouterr().out == positional
    monkeypatch.setenv("DECIDER_APP", APP)
    assert main(["diagram", WORKFLOW]) == 0
    assert capsys.readouterr().out == positional


def test_list_stuck_without_a_progress_within_says_how_to_declare_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    at = ["--app", APP, "--store", "memory://"]
    code, err = error_of(["list", "--stuck", *at], capsys)
    assert code == 2
    assert err == (
        "decider: error: no workflow of app 'traffic-fines' declares a progress_within, so "
        "--stuck without a duration finds nothing: give one (--stuck 15m), or declare it when "
        "registering the workflow (app.workflow(..., progress_within=timedelta(minutes=15)))\n"
    )
    code, err = error_of(["list", "--stuck", "--workflow", WORKFLOW, *at], capsys)
    assert code == 2
    assert err.startswith(f"decider: error: workflow '{WORKFLOW}' declares no progress_within")
    assert main(["list", "--stuck", "15m", *at]) == 0
    assert capsys.readouterr().out == "no instances\n"
