"""The visitor's decisions about a memory (issue 10: forget), one package the app, the CLI and MCP all call.

`control.forget.forget(data_dir, session, seqs)` erases events with proof;
`control.forget.forget_session(data_dir, session)` deletes a whole session;
`control.forget.recover(data_dir)` finishes an erasure a crash interrupted; `control.settle.settle(data_dir, session)`
finishes it (or refuses in one line) before anything of the session is copied out (issue 28).
`control.revoke(data_dir, session, seq)` / `control.restore(...)` (issue 11) take a memory out of retrieval and
bring it back, each a control event in the ledger (control.revocation); the state is derived from the ledger.
`control.supersede(data_dir, session, new_seq, old_seq)` / `control.correct(data_dir, session, old_seq, text)` (issue 12)
record that a newer statement supersedes an older one (control.supersession); `control.history` lists a fact's statements.
The adapters hold no rules: they call these functions and show what they return.
"""

from control.revocation import ControlError, ControlResult, restore, revoke
from control.supersession import SupersedeError, SupersedeResult, correct, history, supersede

__all__ = ["ControlError", "ControlResult", "SupersedeError", "SupersedeResult", "correct", "history", "restore", "revoke", "supersede"]
