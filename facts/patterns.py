"""The patterns of the supersession detector, as data: which words state which attribute (compiled regexes).

Read top to bottom they are the rules docs/RETRIEVAL.md lists ("Facts that change"):

- CLOSED   phrases whose value is fixed by the phrase ("I quit smoking" -> smoking = non-smoker).
- NOUNS    "my <noun> is V", "V is my <noun>", "switched my <noun> to V", "new <noun>: V".
- THINGS   a value of a named thing: "the dev server runs on port 3000", "standup moved to 9:30".
- HEADS    a verb phrase naming the attribute: "live in", "work at", "drive a", "report to".
- SLOTS    a generic phrase ("I'm at V", "switched to V") that names an attribute only when V is in the
           attribute's word list, or when its sentence carries one of the attribute's cue words.
- LEAVING  a value left behind: "from V to W", "left V for W", "sold the V and bought W", "V and I broke up".
- BOUNDED  what keeps a value from replacing another: a while ("for the summer", "temporarily"), a narrower
           scope ("at work", "on my laptop", "on weekends") or several values told in sequence ("then",
           "after that", "in 2010").

Value parsers live in facts.values; the reading of subjects, negation and markers in
facts.claims.
"""

from __future__ import annotations

import re

from facts import lexicon as lex


def _alts(words: list[str] | tuple[str, ...]) -> str:
    return "|".join(sorted(words, key=len, reverse=True))


RELATION_RE = re.compile(
    rf"(?i)\b(?:my|our)\s+(?:(?:{_alts(lex.RELATION_ADJECTIVES)})[-\s]+)*({_alts(list(lex.RELATIONS))})(?P<of>'s)?"
    r"(?:\s+(?-i:([A-Z][a-z]+)))?(?![\w'-])"
)
OTHER_RE = re.compile(r"(?i)\b(?:he|she|they|you|it|his|her|their|your|someone|somebody|everyone|people|nobody)\b")
SELF_RE = re.compile(r"(?i)\b(?:I|I'm|I've|I'd|I'll|we|we're|we've|me|us|myself)(?![\w'])")
POSSESSIVE_RE = re.compile(r"(?i)\b(?:my|our)\b")
NEGATION_RE = re.compile(
    r"(?i)(?:\b(?:don't|dont|do not|doesn't|does not|didn't|did not|never|no longer|not|isn't|aren't|wasn't|"
    r"used to|stopped|no more|ceased)\b|n't\b)"
)
ANYMORE_RE = re.compile(r"(?i)\b(?:anymore|any more|no more)\b")
HYPOTHETICAL_RE = re.compile(lex.HYPOTHETICAL + r"|(?i:\b(?:when|whenever|until|back then)\b)")
COEXIST_RE = re.compile(rf"(?i)\b(?:{_alts(list(lex.COEXIST_WORDS))})\b")
MARKER_RE = re.compile(rf"(?i)\b(?:{_alts(list(lex.CHANGE_MARKERS))})\b")
SENTENCE_RE = re.compile(r"(?<=[!?])\s+|(?<=\.)(?<!Dr\.)(?<!Mr\.)(?<!Ms\.)(?<!St\.)(?<!Mrs\.)\s+|\n+")
CLAUSE_RE = re.compile(r"\s*[,;:()]\s*|\s+[-–—]\s+|\s+(?:and|but|because|so|though|although|whereas|while)\s+", re.I)

