"""``python -m decider.processors.cli``: the ``decider`` command line."""

from decider.processors.cli import main

raise SystemExit(main())
