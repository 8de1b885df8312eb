"""What a program outside the service asks of an app: publish inputs, request and wait for the
reply, cancel an instance (``publishing``, ``requests``, ``cancelling``), and
:class:`~decider.processors.client.app.App`, the definition with these as its methods."""