# -- closed phrases: (attribute, value or None for group 1, pattern, negatable) -------------------------------
# a diet word before a dish names the dish, not the speaker's diet ("I cook vegan meals for my sister")
_DISH = r"(?!\s+(?:meals?|food|dish(?:es)?|recipes?|restaurants?|options?|dinners?|lunch(?:es)?|menus?|cafés?|cafes?))"
_COMMUTE = {"cycl": "bike", "bik": "bike", "walk": "foot", "driv": "car", "scoot": "scooter", "run": "foot"}
CLOSED: list[tuple[str, str | None, re.Pattern[str], bool]] = [
    (a, v, re.compile("(?i)" + p), neg)
    for a, v, p, neg in [
        ("diet", "pescatarian", r"\b(?:pescatarian|pescetarian)\b" + _DISH, True),
        ("diet", "pescatarian", r"\beat(?:s|ing)?\s+fish\s+but\s+no(?:t)?\s+(?:other\s+)?meat\b", False),
        ("diet", "pescatarian", r"\beating\s+fish\s+again\b", False),
        ("diet", "vegan", r"\bvegan\b" + _DISH, True),
        ("diet", "keto", r"\bketo(?:genic)?\b" + _DISH, True),
        ("diet", "gluten-free", r"\bgluten[- ]free\b" + _DISH, True),
        ("diet", "vegetarian", r"\b(?:vegetarian|veggie)\b" + _DISH, True),
        ("diet", "vegetarian",
         r"\b(?:don't|do\s+not|no\s+longer|never|stopped|quit|gave\s+up|given\s+up|cut\s+out)\s+(?:eating\s+|eat\s+)?meat\b",
         False),
        ("diet", "omnivore",
         r"\b(?:eat|eats|eating|ate)\s+(?:(?!no\b|not\b|never\b)\w+\s+){0,3}?meat\b|\bmeat\s+(?:again|included)\b|\bback\s+(?:to|on)\s+(?:eating\s+)?meat\b",
         True),
        ("work team", None, r"\b(?:on|in|to|joined)\s+the\s+([a-z]+)\s+team\b", True),
        ("relationship status", None,
         r"\b(?:I'm|I\s+am|we're|we\s+are|I\s+got|we\s+got|I've\s+got|got)\s+(?:now\s+|just\s+|recently\s+|newly\s+|"
         r"officially\s+|not\s+|no\s+longer\s+)?(single|engaged|married|divorced|separated|widowed)\b", True),
        ("relationship status", "engaged",
         r"\b(?:proposed|popped\s+the\s+question)(?:\s+to\s+me)?\s+and\s+I\s+said\s+yes\b|\b(?:proposed|popped\s+the\s+question)\s+to\s+me\b",
         False),
        ("relationship status", "married", r"\btied\s+the\s+knot\b", False),
        ("relationship status", "divorced", r"\bdivorce\s+(?:came\s+through|is\s+final|was\s+finali[sz]ed|went\s+through)\b", False),
        ("smoking", "non-smoker", r"\bsmoke-free\b", False),
        ("smoking", "non-smoker", r"\b(?:quit|stopped|gave\s+up|given\s+up|kicked)\s+(?:smoking|cigarettes)\b", False),
        ("smoking", "non-smoker",
         r"\b(?:don't|do\s+not|never|no\s+longer)\s+smoke\b|\bnon-?smoker\b|\bnever\s+been\s+a\s+smoker\b|\bnot\s+a\s+smoker\b",
         False),
        ("smoking", "smoker",
         r"\b(?:I|we)\s+(?:still\s+)?smoke\b|\bstart(?:ed)?\s+smoking\b|\bsmoking\s+again\b|\b(?:I'm|I\s+am)\s+a\s+smoker\b|"
         r"\bsmoke\s+again\b", True),
        ("commute", None, r"\b(cycl|bik|walk|driv|scoot|run|bus|train|tram)\w*\s+(?:it\s+)?(?:in\s+)?to\s+(?:work|the\s+office)\b",
         True),
        ("commute", None, r"\b(?:go|get|travel|come|head)\s+(?:in\s+)?to\s+(?:work|the\s+office)\s+(?:by|on)\s+"
         r"(train|bus|tram|bike|bicycle|car|foot|tube|metro|scooter|ferry)\b", True),
        ("commute", None,
         r"\b(?:take|takes|taking|took|get|gets|getting|ride|rides|riding|catch|catches|catching)\s+the\s+"
         r"(train|bus|tram|tube|metro|subway|ferry|underground)\s+(?:in\s+)?to\s+(?:work|the\s+office)\b", True),
        ("commute", None, r"\bcommute\s+(?:is\s+(?:now\s+)?)?(?:by|on)\s+(train|bus|tram|bike|bicycle|car|foot|tube|metro|scooter|ferry)\b",
         True),
        ("age", None, r"\b(?:I'm|I\s+am)\s+(\d{1,3})(?:\s+years?\s+old)?(?=\s*(?:now|today|this\s+year|already)?\s*"
         r"(?:[.,;!]|$|as\s+of\b|since\b))",
         False),
        ("age", None, r"\bturned\s+(\d{1,3})\b", False),
        ("hair colour", None,
         rf"\b(?:have|'ve\s+got|has|got)\s+((?:(?:dark|light|bright|pale)\s+)?(?:{_alts(lex.COLOURS)}))\s+hair\b", True),
    ]
]


