"""The Gradio edge of bundles (issue 13): the Ledger tab's exports and the Import tab. The rules are in
webui/bundles.py (and `bundle`); what is shown is webui/render_bundle.py's.

Exports are refused with a toast (gr.Error, as every other refusal of the page); an import's refusal is its
result — the reason and the rows that refused it, in the result area, like the Verify tab's.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from webui import bundles as bd
from webui import render as r
from webui import render_bundle as rb
from webui.handlers import edge, table, to_gr_error
from webui.inputs import BadInput
from webui.service import Service
from webui.sessions import SessionKeyError, is_session_key


class BundleUI:
    """One method per bundle event; webui/wiring.py wires components to them."""

    def __init__(self, service: Service) -> None:
        self.service = service

    # -- the Ledger tab: exports of the visitor's own session -------------------------------------------------
    @edge
    def export_bundle(self, key: object, progress: gr.Progress = gr.Progress()) -> tuple[Any, ...]:  # noqa: B008
        """Outputs: (status line, bundle download). The progress bar follows the ledger's bytes, then the receipts."""

        def step(done: int, total: int, what: str) -> None:
            progress((done, total), desc=f"exporting the {what}", unit="bytes" if what == "ledger" else "files")

        done = bd.export_bundle(self.service, key, step)
        return rb.export_markdown(done), gr.DownloadButton(
            label=f"{rb.BUNDLE_DOWNLOAD_LABEL} ({done.bytes:,} bytes)", value=str(done.path), visible=True, interactive=True
        )

    @edge
    def export_markdown(self, key: object) -> tuple[Any, ...]:
        """Outputs: (status line, Markdown download)."""
        path, n = bd.export_markdown(self.service, key)
        return rb.markdown_ready(self.service.session(key), n), gr.DownloadButton(
            label=rb.MARKDOWN_DOWNLOAD_LABEL, value=path, visible=True, interactive=True
        )

    @staticmethod
    def exports_cleared() -> tuple[Any, ...]:
        """After a session switch: (status line, bundle download, Markdown download) as on a fresh page."""
        hidden = gr.DownloadButton(value=None, visible=False)
        return "", hidden, hidden

    # -- the Import tab -------------------------------------------------------------------------------------
    def import_bundle(
        self,
        path: object,
        allow_untrusted: object,
        key: object,
        progress: gr.Progress = gr.Progress(),  # noqa: B008 - Gradio's way to ask for a progress bar
    ) -> tuple[Any, ...]:
        """Outputs: (result, check rows, imported list, imported dropdown). The progress bar names the step:
        verifying and importing (the ledger's chain from genesis, every receipt), then the listing."""
        empty = table(rb.BUNDLE_HEADERS, [])
        try:
            progress((0, 2), desc="verifying the bundle and importing it", unit="steps")
            outcome = bd.import_upload(self.service, key, path, allow_untrusted=allow_untrusted is True)
            progress((1, 2), desc="listing your imported sessions", unit="steps")
        except BadInput as exc:
            return f"## ⛔ Not imported\n\n{r.md(str(exc), 600)}", empty, gr.skip(), gr.skip()
        except Exception as exc:  # noqa: BLE001 - the edge
            raise to_gr_error(exc) from None
        listed, pick = self._listing(key, outcome.imported.local if outcome.imported is not None else None)
        return rb.import_markdown(outcome), table(rb.BUNDLE_HEADERS, rb.bundle_rows(outcome.report)), listed, pick

    @edge
    def imported(self, key: object) -> tuple[Any, ...]:
        """Whenever the session loads or switches: (imported list, dropdown)."""
        return self._listing(key, None)

    def _listing(self, key: object, chosen: str | None) -> tuple[Any, ...]:
        origins = bd.imported_sessions(self.service, key) if is_session_key(key) else []
        value = chosen if chosen is not None else (origins[0].local if origins else None)
        return rb.imported_list_markdown(origins), gr.Dropdown(choices=rb.imported_choices(origins), value=value)

    @staticmethod
    def import_cleared() -> tuple[Any, ...]:
        """After a session switch: (result, rows, search status, search results) as on a fresh page."""
        return rb.IMPORT_HELP, table(rb.BUNDLE_HEADERS, []), "", table(r.SEARCH_HEADERS, [])

    def search_imported(self, local: object, query: object, k: object, key: object) -> tuple[Any, ...]:
        """Outputs: (status, results). A refusal replaces the status and empties the table, as Manual search does."""
        try:
            origin, resp = bd.search_imported(self.service, key, local, query, k)
        except (BadInput, SessionKeyError) as exc:
            return r.search_refused(str(exc)), table(r.SEARCH_HEADERS, [])
        except Exception as exc:  # noqa: BLE001 - the edge
            raise to_gr_error(exc) from None
        return (
            rb.imported_search_status(origin, len(resp.results), resp.k, resp.reason),
            table(r.SEARCH_HEADERS, r.search_rows(resp.results)),
        )
