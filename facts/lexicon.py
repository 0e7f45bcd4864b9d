"""Word lists of the supersession detector (facts.claims): data, no logic.

Kept apart so the rules read as rules. Every list is lower-case; matching folds case. A list here
only ever *narrows* what the detector believes (a value is a car because it starts with a car
make), it never makes two facts collide on its own.
"""

from __future__ import annotations

# Who a statement can be about besides the speaker. A relation is a subject key ("sister"), so
# "my sister lives in Leeds" never meets "I live in Bristol".
RELATIONS: frozenset[str] = frozenset(
    """
    mum mom mother dad father parents sister brother son daughter wife husband partner girlfriend boyfriend
    fiance fiancee friend cousin aunt uncle grandma grandmother gran nan grandpa grandfather grandad colleague
    coworker neighbour neighbor boss manager flatmate roommate housemate niece nephew kids children family
    landlord landlady ex sibling stepmum stepdad sisters brothers sons daughters friends cousins aunts uncles
    colleagues coworkers neighbours neighbors flatmates roommates housemates nieces nephews siblings grandparents
    in-laws
    """.split()
)
# "my old colleague", "our best friend": words that may stand between the possessive and the relation.
RELATION_ADJECTIVES = ("old", "best", "older", "younger", "little", "big", "new", "ex", "late", "former", "elder",
                       "twin", "step", "dear", "oldest", "youngest", "eldest", "closest")
# "our team moved to Slack" is the speaker's own doing; any other "my <noun> …" is someone or something else.
SELF_NOUNS = frozenset("team family household whole".split())

# Words saying the fact changed. A weak claim ("I use Firefox") supersedes only with one of these in
# its sentence, and so does any claim about someone other than the speaker.
CHANGE_MARKERS: tuple[str, ...] = (
    "moved", "relocated", "switched", "changed", "now", "nowadays", "no longer", "anymore", "any more",
    "these days", "used to", "again", "new", "left", "joined", "started", "became", "become", "turned",
    "transferred", "upgraded", "migrated", "traded", "sold", "dropped", "cancelled", "canceled", "quit",
    "gave up", "given up", "retrained", "ported", "instead of", "broke up", "split up", "went", "gone",
    "actually", "not anymore", "since", "hired", "took a job", "dyed", "reinstalled", "back to", "got", "lately",
    "recently", "signed up", "replaced", "wiped", "from now on", "as of", "took over", "renamed", "rewrote", "proposed",
)

# A clause holding one of these states something that can be true beside what was said before.
COEXIST_WORDS: tuple[str, ...] = (
    "also", "too", "as well", "another", "second", "both", "either", "in addition", "besides", "plus",
    "extra", "other one",
)

# A clause holding one of these is not a statement of fact about now.
HYPOTHETICAL = (
    r"\b(?:[Ii]f|would|[Ww]ould|'d|could|might|[Mm]aybe|[Pp]erhaps|should|[Ss]hould|shall|wanna|"
    r"want(?:s|ed)? to|hop(?:e|es|ing) to|wish|(?<!phone )(?<!mobile )(?<!data )plan(?:s|ned|ning)? (?:to|on) (?-i:[a-z])|"
    r"thinking (?:of|about)|considering|"
    r"[Ss]omeday|one day|will|'ll|going to|gonna|dream|imagine|unless|"
    # a change on a date is scheduled, not hypothetical: "from next week standup is at 10:15"
    r"(?<![Ff]rom )(?<![Aa]s of )(?<![Ss]tarting )(?:tomorrow|next (?:week|month|year))|"
    r"pretend|suppose|supposing|what if)\b"
)

QUESTION_WORDS: frozenset[str] = frozenset(
    "what where who whom whose which when why how do does did is are am was were can could should would "
    "will shall have has may might".split()
)

PROFESSIONS: tuple[str, ...] = tuple(
    p.strip()
    for p in """
    nurse, teacher, data analyst, data scientist, architect, paramedic, accountant, chef, cook, product manager,
    project manager, electrician, translator, interpreter, pharmacist, ux designer, ui designer, designer,
    graphic designer, software engineer, software developer, developer, engineer, web developer, programmer,
    doctor, surgeon, dentist, vet, veterinarian, lawyer, solicitor, barrister, paralegal, journalist, editor,
    writer, copywriter, photographer, plumber, carpenter, builder, mechanic, pilot, flight attendant,
    firefighter, police officer, detective, soldier, librarian, lecturer, professor, researcher, scientist,
    biologist, chemist, physicist, economist, consultant, banker, trader, analyst, marketing manager,
    sales manager, salesperson, receptionist, cashier, barista, waiter, waitress, bartender, baker, butcher,
    farmer, gardener, cleaner, carer, care worker, social worker, therapist, counsellor, counselor,
    psychologist, psychiatrist, midwife, physiotherapist, optician, radiographer, dietitian, nutritionist,
    hairdresser, stylist, tailor, artist, illustrator, animator, musician, actor, actress, dancer,
    civil servant, teaching assistant, tutor, estate agent, recruiter, hr manager, office manager,
    administrator, secretary, devops engineer, data engineer, qa engineer, tester, sysadmin, postman,
    courier, bus driver, taxi driver, lorry driver, truck driver, delivery driver, security guard
    """.split(",")
)