def commute_value(word: str) -> str:
    w = word.lower()
    for stem, value in _COMMUTE.items():
        if w.startswith(stem):
            return value
    return "bike" if w == "bicycle" else w


# -- nouns: regex of the noun -> attributes tried in order (the first whose value parses) ---------------------
NOUN_ATTRS: list[tuple[str, tuple[str, ...]]] = [
    (r"phone\s+number|mobile\s+number|phone\s+no|cell\s+number|number", ("phone number",)),
    (r"e-?mail\s+address|e-?mail", ("email",)),
    (r"home\s+address|postal\s+address|address", ("address",)),
    (r"phone|mobile|smartphone|handset", ("phone number", "phone")),
    (r"car", ("car",)),
    (r"text\s+editor|code\s+editor|editor|ide", ("editor",)),
    (r"os|operating\s+system|distro", ("os",)),
    (r"web\s+browser|browser", ("browser",)),
    (r"shell", ("shell",)),
    (r"main\s+programming\s+language|main\s+language|programming\s+language|language\s+at\s+work|work\s+language|stack",
     ("work language",)),
    (r"time\s*zone|clock", ("timezone",)),
    (r"gym", ("gym",)),
    (r"medication|medicine|meds|prescription", ("medication",)),
    (r"diet", ("diet",)),
    (r"laptop|notebook", ("laptop",)),
    (r"football\s+team|football\s+club|club", ("football team",)),
    (r"school", ("school",)),
    (r"bank|banking|current\s+account|bank\s+account", ("bank",)),
    (r"mobile\s+network|network|(?:mobile|phone)\s+(?:contract|plan|provider|network|carrier)|carrier|sim", ("mobile network",)),
    (r"broadband\s+provider|broadband|internet\s+provider|internet|isp|wi-?fi\s+provider|wi-?fi", ("broadband",)),
    (r"partner|girlfriend|boyfriend|wife|husband|fianc[eé]e?|other\s+half|spouse", ("partner",)),
    (r"line\s+manager|manager|boss|supervisor|team\s+lead", ("manager",)),
    (r"gp|family\s+doctor|doctor", ("gp",)),
    (r"employer|workplace|company", ("employer",)),
    (r"job|profession|occupation", ("job", "employer")),
    (r"coffee\s+order|coffee|usual\s+order|usual", ("coffee",)),
    (r"hair\s+colou?r|hair", ("hair colour",)),
    (r"(?:[\w-]+\s+)?(?:username|user\s+name|handle)", ("username",)),
    (r"name", ("name",)),
    (r"uni|university|college", ("university",)),
    (r"flat|house|home|apartment|place", ("residence",)),
    (r"favou?rite\s+[a-z]+", ("favourite",)),
]
_NOUNS = "|".join(f"(?:{n})" for n, _ in sorted(NOUN_ATTRS, key=lambda x: len(x[0]), reverse=True))
NOUN_RES = [(re.compile(rf"(?i)(?:{n})\Z"), attrs) for n, attrs in NOUN_ATTRS]
RESIDENCE_NOUNS = frozenset("flat house home apartment place".split())
LEX_ONLY_NOUNS = frozenset(("usual", "usual order"))  # "my usual is …" names a coffee only when it is one
_MODS = r"(?:(?:new|current|usual|main|latest|present|daily|go-to|default|family|primary|regular)\s+)*"
_ADV = r"(?:\s+(?:now|these\s+days|nowadays|at\s+the\s+moment|currently|this\s+year))?"
_REL = _alts(list(lex.RELATIONS))

