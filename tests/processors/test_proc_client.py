"""The definition apart from the client: ``AppDefinition`` holds what a service runs, ``App``
adds publish, request and cancel, and the functions of ``client/`` take a bare definition."""

from __future__ import annotations

from decider import Lifecycle
from decider.processors import App, AppDefinition, FakeClock, Service, show
from decider.processors.app.streams import instance_stream
from decider.processors.client.cancelling import cancel
from decider.processors.client.publishing import publish, publish_many
from decider.stores.memory import MemoryEventStore
from tests.support.apps import Added, tally, tally_route

CLIENT = ("publish", "publish_many", "request", "request_async", "cancel")


def test_the_definition_has_no_client_and_app_adds_it() -> None:
    assert issubclass(App, AppDefinition)
    for name in CLIENT:
        assert not hasattr(AppDefinition, name)
        assert callable(getattr(App, name))


def test_a_service_runs_a_bare_definition_that_the_client_functions_feed() -> None:
    definition = AppDefinition("bare")
    definition.workflow(tally, inputs={Added: tally_route})
    store = MemoryEventStore()
    assert publish(definition, store, Added(tally_id="t1", amount=2), "inputs-bare", "m1") == "m1"
    more = [Added(tally_id="t1", amount=3), Added(tally_id="t2", amount=1)]
    assert len(publish_many(definition, store, more, "inputs-bare")) == 2
    with Service(definition, store, clock=FakeClock()) as service:
        assert service.wait_idle(30)
        assert show(store, definition, instance_stream("Tally", "t1")).state == 5
        first = cancel(definition, store, tally, "t2", reason="enough")
        assert not first.already
        t2 = instance_stream("Tally", "t2")
        assert service.wait_until(
            lambda: show(store, definition, t2).status is Lifecycle.CANCELLED, 30
        )
        assert service.errors == []
    again = cancel(definition, store, t2, reason="again")
    assert again.already and again.reason == "enough"
