"""Registration checks: a wrong route, handler, input type or name fails at once, named."""

from __future__ import annotations

from typing import Any

import pytest
from proc_support import Added, DoWork, JobRequested, tally, tally_app

from decider import Metadata, Workflow
from decider.processors import App, AppDefinitionError


def _workflow(name: str) -> Workflow[Any, Any, Any]:
    return Workflow(name, 0, tally.evolve, tally.decide)


def test_a_route_that_cannot_take_message_and_metadata_is_refused() -> None:
    app = App("reg")

    def one_argument(message: Added) -> str:
        return message.tally_id

    with pytest.raises(AppDefinitionError, match=r"route for 'ptest.Added'.*one_argument"):
        app.workflow(tally, inputs={Added: one_argument})
    with pytest.raises(AppDefinitionError, match=r"route for 'ptest\.Added'"):
        app.workflow(tally, inputs={Added: lambda m, md, extra: "x"})
    assert app.workflows == {}
    # Defaults, *args and callables objects are fine.
    app.workflow(tally, inputs={Added: lambda m, md=None: m.tally_id})
    app.workflow(_workflow("Other"), inputs={Added: lambda *args: "x"})


def test_a_handler_that_cannot_take_command_and_command_id_is_refused() -> None:
    app = tally_app("reg")

    def work(command: DoWork) -> list[object]:
        return []

    with pytest.raises(AppDefinitionError, match=r"handler 'work'.*command, command_id"):
        app.add_handler(DoWork, work)  # type: ignore[arg-type]
    with pytest.raises(AppDefinitionError, match="not callable"):
        app.add_handler(DoWork, "work", name="work")  # type: ignore[arg-type]
    assert app.handlers == {}

    @app.handler(DoWork)
    def do_work(command: DoWork, command_id: str) -> list[object]:
        return []

    assert app.handlers["ptest.DoWork"].name == "do_work"


def test_an_unregistered_input_type_is_refused() -> None:
    class NotAMessage:
        pass

    app = App("reg")
    with pytest.raises(AppDefinitionError, match=r"NotAMessage.*input of workflow 'Tally'"):
        app.workflow(tally, inputs=[Added, NotAMessage])


@pytest.mark.parametrize(
    "name", ["Order-v2", "Order.v2", "Order v2", "", "2Order", "timer", "Decider"]
)
def test_a_workflow_name_a_stream_name_could_confuse_is_refused(name: str) -> None:
    with pytest.raises(AppDefinitionError, match=f"workflow name {name!r}"):
        App("reg").workflow(_workflow(name), inputs=[Added])


@pytest.mark.parametrize("name", ["my.app", "has space", "", "-x", "a/b"])
def test_an_app_name_with_the_processor_separator_is_refused(name: str) -> None:
    with pytest.raises(AppDefinitionError, match=f"app name {name!r}"):
        App(name)


def test_handler_and_workflow_names_cannot_share_streams() -> None:
    app = tally_app("reg")
    with pytest.raises(AppDefinitionError, match="handler name 'do-work'"):
        app.add_handler(DoWork, lambda c, i: [], name="do-work")
    with pytest.raises(AppDefinitionError, match="'Tally' is already a workflow's name"):
        app.add_handler(DoWork, lambda c, i: [], name="Tally")
    app.add_handler(DoWork, lambda c, i: [], name="Job")
    with pytest.raises(AppDefinitionError, match="'Job' is already a handler's name"):
        app.workflow(_workflow("Job"), inputs=[JobRequested])


def test_a_target_stream_no_store_can_hold_is_refused() -> None:
    app = App("reg")
    with pytest.raises(AppDefinitionError, match="NUL"):
        app.route(DoWork, stream="work\x00")
    with pytest.raises(AppDefinitionError, match="bytes long"):
        app.route(DoWork, stream="w" * 1001)


def test_a_valid_app_registers_and_routes_by_name() -> None:
    app = App("traffic-fines")

    def route(message: Added, metadata: Metadata) -> str:
        return message.tally_id

    app.workflow(tally, inputs={Added: route})
    assert app.workflow_of_stream("Tally-x-1") is app.workflows["Tally"]
    assert app.workflow_of_stream("decider-failed-Tally-x") is None
