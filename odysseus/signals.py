"""Private blinker signals: other parts subscribe without the run engine knowing them."""

from blinker import Namespace

_signals = Namespace()

#: sent with the Run when a run starts
run_started = _signals.signal("run-started")
#: sent with the Run once its outcome is recorded (status, stop_reason set)
run_finished = _signals.signal("run-finished")
#: sent with (owner, session_id, message_id, role) whenever a message is stored by a run
message_saved = _signals.signal("message-saved")
#: sent by the app with owner=, session_id=, images=[file names] after a session's records are deleted
session_deleted = _signals.signal("session-deleted")
