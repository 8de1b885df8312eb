"""The messages of the traffic-fine workflow: its inputs and its outputs."""

from __future__ import annotations

from typing import TypeAlias

import attrs

from decider import message


@attrs.frozen(kw_only=True)
class SpeedingViolation:
    """An offense: driving faster than the limit."""

    maximum_speed: str
    measured_speed: str


@attrs.frozen(kw_only=True)
class ParkingViolation:
    """An offense: parking where it is not allowed."""

    location: str


Offense: TypeAlias = SpeedingViolation | ParkingViolation


@message("fines.PoliceReportPublished")
@attrs.frozen(kw_only=True)
class PoliceReportPublished:
    """The police published a report of one offense."""

    police_report_id: str
    offense: Offense


@message("fines.TrafficFineSystemNumberGenerated")
@attrs.frozen(kw_only=True)
class TrafficFineSystemNumberGenerated:
    """The fine's unique system number was generated."""

    police_report_id: str
    number: str


@message("fines.TrafficFineManualIdentificationCodeGenerated")
@attrs.frozen(kw_only=True)
class TrafficFineManualIdentificationCodeGenerated:
    """The code that lets a person without a digital identity reach the fine was generated."""

    police_report_id: str
    number: str
    code: str


@message("fines.GenerateTrafficFineSystemNumber")
@attrs.frozen(kw_only=True)
class GenerateTrafficFineSystemNumber:
    """Generate the fine's system number."""

    police_report_id: str


@message("fines.GenerateTrafficFineManualIdentificationCode")
@attrs.frozen(kw_only=True)
class GenerateTrafficFineManualIdentificationCode:
    """Generate the manual identification code for a fine."""

    police_report_id: str
    system_number: str


@message("fines.IssueTrafficFine")
@attrs.frozen(kw_only=True)
class IssueTrafficFine:
    """Issue the fine to whoever the vehicle is registered to."""

    police_report_id: str
    system_number: str
    manual_identification_code: str


Input: TypeAlias = (
    PoliceReportPublished
    | TrafficFineSystemNumberGenerated
    | TrafficFineManualIdentificationCodeGenerated
)
Output: TypeAlias = (
    GenerateTrafficFineSystemNumber | GenerateTrafficFineManualIdentificationCode | IssueTrafficFine
)
