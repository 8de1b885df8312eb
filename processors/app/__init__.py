"""The definition of an app and the words it writes: the :class:`App` registry of workflows,
handlers and routes, stream names, the processors' own messages, retry policies, errors, and
stored events decoded to the pure core's values."""
