"""``python -m processors.cli``: the ``decider`` command line."""

from processors.cli import main

raise SystemExit(main())
