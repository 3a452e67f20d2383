"""The demo's closing summary: one line per scene in an 80-column terminal, failures spelled out."""

from rich.console import Console

from reassigner.dev.harness.monitor import MonitorReport
from reassigner.dev.demo.story import Demo
from reassigner.dev.harness.stage import SceneResult
from reassigner.dev.harness.traffic import TrafficReport

SCENES = [
    SceneResult("1. add two brokers", 115, "65", "65", 80, 6, 2, 2),
    SceneResult("2. decommission a broker", 32, "40", "40", 41, 5, 2, 1),
    SceneResult("3. fail a log dir", 52, "19", "19", 19, 4, 1, 1),
    SceneResult("4. cancel a manual reassignment", 66, "-", "-", 2, 2, 0, 0,
                "FAILED: the first steps copy data: not done after 60 s"),
    SceneResult("5. kill a broker", 44, "26", "26", 26, 4, 1, 1),
    SceneResult("6. bad input", 3, "-", "-", 0, 0, 0, 0),
]


def render(tmp_path, traffic: TrafficReport) -> str:
    console = Console(width=80, record=True, color_system=None)
    demo = Demo(tmp_path / "stack", tmp_path / "cache", console=console, results=list(SCENES))
    demo.monitor_report = MonitorReport()
    demo.summary(traffic, 321)
    return console.export_text()


def test_every_scene_fits_one_line_of_80_columns(tmp_path):
    text = render(tmp_path, TrafficReport(produced=5, acknowledged=5, read=5))
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    for label, row in (("1. add brokers", "65 / 65"), ("2. decommission", "40 / 40"),
                       ("5. kill broker", "26 / 26")):
        assert any(label in line and row in line for line in lines), (label, text)


def test_a_failed_scene_and_a_failed_data_check_say_why(tmp_path):
    traffic = TrafficReport(produced=5, acknowledged=5, read=4, lost=1,
                            missing=["orders-3 #7 (acknowledged at offset 7)"])
    text = " ".join(render(tmp_path, traffic).split())  # as one line: the console wraps at 80
    assert "4. cancel a manual reassignment: FAILED: the first steps copy data" in text
    assert "DATA CHECK FAILED: missing: orders-3 #7 (acknowledged at offset 7)" in text


class PlanAlerts:
    """The `PlanCreated` alerts a scene saw, as the alerts collector hands them out."""

    def __init__(self, *details: dict) -> None:
        self.plans = [{"kind": "PlanCreated", "details": d} for d in details]

    def of_kind(self, kind: str, since: int = 0) -> list[dict]:
        return self.plans[since:] if kind == "PlanCreated" else []


def test_a_count_plan_shows_its_moves_against_its_bound_in_moves(tmp_path):
    demo = Demo(tmp_path / "stack", tmp_path / "cache")
    demo.alerts = PlanAlerts({"replica_moves": "12", "lower_bound": "10"}, {"replica_moves": "3", "lower_bound": "3"})
    assert demo.plan_figures(0) == ("15", "13")
    demo.alerts = PlanAlerts()
    assert demo.plan_figures(0) == ("-", "-")


def test_a_bytes_plan_shows_its_bytes_against_its_bound_in_bytes_not_a_bound_of_zero_moves(tmp_path):
    """A plan made in bytes (`balance.mode=bytes`) proves bytes; its alert has no bound in moves."""
    demo = Demo(tmp_path / "stack", tmp_path / "cache")
    demo.alerts = PlanAlerts({"replica_moves": "7", "balance_mode": "bytes", "bytes_moved": "23400000",
                              "bytes_lower_bound": "21000000"},
                             {"replica_moves": "2", "lower_bound": "2"})
    assert demo.plan_figures(0) == ("9 (23.4 MB)", "21.0 MB")
