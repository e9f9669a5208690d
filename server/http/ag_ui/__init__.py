"""AG-UI: ``POST /ag-ui/{protocol}`` takes AG-UI's ``RunAgentInput`` and streams AG-UI 1.0 events.

One more surface on the run machinery: a run started here is an ordinary request of the protocol
(``runId`` is its request id, ``threadId`` its thread, ``?projectId=`` its project), so it shows in
``GET /api/requests``, has a trace, can be paused with the pause route and followed anywhere. The
request's own events are read through the same follower as every other stream (a dropped
connection pauses the run) and translated one by one:

* ``RUN_STARTED`` first, then the thread's state as ``STATE_SNAPSHOT`` (plain JSON, messages in
  AG-UI's format: see ``state.py`` and ``messages.py``); then, as the run goes, ``text`` →
  ``TEXT_MESSAGE_START/CONTENT/END`` (a message ends at the first event that is not text),
  ``tool_call`` → ``TOOL_CALL_START/ARGS/END``, ``tool_result`` → ``TOOL_CALL_RESULT`` (the output
  when shown, else its status), ``phase_start``/``phase_end`` and the planner's
  ``step_start``/``step_complete`` → ``STEP_STARTED``/``STEP_FINISHED``, every other event →
  ``CUSTOM`` (name: its type, value: its JSON); after each event that is not model text, what changed
  in the thread's state as ``STATE_DELTA`` (JSON Patch against what the stream sent last). Each AG-UI
  event made from one of ours carries that event's JSON as ``rawEvent``.
* At the end, whatever is open is closed (a run may stop mid-phase), the state's last changes go out
  as ``STATE_DELTA``, the thread's messages as ``MESSAGES_SNAPSHOT``, and the last event is
  ``RUN_FINISHED`` or ``RUN_ERROR``: ``final`` finishes as success (``result``: the final event; its
  answer becomes a text message unless it was just streamed), ``cancelled`` with the cancelled
  outcome, ``error`` as ``RUN_ERROR`` (code: its kind).
* A run that stops to wait finishes with the interrupt outcome. A run that stopped at a LangGraph
  ``interrupt`` (or a ``final`` that leaves one pending) names what the thread waits on by the
  LangGraph interrupt's id: a tool call's **approval** (reason ``tool_approval``, ``toolCallId``, the
  call in ``metadata``; see ``approvals.py``) or a question (reason ``input_required``). Any other
  pause names the interrupt ``pause:<requestId>``. The next run answers it with ``resume``: an
  approval's ``payload`` (``"approve"``, ``{"decision": "edit", "args": {...}}``, ``{"decision":
  "reject", "reason": "..."}``; ``cancelled`` rejects) becomes ``Command(resume=payload)`` for the
  request paused there (same request, same ``runId``); a question's starts the thread's next turn with the
  answer (``payload``, a string, or else the new user message); a ``pause:`` interrupt ``resolved``
  continues the paused request (same request, same ``runId``) and ``cancelled`` cancels it. A plain
  new user message answers a question too, as on every other route, but never an approval (409).

What the protocols cannot take is refused with a 4xx before the stream starts: client-side ``tools``
and ``context`` (empty lists are fine), a client ``state`` the server never sent for the thread (409;
the state it sent, a part of it, or ``{}`` is fine: runs start from the thread's checkpoint anyway),
user content other than text, unknown fields. ``forwardedProps`` are the protocol's client settings
(the generic route's ``settings``); the model is the server's default and tool outputs are not shown
(no AG-UI field chooses them). The turn's input is the user messages ending ``messages`` that the
thread does not hold yet; the messages before them are the client's copy of the conversation.
"""

from phasegraph.server.http.ag_ui.routes import ag_ui_routes

__all__ = ["ag_ui_routes"]
