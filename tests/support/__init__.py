"""What the tests share: test apps, stores, PostgreSQL schemas, service processes, waits.

- :mod:`tests.support.apps`: the test workflows and the apps built from them (``Tally``,
  ``Job``, ``Reminder``; ``fines_app`` and ``chores_app`` for ``decider run`` processes).
- :mod:`tests.support.effects`: the side table in which the service apps' handlers record
  their effects, one row per command id.
- :mod:`tests.support.stores`: a fresh store of each kind, and readers of what a store holds.
- :mod:`tests.support.postgres`: the PostgreSQL server of the tests and a fresh schema per test.
- :mod:`tests.support.service`: ``decider run`` processes, started and ended by pid.
- :mod:`tests.support.fines`: the fines app's service runs and the checks at their end.
- :mod:`tests.support.scaleout`: ``--partitions auto`` processes: leases held, the lease history
  checked, and the run with repeated SIGKILLs every store's test shares.
- :mod:`tests.support.waiting`: waiting on a condition with a timeout (never a bare sleep).
"""
