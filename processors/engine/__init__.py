"""The processing loop every processor runs on: the thread, the batch, committing an outcome,
the classification of failures, a processor's share of its group's work, clocks, reading,
telemetry and logging."""