NOUN_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("my-noun-is", re.compile(
        rf"(?i)(?:\b(?:all\s+)?(?:my|our)\s+(?:(?P<rel>{_REL})'s\s+)?|^\s*){_MODS}(?P<noun>{_NOUNS}){_ADV}\s*"
        r"(?P<cop>is|are|'s|:|=|has\s+changed\s+to|changed\s+to|has\s+become|became|switched\s+to|moved\s+to)\s+"
        r"(?:now\s+|currently\s+|actually\s+|still\s+|officially\s+)?(?:(?P<prep>with|from|at|in|on|for)\s+)?"
        r"(?:called\s+|named\s+)?")),
    ("v-is-my-noun", re.compile(
        rf"(?i)(?P<pre>[^,.;:!?]+?)\s+(?:is|are|'s|has\s+become|have\s+become|became|took\s+over\s+as|is\s+taking\s+over\s+as)"
        rf"\s+(?:now\s+)?(?:my|our)\s+{_MODS}(?P<noun>{_NOUNS})\b")),
    ("made-v-my-noun", re.compile(
        rf"(?i)\b(?:made|make|making|set|picked|chose)\s+(?P<pre>[^,.;:!?]+?)\s+(?:as\s+)?(?:my|our)\s+{_MODS}(?P<noun>{_NOUNS})\b")),
    ("changed-my-noun-to", re.compile(
        rf"(?i)\b(?:changed|switched|moved|transferred|updated|swapped|ported)\s+(?:(?:my|our|the)\s+)?{_MODS}(?P<noun>{_NOUNS})\s+"
        r"(?:over\s+)?(?:from\s+[^,.;!?]+?\s+)?to\s+")),
    ("v-as-my-noun", re.compile(
        r"(?i)\b(?:use|using|uses|got|have|has|drive|drives|run|runs|chose|picked|switched\s+to|moved\s+to|settled\s+on|"
        rf"went\s+with)\s+(?P<pre>[^,.;!?]+?)\s+as\s+(?:my|our)\s+{_MODS}(?P<noun>{_NOUNS})\b")),
    ("new-noun", re.compile(rf"(?i)\b(?:a\s+|my\s+|our\s+)?new\s+(?P<noun>{_NOUNS})\s*(?:is|'s|:|,|-|—)\s+")),
    ("get-my-noun-from", re.compile(rf"(?i)\bget\s+(?:my|our)\s+(?P<noun>{_NOUNS})\s+(?:from|through|with|via)\s+")),
]

# "switched jobs" is a cue for employer; "switched gyms to X" names the gym.
PLURALS = {"jobs": "employer", "employers": "employer", "careers": "job", "gyms": "gym", "banks": "bank",
           "browsers": "browser", "editors": "editor", "shells": "shell", "networks": "mobile network",
           "carriers": "mobile network", "universities": "university", "unis": "university", "phones": "phone",
           "cars": "car", "doctors": "gp", "gps": "gp", "languages": "work language", "distros": "os"}
PLURAL_RE = re.compile(
    rf"(?i)\b(?:changed|switched|moved|swapped|changing|switching)\s+(?P<plural>{_alts(list(PLURALS))})\b"
    r"(?P<to>\s+(?:over\s+)?(?:again\s+)?to\s+)?"
)

# -- things: a value of something named (port, time, hosting, os) --------------------------------------------
_THING = r"(?P<thing>[A-Za-z][\w-]*(?:\s+[A-Za-z][\w-]*){0,2}?)"
THING_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("thing-is-on", re.compile(
        rf"(?i)(?:\b(?:my|the|our)\s+|^\s*){_THING}(?:\s+(?P<port>port))?(?:\s+now)?"
        r"(?:'s|\s+is\s+now|\s+is|\s+runs|\s+listens|\s+sits|\s+starts|\s+happens|\s+lives)\s+(?:now\s+|still\s+)?"
        r"(?:running\s+|listening\s+)?"
        r"(?:(?P<prep>on|at)\s+)?")),
    ("moved-thing-to", re.compile(
        r"(?i)\b(?:moved|switched|changed|set|put|run|ran|running|migrated|reinstalled|host|hosting|hosted|deploy|"
        rf"deployed|bumped|pushed|shifted|brought)\s+(?:(?:my|the|our)\s+)?{_THING}\s+(?P<port>port\s+)?(?:(?:over|up|back|down)\s+)?"
        r"(?:from\s+(?P<old>\S+?)\s+)?(?P<prep>to|on|onto|with|at)\s+")),
    ("thing-runs", re.compile(
        rf"(?i)(?:\b(?:my|the|our)\s+|^\s*){_THING}\s+(?:now\s+)?(?:runs|is\s+running|running)\s+(?=\S)")),
    ("thing-moved-to", re.compile(
        rf"(?i)(?:\b(?:the|our|my)\s+|^\s*){_THING}\s+(?:has\s+)?(?:been\s+)?(?:moved|changed|switched|shifted|pushed|"
        r"bumped)\s+(?:over\s+|back\s+)?to\s+")),
]
THING_REJECT = frozenset(
    """i we you he she it they this that there what which who everything something one mine here today tomorrow
    from to in on at over back out up down away house jobs me us them my our the a an hosting""".split()
)
THING_DROP = frozenset("local daily my our the main new old".split())
APPS = frozenset("app site website web app service".split())
COMPUTERS = frozenset("laptop computer machine pc desktop mac macbook notebook".split())
ON_THING_RE = re.compile(r"(?i)\b(?:on|with|for)\s+(?:my|the|our)\s+(laptop|computer|machine|pc|desktop|mac|macbook|notebook|server)\b")

