"""The page: every component of the app in the order it shows, and `build`, which makes the Blocks.

Which handler each event calls (inputs, outputs, API names) is webui/wiring.py; the rules live in the
handlers (webui/handlers.py, webui/service.py). app.py only starts things.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from types import SimpleNamespace

import gradio as gr

from webui import ids
from webui import kept as kp
from webui import render as r
from webui import render_bundle as rb
from webui import render_controls as rc
from webui import render_forget as rf
from webui import render_history as rh
from webui import render_proofs as rp
from webui import render_supersede as rs
from webui import render_verify as rv
from webui.config import delete_cache
from webui.inputs import K_DEFAULT, K_MAX, K_MIN, MAX_MESSAGE_CHARS, MAX_POLICY_CHARS, MAX_QUERY_CHARS
from webui.service import Service
from webui.tamper import DEFAULT_TARGET, TARGETS
from webui.wiring import wire

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
# translated); tests/faces/test_browser_narrow.py checks it stays hidden.
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
@media (max-width: 600px) {{
  /* On a phone the Verify tab's grouped checks are stacked (issue 31): a four-column table squeezed its sentences to
     a letter per line. Each row becomes a block: the result and what it is about on one line, the sentence below. */
  #{ids.VERIFY_VERDICT} table, #{ids.VERIFY_VERDICT} tbody, #{ids.VERIFY_VERDICT} tr {{ display: block; width: 100%; }}
  #{ids.VERIFY_VERDICT} thead {{ display: none; }}
  #{ids.VERIFY_VERDICT} td {{ display: inline-block; border: none !important; padding: 2px 6px !important; }}
  #{ids.VERIFY_VERDICT} td:nth-child(3) {{ display: block; }}
  #{ids.VERIFY_VERDICT} td:nth-child(4)::before {{ content: "checks: "; }}
  #{ids.VERIFY_VERDICT} tr {{ border-bottom: 1px solid var(--border-color-primary); padding: 4px 0; }}
}}
#{ids.CHAT_HISTORY} .top-panel button[aria-label="Clear"],
#{ids.CHAT_HISTORY} .top-panel button:has(rect[x="12"][y="2"][width="8"][height="2"]) {{
  display: none !important;
}}
"""




class Page(SimpleNamespace):
    """Every component of the page, under the name `_components` gives it (the wiring reads `page.chatbot`, …)."""


def build(service: Service, *, retention_hours: float | None = None) -> gr.Blocks:
    """The Blocks app over one service (one data directory)."""
    with gr.Blocks(
        title="Memory Receipt Engine", analytics_enabled=False, delete_cache=delete_cache(retention_hours)
    ) as demo:
        wire(demo, _components(service), service)
    return demo


