"""Reviewer finding (issue 28 item 7, checked session keys): the check only applies to a key of exactly the generated
shape (43 + '-' + 6). A generated key pasted cut off (its last character lost), with the check characters dropped
after the '-', with a character of its body deleted or doubled, or with its '-' turned into '_', is no longer of that
shape, so it is taken as an *old-format* key: it opens another, empty session with only a warning — the very
"typo or truncated paste" the check was added to refuse (webui/sessions.py's docstring). Every mutation below is of
a key generated now; none is 43 characters long (an old generated key's length)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from webui.service import Service
from webui.sessions import SessionKeyError, new_session_key

MUTATIONS = {
    "last-character-lost": lambda k: k[:-1],
    "check-characters-dropped": lambda k: k[:44],
    "body-character-deleted": lambda k: k[:10] + k[11:],
    "body-character-doubled": lambda k: k[:10] + k[10] + k[10:],
    "dash-as-underscore": lambda k: k[:43] + "_" + k[44:],
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_a_damaged_generated_key_is_refused_not_opened_as_an_old_format_key(mutation: str, tmp_path: Path) -> None:
    eng = Engine(tmp_path / "data", llm=LLM(api_key=""))
    svc = Service(eng)
    try:
        key = new_session_key()
        eng.remember(svc.session(key), "I adopted a grey cat named Miso")  # the person's real session
        damaged = MUTATIONS[mutation](key)
        assert damaged != key and len(damaged) != 43
        with pytest.raises(SessionKeyError):
            svc.session(damaged)
    finally:
        eng.close()
        svc.downloads.close()