# -- heads: (attribute, pattern); the value follows the match -----------------------------------------------
HEADS: list[tuple[str, re.Pattern[str]]] = [
    (a, re.compile(r"(?i)\b(?:" + p + r")\s+"))
    for a, p in [
        ("residence", r"(?:live|lives|living|reside|resides|residing)\s+in"),
        ("residence", r"(?:'ve|have|has|'s)\s+(?:been\s+living|lived)"),
        ("residence", r"(?:moved|relocated|emigrated)(?:\s+(?:back|house|over|out|up|down))?\s+to"),
        ("residence", r"based\s+(?:in|out\s+of)|settled\s+(?:down\s+)?in"),
        ("residence", r"(?:bought|got|found|rented|renting|own)\s+(?:a|our|my|the)\s+(?:new\s+)?(?:place|flat|house|home|apartment)\s+in"),
        ("residence", r"^\s*home(?:\s+for\s+(?:me|us))?\s+is(?:\s+now)?(?:\s+in)?"),
        ("residence", r"(?:new|our|my)\s+(?:place|flat|house|home|apartment)\s+in|(?:the|our|my)\s+move\s+to"),
        ("employer", r"(?:work|works|working)\s+(?:at|for)|(?:'ve|have|has)\s+worked\s+(?:at|for)"),
        ("employer", r"employed\s+(?:by|at)|(?:job|position|role)\s+(?:at|with)|(?:hired|taken\s+on)\s+(?:by|at)|took\s+a\s+job\s+(?:at|with)"),
        ("job", r"(?:work|works|working)\s+as|(?:retrained|trained|qualified|requalified)\s+as"),
        ("partner", r"dating|going\s+out\s+with|in\s+a\s+relationship\s+with|engaged\s+to|married\s+to"),
        ("car", r"(?:drive|drives|driving)(?=\s+(?:a|an|the|my)\s)"),
        ("bank", r"bank(?:s|ing)?\s+with|(?:opened|have|got)\s+an?\s+(?:new\s+)?(?:bank\s+|current\s+)?account\s+(?:with|at)"),
        ("mobile network", r"ported\s+(?:my\s+)?(?:phone\s+)?number\s+(?:over\s+)?to"),
        ("hair colour", r"dyed\s+(?:my\s+)?hair(?:\s+(?:back\s+)?to)?"),
        ("university", r"(?:study|studies|studying)\s+at|(?:a\s+)?(?:student|undergrad|postgrad)\s+at"),
        ("manager", r"(?:report|reports|reporting)\s+(?:directly\s+)?to"),
        ("medication", r"(?:take|takes|taking|(?:'ve|have|has)\s+taken|prescribed)"),
        ("football team", r"(?:support|supports|supporting|follow|follows|following)|(?:a|an)\s+fan\s+of"),
        ("school", r"(?:go|goes|going)\s+to|(?:started|starts)\s+at|(?:moved|changed|switched|transferred)\s+(?:schools?\s+)?to"),
        ("wake-up time", r"(?:wake|wakes|woke|waking|get|gets|getting)\s+up\s+at|(?:waking|wake)\s+at"),
        ("wake-up time", r"alarm\s+(?:goes\s+off|goes|is\s+set|'s\s+set|rings|is|set)\s+(?:at|for)|(?:I'm|I\s+am)\s+up\s+at"),
        ("browser", r"browse\s+(?:the\s+web\s+)?(?:with|in|on|using)"),
        ("email", r"(?:reach|email|e-mail|contact|mail)\s+me\s+(?:at|on|via)"),
        ("phone number", r"(?:text|call|ring|reach|message|whatsapp|phone)\s+me\s+(?:on|at)"),
        ("name", r"call\s+me"),
    ]
]
THIRD_PERSON_RE = re.compile(r"(?i)^(?:lives|resides|works|drives|studies|reports|banks|'s)\b")

