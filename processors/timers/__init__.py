"""The timer processor: ``Scheduled`` events come back to their workflow when due."""
