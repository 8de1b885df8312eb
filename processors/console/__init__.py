"""The web console: instances, their timelines and diagrams, parked commands, skipped inputs.

``decider console --app APP --store URI [--port N] [--allow-actions]`` serves it on loopback;
:class:`~decider.processors.console.server.Console` and
:func:`~decider.processors.console.server.serve` run it from Python. Pages are rendered on the
server with the standard library (``http.server``) and carry no JavaScript; diagrams are SVG
drawn on the server (:mod:`decider.processors.console.svg`). See docs/service.md.
"""

from decider.processors.console.server import Console, make_server, serve

__all__ = ["Console", "make_server", "serve"]
