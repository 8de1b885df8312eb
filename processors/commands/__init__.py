"""The command processor: what workflows sent, carried out by a pool of handlers, retried,
parked, and committed in lanes under the low-water mark."""