# Before the value: "Acme hired me", "Dr Nguyen's list", "samk on GitHub".
HIRED_RE = re.compile(
    r"(?P<pre>[^,.;:!?]+?)\s+(?:has\s+)?(?:just\s+)?(?:hired|taken\s+me\s+on|took\s+me\s+on|offered\s+me\s+a\s+job)\b(?:\s+me)?"
)
CALL_HOME_RE = re.compile(r"(?i)\bcall(?:s|ing)?\s+(?P<pre>[^,.;:!?]+?)\s+home\b")
TOGETHER_RE = re.compile(
    r"\b(?P<v>[A-Z][a-z]+)\s+and\s+I\s+(?:are|'re)\s+(?:now\s+)?(?:together|a\s+couple|an\s+item|dating|seeing\s+each\s+other)\b"
)
# "Virgin Media broadband", "an EE contract", "a Monzo account": the value names the thing it is.
_ORG_NOUN = {"broadband": "broadband", "fibre": "broadband", "contract": "mobile network", "sim": "mobile network",
             "plan": "mobile network", "account": "bank", "membership": "gym"}
ORG_NOUN = _ORG_NOUN
ORG_NOUN_RE = re.compile(
    r"(?i)\b(?:got|have|has|use|using|on|with|switched\s+to|moved\s+to|signed\s+up\s+for|opened)\s+(?:a\s+|an\s+)?"
    rf"(?P<pre>(?-i:[A-Z][\w&.+-]*(?:\s+[A-Z][\w&.+-]*){{0,2}}))\s+(?P<noun>{_alts(list(_ORG_NOUN))})\b"
)
RENAMED_RE = re.compile(
    rf"(?i)\b(?:renamed\s+myself|changed\s+my\s+(?:user)?name|go\s+by)\s+(?:to\s+)?(?P<v>[\w.-]+)\s+on\s+(?P<plat>{_alts(lex.PLATFORMS)})\b"
)
DR_LIST_RE = re.compile(r"\bDr\.?\s+(?P<v>[A-Z][a-z]+(?:-[A-Z][a-z]+)?)'s\s+(?:list|books|practice|surgery)\b")
ON_PLATFORM_RE = re.compile(rf"(?i)\b(?:I'm|I\s+am)\s+(?P<v>[\w.-]+)\s+on\s+(?P<plat>{_alts(lex.PLATFORMS)})\b")
EMAIL_CUE_RE = re.compile(r"(?i)\b(?:e-?mail|mail|reach\s+me|contact\s+me|address|write\s+to\s+me|inbox)\b")
EMAIL_RE = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
DATE_LIKE_RE = re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}-\d{1,2}-\d{2,4}\b")
PHONE_NUMBER_RE = re.compile(r"(?<![\w:.])\+?\d[\d -]{6,}\d(?![\w:])")

