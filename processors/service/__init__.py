"""The service: every processor of an app in one process, its metrics and its garbage
collector's settings."""
