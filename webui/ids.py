"""Stable elem_ids of the UI, for the browser tests (import them rather than repeating the strings)."""

SESSION_KEY = "session-key"
SESSION_ID = "session-id"
NEW_SESSION = "new-session"

TABS = "tabs"
TAB_CHAT = "tab-chat"
TAB_SEARCH = "tab-search"
TAB_VERIFY = "tab-verify"
TAB_LEDGER = "tab-ledger"

CHAT_HISTORY = "chat-history"
CHAT_INPUT = "chat-input"
CHAT_SEND = "chat-send"
CHAT_K = "chat-k"
STAMPS = "stamps"
RECEIPT_DOWNLOAD = "receipt-download"
PROVIDER = "provider"

SEARCH_QUERY = "search-query"
SEARCH_K = "search-k"
SEARCH_BUTTON = "search-button"
SEARCH_STATUS = "search-status"
SEARCH_RESULTS = "search-results"

VERIFY_UPLOAD = "verify-upload"
VERIFY_BUTTON = "verify-button"
TAMPER_TARGET = "tamper-target"
TAMPER_BUTTON = "tamper-button"
TAMPER_DOWNLOAD = "tamper-download"
VERIFY_VERDICT = "verify-verdict"
VERIFY_REPORT = "verify-report"
VERIFY_RAW = "verify-raw"  # the accordion holding the raw check rows
VERIFY_POLICY_BOX = "verify-policy-box"  # the accordion holding the witness policy (issue 33)
VERIFY_POLICY = "verify-policy"
VERIFY_PROOFS = "verify-proofs"  # the accordion holding each memory's tlog-proof (issue 33)
PROOF_PICK = "proof-pick"
PROOF_TEXT = "proof-text"
PROOF_DOWNLOAD = "proof-download"
PROOF_STATUS = "proof-status"

LEDGER_REFRESH = "ledger-refresh"
LEDGER_STATUS = "ledger-status"
LEDGER_EVENTS = "ledger-events"
LEDGER_CHECKPOINT = "ledger-checkpoint"
LEDGER_PUBLIC_KEY = "ledger-public-key"
LEDGER_KEY_ID = "ledger-key-id"
LEDGER_KEY_DOWNLOAD = "ledger-key-download"

HISTORY_BOX = "history-box"
HISTORY_WARNING = "history-warning"
HISTORY_KEPT_DOWNLOAD = "history-kept-download"
HISTORY_CURRENT_DOWNLOAD = "history-current-download"
HISTORY_ACCEPT = "history-accept"
HISTORY_STATUS = "history-status"

# Forgetting (issue 10): the entry points, the one confirmation panel they open, and the danger zone.
FORGET_BOX = "forget-box"
FORGET_PREVIEW = "forget-preview"
FORGET_REASON = "forget-reason"
FORGET_STATUS = "forget-status"  # the refusal of a confirmation, under the reason
FORGET_CONFIRM = "forget-confirm"
FORGET_CANCEL = "forget-cancel"
FORGET_CERTIFICATE = "forget-certificate"
FORGET_TURN_PICK = "forget-turn-pick"
FORGET_TURN_BUTTON = "forget-turn-button"
FORGET_SEARCH_SEQ = "forget-search-seq"
FORGET_SEARCH_BUTTON = "forget-search-button"
FORGET_LEDGER_SEQ = "forget-ledger-seq"
FORGET_LEDGER_BUTTON = "forget-ledger-button"
FORGET_SESSION_BUTTON = "forget-session-button"
TURN_TOOLS = "turn-tools"  # the accordion under the stamps: forget, revoke, restore or correct a memory of this turn
TURN_SHARE_TOOLS = "turn-share-tools"  # the accordion under the stamps: a copy of the receipt with memories withheld
WITHHOLD_PICK = "withhold-pick"
WITHHELD_DOWNLOAD = "withheld-download"

# Revoke and restore (issue 11): beside each Forget… entry point, and the search's "include revoked" box.
REVOKE_TURN_BUTTON = "revoke-turn-button"
RESTORE_TURN_BUTTON = "restore-turn-button"
CONTROL_TURN_STATUS = "control-turn-status"
REVOKE_SEARCH_BUTTON = "revoke-search-button"
RESTORE_SEARCH_BUTTON = "restore-search-button"
CONTROL_SEARCH_STATUS = "control-search-status"
SEARCH_INCLUDE_REVOKED = "search-include-revoked"
SEARCH_EXPLAIN = "search-explain"  # the "explain each hit" checkbox
SEARCH_AS_OF = "search-as-of"  # the "as of" box: search the memory as it stood at a ledger size (issue 34)
SEARCH_EXPLANATION = "search-explanation"  # why each hit ranked where it did (under the results)
REVOKE_LEDGER_BUTTON = "revoke-ledger-button"
RESTORE_LEDGER_BUTTON = "restore-ledger-button"
CONTROL_LEDGER_STATUS = "control-ledger-status"
NOT_ERASURE_NOTE = "not-erasure-note"  # the sentence beside the buttons (one per tab: suffixed -turn/-search/-ledger)
CONTROL_REASON = "control-reason"  # the optional reason of a revoke or restore (suffixed -turn/-search/-ledger)

# Ask me first (issue 11): the per-session setting in the chat tab and the consent step under the input.
CONSENT_TOGGLE = "consent-toggle"
CONSENT_NOTE = "consent-note"
CONSENT_BOX = "consent-box"
CONSENT_PROPOSAL = "consent-proposal"
CONSENT_PICK = "consent-pick"
CONSENT_SEND = "consent-send"
CONSENT_CANCEL = "consent-cancel"

# Facts that change (issue 12): beside each Revoke / Restore, suffixed -turn/-search/-ledger like CONTROL_REASON.
CORRECT_TEXT = "correct-text"  # the new statement typed for "Correct this"
CORRECT_BUTTON = "correct-button"
HISTORY_BUTTON = "memory-history-button"
MEMORY_HISTORY = "memory-history"  # the history table of the memory's fact
SEARCH_INCLUDE_SUPERSEDED = "search-include-superseded"

# Session bundles (issue 13): the Ledger tab's exports and the Import tab.
EXPORT_BUNDLE = "export-bundle"
EXPORT_MARKDOWN = "export-markdown"
EXPORT_STATUS = "export-status"
BUNDLE_DOWNLOAD = "bundle-download"
MARKDOWN_DOWNLOAD = "markdown-download"
TAB_IMPORT = "tab-import"
IMPORT_UPLOAD = "import-upload"
IMPORT_UNVERIFIED = "import-unverified"
IMPORT_BUTTON = "import-button"
IMPORT_RESULT = "import-result"
IMPORT_REPORT = "import-report"
IMPORTED_LIST = "imported-list"
IMPORTED_PICK = "imported-pick"
IMPORTED_QUERY = "imported-query"
IMPORTED_K = "imported-k"
IMPORTED_SEARCH_BUTTON = "imported-search-button"
IMPORTED_STATUS = "imported-status"
IMPORTED_RESULTS = "imported-results"