# -- slots: (name, pattern, [(attribute, "lex" | "cue")]) ---------------------------------------------------
_LEX_SWITCH = ("car", "phone", "editor", "os", "browser", "shell", "work language", "hosting", "coffee", "gym", "timezone")
SLOTS: list[tuple[str, re.Pattern[str], tuple[tuple[str, str], ...]]] = [
    (n, re.compile("(?i)" + p), c)
    for n, p, c in [
        ("I'm in", r"\b(?:I'm|I\s+am|we're|we\s+are|I've\s+been|we've\s+been|I\s+have\s+been)\s+"
         r"(?:now\s+|currently\s+|still\s+|back\s+|finally\s+)?in\s+", (("residence", "cue"),)),
        ("I'm at", r"\b(?:I'm|I\s+am|I've\s+been|I\s+have\s+been)\s+(?:now\s+|currently\s+|still\s+)?(?:working\s+)?at\s+",
         (("employer", "cue"), ("university", "cue"))),
        ("I'm on", r"\b(?:I'm|I\s+am|we're|we\s+are)\s+(?:now\s+|currently\s+|still\s+)?on\s+",
         (("os", "lex"), ("timezone", "lex"), ("browser", "lex"), ("phone", "lex"), ("shell", "lex"), ("medication", "lex"),
          ("mobile network", "cue"))),
        ("on TZ time", r"\bon\s+(?=\S+\s+(?:time|hours)\b)", (("timezone", "lex"),)),
        ("switched to", r"\b(?:switched|switching|changed|upgraded|migrated|converted|went|gone|moved|swapped|downgraded)\s+"
         r"(?:over\s+|back\s+)*to\s+(?:using\s+|drinking\s+)?",
         tuple((a, "lex") for a in _LEX_SWITCH) + (("mobile network", "cue"), ("university", "cue"), ("bank", "cue"),
                                                   ("broadband", "cue"))),
        ("use", r"\b(?:use|using|uses|run|running|runs)\s+",
         tuple((a, "lex") for a in ("editor", "os", "browser", "shell", "work language", "phone", "hosting"))),
        ("code in", r"\b(?:code|coding|program|programming|develop|developing|write\s+code|writing\s+code|"
         r"do\s+(?:all\s+)?(?:my|our)\s+coding|work)\s+in\s+", (("editor", "lex"), ("work language", "lex"))),
        ("write", r"\b(?:write|writing|writes)\s+", (("work language", "lex"),)),
        ("go to", r"\b(?:go|going|goes|train|training|work\s+out|working\s+out)\s+(?:to|at)\s+", (("gym", "lex"), ("gym", "cue"))),
        ("member at", r"\b(?:member|membership)\s+(?:at|of|with)\s+", (("gym", "lex"), ("gym", "cue"))),
        ("order", r"\b(?:order|ordering|orders|drink|drinking|get|getting|have|having)\s+(?=(?:a|an)\s)", (("coffee", "lex"),)),
        ("joined", r"\b(?:joined|signed\s+up\s+(?:with|at|to|for)|started\s+at|started\s+working\s+(?:at|for)|"
         r"transferred\s+to|enrolled\s+at)\s+",
         (("gym", "lex"), ("gym", "cue"), ("employer", "cue"), ("university", "cue"), ("bank", "cue"),
          ("broadband", "cue"), ("mobile network", "cue"))),
        ("became", r"\b(?:became|become|becoming)\s+", (("job", "lex"),)),
        ("have a", r"\b(?:have|has|'ve\s+got|got|own|owns)\s+(?=(?:a|an)\s)", (("car", "lex"), ("phone", "lex"))),
        ("put on", r"\b(?:put|installed|install|installing)\s+", (("os", "lex"),)),
        ("rewrote in", r"\b(?:rewrote|rewritten|rewriting|ported)\s+(?:\w+\s+){0,3}?in\s+", (("work language", "lex"),)),
        ("I'm a", r"\b(?:I'm|I\s+am|I've\s+been|I\s+have\s+been|I\s+was)\s+(?:now\s+|still\s+|no\s+longer\s+|not\s+|actually\s+)?"
         r"(?=(?:a|an)\s)", (("job", "lex"),)),
        # a relation's job: "my sister is a nurse" (the subject is whoever the clause names)
        ("is a", rf"\b(?:my|our)\s+(?:\w+\s+)?(?:{_REL})\s+(?:is|'s)\s+(?:now\s+|still\s+|no\s+longer\s+|not\s+)?(?=(?:a|an)\s)",
         (("job", "lex"),)),
        ("seeing", r"\b(?:seeing|(?:I'm|I\s+am|we're)\s+(?:now\s+)?with)\s+", (("partner", "cue"),)),
        ("went colour", rf"\b(?:went|gone|going)\s+(?=(?:(?:dark|light|bright)\s+)?(?:{_alts(lex.COLOURS)})\b)",
         (("hair colour", "cue"),)),
        ("see Dr", r"\b(?:see|seeing|registered\s+with)\s+(?=Dr\.?\s)", (("gp", "cue"),)),
    ]
]
CUES: dict[str, re.Pattern[str]] = {a: re.compile(rf"(?i)\b(?:{_alts(list(ws))})\b") for a, ws in lex.CUE_WORDS.items()}

