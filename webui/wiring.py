"""Which handler each event of the page calls, with which inputs and outputs, under which API name.

Components come from webui/layout.py (a Page); every rule lives in the handlers (webui/handlers.py,
webui/bundle_ui.py, webui/service.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr

from webui import forget as fg
from webui import ids
from webui.bundle_ui import BundleUI
from webui.handlers import UI
from webui.mcp_tools import make_tools
from webui.proofs_ui import ProofsUI
from webui.service import Service

if TYPE_CHECKING:
    from webui.layout import Page

UNDOCUMENTED = "undocumented"  # callable by gradio_client (the browser's events), but not an MCP tool

# After a Forget… button: bring the confirmation (above the tabs) into view.
SHOW_FORGET_BOX = f"() => {{ const el = document.getElementById('{ids.FORGET_BOX}'); if (el) el.scrollIntoView({{block: 'center'}}); }}"
# After Send with ask me first on: the proposal (below the last turn, webui/layout.py) into view, when it shows.
# The box is made visible by the event's outputs, which the page may render a frame later: looked for a few times.
SHOW_PROPOSAL_JS = (
    "() => { let tries = 0; const show = () => {"
    f" const el = document.getElementById('{ids.CONSENT_BOX}');"
    " if (el && el.offsetParent !== null && el.getBoundingClientRect().height > 0) {"
    " el.scrollIntoView({block: 'nearest'}); return; }"
    " if (++tries < 20) setTimeout(show, 100); }; show(); }"
)


def _only_when(done: Callable[[object], bool], fn: Callable[..., Any], outputs: int, suffix: str) -> Callable[..., Any]:
    """`fn`, run only when `done` holds for the first input (a State the step before set); otherwise every output is
    left as it is."""

    def run(state: object, *args: Any) -> Any:
        if done(state):
            return fn(*args)
        return gr.skip() if outputs == 1 else tuple(gr.skip() for _ in range(outputs))

    run.__name__ = f"{getattr(fn, '__name__', 'step')}_{suffix}"
    return run


def if_forgotten(fn: Callable[..., Any], outputs: int) -> Callable[..., Any]:
    """`fn`, run after a confirmation only when something was forgotten (the pending State reads done): after a
    refusal or a confirmation asked again, the exports, the search, the ledger and the turn tools' pick stay as
    they are (issue 28 §6). The pending State is the first input."""
    return _only_when(lambda state: state in (fg.DONE_EVENTS, fg.DONE_SESSION), fn, outputs, "if_forgotten")


def if_changed(fn: Callable[..., Any], outputs: int) -> Callable[..., Any]:
    """`fn`, run after Revoke, Restore or Correct this only when it changed something (its State reads True): a
    refusal is a status line, not an error (issue 28 §6), so Gradio runs every `.then` after it; the ledger and the
    search stay as they are. The control's State is the first input."""
    return _only_when(lambda state: state is True, fn, outputs, "if_changed")


