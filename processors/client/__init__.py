"""What a program outside the service asks of an app: request and reply."""
