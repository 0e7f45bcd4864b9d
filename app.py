"""`python app.py [--data DIR] [--host H] [--port P]`: the Memory Receipt Engine web app and MCP server.

Wiring only: the components, their elem_ids and which handler each event
calls. Every rule lives in `webui/` (see webui/handlers.py and webui/service.py).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from receipts.keys import KeyConfigError
from webui import ids
from webui import kept as kp
from webui import render as r
from webui import render_bundle as rb
from webui import render_controls as rc
from webui import render_forget as rf
from webui import render_history as rh
from webui import render_supersede as rs
from webui import render_verify as rv
from webui.bundle_ui import BundleUI
from webui.config import (
    Config,
    ConfigError,
    delete_cache,
    launch_options,
    open_engine,
    parse_args,
    sweep_interval,
    warn_loose_modes,
)
from webui.forget import recover
from webui.handlers import UI, raised_at
from webui.inputs import K_DEFAULT, K_MAX, K_MIN, MAX_MESSAGE_CHARS, MAX_QUERY_CHARS
from webui.mcp_tools import make_tools
from webui.retention import Sweeper, sweep
from webui.service import Service
from webui.tamper import DEFAULT_TARGET, TARGETS

log = logging.getLogger("app")
UNDOCUMENTED = "undocumented"  # callable by gradio_client (the browser's events), but not an MCP tool

INTRO = """\
# 🧾 Memory Receipt Engine
A chat assistant whose memory is a hash-chained ledger. Under every answer: the *stamps* — exactly which
memories the model was handed — and a signed **receipt** you can verify here or offline.
"""


# Tables a phone can read (issue 18): short columns keep their one-line values whole, only text columns wrap (at
# word boundaries; a word longer than its column is broken only there), and a table wider than the screen scrolls
# sideways. The Dataframes get pixel widths from webui/render.py; the stamps are a Markdown table.
# The chat's trash icon is hidden: it emptied the view only, and read as "deleted my memories" (forgetting is
# the ledger's business). Gradio 6.31 has no option to drop it, so it is matched by its icon (its label is
# translated); tests/test_browser_narrow.py checks it stays hidden.
CSS = f"""
#{ids.STAMPS} table, #{ids.CHAT_HISTORY} .message table {{
  display: block; max-width: 100%; overflow-x: auto; border-collapse: collapse;
}}
#{ids.STAMPS} th, #{ids.STAMPS} td, #{ids.CHAT_HISTORY} .message th, #{ids.CHAT_HISTORY} .message td {{
  white-space: nowrap; word-break: normal; overflow-wrap: normal;
}}
#{ids.STAMPS} td:nth-child(4), #{ids.CHAT_HISTORY} .message td:nth-child(4) {{
  white-space: normal; min-width: 12em; overflow-wrap: anywhere;
}}
@media (max-width: 480px) {{
  #{ids.STAMPS} th, #{ids.STAMPS} td, #{ids.CHAT_HISTORY} .message th, #{ids.CHAT_HISTORY} .message td {{
    padding: 4px 6px !important;
  }}
  #{ids.STAMPS} td:nth-child(4), #{ids.CHAT_HISTORY} .message td:nth-child(4) {{ min-width: 9em; }}
}}
#{ids.SEARCH_RESULTS} .table-wrap, #{ids.LEDGER_EVENTS} .table-wrap, #{ids.VERIFY_REPORT} .table-wrap {{
  overflow-x: auto;
}}
#{ids.SEARCH_RESULTS} [role=columnheader] span, #{ids.LEDGER_EVENTS} [role=columnheader] span,
#{ids.SEARCH_RESULTS} [role=gridcell]:not([data-col="4"]) span,
#{ids.LEDGER_EVENTS} [role=gridcell]:not([data-col="3"]) span {{
  white-space: nowrap !important; word-break: normal !important; overflow-wrap: normal !important;
}}
#{ids.SEARCH_RESULTS} [role=gridcell][data-col="4"] span, #{ids.LEDGER_EVENTS} [role=gridcell][data-col="3"] span {{
  white-space: normal !important; word-break: normal !important; overflow-wrap: anywhere !important;
}}
#{ids.CHAT_HISTORY} .top-panel button[aria-label="Clear"],
#{ids.CHAT_HISTORY} .top-panel button:has(rect[x="12"][y="2"][width="8"][height="2"]) {{
  display: none !important;
}}
"""


# After a Forget… button: bring the confirmation (above the tabs) into view.
SHOW_FORGET_BOX = f"() => {{ const el = document.getElementById('{ids.FORGET_BOX}'); if (el) el.scrollIntoView({{block: 'center'}}); }}"


def build(service: Service, *, retention_hours: float | None = None) -> gr.Blocks:
    """The Blocks app over one service (one data directory)."""
    ui = UI(service)
    bui = BundleUI(service)
    with gr.Blocks(
        title="Memory Receipt Engine", analytics_enabled=False, delete_cache=delete_cache(retention_hours)
    ) as demo:
        key_state = gr.BrowserState(
            None,
            storage_key="mre-session-key",
            # Not a secret (the page carries it); tied to the signing key so a new data directory starts afresh.
            secret=hashlib.sha256(b"mre-browser-state:" + service.key_id.encode()).hexdigest()[:32],
        )
        kept_state = gr.BrowserState(None, storage_key=kp.STORAGE_KEY, secret=kp.STATE_SECRET)
        gr.Markdown(INTRO)
        with gr.Column(visible=False, elem_id=ids.HISTORY_BOX) as history_box:
            history_md = gr.Markdown(elem_id=ids.HISTORY_WARNING, latex_delimiters=[])
            with gr.Row():
                kept_dl = gr.DownloadButton(rh.KEPT_LABEL, visible=False, elem_id=ids.HISTORY_KEPT_DOWNLOAD)
                current_dl = gr.DownloadButton(rh.CURRENT_LABEL, visible=False, elem_id=ids.HISTORY_CURRENT_DOWNLOAD)
                accept_btn = gr.Button(rh.ACCEPT_LABEL, visible=False, elem_id=ids.HISTORY_ACCEPT)
        with gr.Accordion("Your session", open=False):
            session_md = gr.Markdown(elem_id=ids.SESSION_ID)
            history_status = gr.Markdown(elem_id=ids.HISTORY_STATUS, latex_delimiters=[])
            with gr.Row():
                key_box = gr.Textbox(
                    label="Session key (secret — paste another key and press Enter to open that session)",
                    type="password",
                    buttons=["copy"],
                    elem_id=ids.SESSION_KEY,
                    scale=4,
                )
                new_btn = gr.Button("New session", elem_id=ids.NEW_SESSION, scale=1)
            gr.Markdown("**Danger zone** — deletes this session's ledger, receipts and index rows for good.")
            forget_session_btn = gr.Button(
                "🗑 Forget this whole session…", variant="stop", size="sm", elem_id=ids.FORGET_SESSION_BUTTON
            )
        # The one confirmation every Forget… opens: what goes, then Confirm / Cancel, then the certificate.
        pending = gr.State(None)  # webui.forget.Pending, server-side: the page cannot change what it confirms
        with gr.Column(visible=False, elem_id=ids.FORGET_BOX) as forget_box:
            forget_md = gr.Markdown(elem_id=ids.FORGET_PREVIEW, latex_delimiters=[])
            reason = gr.Textbox(
                label="Reason (optional; kept in the erasure record for good, so do not repeat what you forget)",
                max_length=2000,
                elem_id=ids.FORGET_REASON,
            )
            with gr.Row():
                confirm_btn = gr.Button(rf.CONFIRM_LABEL, variant="stop", elem_id=ids.FORGET_CONFIRM)
                cancel_btn = gr.Button(rf.CANCEL_LABEL, elem_id=ids.FORGET_CANCEL)
                cert_dl = gr.DownloadButton(rf.CERTIFICATE_LABEL, visible=False, elem_id=ids.FORGET_CERTIFICATE)

        with gr.Tabs(elem_id=ids.TABS):
            with gr.Tab("Chat", id="chat", elem_id=ids.TAB_CHAT):
                gr.Markdown(r.provider_now(service.engine.llm.describe()), elem_id=ids.PROVIDER)
                chatbot = gr.Chatbot(
                    elem_id=ids.CHAT_HISTORY,
                    height=480,
                    latex_delimiters=[],
                    feedback_options=None,
                    show_label=False,
                    buttons=["copy", "copy_all"],  # no "share" (to Hugging Face): nothing leaves this app
                )
                with gr.Row():
                    msg = gr.Textbox(
                        placeholder=f"Say something (up to {MAX_MESSAGE_CHARS} characters) and press Enter",
                        show_label=False,
                        elem_id=ids.CHAT_INPUT,
                        scale=6,
                        autofocus=True,
                    )
                    send = gr.Button("Send", variant="primary", elem_id=ids.CHAT_SEND, scale=1)
                # Ask me first (issue 11): off by default, stated plainly; when on, the proposal waits here.
                with gr.Row():
                    consent_on = gr.Checkbox(False, label=rc.CONSENT_LABEL, elem_id=ids.CONSENT_TOGGLE, scale=1)
                    consent_note = gr.Markdown(rc.CONSENT_OFF, elem_id=ids.CONSENT_NOTE, scale=3)
                waiting = gr.State(None)  # webui.controls.Waiting, server-side: the page cannot change the token
                with gr.Column(visible=False, elem_id=ids.CONSENT_BOX) as consent_box:
                    consent_md = gr.Markdown(elem_id=ids.CONSENT_PROPOSAL, latex_delimiters=[])
                    consent_pick = gr.CheckboxGroup(
                        label="Memories the model may see (ticked ones only)", elem_id=ids.CONSENT_PICK
                    )
                    with gr.Row():
                        consent_send = gr.Button(rc.CONSENT_SEND_LABEL, variant="primary", elem_id=ids.CONSENT_SEND)
                        consent_cancel = gr.Button(rc.CONSENT_CANCEL_LABEL, elem_id=ids.CONSENT_CANCEL)
                k_chat = gr.Slider(
                    K_MIN,
                    K_MAX,
                    value=K_DEFAULT,
                    step=1,
                    precision=0,
                    label="K: memories handed to the model",
                    elem_id=ids.CHAT_K,
                )
                stamps = gr.Markdown(r.NO_STAMPS, elem_id=ids.STAMPS, latex_delimiters=[])
                download = gr.DownloadButton(
                    "⬇ Download receipt (after the first answer)", interactive=False, elem_id=ids.RECEIPT_DOWNLOAD
                )
                receipt_state = gr.State(None)  # the receipt id the turn tools below are about
                with gr.Accordion(
                    "Withhold, forget, revoke or restore a memory of the latest answer", open=False, elem_id=ids.TURN_TOOLS
                ):
                    withhold = gr.CheckboxGroup(
                        label="Share the receipt with these memories withheld (the signature still verifies)",
                        elem_id=ids.WITHHOLD_PICK,
                    )
                    withheld_dl = gr.DownloadButton(rf.WITHHELD_LABEL, interactive=False, elem_id=ids.WITHHELD_DOWNLOAD)
                    with gr.Row():
                        turn_pick = gr.Dropdown(
                            label="A memory of this turn (to forget, revoke or restore)", choices=[], elem_id=ids.FORGET_TURN_PICK, scale=4
                        )
                        turn_forget = gr.Button("🗑 Forget…", elem_id=ids.FORGET_TURN_BUTTON, scale=1)
                        turn_revoke = gr.Button(rc.REVOKE_LABEL, elem_id=ids.REVOKE_TURN_BUTTON, scale=1)
                        turn_restore = gr.Button(rc.RESTORE_LABEL, elem_id=ids.RESTORE_TURN_BUTTON, scale=1)
                    gr.Markdown(rc.NOTE, elem_id=f"{ids.NOT_ERASURE_NOTE}-turn")
                    turn_reason = gr.Textbox(label=rc.REASON_LABEL, max_length=rc.MAX_REASON, elem_id=f"{ids.CONTROL_REASON}-turn")
                    turn_control_md = gr.Markdown(elem_id=ids.CONTROL_TURN_STATUS, latex_delimiters=[])
                    with gr.Row():
                        turn_correct_text = gr.Textbox(
                            label=rs.CORRECT_TEXT_LABEL, max_length=MAX_MESSAGE_CHARS, elem_id=f"{ids.CORRECT_TEXT}-turn", scale=4
                        )
                        turn_correct = gr.Button(rs.CORRECT_LABEL, elem_id=f"{ids.CORRECT_BUTTON}-turn", scale=1)
                        turn_history = gr.Button(rs.HISTORY_LABEL, elem_id=f"{ids.HISTORY_BUTTON}-turn", scale=1)
                    turn_history_md = gr.Markdown(elem_id=f"{ids.MEMORY_HISTORY}-turn", latex_delimiters=[])

            with gr.Tab("Manual search", id="search", elem_id=ids.TAB_SEARCH):
                with gr.Row():
                    query = gr.Textbox(
                        label=f"Search this session's memories (any words, up to {MAX_QUERY_CHARS:,} characters)",
                        elem_id=ids.SEARCH_QUERY,
                        scale=6,
                    )
                    search_btn = gr.Button("Search", variant="primary", elem_id=ids.SEARCH_BUTTON, scale=1)
                with gr.Row():
                    k_search = gr.Slider(
                        K_MIN,
                        K_MAX,
                        value=K_DEFAULT,
                        step=1,
                        precision=0,
                        label="K: results at most",
                        elem_id=ids.SEARCH_K,
                        scale=4,
                    )
                    include_revoked = gr.Checkbox(
                        False, label="include revoked memories", elem_id=ids.SEARCH_INCLUDE_REVOKED, scale=1
                    )
                    include_superseded = gr.Checkbox(
                        False, label=rs.INCLUDE_SUPERSEDED_LABEL, elem_id=ids.SEARCH_INCLUDE_SUPERSEDED, scale=1
                    )
                    explain_hits = gr.Checkbox(False, label="explain each hit", elem_id=ids.SEARCH_EXPLAIN, scale=1)
                search_status = gr.Markdown(elem_id=ids.SEARCH_STATUS, latex_delimiters=[])
                results = gr.Dataframe(
                    headers=r.SEARCH_HEADERS,
                    interactive=False,
                    wrap=True,
                    column_widths=r.SEARCH_WIDTHS,
                    elem_id=ids.SEARCH_RESULTS,
                )
                search_explain = gr.Markdown(elem_id=ids.SEARCH_EXPLANATION, latex_delimiters=[])
                with gr.Row():
                    search_seq = gr.Textbox(
                        label="seq to forget, revoke or restore (select a result, or type it)",
                        elem_id=ids.FORGET_SEARCH_SEQ,
                        scale=4,
                    )
                    search_forget = gr.Button("🗑 Forget…", elem_id=ids.FORGET_SEARCH_BUTTON, scale=1)
                    search_revoke = gr.Button(rc.REVOKE_LABEL, elem_id=ids.REVOKE_SEARCH_BUTTON, scale=1)
                    search_restore = gr.Button(rc.RESTORE_LABEL, elem_id=ids.RESTORE_SEARCH_BUTTON, scale=1)
                gr.Markdown(rc.NOTE, elem_id=f"{ids.NOT_ERASURE_NOTE}-search")
                search_reason = gr.Textbox(label=rc.REASON_LABEL, max_length=rc.MAX_REASON, elem_id=f"{ids.CONTROL_REASON}-search")
                search_control_md = gr.Markdown(elem_id=ids.CONTROL_SEARCH_STATUS, latex_delimiters=[])
                with gr.Row():
                    search_correct_text = gr.Textbox(
                        label=rs.CORRECT_TEXT_LABEL, max_length=MAX_MESSAGE_CHARS, elem_id=f"{ids.CORRECT_TEXT}-search", scale=4
                    )
                    search_correct = gr.Button(rs.CORRECT_LABEL, elem_id=f"{ids.CORRECT_BUTTON}-search", scale=1)
                    search_history = gr.Button(rs.HISTORY_LABEL, elem_id=f"{ids.HISTORY_BUTTON}-search", scale=1)
                search_history_md = gr.Markdown(elem_id=f"{ids.MEMORY_HISTORY}-search", latex_delimiters=[])

            with gr.Tab("Verify a receipt", id="verify", elem_id=ids.TAB_VERIFY):
                upload = gr.File(
                    label="Receipt (.json)", file_types=[".json"], type="filepath", elem_id=ids.VERIFY_UPLOAD
                )
                with gr.Row():
                    verify_btn = gr.Button("Verify", variant="primary", elem_id=ids.VERIFY_BUTTON)
                    target = gr.Dropdown(
                        choices=[(label, key) for key, label in TARGETS.items()],
                        value=DEFAULT_TARGET,
                        label="Change one byte of…",
                        elem_id=ids.TAMPER_TARGET,
                    )
                    tamper_btn = gr.Button("🔨 Tamper with it", elem_id=ids.TAMPER_BUTTON)
                verdict = gr.Markdown(rv.VERIFY_HELP, elem_id=ids.VERIFY_VERDICT, latex_delimiters=[])
                with gr.Accordion(rv.RAW_ROWS_LABEL, open=False, elem_id=ids.VERIFY_RAW):  # the summary is above
                    report = gr.Dataframe(
                        headers=rv.REPORT_HEADERS,
                        interactive=False,
                        wrap=True,
                        column_widths=rv.REPORT_WIDTHS,
                        elem_id=ids.VERIFY_REPORT,
                    )
                tamper_dl = gr.DownloadButton(
                    "⬇ Download the tampered copy", interactive=False, elem_id=ids.TAMPER_DOWNLOAD
                )

            with gr.Tab("Ledger", id="ledger", elem_id=ids.TAB_LEDGER) as ledger_tab:
                refresh = gr.Button("Refresh", elem_id=ids.LEDGER_REFRESH)
                ledger_status = gr.Markdown(elem_id=ids.LEDGER_STATUS, latex_delimiters=[])
                events = gr.Dataframe(
                    headers=r.LEDGER_HEADERS,
                    interactive=False,
                    wrap=True,
                    column_widths=r.LEDGER_WIDTHS,
                    elem_id=ids.LEDGER_EVENTS,
                )
                with gr.Row():
                    ledger_seq = gr.Textbox(
                        label="seq to forget, revoke or restore (select a row, or type it)",
                        elem_id=ids.FORGET_LEDGER_SEQ,
                        scale=4,
                    )
                    ledger_forget = gr.Button("🗑 Forget…", elem_id=ids.FORGET_LEDGER_BUTTON, scale=1)
                    ledger_revoke = gr.Button(rc.REVOKE_LABEL, elem_id=ids.REVOKE_LEDGER_BUTTON, scale=1)
                    ledger_restore = gr.Button(rc.RESTORE_LABEL, elem_id=ids.RESTORE_LEDGER_BUTTON, scale=1)
                gr.Markdown(rc.NOTE, elem_id=f"{ids.NOT_ERASURE_NOTE}-ledger")
                ledger_reason = gr.Textbox(label=rc.REASON_LABEL, max_length=rc.MAX_REASON, elem_id=f"{ids.CONTROL_REASON}-ledger")
                ledger_control_md = gr.Markdown(elem_id=ids.CONTROL_LEDGER_STATUS, latex_delimiters=[])
                with gr.Row():
                    ledger_correct_text = gr.Textbox(
                        label=rs.CORRECT_TEXT_LABEL, max_length=MAX_MESSAGE_CHARS, elem_id=f"{ids.CORRECT_TEXT}-ledger", scale=4
                    )
                    ledger_correct = gr.Button(rs.CORRECT_LABEL, elem_id=f"{ids.CORRECT_BUTTON}-ledger", scale=1)
                    ledger_history = gr.Button(rs.HISTORY_LABEL, elem_id=f"{ids.HISTORY_BUTTON}-ledger", scale=1)
                ledger_history_md = gr.Markdown(elem_id=f"{ids.MEMORY_HISTORY}-ledger", latex_delimiters=[])
                checkpoint = gr.Code(
                    language="json", label="Latest signed checkpoint", interactive=False, elem_id=ids.LEDGER_CHECKPOINT
                )
                # Take your memory with you (issue 13): this session only, as a signed bundle or readable Markdown.
                gr.Markdown(rb.EXPORT_HELP)
                with gr.Row():
                    export_btn = gr.Button(rb.EXPORT_LABEL, elem_id=ids.EXPORT_BUNDLE)
                    export_md_btn = gr.Button(rb.EXPORT_MARKDOWN_LABEL, elem_id=ids.EXPORT_MARKDOWN)
                export_status = gr.Markdown(elem_id=ids.EXPORT_STATUS, latex_delimiters=[])
                with gr.Row():
                    bundle_dl = gr.DownloadButton(rb.BUNDLE_DOWNLOAD_LABEL, visible=False, elem_id=ids.BUNDLE_DOWNLOAD)
                    markdown_dl = gr.DownloadButton(rb.MARKDOWN_DOWNLOAD_LABEL, visible=False, elem_id=ids.MARKDOWN_DOWNLOAD)
                gr.Markdown(r.key_markdown(service.key_id), elem_id=ids.LEDGER_KEY_ID)
                gr.Code(
                    service.public_key_text,
                    language="json",
                    label="Public key (signing.pub)",
                    interactive=False,
                    elem_id=ids.LEDGER_PUBLIC_KEY,
                )
                gr.DownloadButton(
                    "⬇ Download signing.pub", value=service.public_key_path, elem_id=ids.LEDGER_KEY_DOWNLOAD
                )

            with gr.Tab("Import a bundle", id="import", elem_id=ids.TAB_IMPORT) as import_tab:
                import_upload = gr.File(
                    label="Session bundle (.mre.zip)", file_types=[".zip"], type="filepath", elem_id=ids.IMPORT_UPLOAD
                )
                with gr.Row():
                    import_unverified = gr.Checkbox(False, label=rb.UNVERIFIED_LABEL, elem_id=ids.IMPORT_UNVERIFIED, scale=3)
                    import_btn = gr.Button(rb.IMPORT_LABEL, variant="primary", elem_id=ids.IMPORT_BUTTON, scale=1)
                import_result = gr.Markdown(rb.IMPORT_HELP, elem_id=ids.IMPORT_RESULT, latex_delimiters=[])
                import_report = gr.Dataframe(
                    headers=rb.BUNDLE_HEADERS,
                    interactive=False,
                    wrap=True,
                    column_widths=rb.BUNDLE_WIDTHS,
                    elem_id=ids.IMPORT_REPORT,
                )
                imported_list = gr.Markdown(rb.NO_IMPORTS, elem_id=ids.IMPORTED_LIST, latex_delimiters=[])
                with gr.Row():
                    imported_pick = gr.Dropdown(label=rb.IMPORTED_PICK_LABEL, choices=[], elem_id=ids.IMPORTED_PICK, scale=3)
                    imported_query = gr.Textbox(
                        label=f"Search it (any words, up to {MAX_QUERY_CHARS:,} characters)", elem_id=ids.IMPORTED_QUERY, scale=3
                    )
                    imported_k = gr.Slider(
                        K_MIN, K_MAX, value=K_DEFAULT, step=1, precision=0, label="K", elem_id=ids.IMPORTED_K, scale=1
                    )
                    imported_search_btn = gr.Button("Search", elem_id=ids.IMPORTED_SEARCH_BUTTON, scale=1)
                imported_status = gr.Markdown(elem_id=ids.IMPORTED_STATUS, latex_delimiters=[])
                imported_results = gr.Dataframe(
                    headers=r.SEARCH_HEADERS,
                    interactive=False,
                    wrap=True,
                    column_widths=r.SEARCH_WIDTHS,
                    elem_id=ids.IMPORTED_RESULTS,
                )

        session_outputs = [key_state, key_box, session_md, chatbot, stamps, download]
        ledger_outputs = [ledger_status, events, checkpoint]
        cleared = [search_status, results, verdict, report, search_explain]
        history_inputs = [key_state, kept_state]
        history_outputs = [kept_state, history_box, history_md, kept_dl, current_dl, accept_btn, history_status]
        forget_outputs = [pending, forget_box, forget_md, reason, confirm_btn, cancel_btn, cert_dl]
        turn_tool_outputs = [receipt_state, turn_pick, withhold, withheld_dl]
        export_outputs = [export_status, bundle_dl, markdown_dl]
        imported_outputs = [imported_list, imported_pick]
        import_cleared = [import_result, import_report, imported_status, imported_results]

        # After every load, session switch and turn: prove today's history extends the checkpoint this browser kept.
        loaded = demo.load(ui.start, [key_state], session_outputs, api_name="start", api_visibility=UNDOCUMENTED)
        loaded.then(ui.turn_tools, [key_state], turn_tool_outputs, api_name="start_tools", api_visibility="private")
        consent_setting = [consent_on, consent_note]
        loaded.then(ui.load_consent, [key_state], consent_setting, api_name="start_consent", api_visibility="private")
        loaded.then(bui.imported, [key_state], imported_outputs, api_name="start_imported", api_visibility="private")
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
            (new_btn.click, ui.new_session, None, "new_session"),
            (key_box.submit, ui.resume, [key_box], "resume"),
        ):
            switched = trigger(fn, inputs, session_outputs, api_name=name, api_visibility=UNDOCUMENTED)
            # A confirmation still open was about the other session: it closes (nothing changes).
            switched.then(ui.cancel_forget, None, forget_outputs, api_name=f"{name}_forget", api_visibility="private")
            switched.then(  # a revoke/restore line, and a reason typed for it, were about the other session
                lambda: ("",) * 12,
                None,
                [
                    *(turn_control_md, search_control_md, ledger_control_md, turn_reason, search_reason, ledger_reason),
                    *(turn_correct_text, search_correct_text, ledger_correct_text),
                    *(turn_history_md, search_history_md, ledger_history_md),
                ],
                api_name=f"{name}_controls",
                api_visibility="private",
            )
            # the other session's exports, import result and imported sessions
            switched.then(bui.exports_cleared, None, export_outputs, api_name=f"{name}_exports", api_visibility="private")
            switched.then(bui.import_cleared, None, import_cleared, api_name=f"{name}_import", api_visibility="private")
            switched.then(bui.imported, [key_state], imported_outputs, api_name=f"{name}_imported", api_visibility="private")
            switched.then(  # the other session's "ask me first", as it was left there
                ui.load_consent,
                [key_state],
                consent_setting,
                api_name=f"{name}_consent_setting",
                api_visibility="private",
            )
            switched.then(
                ui.consent_closed,
                None,
                [waiting, consent_box, consent_md, consent_pick],
                api_name=f"{name}_consent",
                api_visibility="private",
            )
            switched.then(ui.cleared, None, cleared, api_name=f"{name}_clear", api_visibility="private").then(
                ui.ledger, [key_state], ledger_outputs, api_name=f"{name}_ledger", api_visibility="private"
            ).then(
                ui.turn_tools, [key_state], turn_tool_outputs, api_name=f"{name}_tools", api_visibility="private"
            ).then(
                ui.check_history, history_inputs, history_outputs, api_name=f"{name}_history", api_visibility="private"
            )
        accept_btn.click(
            ui.accept_history, history_inputs, history_outputs, api_name="history_accept", api_visibility=UNDOCUMENTED
        )
        turn = gr.on(
            [msg.submit, send.click],
            ui.chat,
            [msg, chatbot, k_chat, key_state, consent_on],
            [chatbot, msg, stamps, download],
            api_name="chat",
            api_visibility=UNDOCUMENTED,
            show_progress_on=[chatbot],  # an error overlay on the input box would swallow clicks until closed
        )
        # Ask me first: the same message, when the setting is on, is proposed instead (ui.chat then does nothing).
        consent_outputs = [chatbot, msg, waiting, consent_box, consent_md, consent_pick]
        gr.on(
            [msg.submit, send.click],
            ui.propose,
            [msg, chatbot, k_chat, key_state, consent_on, waiting],
            consent_outputs,
            api_name="consent_propose",
            api_visibility=UNDOCUMENTED,
            show_progress_on=[chatbot],
        )
        # The setting is the session's, kept on the server (control.settings): stored when the person changes it,
        # loaded whenever the session loads or switches (below), so a reload or another device never finds it off.
        consent_on.input(
            ui.change_consent,
            [key_state, consent_on],
            [consent_on, consent_note],
            api_name="consent_setting",
            api_visibility=UNDOCUMENTED,
        )
        answered = consent_send.click(
            ui.consent_send,
            [key_state, waiting, consent_pick, chatbot],
            [chatbot, stamps, download, waiting, consent_box],
            api_name="consent_send",
            api_visibility=UNDOCUMENTED,
            show_progress_on=[chatbot],
        )
        for chained, name in ((answered.then, "consent_history"), (answered.failure, "consent_failed_history")):
            chained(ui.check_history, history_inputs, history_outputs, api_name=name, api_visibility="private")
        answered.then(ui.turn_tools, [key_state], turn_tool_outputs, api_name="consent_tools", api_visibility="private")
        consent_cancel.click(
            ui.consent_cancel,
            [key_state, waiting, chatbot],
            consent_outputs,
            api_name="consent_cancel",
            api_visibility=UNDOCUMENTED,
        )
        # After a refused turn too (a ledger edited under the app is then named here): Gradio 6.31's page runs a
        # `.then` only after a success, so the check is chained both ways.
        for chained, name in ((turn.then, "chat_history"), (turn.failure, "chat_failed_history")):
            chained(ui.check_history, history_inputs, history_outputs, api_name=name, api_visibility="private")
        turn.then(ui.turn_tools, [key_state], turn_tool_outputs, api_name="chat_tools", api_visibility="private")
        gr.on(
            [query.submit, search_btn.click, include_revoked.input, explain_hits.input, include_superseded.input],
            ui.search,
            [query, k_search, key_state, include_revoked, explain_hits, include_superseded],
            [search_status, results, search_explain],
            api_name="search",
            api_visibility=UNDOCUMENTED,
        )
        gr.on(
            [upload.upload, verify_btn.click],
            ui.verify,
            [upload, key_state],
            [verdict, report],
            api_name="verify",
            api_visibility=UNDOCUMENTED,
        )
        upload.clear(
            lambda: ui.cleared()[2:4], None, [verdict, report], api_name="verify_clear", api_visibility="private"
        )
        tamper_btn.click(
            ui.tamper,
            [upload, target, key_state],
            [verdict, report, tamper_dl],
            api_name="tamper",
            api_visibility=UNDOCUMENTED,
        )
        gr.on(
            [ledger_tab.select, refresh.click],
            ui.ledger,
            [key_state],
            ledger_outputs,
            api_name="ledger",
            api_visibility=UNDOCUMENTED,
        )

        # Confirm, then refresh everything that may still show the forgotten words: the chat (it reads [forgotten]),
        # the search results and the Verify tab (cleared), the ledger, the turn tools; then the history check.
        forgot = confirm_btn.click(
            ui.confirm_forget,
            [key_state, pending, reason],
            forget_outputs,
            api_name="forget_confirm",
            api_visibility=UNDOCUMENTED,
        )
        # an export shown before held the forgotten words: its copies were deleted (webui.forget.purge_copies)
        forgot.then(bui.exports_cleared, None, export_outputs, api_name="forget_exports", api_visibility="private")
        forgot.then(
            ui.after_forget, [key_state, pending], session_outputs, api_name="forget_done", api_visibility="private"
        ).then(ui.load_consent, [key_state], consent_setting, api_name="forget_consent", api_visibility="private").then(
            ui.cleared, None, cleared, api_name="forget_clear", api_visibility="private"
        ).then(ui.ledger, [key_state], ledger_outputs, api_name="forget_ledger", api_visibility="private").then(
            ui.turn_tools, [key_state], turn_tool_outputs, api_name="forget_tools", api_visibility="private"
        ).then(ui.check_history, history_inputs, history_outputs, api_name="forget_history", api_visibility="private")
        cancel_btn.click(ui.cancel_forget, None, forget_outputs, api_name="forget_cancel", api_visibility=UNDOCUMENTED)
        for trigger, fn, inputs, name in (
            (turn_forget.click, ui.ask_forget, [key_state, turn_pick], "forget_ask_turn"),
            (search_forget.click, ui.ask_forget, [key_state, search_seq], "forget_ask_search"),
            (search_seq.submit, ui.ask_forget, [key_state, search_seq], "forget_ask_search_seq"),
            (ledger_forget.click, ui.ask_forget, [key_state, ledger_seq], "forget_ask_ledger"),
            (ledger_seq.submit, ui.ask_forget, [key_state, ledger_seq], "forget_ask_ledger_seq"),
            (forget_session_btn.click, ui.ask_forget_session, [key_state], "forget_ask_session"),
        ):
            trigger(fn, inputs, forget_outputs, api_name=name, api_visibility=UNDOCUMENTED).then(
                None, None, None, js=SHOW_FORGET_BOX
            )
        # Revoke / Restore beside each Forget…: the status line there, then the ledger and the search (their labels).
        search_inputs = [query, k_search, key_state, include_revoked, explain_hits, include_superseded]
        for button, fn, seq_box, why, status, name in (
            (turn_revoke, ui.revoke, turn_pick, turn_reason, turn_control_md, "revoke_turn"),
            (turn_restore, ui.restore, turn_pick, turn_reason, turn_control_md, "restore_turn"),
            (search_revoke, ui.revoke, search_seq, search_reason, search_control_md, "revoke_search"),
            (search_restore, ui.restore, search_seq, search_reason, search_control_md, "restore_search"),
            (ledger_revoke, ui.revoke, ledger_seq, ledger_reason, ledger_control_md, "revoke_ledger"),
            (ledger_restore, ui.restore, ledger_seq, ledger_reason, ledger_control_md, "restore_ledger"),
        ):
            button.click(fn, [key_state, seq_box, why], status, api_name=name, api_visibility=UNDOCUMENTED).then(
                ui.ledger, [key_state], ledger_outputs, api_name=f"{name}_ledger", api_visibility="private"
            ).then(
                ui.search_again,
                search_inputs,
                [search_status, results, search_explain],
                api_name=f"{name}_search",
                api_visibility="private",
            )
        # Correct this and History beside them (issue 12): the same places, the same reason box and refreshes.
        for button, seq_box, new_text, why, status, name in (
            (turn_correct, turn_pick, turn_correct_text, turn_reason, turn_control_md, "correct_turn"),
            (search_correct, search_seq, search_correct_text, search_reason, search_control_md, "correct_search"),
            (ledger_correct, ledger_seq, ledger_correct_text, ledger_reason, ledger_control_md, "correct_ledger"),
        ):
            button.click(
                ui.correct, [key_state, seq_box, new_text, why], [status, new_text], api_name=name, api_visibility=UNDOCUMENTED
            ).then(ui.ledger, [key_state], ledger_outputs, api_name=f"{name}_ledger", api_visibility="private").then(
                ui.search_again,
                search_inputs,
                [search_status, results, search_explain],
                api_name=f"{name}_search",
                api_visibility="private",
            )
        for button, seq_box, shown, name in (
            (turn_history, turn_pick, turn_history_md, "history_turn"),
            (search_history, search_seq, search_history_md, "history_search"),
            (ledger_history, ledger_seq, ledger_history_md, "history_ledger"),
        ):
            button.click(ui.memory_history, [key_state, seq_box], shown, api_name=name, api_visibility=UNDOCUMENTED)
        # Bundles (issue 13): exports of the visitor's own session; an import verified first, under the visitor's session.
        export_btn.click(
            bui.export_bundle, [key_state], [export_status, bundle_dl], api_name="bundle_export", api_visibility=UNDOCUMENTED
        )
        export_md_btn.click(
            bui.export_markdown, [key_state], [export_status, markdown_dl], api_name="bundle_markdown", api_visibility=UNDOCUMENTED
        )
        import_btn.click(
            bui.import_bundle,
            [import_upload, import_unverified, key_state],
            [import_result, import_report, imported_list, imported_pick],
            api_name="bundle_import",
            api_visibility=UNDOCUMENTED,
        )
        import_tab.select(bui.imported, [key_state], imported_outputs, api_name="bundle_imported", api_visibility=UNDOCUMENTED)
        gr.on(
            [imported_query.submit, imported_search_btn.click],
            bui.search_imported,
            [imported_pick, imported_query, imported_k, key_state],
            [imported_status, imported_results],
            api_name="bundle_search",
            api_visibility=UNDOCUMENTED,
        )
        results.select(ui.pick_search_row, None, search_seq, api_name="forget_pick_search", api_visibility="private")
        events.select(ui.pick_ledger_row, None, ledger_seq, api_name="forget_pick_ledger", api_visibility="private")
        withhold.input(
            ui.withhold,
            [key_state, receipt_state, withhold],
            withheld_dl,
            api_name="withhold",
            api_visibility=UNDOCUMENTED,
        )
        service.cache_dirs.append(Path(demo.GRADIO_CACHE))  # its copies of downloads and uploads (webui/forget.py)

        for tool in make_tools(service):  # the MCP tools (public API endpoints)
            gr.api(tool, api_name=tool.__name__)
    return demo


@dataclass
class Running:
    """A launched app: stop() closes the server, the sweeper and the download folder."""

    demo: gr.Blocks
    url: str
    service: Service
    sweeper: Sweeper

    def stop(self) -> None:
        self.sweeper.stop()
        self.demo.close()
        self.service.downloads.close()


def start(cfg: Config, *, block: bool = False, quiet: bool = False) -> Running:
    """Open the data directory, sweep, build and launch. With block=False the server runs in a thread."""
    engine = open_engine(cfg)  # a --data whose parent is missing is refused (a typo), unless --create
    warn_loose_modes(cfg.data_dir)  # what the engine creates is private: anything loose was there before
    service = Service(engine)  # its Downloads removes the download folders of app processes that are gone
    demo = build(service, retention_hours=cfg.retention_hours)  # adds Gradio's file cache to service.cache_dirs
    # finish any erasure a crash interrupted, and delete its receipts' copies in those folders, before the index
    # catches up or a visitor arrives
    recover(service)
    for warning in engine.index.catch_up():
        log.warning("%s", warning)
    jobs = [service.downloads.sweep]
    if cfg.retention_hours is not None:
        sweep(engine, cfg.retention_hours)
        jobs.insert(0, lambda: sweep(engine, cfg.retention_hours))
    sweeper = Sweeper(jobs, sweep_interval(cfg.retention_hours))
    sweeper.start()
    demo.queue(default_concurrency_limit=cfg.concurrency)
    running = Running(demo, "", service, sweeper)
    _app, url, _share = demo.launch(prevent_thread_lock=not block, quiet=quiet, css=CSS, **launch_options(cfg))
    running.url = url or f"http://{cfg.host}:{cfg.port}/"
    return running


START_FAILED = (
    "the app could not start; the log line above says where it failed. "
    "Check the data directory with `python -m ledger verify DATA_DIR`"
)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # gradio's own loopback requests
    try:
        cfg = parse_args(argv, os.environ)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        start(cfg, block=True)
    except KeyboardInterrupt:
        return 0
    except (ConfigError, KeyConfigError) as exc:  # --data refused (nothing created), or an unusable key: why
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a start-up failure is one line, not a traceback
        # A fixed sentence: the message of an exception raised while opening the data directory (the index
        # catching up, an erasure finished at start) could quote a ledger line, a memory's words, and its class
        # is an internal name (issue 18). The log line above it has the class and where it was raised.
        log.error("the app could not start (%s at %s)", type(exc).__name__, raised_at(exc))
        print(f"error: {START_FAILED}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