# -- leaving a value behind ----------------------------------------------------------------------------------
_CHUNK = r"(?:(?:the|my|our|her|his|their)\s+)?(?:old\s+)?[\w@.:+'&-]+(?:\s+[\w@.:+'&-]+){0,3}?"
_END = r"(?=\s*(?:$|[,.;!?]|\s(?:for|because|since|last|this|in|at|and|but|now|recently|after|when|as|these)\b))"
LEAVING: list[tuple[str, re.Pattern[str]]] = [
    (n, re.compile("(?i)" + p))
    for n, p in [
        ("from-to", r"\b(?:moved|switched|changed|went|upgraded|migrated|transferred|converted|swapped|jumped)\b[^.;!?]*?"
         rf"\bfrom\s+(?P<old>{_CHUNK})\s+(?:over\s+)?to\s+(?P<new>{_CHUNK}){_END}"),
        ("left-for", rf"\b(?:left|quit)\s+(?P<old>{_CHUNK})\s+(?:and\s+(?:joined|started\s+at|went\s+to|moved\s+to|"
         rf"signed\s+up\s+with)|for)\s+(?P<new>{_CHUNK}){_END}"),
        ("sold-bought", rf"\b(?:sold|traded\s+in|got\s+rid\s+of|gave\s+away|scrapped)\s+(?P<old>{_CHUNK})\s+"
         rf"(?:and\s+(?:bought|got|picked\s+up|replaced\s+it\s+with)|for)\s+(?P<new>{_CHUNK}){_END}"),
        ("dropped-for", rf"\b(?:dropped|cancelled|canceled|ditched|left|quit)\s+(?P<old>{_CHUNK})\s+and\s+"
         rf"(?:signed\s+up\s+(?:with|to|at)|joined|switched\s+to|moved\s+to|went\s+with|got)\s+(?P<new>{_CHUNK}){_END}"),
        ("instead-of", rf"\binstead\s+of\s+(?P<old>{_CHUNK}){_END}"),
        ("replaced-with", rf"\b(?:replaced|swapped|exchanged)\s+(?P<old>{_CHUNK})\s+(?:with|for)\s+(?P<new>{_CHUNK}){_END}"),
        ("is-gone", r"(?:^|[,;:]\s*|\b(?:the|my|our)\s+)(?P<old>(?-i:[A-Z])[\w.+-]*(?:\s+[\w.+-]+){0,2}?)\s+(?:is|'s)\s+"
         r"(?:gone|out|history|sold|no\s+more)\b"),
        ("closed-account", rf"\bclosed\s+(?:my|the|our)\s+(?P<old>{_CHUNK})\s+(?:account|one)\b"),
        ("broke-up", r"(?-i:(?P<old>[A-Z][a-z]+))\s+and\s+I\s+(?:have\s+)?(?:broke|broken|split)\s+up"),
        ("broke-up", r"\b(?:broke|broken|split)\s+up\s+with\s+(?-i:(?P<old>[A-Z][a-z]+))"),
        ("gone-off", rf"\b(?:gone\s+off|went\s+off|moved\s+on\s+from|moved\s+away\s+from|moved\s+out\s+of|done\s+with|"
         rf"finished\s+with)\s+(?P<old>{_CHUNK}){_END}"),
    ]
]


# -- what keeps a new value from replacing the old one (issue 12, review D) ---------------------------------------
# A while: "I moved to London for the summer" is a stay, not a new home.
TEMPORARY_RE = re.compile(
    r"(?i)\b(?:temporarily|temporary|short[- ]term|for\s+(?:the|this|a|one|two|three|a\s+few|a\s+couple\s+(?:of\s+)?|"
    r"several|some)\s*(?:summer|winter|spring|autumn|fall|season|semester|term|week|weeks|weekend|month|months|"
    r"day|days|while|bit|holidays?|year)\b|over\s+the\s+(?:summer|winter|holidays?)|this\s+(?:summer|winter)|"
    r"until\s+(?:the\s+)?(?:end|summer|winter|spring|autumn|next|[A-Z][a-z]+)\b|till\s+\w+)"
)
# A narrower scope: "I now use VS Code at work" leaves the editor used elsewhere standing. Not for the
# attributes such a phrase does not narrow (a home "for work" is still a home; "on my laptop" names the computer).
SCOPE_RE = re.compile(
    r"(?i)\b(?:at|for)\s+work\b|\bat\s+(?:the\s+)?(?:home|office|weekends?)\b|\bfor\s+(?:personal|side|hobby|work)\s+"
    r"(?:projects?|stuff|things)\b|\bon\s+(?:my|the|our)\s+(?:work\s+|personal\s+|home\s+)?(?:laptop|computer|machine|"
    r"pc|desktop|mac|macbook|phone|tablet|ipad)\b|\bon\s+(?:the\s+)?(?:weekends?|weekdays?|holidays?|sundays|saturdays)\b"
)
UNSCOPED = frozenset(("residence", "employer", "job", "os", "hosting", "commute", "work language", "manager", "port", "time"))
# "I've been seeing Sam for a few months": how long it has held so far, not a while it will hold.
SO_FAR_RE = re.compile(r"(?i)\b(?:'ve|have|has|had)\s+been\b")
# Several values in sequence: "I moved to Bristol in 2010 and then back to Leeds in 2015" ("back to" alone is one
# change: "I'm back to eating meat").
SEQUENCE_RE = re.compile(
    r"(?i)\b(?:then|afterwards|after\s+that|before\s+that|later\s+on)\b|"
    r"\b(?:in|during|by)\s+(?:19|20)\d\d\b"
)
