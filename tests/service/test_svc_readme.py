"""The README's service section, run as written, line by line, on a fresh store."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
from pathlib import Path

from decider import Lifecycle
from decider.processors.operate.listing import InstanceQuery, list_instances
from decider.stores.sqlite import SqliteEventStore
from samples.traffic_fine.app import ISSUED_STREAM, app
from tests.support.service import ROOT, decider_command
from tests.support.waiting import wait_until


def readme_service_block() -> list[list[str]]:
    """The commands of the README's ``sh`` block that publishes, as argument lists."""
    readme = (ROOT / "README.md").read_text()
    found = re.findall(r"```sh\n(.*?)```", readme, re.DOTALL)
    blocks = [block for block in found if "decider publish" in block]
    assert len(blocks) == 1, "one README block shows publish, run, status and show"
    return [shlex.split(line, comments=True) for line in blocks[0].splitlines() if line.strip()]


def test_the_readme_service_section_works_top_to_bottom_on_a_fresh_store(tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    service: subprocess.Popen[bytes] | None = None
    outputs: dict[str, str] = {}
    try:
        for argv in readme_service_block():
            if argv[0] == "export":
                env.update(item.partition("=")[::2] for item in argv[1:])
                continue
            assert argv[0] == "decider", argv
            if argv[1] == "run":
                log = (tmp_path / "service.log").open("w")
                service = subprocess.Popen(
                    [*decider_command(), *argv[1:]],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=tmp_path,
                    env=env,
                )
                _wait_for_both_reports(tmp_path / "events.db", service)
                continue
            result = subprocess.run(
                [*decider_command(), *argv[1:]],
                capture_output=True,
                text=True,
                cwd=tmp_path,
                env=env,
                timeout=60,
                check=False,
            )
            assert result.returncode == 0, (argv, result.stderr)
            outputs[argv[1]] = result.stdout
        assert service is not None, "the block runs the service"
        service.send_signal(signal.SIGTERM)
        assert service.wait(timeout=30) == 0
    finally:
        if service is not None and service.poll() is None:
            service.kill()
            service.wait()
    assert outputs["status"].startswith("app traffic-fines: 2 instances")
    assert "status: completed" in outputs["show"]
    assert "parked commands: none" in outputs["parked"]


def _wait_for_both_reports(db: Path, service: subprocess.Popen[bytes]) -> None:
    def done() -> bool:
        assert service.poll() is None, "the service exited"
        if not db.exists():
            return False
        store = SqliteEventStore(db)
        try:
            page = list_instances(store, app, InstanceQuery())
            completed = [i for i in page.instances if i.status is Lifecycle.COMPLETED]
            return len(completed) == 2 and len(store.read_stream(ISSUED_STREAM)) == 1
        finally:
            store.close()

    wait_until(done, 60, "both README reports to complete")