def wire(demo: gr.Blocks, p: Page, service: Service) -> None:
    """Attach every event of the page `p` (called inside `demo`'s Blocks context)."""
    ui = UI(service)
    bui = BundleUI(service)
    pui = ProofsUI(service)
    session_outputs = [p.key_state, p.key_box, p.session_md, p.chatbot, p.stamps, p.download]
    ledger_outputs = [p.ledger_status, p.events, p.checkpoint]
    cleared = [p.search_status, p.results, p.verdict, p.report, p.search_explain]
    history_inputs = [p.key_state, p.kept_state]
    history_outputs = [p.kept_state, p.history_box, p.history_md, p.kept_dl, p.current_dl, p.accept_btn, p.history_status]
    forget_outputs = [
        p.pending, p.forget_box, p.forget_md, p.reason, p.confirm_btn, p.cancel_btn, p.cert_dl, p.forget_status
    ]
    turn_tool_outputs = [p.receipt_state, p.turn_pick, p.withhold, p.withheld_dl]
    export_outputs = [p.export_status, p.bundle_dl, p.markdown_dl]
    imported_outputs = [p.imported_list, p.imported_pick]
    import_cleared = [p.import_result, p.import_report, p.imported_status, p.imported_results]

    # After every load, session switch and turn: prove today's history extends the checkpoint this browser kept.
    loaded = demo.load(ui.start, [p.key_state], session_outputs, api_name="start", api_visibility=UNDOCUMENTED)
    loaded.then(ui.turn_tools, [p.key_state], turn_tool_outputs, api_name="start_tools", api_visibility="private")
    consent_setting = [p.consent_on, p.consent_note]
    loaded.then(ui.load_consent, [p.key_state], consent_setting, api_name="start_consent", api_visibility="private")
    loaded.then(bui.imported, [p.key_state], imported_outputs, api_name="start_imported", api_visibility="private")
    loaded.then(
        ui.check_history,
        history_inputs,
        history_outputs,
        api_name="history_check",
        api_visibility=UNDOCUMENTED,
        show_progress="hidden",
    )
    loaded.failure(  # the session could not be opened (e.g. its ledger changed under the app): check anyway
        ui.check_history, history_inputs, history_outputs, api_name="load_failed_history", api_visibility="private"
    )
    for trigger, fn, inputs, name in (
        (p.new_btn.click, ui.new_session, None, "new_session"),
        (p.key_box.submit, ui.resume, [p.key_box], "resume"),
    ):
        switched = trigger(fn, inputs, session_outputs, api_name=name, api_visibility=UNDOCUMENTED)
        # A confirmation still open was about the other session: it closes (nothing changes).
        switched.then(ui.cancel_forget, None, forget_outputs, api_name=f"{name}_forget", api_visibility="private")
        switched.then(  # a revoke/restore line, and a reason typed for it, were about the other session
            lambda: ("",) * 12,
            None,
            [
                *(p.turn_control_md, p.search_control_md, p.ledger_control_md, p.turn_reason, p.search_reason, p.ledger_reason),
                *(p.turn_correct_text, p.search_correct_text, p.ledger_correct_text),
                *(p.turn_history_md, p.search_history_md, p.ledger_history_md),
            ],
            api_name=f"{name}_controls",
            api_visibility="private",
        )
        # the other session's exports, import result and imported sessions
        switched.then(bui.exports_cleared, None, export_outputs, api_name=f"{name}_exports", api_visibility="private")
        switched.then(bui.import_cleared, None, import_cleared, api_name=f"{name}_import", api_visibility="private")
        switched.then(bui.imported, [p.key_state], imported_outputs, api_name=f"{name}_imported", api_visibility="private")
        switched.then(  # the other session's "ask me first", as it was left there
            ui.load_consent,
            [p.key_state],
            consent_setting,
            api_name=f"{name}_consent_setting",
            api_visibility="private",
        )
        switched.then(
            ui.consent_closed,
            None,
            [p.waiting, p.consent_box, p.consent_md, p.consent_pick],
            api_name=f"{name}_consent",
            api_visibility="private",
        )
        switched.then(ui.cleared, None, cleared, api_name=f"{name}_clear", api_visibility="private").then(
            ui.ledger, [p.key_state], ledger_outputs, api_name=f"{name}_ledger", api_visibility="private"
        ).then(
            ui.turn_tools, [p.key_state], turn_tool_outputs, api_name=f"{name}_tools", api_visibility="private"
        ).then(
            ui.check_history, history_inputs, history_outputs, api_name=f"{name}_history", api_visibility="private"
        )
    p.accept_btn.click(
        ui.accept_history, history_inputs, history_outputs, api_name="history_accept", api_visibility=UNDOCUMENTED
    )
    turn = gr.on(
        [p.msg.submit, p.send.click],
        ui.chat,
        [p.msg, p.chatbot, p.k_chat, p.key_state, p.consent_on],
        [p.chatbot, p.msg, p.stamps, p.download],
        api_name="chat",
        api_visibility=UNDOCUMENTED,
        show_progress_on=[p.chatbot],  # an error overlay on the input box would swallow clicks until closed
    )
    # Ask me first: the same message, when the setting is on, is proposed instead (ui.chat then does nothing).
    consent_outputs = [p.chatbot, p.msg, p.waiting, p.consent_box, p.consent_md, p.consent_pick]
    proposed = gr.on(
        [p.msg.submit, p.send.click],
        ui.propose,
        [p.msg, p.chatbot, p.k_chat, p.key_state, p.consent_on, p.waiting],
        consent_outputs,
        api_name="consent_propose",
        api_visibility=UNDOCUMENTED,
        show_progress_on=[p.chatbot],
    )
    # the proposal sits below the last turn's stamps and tools (webui/layout.py): brought into view when it shows
    proposed.then(None, None, None, js=SHOW_PROPOSAL_JS)
    # The setting is the session's, kept on the server (control.settings): stored when the person changes it,
    # loaded whenever the session loads or switches (below), so a reload or another device never finds it off.
    p.consent_on.input(
        ui.change_consent,
        [p.key_state, p.consent_on],
        [p.consent_on, p.consent_note],
        api_name="consent_setting",
        api_visibility=UNDOCUMENTED,
    )
    answered = p.consent_send.click(
        ui.consent_send,
        [p.key_state, p.waiting, p.consent_pick, p.chatbot],
        [p.chatbot, p.stamps, p.download, p.waiting, p.consent_box],
        api_name="consent_send",
        api_visibility=UNDOCUMENTED,
        show_progress_on=[p.chatbot],
    )
    for chained, name in ((answered.then, "consent_history"), (answered.failure, "consent_failed_history")):
        chained(ui.check_history, history_inputs, history_outputs, api_name=name, api_visibility="private")
    answered.then(ui.turn_tools, [p.key_state], turn_tool_outputs, api_name="consent_tools", api_visibility="private")
    p.consent_cancel.click(
        ui.consent_cancel,
        [p.key_state, p.waiting, p.chatbot],
        consent_outputs,
        api_name="consent_cancel",
        api_visibility=UNDOCUMENTED,
    )
    # After a refused turn too (a ledger edited under the app is then named here): Gradio 6.31's page runs a
    # `.then` only after a success, so the check is chained both ways.
    for chained, name in ((turn.then, "chat_history"), (turn.failure, "chat_failed_history")):
        chained(ui.check_history, history_inputs, history_outputs, api_name=name, api_visibility="private")
    turn.then(ui.turn_tools, [p.key_state], turn_tool_outputs, api_name="chat_tools", api_visibility="private")
    gr.on(
        [p.query.submit, p.search_btn.click, p.include_revoked.input, p.explain_hits.input, p.include_superseded.input, p.as_of.submit],
        ui.search,
        [p.query, p.k_search, p.key_state, p.include_revoked, p.explain_hits, p.include_superseded, p.as_of_state],
        [p.search_status, p.results, p.search_explain],
        api_name="search",
        api_visibility=UNDOCUMENTED,
    )
    p.as_of.change(lambda text: text, p.as_of, p.as_of_state, queue=False, api_visibility="private")
    p.verify_policy.change(lambda text: text, p.verify_policy, p.policy_state, queue=False, api_visibility="private")
    verified = gr.on(
        [p.upload.upload, p.verify_btn.click],
        ui.verify,
        [p.upload, p.key_state, p.policy_state],
        [p.verdict, p.report],
        api_name="verify",
        api_visibility=UNDOCUMENTED,
    )
    # issue 33: each cited event's tlog-proof, offered once the receipt is checked (the same bytes as the CLI's)
    proof_outputs = [p.proof_pick, p.proof_text, p.proof_dl, p.proof_status]
    verified.then(pui.offer, [p.upload], proof_outputs, api_name="verify_proofs", api_visibility="private")
    p.proof_pick.input(pui.show, [p.upload, p.proof_pick], proof_outputs[1:], api_name="tlog_proof", api_visibility=UNDOCUMENTED)
    p.upload.clear(
        lambda: ui.cleared()[2:4], None, [p.verdict, p.report], api_name="verify_clear", api_visibility="private"
    ).then(pui.cleared, None, proof_outputs, api_name="verify_proofs_clear", api_visibility="private")
    p.tamper_btn.click(
        ui.tamper,
        [p.upload, p.target, p.key_state],
        [p.verdict, p.report, p.tamper_dl],
        api_name="tamper",
        api_visibility=UNDOCUMENTED,
    )
    gr.on(
        [p.ledger_tab.select, p.refresh.click],
        ui.ledger,
        [p.key_state],
        ledger_outputs,
        api_name="ledger",
        api_visibility=UNDOCUMENTED,
    )

    # Confirm, then refresh everything that may still show the forgotten words: the chat (it reads [forgotten]),
    # the search results and the Verify tab (cleared), the ledger, the turn tools; then the history check.
    forgot = p.confirm_btn.click(
        ui.confirm_forget,
        [p.key_state, p.pending, p.reason],
        forget_outputs,
        api_name="forget_confirm",
        api_visibility=UNDOCUMENTED,
    )
    # an export shown before held the forgotten words: its copies were deleted (webui.forget.purge_copies)
    # Each step runs only when something was forgotten (if_forgotten): a refusal leaves every view as it was.
    done = p.pending
    forgot.then(
        if_forgotten(bui.exports_cleared, len(export_outputs)),
        [done],
        export_outputs,
        api_name="forget_exports",
        api_visibility="private",
    )
    forgot.then(
        ui.after_forget, [p.key_state, p.pending], session_outputs, api_name="forget_done", api_visibility="private"
    ).then(
        if_forgotten(ui.load_consent, len(consent_setting)),
        [done, p.key_state],
        consent_setting,
        api_name="forget_consent",
        api_visibility="private",
    ).then(
        if_forgotten(ui.cleared, len(cleared)), [done], cleared, api_name="forget_clear", api_visibility="private"
    ).then(
        if_forgotten(ui.ledger, len(ledger_outputs)),
        [done, p.key_state],
        ledger_outputs,
        api_name="forget_ledger",
        api_visibility="private",
    ).then(
        if_forgotten(ui.turn_tools, len(turn_tool_outputs)),
        [done, p.key_state],
        turn_tool_outputs,
        api_name="forget_tools",
        api_visibility="private",
    ).then(
        if_forgotten(ui.check_history, len(history_outputs)),
        [done, *history_inputs],
        history_outputs,
        api_name="forget_history",
        api_visibility="private",
    )
    p.cancel_btn.click(ui.cancel_forget, None, forget_outputs, api_name="forget_cancel", api_visibility=UNDOCUMENTED)
    for trigger, fn, inputs, name in (
        (p.turn_forget.click, ui.ask_forget, [p.key_state, p.turn_pick], "forget_ask_turn"),
        (p.search_forget.click, ui.ask_forget, [p.key_state, p.search_seq], "forget_ask_search"),
        (p.search_seq.submit, ui.ask_forget, [p.key_state, p.search_seq], "forget_ask_search_seq"),
        (p.ledger_forget.click, ui.ask_forget, [p.key_state, p.ledger_seq], "forget_ask_ledger"),
        (p.ledger_seq.submit, ui.ask_forget, [p.key_state, p.ledger_seq], "forget_ask_ledger_seq"),
        (p.forget_session_btn.click, ui.ask_forget_session, [p.key_state], "forget_ask_session"),
    ):
        trigger(fn, inputs, forget_outputs, api_name=name, api_visibility=UNDOCUMENTED).then(
            None, None, None, js=SHOW_FORGET_BOX
        )
    # Revoke / Restore beside each Forget…: the status line there, then the ledger and the search (their labels).
    search_inputs = [p.query, p.k_search, p.key_state, p.include_revoked, p.explain_hits, p.include_superseded, p.as_of_state]
    # A refusal is the status line (and a toast), not an error (issue 28 §6): each control's own State says whether it
    # changed anything, and the refreshes after it run only then (if_changed). One State per control: a revoke refused
    # while a correction of the same row is still running reads its own outcome.
    search_outputs = [p.search_status, p.results, p.search_explain]

    def refreshed(event: Any, changed: gr.State, name: str) -> None:
        event.then(
            if_changed(ui.ledger, len(ledger_outputs)),
            [changed, p.key_state],
            ledger_outputs,
            api_name=f"{name}_ledger",
            api_visibility="private",
        ).then(
            if_changed(ui.search_again, len(search_outputs)),
            [changed, *search_inputs],
            search_outputs,
            api_name=f"{name}_search",
            api_visibility="private",
        )

    for button, fn, seq_box, why, status, name in (
        (p.turn_revoke, ui.revoke, p.turn_pick, p.turn_reason, p.turn_control_md, "revoke_turn"),
        (p.turn_restore, ui.restore, p.turn_pick, p.turn_reason, p.turn_control_md, "restore_turn"),
        (p.search_revoke, ui.revoke, p.search_seq, p.search_reason, p.search_control_md, "revoke_search"),
        (p.search_restore, ui.restore, p.search_seq, p.search_reason, p.search_control_md, "restore_search"),
        (p.ledger_revoke, ui.revoke, p.ledger_seq, p.ledger_reason, p.ledger_control_md, "revoke_ledger"),
        (p.ledger_restore, ui.restore, p.ledger_seq, p.ledger_reason, p.ledger_control_md, "restore_ledger"),
    ):
        changed = gr.State(False)
        clicked = button.click(
            fn, [p.key_state, seq_box, why], [status, changed], api_name=name, api_visibility=UNDOCUMENTED
        )
        refreshed(clicked, changed, name)
    # Correct this and History beside them (issue 12): the same places, the same reason box and refreshes.
    for button, seq_box, new_text, why, status, name in (
        (p.turn_correct, p.turn_pick, p.turn_correct_text, p.turn_reason, p.turn_control_md, "correct_turn"),
        (p.search_correct, p.search_seq, p.search_correct_text, p.search_reason, p.search_control_md, "correct_search"),
        (p.ledger_correct, p.ledger_seq, p.ledger_correct_text, p.ledger_reason, p.ledger_control_md, "correct_ledger"),
    ):
        changed = gr.State(False)
        clicked = button.click(
            ui.correct,
            [p.key_state, seq_box, new_text, why],
            [status, new_text, changed],
            api_name=name,
            api_visibility=UNDOCUMENTED,
        )
        refreshed(clicked, changed, name)
    for button, seq_box, shown, name in (
        (p.turn_history, p.turn_pick, p.turn_history_md, "history_turn"),
        (p.search_history, p.search_seq, p.search_history_md, "history_search"),
        (p.ledger_history, p.ledger_seq, p.ledger_history_md, "history_ledger"),
    ):
        button.click(ui.memory_history, [p.key_state, seq_box], shown, api_name=name, api_visibility=UNDOCUMENTED)
    # Bundles (issue 13): exports of the visitor's own session; an import verified first, under the visitor's session.
    p.export_btn.click(
        bui.export_bundle, [p.key_state], [p.export_status, p.bundle_dl], api_name="bundle_export", api_visibility=UNDOCUMENTED
    )
    p.export_md_btn.click(
        bui.export_markdown, [p.key_state], [p.export_status, p.markdown_dl], api_name="bundle_markdown", api_visibility=UNDOCUMENTED
    )
    p.import_btn.click(
        bui.import_bundle,
        [p.import_upload, p.import_unverified, p.key_state],
        [p.import_result, p.import_report, p.imported_list, p.imported_pick],
        api_name="bundle_import",
        api_visibility=UNDOCUMENTED,
    )
    p.import_tab.select(bui.imported, [p.key_state], imported_outputs, api_name="bundle_imported", api_visibility=UNDOCUMENTED)
    gr.on(
        [p.imported_query.submit, p.imported_search_btn.click],
        bui.search_imported,
        [p.imported_pick, p.imported_query, p.imported_k, p.key_state],
        [p.imported_status, p.imported_results],
        api_name="bundle_search",
        api_visibility=UNDOCUMENTED,
    )
    p.results.select(ui.pick_search_row, None, p.search_seq, api_name="forget_pick_search", api_visibility="private")
    p.events.select(ui.pick_ledger_row, None, p.ledger_seq, api_name="forget_pick_ledger", api_visibility="private")
    p.withhold.input(
        ui.withhold,
        [p.key_state, p.receipt_state, p.withhold],
        p.withheld_dl,
        api_name="withhold",
        api_visibility=UNDOCUMENTED,
    )
    service.cache_dirs.append(Path(demo.GRADIO_CACHE))  # its copies of downloads and uploads (webui/forget.py)

    for tool in make_tools(service):  # the MCP tools (public API endpoints)
        gr.api(tool, api_name=tool.__name__)
