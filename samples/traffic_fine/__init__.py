"""The traffic-fine sample: IssueTrafficFineForSpeedingViolation from "The Workflow Pattern"."""

from samples.traffic_fine.workflow import workflow

__all__ = ["workflow"]
