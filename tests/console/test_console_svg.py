"""The server-side SVG of a diagram: well-formed, every state and arrow drawn, text escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from decider.diagram import Diagram, Transition, explore
from decider.processors.console import svg
from samples.order_fulfilment import workflow as orders
from samples.order_fulfilment.messages import (
    OrderPlaced,
    OrderShipped,
    PaymentConfirmed,
    PaymentRefunded,
    PaymentTimedOut,
    StockReservationFailed,
    StockReserved,
)

NS = "{http://www.w3.org/2000/svg}"


def _parse(text: str) -> ET.Element:
    return ET.fromstring(text)  # raises on anything that is not well-formed XML


def test_every_state_and_arrow_of_a_sample_is_drawn() -> None:
    diagram = explore(
        orders,
        [
            OrderPlaced,
            PaymentConfirmed,
            PaymentTimedOut,
            StockReserved,
            StockReservationFailed,
            PaymentRefunded,
            OrderShipped,
        ],
    )
    root = _parse(svg.render(diagram, {"Initial": "past", "AwaitingPayment": "current"}))
    groups = {g.get("data-state"): g.get("class") for g in root.iter(f"{NS}g")}
    assert set(groups) == set(diagram.states)
    assert groups["Initial"] == "state past"
    assert groups["AwaitingPayment"] == "state current"
    assert groups["Final"] == "state terminal"
    arrows = [p for p in root.iter(f"{NS}path") if p.get("class") == "edge"]
    pairs = {(t.source, t.target) for t in diagram.transitions}
    # One arrow per pair of states, one from the start dot, one to each end marker.
    assert len(arrows) == len(pairs) + 1 + len(diagram.terminals)
    labels = " ".join("".join(t.itertext()) for t in root.iter(f"{NS}text"))
    assert "StockReservationFailed /" in labels and "Send(RefundPayment)" in labels
    width, height = float(root.get("width", 0)), float(root.get("height", 0))
    assert width > 300 and height > 500


def test_names_labels_and_counts_are_escaped() -> None:
    odd = Transition("<b>", "Done & dusted", 'Go"quote / Send(<i>)')
    diagram = Diagram(
        "W<", "<b>", ("<b>", "Done & dusted"), (odd,), {"Done & dusted": ("completed",)}
    )
    text = svg.render(diagram, title="<script>")
    root = _parse(text)
    assert "<b>" not in text and "<script>" not in text
    assert {g.get("data-state") for g in root.iter(f"{NS}g")} == {"<b>", "Done & dusted"}
    assert root.find(f"{NS}title") is not None
    assert root.findtext(f"{NS}title") == "<script>"