CAR_MAKES = (
    "honda toyota tesla ford vw volkswagen audi kia mazda volvo fiat nissan skoda bmw mercedes peugeot renault "
    "hyundai subaru vauxhall mini polestar citroen seat jeep porsche lexus dacia mg jaguar chevrolet chevy "
    "cupra suzuki mitsubishi alfa land rover range rover byd rivian"
).split()
PHONE_MAKES = "iphone pixel galaxy samsung fairphone oneplus nokia motorola moto xperia huawei xiaomi oppo".split()
EDITORS = ("vim", "neovim", "nvim", "emacs", "vs code", "vscode", "visual studio code", "sublime text", "sublime",
           "helix", "zed", "intellij", "pycharm", "webstorm", "atom", "nano", "kate", "xcode", "cursor", "notepad++")
OSES = ("ubuntu", "fedora", "macos", "windows", "arch linux", "arch", "debian", "nixos", "linux mint", "mint",
        "pop!_os", "chromeos", "manjaro", "opensuse", "gentoo", "freebsd", "elementary os")
BROWSERS = ("firefox", "chrome", "chromium", "safari", "brave", "edge", "vivaldi", "opera", "arc", "librewolf")
SHELLS = ("bash", "zsh", "fish", "nushell", "powershell", "ksh", "tcsh", "elvish", "xonsh")
LANGUAGES = ("python", "go", "golang", "rust", "typescript", "javascript", "java", "kotlin", "elixir", "scala",
             "ruby", "php", "c#", "c++", "swift", "haskell", "clojure", "ocaml", "erlang", "dart", "julia", "perl",
             "lua", "zig", "f#")
CLOUDS = ("aws", "amazon web services", "gcp", "google cloud", "azure", "hetzner", "digitalocean", "render",
          "heroku", "fly.io", "vercel", "netlify", "linode", "ovh", "cloudflare", "railway", "scaleway")
COFFEES = ("oat flat white", "flat white", "oat latte", "latte", "double espresso", "espresso", "cappuccino",
           "americano", "cortado", "mocha", "macchiato", "filter coffee", "cold brew", "long black", "piccolo",
           "chai latte")
TIMEZONES = ("gmt", "bst", "utc", "cet", "cest", "eet", "est", "edt", "cst", "cdt", "mst", "pst", "pdt", "jst",
             "aest", "aedt", "ist", "nzst", "sgt", "hkt")
GYMS = ("puregym", "the gym group", "gym group", "anytime fitness", "virgin active", "nuffield health",
        "david lloyd", "better leisure", "fitness first", "third space", "equinox", "planet fitness",
        "24 hour fitness", "gold's gym", "snap fitness", "everyone active", "jd gyms", "bannatyne")
# Common prescription medicines (generic names): "I take X" / "I'm on X" names a medication only with one of these.
MEDICATIONS = tuple(
    """sertraline citalopram escitalopram fluoxetine paroxetine venlafaxine mirtazapine amitriptyline bupropion
    metformin insulin gliclazide lisinopril ramipril amlodipine losartan bisoprolol atenolol propranolol
    atorvastatin simvastatin rosuvastatin levothyroxine omeprazole lansoprazole warfarin apixaban rivaroxaban
    salbutamol prednisolone gabapentin pregabalin lamotrigine lithium quetiapine methotrexate""".split()
)
COLOURS = ("red orange yellow green blue teal turquoise purple violet pink black white grey gray brown blonde "
           "blond silver gold navy maroon lilac auburn ginger platinum beige cream mint lavender magenta cyan "
           "indigo").split()
PLATFORMS = ("github", "gitlab", "twitter", "instagram", "bluesky", "mastodon", "reddit", "discord", "slack",
             "linkedin", "tiktok", "steam", "xbox", "psn")

# Capitalised words that start no place, company or name (a value slot refuses them).
NOT_NAMES: frozenset[str] = frozenset(
    """
    i i'm i've i'd dr mr mrs ms miss prof monday tuesday wednesday thursday friday saturday sunday january
    february march april may june july august september october november december christmas easter the a an
    my our it this that there here yes no ok okay still now then also just actually well so but and
    """.split()
)

# Capitalised words that start a sentence without naming anyone ("Got a new phone", "Finally moved to …").
SENTENCE_STARTS: frozenset[str] = frozenset(
    """
    got just now still new big since today yesterday yes finally update quick sadly anyway honestly career also
    guess turns btw fyi so oh well okay ok hey hi plus then after before lately luckily happily recently
    officially basically apparently only even been gave got had made took went bought sold left found kept put
    ran came began wrote set spent sent brought told felt met won lost paid built finished done using
    """.split()
)

