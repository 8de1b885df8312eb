"""The workflow processors: inputs routed to instances, decided, and recorded (event-sourced
or state-stored), with the instance cache and snapshots."""