def _components(service: Service) -> Page:
    """Lay the page out (inside the Blocks being built); every local name below is a component of it."""
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
        # A refused confirmation (e.g. a reason that repeats the memory) is said here, beside the reason, and the panel
        # stays usable: raising gr.Error would put an "Error" overlay on every output of the event (issue 28 §6).
        forget_status = gr.Markdown(elem_id=ids.FORGET_STATUS, latex_delimiters=[])
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
                    # no autofocus: on a phone, focusing the box scrolled the page 634 px down on load, past the
                    # title and the tabs (issue 31); Verify must be one tap away
                )
                send = gr.Button("Send", variant="primary", elem_id=ids.CHAT_SEND, scale=1)
            # Ask me first (issue 11): off by default, stated plainly; when on, the proposal waits below the last turn.
            with gr.Row():
                consent_on = gr.Checkbox(False, label=rc.CONSENT_LABEL, elem_id=ids.CONSENT_TOGGLE, scale=1)
                consent_note = gr.Markdown(rc.CONSENT_OFF, elem_id=ids.CONSENT_NOTE, scale=3)
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
            # Two tools, each under its own heading (issue 31: one accordion held three at once): a copy of the receipt
            # to share with memories withheld, and what to do about one memory of the answer.
            with gr.Accordion("Share this receipt with memories withheld", open=False, elem_id=ids.TURN_SHARE_TOOLS):
                withhold = gr.CheckboxGroup(
                    label="Memories to withhold from the copy (the signature still verifies)",
                    elem_id=ids.WITHHOLD_PICK,
                )
                withheld_dl = gr.DownloadButton(rf.WITHHELD_LABEL, interactive=False, elem_id=ids.WITHHELD_DOWNLOAD)
            with gr.Accordion(
                "A memory of this answer: forget, revoke or restore it; correct it", open=False, elem_id=ids.TURN_TOOLS
            ):
                turn = _memory_controls(
                    "turn",
                    lambda: gr.Dropdown(
                        label="A memory of this turn (to forget, revoke or restore)", choices=[], elem_id=ids.FORGET_TURN_PICK, scale=4
                    ),
                    ids.FORGET_TURN_BUTTON,
                    ids.REVOKE_TURN_BUTTON,
                    ids.RESTORE_TURN_BUTTON,
                    ids.CONTROL_TURN_STATUS,
                )
            # The proposal of the next turn (ask me first) comes after everything about the last one (its stamps, its
            # receipt, the tools on its memories): above the stamps it read as if they were its own (issue 31).
            waiting = gr.State(None)  # webui.controls.Waiting, server-side: the page cannot change the token
            with gr.Column(visible=False, elem_id=ids.CONSENT_BOX) as consent_box:
                consent_md = gr.Markdown(elem_id=ids.CONSENT_PROPOSAL, latex_delimiters=[])
                consent_pick = gr.CheckboxGroup(
                    label="Memories the model may see (ticked ones only)", elem_id=ids.CONSENT_PICK
                )
                with gr.Row():
                    consent_send = gr.Button(rc.CONSENT_SEND_LABEL, variant="primary", elem_id=ids.CONSENT_SEND)
                    consent_cancel = gr.Button(rc.CONSENT_CANCEL_LABEL, elem_id=ids.CONSENT_CANCEL)

        with gr.Tab("Search", id="search", elem_id=ids.TAB_SEARCH):
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
                as_of = gr.Textbox(
                    label="as of (events; empty: now)", placeholder="now", max_length=20, elem_id=ids.SEARCH_AS_OF, scale=1
                )
                as_of_state = gr.State("")  # what the box holds: /search keeps its six inputs for API clients
            search_status = gr.Markdown(elem_id=ids.SEARCH_STATUS, latex_delimiters=[])
            results = gr.Dataframe(
                headers=r.SEARCH_HEADERS,
                interactive=False,
                wrap=True,
                column_widths=r.SEARCH_WIDTHS,
                elem_id=ids.SEARCH_RESULTS,
            )
            search_explain = gr.Markdown(elem_id=ids.SEARCH_EXPLANATION, latex_delimiters=[])
            search = _memory_controls(
                "search",
                lambda: gr.Textbox(
                    label="seq to forget, revoke or restore (select a result, or type it)",
                    elem_id=ids.FORGET_SEARCH_SEQ,
                    scale=4,
                ),
                ids.FORGET_SEARCH_BUTTON,
                ids.REVOKE_SEARCH_BUTTON,
                ids.RESTORE_SEARCH_BUTTON,
                ids.CONTROL_SEARCH_STATUS,
            )

        with gr.Tab("Verify", id="verify", elem_id=ids.TAB_VERIFY):
            upload = gr.File(
                label="Receipt (.json)", file_types=[".json"], type="filepath", elem_id=ids.VERIFY_UPLOAD
            )
            with gr.Accordion(rp.POLICY_ACCORDION, open=False, elem_id=ids.VERIFY_POLICY_BOX):  # issue 33: witnesses
                gr.Markdown(rp.policy_note(service.engine.witnesses is not None))
                verify_policy = gr.Textbox(
                    label=rp.POLICY_LABEL, placeholder=rp.POLICY_PLACEHOLDER, lines=3, max_length=MAX_POLICY_CHARS, elem_id=ids.VERIFY_POLICY
                )
                # what Verify reads: a State, so `/verify` keeps its two inputs for API clients (theirs is left empty)
                policy_state = gr.State(None)
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
            with gr.Accordion(rp.PROOFS_LABEL, open=False, elem_id=ids.VERIFY_PROOFS):  # issue 33: one per memory
                proof_pick = gr.Dropdown(label=rp.PICK_LABEL, choices=[], elem_id=ids.PROOF_PICK)
                proof_status = gr.Markdown(rp.PROOFS_HELP, elem_id=ids.PROOF_STATUS, latex_delimiters=[])
                proof_text = gr.Code(
                    label=rp.CODE_LABEL, interactive=False, show_line_numbers=False, buttons=["copy"], elem_id=ids.PROOF_TEXT
                )
                proof_dl = gr.DownloadButton(rp.DOWNLOAD_LABEL, interactive=False, elem_id=ids.PROOF_DOWNLOAD)

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
            ledger = _memory_controls(
                "ledger",
                lambda: gr.Textbox(
                    label="seq to forget, revoke or restore (select a row, or type it)",
                    elem_id=ids.FORGET_LEDGER_SEQ,
                    scale=4,
                ),
                ids.FORGET_LEDGER_BUTTON,
                ids.REVOKE_LEDGER_BUTTON,
                ids.RESTORE_LEDGER_BUTTON,
                ids.CONTROL_LEDGER_STATUS,
            )
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

        with gr.Tab("Import", id="import", elem_id=ids.TAB_IMPORT) as import_tab:
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

    controls = {f"{where}_{name}": c for where, row in (("turn", turn), ("search", search), ("ledger", ledger)) for name, c in row.items()}
    controls["turn_pick"] = controls.pop("turn_seq")
    names = {name: value for name, value in locals().items() if name not in ("service", "turn", "search", "ledger", "controls")}
    return Page(**names, **controls)