# A generic phrase ("I'm at X", "I joined X") names an attribute when its sentence holds one of these.
CUE_WORDS: dict[str, tuple[str, ...]] = {
    a: tuple(ws.split())
    for a, ws in {
        "residence": "live lives living lived moved move relocated home city flat house apartment settled",
        "employer": "job jobs work working employer employers company hired role office team colleagues salary",
        "university": "degree uni university universities course studies student studying study campus transferred",
        "gym": "gym gyms membership workout workouts classes",
        "mobile network": "plan contract network sim mobile carrier ported",
        "partner": "dating broke split partner relationship girlfriend boyfriend together ex",
        "gp": "surgery gp practice doctor's registered",
        "hair colour": "hair hairdresser hairdresser's dye dyed salon",
        "bank": "bank banks account",
        "broadband": "broadband internet wifi wi-fi fibre",
        "hosting": "host hosting hosted cloud deploy deployed",
    }.items()
}

# Words an earlier statement of each attribute is likely to hold: the shortlist query (facts.rules.
# shortlist_query) searches with them, so a paraphrase ("moved to Bristol" / "I live in Leeds") is found.
SHORTLIST: dict[str, tuple[str, ...]] = {
    "residence": tuple("live lives living lived moved relocated based home flat house city settled place".split()),
    "employer": tuple("work works working job employer employers joined hired company left started".split()),
    "job": tuple("work job career trade retrained became profession occupation living".split()) + tuple(w for p in PROFESSIONS for w in p.split()),
    "partner": tuple("partner girlfriend boyfriend wife husband dating seeing relationship broke split together".split()),
    "car": tuple("car drive drives driving".split()) + tuple(CAR_MAKES),
    "phone": tuple("phone mobile upgraded".split()) + tuple(PHONE_MAKES),
    "phone number": tuple("number phone mobile text call".split()),
    "email": tuple("email address reach mail".split()),
    "favourite": ("favourite", "favorite"),
    "editor": tuple("editor code coding".split()) + tuple(w for e in EDITORS for w in e.split()),
    "os": tuple("laptop computer os runs".split()) + tuple(w for e in OSES for w in e.split()),
    "gym": tuple("gym gyms member membership".split()) + tuple(w for e in GYMS for w in e.split()),
    "bank": tuple("bank banks account".split()),
    "browser": tuple("browser browsers browse".split()) + BROWSERS,
    "shell": ("shell", "shells") + SHELLS,
    "mobile network": tuple("network plan contract mobile ported carrier".split()),
    "broadband": tuple("broadband internet provider wifi".split()),
    "commute": tuple("work commute cycle cycling train bus drive driving walk tram bike".split()),
    "hair colour": tuple("hair dyed hairdresser".split()) + tuple(COLOURS),
    "work language": tuple("language write code".split()) + LANGUAGES,
    "timezone": ("timezone", "time") + TIMEZONES,
    "relationship status": tuple("single engaged married divorced separated proposed wedding divorce knot".split()),
    "age": tuple("old turned birthday years".split()),
    "coffee": tuple("coffee order usual".split()) + tuple(w for e in COFFEES for w in e.split()),
    "university": tuple("study studying studies university uni degree transferred".split()),
    "manager": tuple("manager boss report".split()),
    "wake-up time": tuple("wake up alarm".split()),
    "port": ("port", "localhost"),
    "time": ("at",),
    "hosting": tuple("host hosting app runs migrated".split()) + tuple(w for e in CLOUDS for w in e.split()),
    "gp": tuple("gp doctor dr surgery".split()),
    "smoking": tuple("smoke smoking smoker".split()),
    "diet": tuple("vegetarian vegan meat pescatarian fish diet eat".split()),
    "username": ("username", "handle"),
    "name": ("name", "call"),
    "address": ("address",),
    "medication": tuple("medication medicine meds prescription prescribed take taking pills tablets".split()) + MEDICATIONS,
    "football team": tuple("support supporter follow football club team fan season".split()),
    "work team": tuple("team squad reorg".split()),
    "school": tuple("school schools primary academy goes".split()),
    "laptop": tuple("laptop notebook computer".split()),
}


def attribute_name(attribute: str) -> str | None:
    """The detector's own name for `attribute`, from its fixed vocabulary (a SHORTLIST key, '<platform>
    username', or 'favourite' for any 'favourite X', whose X is the speaker's word); None for any other label
    (a model's free text: it may hold a word of a memory, and a stored reason is kept for good)."""
    name = " ".join(attribute.lower().split()) if isinstance(attribute, str) else ""
    if name.startswith(("favourite ", "favorite ")):
        return "favourite"
    first, _, rest = name.partition(" ")
    if name in SHORTLIST or (rest == "username" and first in PLATFORMS):
        return name
    return None


def shortlist_words(attribute: str) -> tuple[str, ...]:
    """SHORTLIST of an attribute ('favourite band' and 'github username' use their family's)."""
    if attribute.startswith("favourite "):
        return SHORTLIST["favourite"]
    if attribute.endswith("username"):
        return SHORTLIST["username"]
    return SHORTLIST.get(attribute, ()) + CUE_WORDS.get(attribute, ())
