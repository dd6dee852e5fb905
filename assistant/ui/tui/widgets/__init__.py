"""The main screen's widgets, one per module: each renders its own part and posts a Message when the user acts
on it; the screen handles the messages and talks to the Session."""

from assistant.ui.tui.widgets.candidate_view import CandidateView
from assistant.ui.tui.widgets.candidates import CandidateTable
from assistant.ui.tui.widgets.demonstrations import DemonstrationList
from assistant.ui.tui.widgets.info import InfoPanel
from assistant.ui.tui.widgets.requirement import RequirementBox
from assistant.ui.tui.widgets.status import StatusBar

__all__ = ["CandidateTable", "CandidateView", "DemonstrationList", "InfoPanel", "RequirementBox", "StatusBar"]
