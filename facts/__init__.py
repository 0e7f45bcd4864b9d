"""Facts that change (issue 12): does a new statement make an earlier one no longer true? Pure.

The change detector, in its own room (issue 29): it reads text handed in and returns values. It does no I/O and
imports nothing above itself (`retrieval.text` for folding and stemming, the standard library); it never talks
to a model: `propose` asks one through the `Ask` callable its caller hands it (chat.supersede builds one over
chat.llm.LLM), and code decides what the model proposed. Recording a supersession is control's
(control.supersession); the turn's use of the detector is chat's (chat.supersede).

    detect(new_text, earlier, new_seq=…) -> [Proposal]      the deterministic rules (facts.rules)
    same_fact(new_text, older_text) -> (subject, attribute) | None
    shortlist_query(text) / topic_query(question)           what to search for: earlier statements of a fact
    asked(question) -> Asked | None; answers(asked, text)   what a question asks about (facts.asked)
    asks_about_past(question)                               whether it asks what held before
    resolve(question, statements) -> Resolution             which answering statements are newest, which earlier
    propose(ask, new, shortlist) -> ModelVerdict            the model proposes, code decides (facts.model)
    attribute_name(label)                                   a label of the detector's fixed vocabulary

Below them, and internal: facts.claims reads statements of fact out of one message, with the patterns
(facts.patterns), word lists (facts.lexicon) and value shapes (facts.values) as data; facts.reply reads a model's
reply strictly. docs/RETRIEVAL.md, "Facts that change", has the rules; docs/guides/facts.md what a visitor sees.
"""

from facts.asked import Asked, answers, asked, asks_about_past
from facts.lexicon import attribute_name
from facts.model import (
    ACCEPTOR_RULE,
    FAILURES,
    MAX_PROPOSALS,
    MODEL_PREFIX,
    Ask,
    AskFailed,
    EventLike,
    ModelVerdict,
    Refusal,
    Statement,
    accept,
    build_prompt,
    candidates,
    propose,
)
from facts.resolve import Resolution, resolve
from facts.rules import MAX_READ_CHARS, Proposal, detect, readable, same_fact, shortlist_query, topic_query

__all__ = [
    "ACCEPTOR_RULE",
    "FAILURES",
    "MAX_PROPOSALS",
    "MAX_READ_CHARS",
    "MODEL_PREFIX",
    "Ask",
    "AskFailed",
    "Asked",
    "EventLike",
    "ModelVerdict",
    "Proposal",
    "Refusal",
    "Resolution",
    "Statement",
    "accept",
    "answers",
    "asked",
    "asks_about_past",
    "attribute_name",
    "build_prompt",
    "candidates",
    "detect",
    "propose",
    "readable",
    "resolve",
    "same_fact",
    "shortlist_query",
    "topic_query",
]
