"""What an operator reads and writes through the store, with no service running: instances,
parked commands, skipped inputs, stuck instances, partitions, resets, cancels."""
