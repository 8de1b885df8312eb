"""Partitions of an app's work, and a process's membership in its group through leases."""