CORRECT_HEADING = "**Correct it** — a new statement supersedes this memory (nothing is deleted); **History** lists every statement of it."


def _memory_controls(
    where: str, pick: Callable[[], gr.components.Component], forget: str, revoke: str, restore: str, status: str
) -> dict[str, gr.components.Component]:
    """The rows under a picked memory, the same in the turn tools, Manual search and Ledger (`where`):
    the memory picked (`pick` makes it), Forget…, Revoke / Restore with a reason, Correct this and History.
    The components by name (seq, forget, revoke, restore, reason, control_md, correct_text, correct, history,
    history_md); Page names them `<where>_<name>`."""
    with gr.Row():
        seq = pick()
        forget_btn = gr.Button("🗑 Forget…", elem_id=forget, scale=1)
        revoke_btn = gr.Button(rc.REVOKE_LABEL, elem_id=revoke, scale=1)
        restore_btn = gr.Button(rc.RESTORE_LABEL, elem_id=restore, scale=1)
    gr.Markdown(rc.NOTE, elem_id=f"{ids.NOT_ERASURE_NOTE}-{where}")
    reason = gr.Textbox(label=rc.REASON_LABEL, max_length=rc.MAX_REASON, elem_id=f"{ids.CONTROL_REASON}-{where}")
    control_md = gr.Markdown(elem_id=status, latex_delimiters=[])
    gr.Markdown(CORRECT_HEADING)  # a second tool on the same memory: its own heading, so each reads alone
    with gr.Row():
        correct_text = gr.Textbox(
            label=rs.CORRECT_TEXT_LABEL, max_length=MAX_MESSAGE_CHARS, elem_id=f"{ids.CORRECT_TEXT}-{where}", scale=4
        )
        correct = gr.Button(rs.CORRECT_LABEL, elem_id=f"{ids.CORRECT_BUTTON}-{where}", scale=1)
        history = gr.Button(rs.HISTORY_LABEL, elem_id=f"{ids.HISTORY_BUTTON}-{where}", scale=1)
    history_md = gr.Markdown(elem_id=f"{ids.MEMORY_HISTORY}-{where}", latex_delimiters=[])
    return {
        "seq": seq, "forget": forget_btn, "revoke": revoke_btn, "restore": restore_btn, "reason": reason,
        "control_md": control_md, "correct_text": correct_text, "correct": correct, "history": history,
        "history_md": history_md,
    }  # fmt: skip
