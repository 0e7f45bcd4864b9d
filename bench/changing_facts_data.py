"""The templates of bench/changing_facts.py: facts that change, turns that must not change them, questions.

Written before facts/rules.py, as a person would say these things, and kept that way: the
detector is tuned to them, not the other way round. Placeholders: {v} the value, {old} the value it
replaces, {a} "a" or "an" for {v}. A kind whose templates are a dict keys them by value (a diet is said
differently from a car). `subject` is who the fact is about: "self", or a relation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Templates = tuple[str, ...] | dict[str, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class Kind:
    name: str
    values: tuple[str, ...]
    first: Templates
    change: Templates
    ask_now: tuple[str, ...]
    ask_before: tuple[str, ...]
    restate: Templates = ()
    subject: str = "self"
    ordered: bool = False  # values only ever go forward (an age)
    extra: dict[str, str] = field(default_factory=dict)


CITIES = ("Leeds", "Bristol", "York", "Glasgow", "Lisbon", "Porto", "Berlin", "Munich", "Denver", "Austin", "Osaka",
          "Melbourne", "Toronto", "Dublin", "Valencia", "Utrecht")
COMPANIES = ("Acme", "Globex", "Initech", "Umbrella Labs", "Hooli", "Vandelay Imports", "Wayne Enterprises",
             "Cyberdyne", "Soylent", "Tyrell", "Wonka Foods", "Pied Piper", "Massive Dynamic", "Oscorp")
PEOPLE = ("Sam", "Alex", "Priya", "Jordan", "Maria", "Tom", "Chloe", "Omar", "Lena", "Ravi", "Grace", "Mateo",
          "Noor", "Felix", "Hana", "Kofi")
FRIENDS = ("Ben", "Aisha", "Carlos", "Dana", "Elif", "Finn", "Gita", "Hugo", "Ines", "Jonas", "Kemi", "Luca", "Mina",
           "Nils", "Olga", "Pablo", "Quinn", "Rosa", "Sven", "Tara", "Umar", "Vera", "Wes", "Yara", "Zoe", "Arjun",
           "Bea", "Cole", "Dara", "Emil", "Freya", "Gus", "Hattie", "Ivo", "Jade", "Kit", "Lars", "Maeve", "Nico", "Orla")
MANAGERS = ("Helen", "Marcus", "Deepa", "Graham", "Ingrid", "Tariq", "Beatrice", "Olu")
CARS = ("Honda Civic", "Toyota Prius", "Tesla Model 3", "Ford Focus", "VW Golf", "Audi A4", "Kia Niro", "Mazda 3",
        "Volvo XC40", "Fiat 500", "Nissan Leaf", "Skoda Octavia")

KINDS: tuple[Kind, ...] = (
    Kind(
        "city", CITIES,
        first=("I live in {v}.", "Home for me is {v}.", "I've been living in {v} for a few years.",
               "My flat is in {v}, near the river.", "I'm based in {v}."),
        change=("We've just moved to {v}!", "I moved to {v} last month.", "I relocated to {v} for the new role.",
                "I'm living in {v} now.", "I don't live in {old} anymore, we're in {v} now.",
                "Packed up everything and moved from {old} to {v}.", "These days I live in {v}.",
                "I used to live in {old} but now I'm in {v}.", "Big news: we bought a place in {v} and moved in."),
        restate=("Still living in {v}, no plans to leave.", "Yes, I'm still in {v}."),
        ask_now=("Where do I live?", "Which city am I living in now?", "Where's home for me these days?"),
        ask_before=("Where did I live before?", "Which city did I use to live in?"),
    ),
    Kind(
        "employer", COMPANIES,
        first=("I work at {v}.", "My employer is {v}.", "I've been at {v} for three years, in the data team.",
               "I work for {v}."),
        change=("I switched jobs, I'm at {v} now.", "I started a new job at {v} this week.",
                "I left {old} and joined {v}.", "I work for {v} now.", "I no longer work at {old}; I'm at {v}.",
                "Changed employers: {v} hired me.", "These days I'm working at {v}."),
        restate=("Still at {v}, still enjoying it.",),
        ask_now=("Where do I work?", "Who is my employer now?", "Which company do I work for?"),
        ask_before=("Where did I work before?", "Which company was I at previously?"),
    ),
    Kind(
        "job", ("nurse", "teacher", "data analyst", "architect", "paramedic", "accountant", "chef",
                "product manager", "electrician", "translator", "pharmacist", "UX designer"),
        first=("I'm {a} {v}.", "I work as {a} {v}.", "By trade I'm {a} {v}.", "I've been {a} {v} since university."),
        change=("I retrained as {a} {v}.", "I'm {a} {v} now.", "I'm no longer {a} {old}; I work as {a} {v} these days.",
                "Career change: I became {a} {v}.", "I switched careers and now I'm {a} {v}."),
        ask_now=("What do I do for a living?", "What is my job?", "What's my profession now?"),
        ask_before=("What was my job before?", "What did I use to do for work?"),
    ),
    Kind(
        "dev server port", ("3000", "8080", "5173", "8000", "4200", "9000", "3001", "8443", "5000", "8888"),
        first=("My dev server port is {v}.", "The dev server runs on port {v}.", "I run the dev server on localhost:{v}."),
        change=("I moved the dev server to {v}.", "Switched the dev server port to {v}.", "The dev server is on {v} now.",
                "Changed the dev server from {old} to {v}.", "Dev server now listens on port {v}."),
        ask_now=("What port is my dev server on?", "Which port does the dev server use?"),
        ask_before=("What port did the dev server use before?",),
    ),
    Kind(
        "postgres port", ("5432", "5433", "6432", "15432", "5434", "25432"),
        first=("Postgres listens on port {v} on my machine.", "My local Postgres runs on {v}."),
        change=("I changed the Postgres port to {v}.", "Postgres is on port {v} now.", "Moved Postgres over to {v}."),
        ask_now=("What port is Postgres on?", "Which port does my local Postgres use?"),
        ask_before=("What port was Postgres on before?",),
    ),
    Kind(
        "diet", ("vegetarian", "omnivore", "vegan", "pescatarian"),
        first={
            "vegetarian": ("I'm vegetarian.", "I don't eat meat.", "I've been a vegetarian since I was a teenager."),
            "omnivore": ("I eat pretty much anything, meat included.", "I eat meat."),
            "vegan": ("I'm vegan.", "I follow a vegan diet."),
            "pescatarian": ("I'm pescatarian.", "I eat fish but no other meat."),
        },
        change={
            "vegetarian": ("I've gone vegetarian.", "I stopped eating meat last month.", "I no longer eat meat.",
                           "I'm vegetarian now."),
            "omnivore": ("I eat meat again.", "I'm not vegetarian anymore.", "I'm back to eating meat.",
                         "I started eating meat again after years off it."),
            "vegan": ("I went vegan in January.", "I'm fully vegan now.", "These days I'm vegan."),
            "pescatarian": ("I've started eating fish again, so pescatarian now.", "I'm pescatarian these days."),
        },
        ask_now=("What is my diet?", "Do I eat meat?", "Am I vegetarian?"),
        ask_before=("What did I use to eat?", "What was my diet before?"),
    ),
    Kind(
        "partner", PEOPLE,
        first=("My partner is called {v}.", "I'm dating {v}.", "{v} is my girlfriend.", "I'm in a relationship with {v}."),
        change=("{old} and I broke up; I'm seeing {v} now.", "My new partner is {v}.", "I'm with {v} these days.",
                "I split up with {old}. I've been dating {v} since spring."),
        ask_now=("Who is my partner?", "Who am I dating?"),
        ask_before=("Who was I dating before?", "Who was my previous partner?"),
    ),
    Kind(
        "car", CARS,
        first=("I drive {a} {v}.", "My car is {a} {v}.", "I've got {a} {v} as my car."),
        change=("I sold the {old} and bought {a} {v}.", "I switched to {a} {v}.", "I drive {a} {v} now.",
                "New car: {a} {v}!", "I traded in my {old} for {a} {v}."),
        ask_now=("What car do I drive?", "Which car do I have now?"),
        ask_before=("What car did I have before?",),
    ),
    Kind(
        "phone", ("iPhone 12", "iPhone 15", "Pixel 7", "Pixel 8", "Galaxy S21", "Galaxy S23", "Fairphone 4",
                  "OnePlus 9", "Nokia G50"),
        first=("My phone is {a} {v}.", "I use {a} {v} as my phone."),
        change=("I upgraded to {a} {v}.", "Got a new phone, {a} {v}.", "I switched from the {old} to {a} {v}.",
                "My phone's {a} {v} now."),
        ask_now=("What phone do I have?", "Which phone am I using?"),
        ask_before=("What phone did I have before?",),
    ),
    Kind(
        "phone number", ("07700 900123", "07700 900456", "07700 900789", "07700 900321", "07700 900654"),
        first=("My number is {v}.", "You can text me on {v}."),
        change=("My new number is {v}.", "I changed my phone number to {v}.", "New mobile number: {v}."),
        ask_now=("What is my phone number?",),
        ask_before=("What was my old phone number?",),
    ),
    Kind(
        "email", ("sam.k@example.com", "skay@example.org", "sam@kay.dev", "s.kay@example.net", "hello@samkay.io"),
        first=("My email is {v}.", "You can reach me at {v}."),
        change=("My new email address is {v}.", "I use {v} for email now.", "I changed my email to {v}."),
        ask_now=("What's my email address?",),
        ask_before=("What email did I use before?",),
    ),
    Kind(
        "favourite colour", ("blue", "green", "teal", "orange", "purple", "yellow", "red", "grey"),
        first=("My favourite colour is {v}.", "{V} is my favourite colour."),
        change=("My favourite colour these days is {v}.", "I've gone off {old}; {v} is my favourite colour now.",
                "Favourite colour changed to {v}."),
        ask_now=("What's my favourite colour?",),
        ask_before=("What was my favourite colour before?",),
    ),
    Kind(
        "editor", ("Vim", "Emacs", "VS Code", "Neovim", "Sublime Text", "Helix", "Zed", "IntelliJ"),
        first=("I write code in {v}.", "My editor is {v}.", "I do all my coding in {v}."),
        change=("I switched my editor to {v}.", "I use {v} now instead of {old}.", "I moved from {old} to {v} for coding.",
                "These days I code in {v}."),
        ask_now=("Which editor do I use?", "What do I code in?"),
        ask_before=("Which editor did I use before?",),
    ),
    Kind(
        "laptop os", ("Ubuntu", "Fedora", "macOS", "Windows 11", "Arch Linux", "Debian", "NixOS"),
        first=("My laptop runs {v}.", "I'm on {v} on my laptop."),
        change=("I switched my laptop to {v}.", "I reinstalled the laptop with {v}.", "My laptop runs {v} now."),
        ask_now=("What OS is on my laptop?", "Which operating system does my laptop run?"),
        ask_before=("What did my laptop run before?",),
    ),
    Kind(
        "gym", ("PureGym", "The Gym Group", "Anytime Fitness", "Virgin Active", "Nuffield Health", "Better Leisure"),
        first=("I go to {v} for the gym.", "My gym is {v}.", "I'm a member at {v}."),
        change=("I switched gyms to {v}.", "I cancelled {old} and joined {v}.", "My gym is {v} now."),
        ask_now=("Which gym do I go to?",),
        ask_before=("Which gym was I at before?",),
    ),
    Kind(
        "bank", ("Monzo", "Barclays", "HSBC", "Starling", "Lloyds", "Nationwide", "Santander", "Revolut"),
        first=("I bank with {v}.", "My bank is {v}.", "My current account is with {v}."),
        change=("I moved my current account to {v}.", "I switched banks to {v}.", "I bank with {v} now."),
        ask_now=("Which bank am I with?", "Who do I bank with?"),
        ask_before=("Which bank was I with before?",),
    ),
    Kind(
        "mobile network", ("Vodafone", "EE", "O2", "Three", "Giffgaff", "Tesco Mobile", "Lebara"),
        first=("My mobile contract is with {v}.", "I'm on {v} for my phone plan."),
        change=("I switched my phone plan to {v}.", "I ported my number to {v}.", "My mobile network is {v} now."),
        ask_now=("Which mobile network am I on?",),
        ask_before=("Which network was I on before?",),
    ),
    Kind(
        "broadband", ("BT", "Virgin Media", "TalkTalk", "Plusnet", "Hyperoptic", "Zen", "Community Fibre"),
        first=("Our broadband is from {v}.", "We get our internet from {v}."),
        change=("We changed broadband provider to {v}.", "Our internet is with {v} now.",
                "We dropped {old} and signed up with {v}."),
        ask_now=("Who is our broadband provider?", "Who provides my internet?"),
        ask_before=("Who was our broadband with before?",),
    ),
    Kind(
        "commute", ("bike", "train", "bus", "car", "foot", "tram"),
        first={
            "bike": ("I cycle to work.",), "train": ("I take the train to work.",), "bus": ("I get the bus to work.",),
            "car": ("I drive to work.",), "foot": ("I walk to work.",), "tram": ("I ride the tram to work.",),
        },
        change={
            "bike": ("I've started cycling to work.", "These days I cycle to work."),
            "train": ("I take the train to work now.", "I commute by train these days."),
            "bus": ("I get the bus to work now.", "I switched to taking the bus to work."),
            "car": ("I drive to work now.", "I've gone back to driving to work."),
            "foot": ("I walk to work these days.", "Now I just walk to work."),
            "tram": ("I commute by tram now.", "These days I ride the tram to work."),
        },
        ask_now=("How do I get to work?", "How do I commute?"),
        ask_before=("How did I use to get to work?",),
    ),
    Kind(
        "favourite band", ("Radiohead", "Blur", "Wet Leg", "Pulp", "Bicep", "Arctic Monkeys", "Elbow", "Portishead"),
        first=("My favourite band is {v}.", "{v} are my favourite band."),
        change=("My favourite band these days is {v}.", "{v} have become my favourite band.",
                "I'm over {old}; my favourite band now is {v}."),
        ask_now=("Who's my favourite band?",),
        ask_before=("Who was my favourite band before?",),
    ),
    Kind(
        "hair colour", ("brown", "blonde", "red", "black", "pink", "blue", "silver", "purple"),
        first=("My hair is {v}.", "I have {v} hair."),
        change=("I dyed my hair {v}.", "My hair's {v} now.", "I went {v} at the hairdresser's last week."),
        ask_now=("What colour is my hair?",),
        ask_before=("What colour was my hair before?",),
    ),
    Kind(
        "work language", ("Python", "Go", "Rust", "TypeScript", "Java", "Kotlin", "Elixir", "Scala"),
        first=("At work I mostly write {v}.", "My main language is {v}."),
        change=("Our team switched from {old} to {v}.", "I mostly write {v} now.", "My main language these days is {v}."),
        ask_now=("What language do I mainly write at work?", "What's my main programming language?"),
        ask_before=("What language did I write at work before?",),
    ),
    Kind(
        "timezone", ("GMT", "CET", "EST", "PST", "JST", "AEST", "IST"),
        first=("My timezone is {v}.", "I'm on {v} time."),
        change=("My timezone changed to {v}.", "I'm on {v} now.", "Since the move I'm on {v} time."),
        ask_now=("What timezone am I in?",),
        ask_before=("What timezone was I in before?",),
    ),
    Kind(
        "relationship status", ("single", "engaged", "married", "divorced"),
        first={"single": ("I'm single.",), "engaged": ("I'm engaged.",), "married": ("I'm married.",),
               "divorced": ("I'm divorced.",)},
        change={"single": ("I'm single again.", "I'm single now."),
                "engaged": ("I got engaged!", "We're engaged now."),
                "married": ("We got married in June!", "I'm married now."),
                "divorced": ("I got divorced this year.", "I'm divorced now.")},
        ask_now=("Am I married?", "What is my relationship status?"),
        ask_before=("What was my relationship status before?",),
    ),
    Kind(
        "age", tuple(str(n) for n in range(29, 45)),
        first=("I'm {v} years old.", "I'm {v}."),
        change=("I turned {v} last week.", "I'm {v} now.", "Just had my birthday, I'm {v}."),
        ask_now=("How old am I?",),
        ask_before=("How old was I before my birthday?",),
        ordered=True,
    ),
    Kind(
        "coffee order", ("flat white", "oat latte", "espresso", "cappuccino", "americano", "cortado", "mocha"),
        first=("My usual coffee order is {a} {v}.", "I always order {a} {v}."),
        change=("I've switched to {a} {v} as my usual coffee.", "My coffee order is {a} {v} now.",
                "These days my usual is {a} {v}."),
        ask_now=("What's my usual coffee order?",),
        ask_before=("What coffee did I order before?",),
    ),
    Kind(
        "university", ("Imperial", "UCL", "Durham", "St Andrews", "Warwick", "Exeter", "Lancaster"),
        first=("I'm studying at {v}.", "I study at {v}."),
        change=("I transferred to {v}.", "I'm at {v} now for my degree.", "I moved universities to {v}."),
        ask_now=("Where do I study?", "Which university am I at?"),
        ask_before=("Where did I study before?",),
    ),
    Kind(
        "manager", MANAGERS,
        first=("My manager is {v}.", "I report to {v}."),
        change=("I have a new manager, {v}.", "{v} is my boss now.", "I report to {v} now."),
        ask_now=("Who is my manager?", "Who do I report to?"),
        ask_before=("Who was my manager before?",),
    ),
    Kind(
        "wake-up time", ("6am", "6:30", "7am", "5:45", "7:30", "8am"),
        first=("I wake up at {v}.", "My alarm goes off at {v} every day."),
        change=("I get up at {v} these days.", "My alarm is set for {v} now.", "I've started waking at {v}."),
        ask_now=("What time do I wake up?",),
        ask_before=("What time did I wake up before?",),
    ),
    Kind(
        "standup time", ("9:15", "9:30", "10am", "10:30", "11am", "9am"),
        first=("Our daily standup is at {v}.", "Standup is at {v} every morning."),
        change=("Standup moved to {v}.", "We moved the standup to {v}.", "The standup is at {v} now."),
        ask_now=("When is our standup?",),
        ask_before=("When was standup before?",),
    ),
    Kind(
        "browser", ("Firefox", "Chrome", "Safari", "Brave", "Edge", "Vivaldi"),
        first=("My browser is {v}.", "I browse with {v}."),
        change=("I switched browsers to {v}.", "I use {v} now instead of {old}.", "My browser these days is {v}."),
        ask_now=("Which browser do I use?",),
        ask_before=("Which browser did I use before?",),
    ),
    Kind(
        "shell", ("bash", "zsh", "fish", "nushell", "PowerShell"),
        first=("My shell is {v}.", "I use {v} as my shell."),
        change=("I switched my shell to {v}.", "I use {v} as my shell now.", "My shell's {v} these days."),
        ask_now=("What shell do I use?",),
        ask_before=("What shell did I use before?",),
    ),
    Kind(
        "hosting", ("AWS", "GCP", "Azure", "Hetzner", "DigitalOcean", "Render"),
        first=("We host the app on {v}.", "Our app runs on {v}."),
        change=("We migrated the app to {v}.", "The app runs on {v} now.", "We moved hosting from {old} to {v}."),
        ask_now=("Where do we host the app?",),
        ask_before=("Where did we host the app before?",),
    ),
    Kind(
        "gp", ("Patel", "Okafor", "Nguyen", "Fischer", "Hughes", "Kowalski"),
        first=("My GP is Dr {v}.", "I see Dr {v} at the surgery."),
        change=("My new GP is Dr {v}.", "I've been moved to Dr {v}'s list.", "My GP is Dr {v} now."),
        ask_now=("Who is my GP?",),
        ask_before=("Who was my GP before?",),
    ),
    Kind(
        "smoking", ("smoker", "non-smoker"),
        first={"smoker": ("I smoke about ten a day.", "I'm a smoker."),
               "non-smoker": ("I don't smoke.", "I've never been a smoker.")},
        change={"smoker": ("I've started smoking again, sadly.", "I smoke again."),
                "non-smoker": ("I quit smoking!", "I don't smoke anymore.", "I gave up smoking in March.")},
        ask_now=("Do I smoke?",),
        ask_before=("Did I use to smoke?",),
    ),
    Kind(
        "github username", ("samk", "skay-dev", "samkay88", "kaysam", "sk-builds"),
        first=("My GitHub username is {v}.", "I'm {v} on GitHub."),
        change=("I changed my GitHub username to {v}.", "My GitHub handle is {v} now."),
        ask_now=("What's my GitHub username?",),
        ask_before=("What was my GitHub username before?",),
    ),
    Kind(
        "sister city", CITIES, subject="sister",
        first=("My sister lives in {v}.", "My sister's place is in {v}."),
        change=("My sister moved to {v}.", "My sister is living in {v} now.", "My sister relocated to {v} last year."),
        ask_now=("Where does my sister live?",),
        ask_before=("Where did my sister live before?",),
    ),
    Kind(
        "brother employer", COMPANIES, subject="brother",
        first=("My brother works at {v}.", "My brother has a job at {v}."),
        change=("My brother joined {v}.", "My brother left {old} for {v}.", "My brother works for {v} now."),
        ask_now=("Where does my brother work?",),
        ask_before=("Where did my brother work before?",),
    ),
    Kind(
        "mum car", CARS, subject="mum",
        first=("My mum drives {a} {v}.", "My mum's car is {a} {v}."),
        change=("My mum switched to {a} {v}.", "My mum sold her {old} and got {a} {v}.", "My mum drives {a} {v} now."),
        ask_now=("What car does my mum drive?",),
        ask_before=("What car did my mum have before?",),
    ),
)

# Turns that state facts which can all be true at once, or use change words about nothing that changes.
# {city} {company} {person} {car} {lang} {port} fill from the pools; each is a must-not-supersede.
COEXIST: tuple[str, ...] = (
    "I have a dog called {person}.",
    "We also have a cat named {person2}.",
    "My second cat, {person}, is a rescue.",
    "My friend {person} lives in {city}.",
    "My friend {person2} lives in {city2}.",
    "My friend {person} works at {company}.",
    "My colleague drives {a_car} {car}.",
    "My neighbour just bought {a_car} {car}.",
    "I rented {a_car} {car} on holiday.",
    "I love tea.",
    "I also like coffee.",
    "I like both jazz and techno.",
    "I enjoy hiking and climbing.",
    "I play guitar.",
    "I've taken up the piano too.",
    "I'm learning Spanish.",
    "I started learning Japanese as well.",
    "I visited {city} last weekend.",
    "We flew to {city} for a wedding.",
    "I'm thinking of moving to {city} next year.",
    "I'd love to live in {city} someday.",
    "If I moved to {city}, I'd need a car.",
    "My parents live in {city}.",
    "My cousin just moved to {city2}.",
    "I had an interview with {company} but turned it down.",
    "{company} is hiring, apparently.",
    "The staging server uses port {port}.",
    "Redis is on port 6379.",
    "I also write a bit of {lang} on weekends.",
    "I changed my mind about the film.",
    "We moved the meeting to Friday.",
    "I switched the heating off before leaving.",
    "Now I remember where I put my keys.",
    "I'm not sure about that anymore.",
    "I used to hate olives.",
    "These days everything is expensive.",
    "I no longer watch the news in the morning.",
    "My favourite film is Alien.",
    "I moved the sofa to the other wall.",
    "I also volunteer at {company} on Saturdays.",
)

# Questions asked during the chat (appended like any user turn; they must never supersede anything).
IN_CHAT_QUESTIONS: tuple[str, ...] = (
    "Do you think I should move to {city}?",
    "Should I switch to {car}?",
    "Is {company} a good place to work?",
    "Where should we go for dinner?",
    "Do I live in {city}?",
    "Would I be happier working at {company}?",
    "what port should the dev server use",
    "Can you remind me what I said about my car?",
)

CHATTER: tuple[str, ...] = (
    "The weather has been awful this week.",
    "I finished a great book about whales.",
    "Can you recommend a podcast?",
    "I've been sleeping badly.",
    "Work was busy today.",
    "We had pizza for dinner.",
    "My knee hurts after the run.",
    "I watched the match last night, what a game.",
    "The train was late again this morning.",
    "I'm trying to drink more water.",
    "Planning a trip to the coast in August.",
    "Our landlord finally fixed the boiler.",
)

ACKS: tuple[str, ...] = ("Noted.", "Thanks, I'll keep that in mind.", "Got it.", "Sounds good.")

# A second set of change phrasings and distractors, written after the detector's first version as a held-out
# set and measured once (bench/HISTORY.md); then looked at, and folded into the tuning set beside KINDS'.
MORE_CHANGE: dict[str, Templates] = {
    "city": ("The move to {v} is done, finally unpacked!", "We left {old} in the spring and now call {v} home.",
             "Just got the keys to our new place in {v}.", "Settled in {v} after the move."),
    "employer": ("First week at {v} done!", "New role at {v} starting this month.", "I'm now employed by {v}.",
                 "I quit {old}, and {v} took me on."),
    "job": ("I've qualified as {a} {v}.", "Started working as {a} {v} last month.", "I'm {a} {v} these days."),
    "dev server port": ("Bumped the dev server up to port {v}.", "dev server's on :{v} now",
                        "Heads up, the dev server listens on {v} from today."),
    "postgres port": ("Postgres now runs on port {v}.", "Had to put Postgres on {v} instead."),
    "diet": {"vegetarian": ("Gave up meat for good.", "I'm a vegetarian now."),
             "omnivore": ("I'm eating meat again these days.", "Gave up on being veggie, I eat meat now."),
             "vegan": ("Went plant-based, fully vegan now.",),
             "pescatarian": ("I've become a pescatarian.",)},
    "partner": ("I've got a new girlfriend, {v}.", "{v} and I are together now."),
    "car": ("Picked up {a} {v} yesterday, the {old} is gone.", "Our family car is now {a} {v}.",
            "We replaced the {old} with {a} {v}."),
    "phone": ("Finally replaced my {old} with {a} {v}.", "Using {a} {v} these days."),
    "phone number": ("Please use {v} for me from now on.", "Got a new SIM, my number is now {v}."),
    "email": ("Update: email me at {v} now.", "I've moved my email to {v}."),
    "favourite colour": ("Lately {v} is my favourite colour.", "Honestly my favourite colour is {v} now."),
    "editor": ("Gave up on {old}, {v} is my editor now.", "Been using {v} for all my coding lately."),
    "laptop os": ("Wiped the laptop and put {v} on it.", "The laptop is on {v} now."),
    "gym": ("Signed up at {v} last week.", "I train at {v} now."),
    "bank": ("Opened an account with {v} and closed the {old} one.", "All my banking is with {v} now."),
    "mobile network": ("Switched to {v} for my SIM.", "I'm on a {v} contract now."),
    "broadband": ("We've got {v} broadband now.", "Our wifi is from {v} since last month."),
    "commute": {"bike": ("I bike to the office now.",), "train": ("My commute is by train now.",),
                "bus": ("These days I bus it to work.",), "car": ("I've started driving in to work.",),
                "foot": ("I go to work on foot now.",), "tram": ("I take the tram in to work now.",)},
    "favourite band": ("Lately {v} are my favourite band.", "{v} is my favourite band now, sorry {old}."),
    "hair colour": ("Went {v} last weekend, the hairdresser did a great job.", "My hair is now {v}."),
    "work language": ("We rewrote everything in {v}, so that's my main language now.", "I write {v} all day now."),
    "timezone": ("I'm working on {v} hours now.", "My clock's on {v} now."),
    "relationship status": {"single": ("We've split, so I'm single.",), "engaged": ("He proposed and I said yes!",),
                            "married": ("We tied the knot last month!",), "divorced": ("The divorce came through.",)},
    "age": ("Turned {v} yesterday!", "I'm {v} as of last week."),
    "coffee order": ("I order {a} {v} these days.", "My go-to coffee is {a} {v} now."),
    "university": ("I've switched to {v} for the rest of my degree.", "I'm now a student at {v}."),
    "manager": ("{v} took over as my manager.", "My boss is now {v}."),
    "wake-up time": ("These days the alarm goes at {v}.", "I'm up at {v} every morning now."),
    "standup time": ("Standup is now at {v}.", "We pushed standup to {v}."),
    "browser": ("{old} is out, I'm on {v} now.", "Made {v} my default browser."),
    "shell": ("Moved my shell over to {v}.", "Changed my default shell to {v}."),
    "hosting": ("The app lives on {v} now.", "We moved the app over to {v}."),
    "gp": ("I've switched GP, I see Dr {v} now.", "Dr {v} is my GP now."),
    "smoking": {"smoker": ("I'm smoking again.",), "non-smoker": ("I've been smoke-free since March.",)},
    "github username": ("Renamed myself to {v} on GitHub.", "New GitHub handle: {v}."),
    "sister city": ("My sister has moved to {v}.", "My sister lives in {v} now."),
    "brother employer": ("My brother got a job at {v}.", "My brother is at {v} now."),
    "mum car": ("My mum got rid of her {old} and bought {a} {v}.", "My mum has {a} {v} now."),
}

MORE_COEXIST: tuple[str, ...] = (
    "My flatmate moved to {city}.",
    "I'm flying to {city} next week.",
    "I'd switch to {a_car} {car} if it were cheaper.",
    "My boss lives in {city}.",
    "We have two cats, {person} and {person2}.",
    "I like both {lang} and Python.",
    "My friend {person} just started at {company}.",
    "Our neighbours drive {a_car} {car}.",
    "I was in {city} for a conference.",
    "My old colleague {person} moved to {city2}.",
    "The new office is in {city}.",
    "I'm not moving to {city}, whatever my mum says.",
    "We'll probably switch to {company} for insurance.",
    "My brother-in-law works at {company} too.",
    "I used to visit {city} every summer.",
    "Did you know {person} moved to {city2}?",
)

# Held out (`--held-out`): change phrasings and distractors written after the second tuning round and never
# tuned on. They replace the change templates (and the distractors) to show how the detector does on
# paraphrases it has not seen.
HELD_OUT_CHANGE: dict[str, Templates] = {
    "city": ("I've made the move to {v}.", "Living in {v} these days, {old} feels like ages ago.",
             "We're {v} people now.", "Our new address is in {v}."),
    "employer": ("I accepted an offer from {v}.", "My new company is {v}.", "I've gone to work for {v}.",
                 "I'm with {v} now, started Monday."),
    "job": ("I've moved into {a} {v} role.", "Now working as {a} {v}.", "I made the switch to being {a} {v}."),
    "dev server port": ("Dev server lives on {v} now.", "I put the dev server on {v}.",
                        "Port {v} is where the dev server runs now."),
    "postgres port": ("Postgres moved to {v}.", "Local Postgres is listening on {v} now."),
    "diet": {"vegetarian": ("I've cut meat out completely.", "I'm meat-free now."),
             "omnivore": ("I've started eating meat again.", "Vegetarianism didn't stick, I eat meat now."),
             "vegan": ("I've gone vegan.",), "pescatarian": ("I only eat fish now, no other meat.",)},
    "partner": ("I'm in a relationship with {v} now.", "I've been seeing {v} for a few months.",
                "{old} and I split; {v} is my boyfriend now."),
    "car": ("I now drive {a} {v}.", "Swapped the {old} for {a} {v}.", "Bought {a} {v} to replace the {old}."),
    "phone": ("My new phone is {a} {v}.", "I've got {a} {v} now."),
    "phone number": ("I've got a new number: {v}.", "Reach me on {v} from now on."),
    "email": ("My email address changed to {v}.", "Please write to {v} from now on."),
    "favourite colour": ("These days I'd say {v} is my favourite colour.", "{V} has overtaken {old} as my favourite colour."),
    "editor": ("I'm a {v} user now.", "Switched from {old} to {v}."),
    "laptop os": ("I installed {v} on my laptop.", "My laptop is running {v} now."),
    "gym": ("I joined {v}.", "Now I work out at {v}."),
    "bank": ("I've moved banks to {v}.", "{v} is my bank now."),
    "mobile network": ("Moved my phone over to {v}.", "I'm with {v} for mobile now."),
    "broadband": ("We switched our internet to {v}.", "{v} is our broadband provider now."),
    "commute": {"bike": ("I've taken up cycling to work.",), "train": ("Now I commute by train.",),
                "bus": ("I ride the bus to work now.",), "car": ("I've gone back to driving in.",),
                "foot": ("I walk in to work now.",), "tram": ("I use the tram to get to work now.",)},
    "favourite band": ("My current favourite band is {v}.", "{v} are my favourite now."),
    "hair colour": ("I've dyed my hair {v}.", "Just went {v}!"),
    "work language": ("I'm a {v} developer now.", "Most of my work is in {v} now."),
    "timezone": ("I've changed timezone to {v}.", "I'm in the {v} timezone now."),
    "relationship status": {"single": ("We broke up, I'm single.",), "engaged": ("We just got engaged!",),
                            "married": ("I'm a married woman now!",), "divorced": ("My divorce is final.",)},
    "age": ("I'm {v} today!", "Just turned {v}."),
    "coffee order": ("Switched my usual to {a} {v}.", "Now my go-to is {a} {v}."),
    "university": ("I'm now studying at {v}.", "I transferred universities; I'm at {v}."),
    "manager": ("My new boss is {v}.", "Now I report to {v}."),
    "wake-up time": ("I'm waking up at {v} these days.", "New alarm time: {v}."),
    "standup time": ("Standup has moved to {v}.", "Our standup is now at {v}."),
    "browser": ("Switched browsers, using {v} now.", "{v} is my browser now."),
    "shell": ("I'm using {v} as my shell now.", "Switched from {old} to {v} for my shell."),
    "hosting": ("We're on {v} now for hosting.", "Migrated the app from {old} to {v}."),
    "gp": ("I'm registered with Dr {v} now.", "My doctor is now Dr {v}."),
    "smoking": {"smoker": ("Started smoking again, I know.",), "non-smoker": ("I gave up cigarettes.",)},
    "github username": ("My GitHub is {v} now.", "Changed my GitHub handle to {v}."),
    "sister city": ("My sister moved out to {v}.", "My sister's living in {v} these days."),
    "brother employer": ("My brother now works at {v}.", "My brother switched jobs to {v}."),
    "mum car": ("My mum's new car is {a} {v}.", "My mum traded her {old} in for {a} {v}."),
}

HELD_OUT_COEXIST: tuple[str, ...] = (
    "My uncle lives in {city}.",
    "I have a brother and a sister.",
    "I speak French and German.",
    "Both my parents drive {a_car} {car}.",
    "We might get {a_car} {car} next year.",
    "I love visiting {city}.",
    "{person} is my best friend.",
    "My friend {person} switched to {company}.",
    "I work with {person} and {person2}.",
    "I'm meeting {person} at {company} tomorrow.",
    "There's a new café in {city}.",
    "I used to work weekends.",
    "Where did you say {person} lives?",
    "I'm going to {city} on Friday.",
    "My other phone is for work.",
    "I also have a work laptop running Windows.",
)


# ------------------------------------------------------------------------------------------------ issue 32: families
# Written for this repository by hand (issue 32): no sentence comes from LoCoMo or any other data set (LoCoMo is read
# by path from ../shared/data by bench/locomo.py only). Each attribute is said first one way, then changed in
# several *families* of phrasing. THE SPLIT IS FIXED: a family is either in TUNE_FAMILIES (rules may be written
# and checked against it) or in HELD_OUT_FAMILIES (reported on, never tuned on). Never move a family across it;
# add a new family to one side instead. Placeholders as above, and {x} / {a_x}: another value of the same
# attribute, for co-existing statements (another subject, an addition, a hypothetical, a while).
#
# explicit        the change said outright ("I moved to {v}")                              tune
# time-anchored   the change with a date or a "from next week"                            tune
# correction      a typo or slip put right ("sorry, I meant {v}")                          tune
# coexist-a       facts beside the live one that must not touch it                        tune
# implied         the change only implied ("we sold the flat in {old}, the new place…")   held out
# third-person    told through someone else ("Priya moved teams, Daniel is my manager")  held out
# negation-first  the old value denied first ("I don't follow {old} anymore, …")          held out
# compound        the change inside a longer sentence, and first statements of two facts  held out
#                 joined ("I live in Paris and I work as a nurse")
# coexist-b       more facts beside the live one that must not touch it                   held out

TUNE_FAMILIES: tuple[str, ...] = ("explicit", "time-anchored", "correction", "coexist-a")
HELD_OUT_FAMILIES: tuple[str, ...] = ("implied", "third-person", "negation-first", "compound", "coexist-b")
CHANGE_FAMILIES: tuple[str, ...] = ("explicit", "time-anchored", "correction", "implied", "third-person",
                                    "negation-first", "compound")
COEXIST_FAMILIES: tuple[str, ...] = ("coexist-a", "coexist-b")


@dataclass(frozen=True, slots=True)
class Attribute:
    """One attribute that changes: its values, its first statements, the questions about it, and per family the
    sentences that change it (`changes`) or stand beside it (`coexist`, with {x} another value)."""

    name: str
    values: tuple[str, ...]
    first: tuple[str, ...]
    ask_now: tuple[str, ...]
    ask_before: tuple[str, ...]
    changes: dict[str, tuple[str, ...]]
    coexist: dict[str, tuple[str, ...]]
    clause: str = ""  # the first statement as a clause after "and" ("I work as {a} {v}"), for compound first statements


GYMS = ("PureGym", "Third Space", "Gymbox", "Anytime Fitness", "Virgin Active", "Nuffield Health", "Better Leisure",
        "The Gym Group")
PHONES = ("iPhone 13", "iPhone 15", "Pixel 7", "Pixel 8", "Galaxy S22", "Galaxy S24", "Fairphone 5", "OnePlus 11")
TEAMS = ("Arsenal", "Brentford", "Celtic", "Everton", "Wrexham", "Fulham", "Hibernian", "Sunderland")
MEDS = ("sertraline", "citalopram", "fluoxetine", "metformin", "lisinopril", "amlodipine", "atorvastatin", "propranolol")
LAPTOPS = ("MacBook Air", "ThinkPad X1", "Dell XPS 13", "Framework 13", "Surface Laptop", "HP Spectre")
WORK_TEAMS = ("platform", "payments", "search", "mobile", "data", "growth", "billing", "security")
SCHOOLS = ("Oakfield Primary", "St Brigid's", "Hillcrest Academy", "Riverside School", "Greenway Primary",
           "Meadowbank School")
CAT_FOODS = ("Royal Canin", "Purina One", "Lily's Kitchen", "Hill's Science Plan", "Whiskas", "Applaws")
BANKS = ("Monzo", "Barclays", "Nationwide", "Starling", "HSBC", "Santander", "Lloyds")
STANDUPS = ("9:00", "9:30", "10:00", "10:15", "10:45", "11:00", "8:45")
JOBS = ("nurse", "teacher", "data analyst", "architect", "paramedic", "accountant", "chef", "electrician",
        "translator", "pharmacist")
DIETS = ("vegetarian", "vegan", "pescatarian", "keto", "gluten-free")
NAMES = ("Daniel", "Priya", "Helen", "Marcus", "Deepa", "Graham", "Ingrid", "Tariq", "Beatrice", "Olu")

ATTRIBUTES: tuple[Attribute, ...] = (
    Attribute(
        "home", CITIES,
        first=("I live in {v}.", "Home is {v} these days, in a small flat.", "I'm based in {v}."),
        clause="I live in {v}",
        ask_now=("Where do I live?", "Which city do I live in now?"),
        ask_before=("Where did I live before?",),
        changes={
            "explicit": ("I moved to {v} last month.", "We've moved to {v}."),
            "time-anchored": ("Since March I've been living in {v}.", "From next week I live in {v}, the keys are ready."),
            "correction": ("Sorry, I said {old} earlier, I actually live in {v}.", "Typo before: I live in {v}, not {old}."),
            "implied": ("We sold the flat in {old}; the new place in {v} is smaller but brighter.",
                        "The removal van finally reached {v} yesterday, so that's home sorted."),
            "third-person": ("My wife found us a house in {v} and we've settled in.",
                             "The letting agent handed us the keys in {v} on Friday, we live there now."),
            "negation-first": ("I don't live in {old} anymore, it's {v} now.", "No more {old} for me: I'm in {v}."),
            "compound": ("I moved to {v} and honestly the commute is much better.",
                         "We packed up, drove for six hours and now live in {v}, which I love."),
        },
        coexist={
            "coexist-a": ("My brother lives in {x}.", "I'd love to live in {x} one day."),
            "coexist-b": ("I'm in {x} for a conference this week.", "My best friend just moved to {x}."),
        },
    ),
    Attribute(
        "employer", COMPANIES,
        first=("I work at {v}.", "My employer is {v}.", "I've been at {v} for three years."),
        clause="I work at {v}",
        ask_now=("Where do I work?", "Which company do I work for now?"),
        ask_before=("Where did I work before?",),
        changes={
            "explicit": ("I started a new job at {v}.", "I work for {v} now."),
            "time-anchored": ("As of Monday I'm at {v}.", "Since January I've worked at {v}."),
            "correction": ("Oops, I meant {v}, not {old}: that's where I work.", "Correction: my employer is {v}."),
            "implied": ("Handed in my badge at {old}; first day at {v} went fine.",
                        "My onboarding at {v} is this week and the laptop just arrived."),
            "third-person": ("The recruiter from {v} called: they want me, and I've signed.",
                             "My new boss at {v} says my desk is by the window."),
            "negation-first": ("I'm not at {old} anymore, I joined {v}.", "No longer with {old}; {v} it is."),
            "compound": ("I joined {v} and the pay is better, which helps with rent.",
                         "After a long summer of interviews I took the offer from {v} and started there."),
        },
        coexist={
            "coexist-a": ("My sister works at {x}.", "{x} is hiring, apparently."),
            "coexist-b": ("I had coffee with someone from {x} today.", "I might apply to {x} someday."),
        },
    ),
    Attribute(
        "job", JOBS,
        first=("I'm {a} {v}.", "I work as {a} {v}."),
        clause="I work as {a} {v}",
        ask_now=("What is my job?", "What do I do for a living?"),
        ask_before=("What was my job before?",),
        changes={
            "explicit": ("I'm {a} {v} now.", "I retrained as {a} {v}."),
            "time-anchored": ("Since the autumn I've worked as {a} {v}.", "From April I'm {a} {v}."),
            "correction": ("Sorry, I mistyped: I'm {a} {v}.", "I meant {v}, not {old}: that's my job."),
            "implied": ("Finished the {v} qualification and got my first shifts, goodbye {old} life.",
                        "Hung up my {old} gear; the {v} course paid off and I start work on Monday."),
            "third-person": ("My mentor signed me off, so I'm officially {a} {v}.",
                             "The hospital took me on as {a} {v}."),
            "negation-first": ("I'm not {a} {old} anymore, I'm {a} {v}.", "Not {a} {old} these days; I work as {a} {v}."),
            "compound": ("I'm {a} {v} now and the hours are kinder.",
                         "I changed careers, did a year of night classes, and I'm {a} {v} today."),
        },
        coexist={
            "coexist-a": ("My mum was {a_x} {x}.", "I sometimes wish I'd become {a_x} {x}."),
            "coexist-b": ("My flatmate is {a_x} {x}.", "My cousin is training to be {a_x} {x}."),
        },
    ),
    Attribute(
        "manager", NAMES,
        first=("My manager is {v}.", "I report to {v}."),
        clause="my manager is {v}",
        ask_now=("Who is my manager?", "Who do I report to now?"),
        ask_before=("Who was my manager before?",),
        changes={
            "explicit": ("My new manager is {v}.", "I report to {v} now."),
            "time-anchored": ("From next week I report to {v}.", "Since the reorg in May my manager is {v}."),
            "correction": ("Sorry, typo: my manager is {v}.", "I meant {v}, not {old}: {v} is my manager."),
            "implied": ("{old} left the company, so {v} runs my one-to-ones now.",
                        "My reviews go to {v} after the reshuffle."),
            "third-person": ("{old} moved teams, {v} is my manager now.", "HR told me {v} is my line manager."),
            "negation-first": ("{old} isn't my manager anymore; it's {v}.", "I don't report to {old} now, I report to {v}."),
            "compound": ("{v} took over as my manager and the team seems happier.",
                         "We had a reorg, lost two people, and my manager is {v} now."),
        },
        coexist={
            "coexist-a": ("My sister's manager is {x}.", "I had lunch with {x} from marketing."),
            "coexist-b": ("{x} is a manager on another team.", "My partner's boss is called {x}."),
        },
    ),
    Attribute(
        "car", CARS,
        first=("I drive {a} {v}.", "My car is {a} {v}."),
        clause="I drive {a} {v}",
        ask_now=("What car do I drive?", "Which car do I have now?"),
        ask_before=("What car did I have before?",),
        changes={
            "explicit": ("I drive {a} {v} now.", "I bought {a} {v}."),
            "time-anchored": ("From Saturday my car is {a} {v}.", "Since last month I've been driving {a} {v}."),
            "correction": ("Sorry, I said {old}: my car is {a} {v}.", "Typo earlier, I drive {a} {v}."),
            "implied": ("I sold the {old} and bought {a} {v}.", "The {old} went to a dealer; the {v} is parked outside."),
            "third-person": ("My dad gave me his {v} and I'm driving it everywhere.",
                             "The garage handed over my {v} today and took the {old}."),
            "negation-first": ("I don't drive the {old} anymore, I have {a} {v}.", "No {old} now: it's {a} {v}."),
            "compound": ("I traded in the {old} for {a} {v} and the insurance went down.",
                         "I drive {a} {v} now and parking is easier."),
        },
        coexist={
            "coexist-a": ("My neighbour drives {a_x} {x}.", "I rented {a_x} {x} on holiday."),
            "coexist-b": ("My partner also drives, {a_x} {x}.", "I test drove {a_x} {x} for fun."),
        },
    ),
    Attribute(
        "phone", PHONES,
        first=("My phone is {a} {v}.", "I use {a} {v}."),
        clause="my phone is {a} {v}",
        ask_now=("What phone do I have?", "Which phone am I using now?"),
        ask_before=("What phone did I have before?",),
        changes={
            "explicit": ("I got {a} {v}.", "My phone is {a} {v} now."),
            "time-anchored": ("Since Christmas my phone is {a} {v}.", "As of today I'm on {a} {v}."),
            "correction": ("Sorry, wrong model: my phone is {a} {v}.", "I meant {v}, not {old}, that's my phone."),
            "implied": ("Dropped the {old} in a lake; the {v} arrived this morning.",
                        "Transferred everything onto the {v} and wiped the {old}."),
            "third-person": ("My son gave me his old {v} and I use it every day.",
                             "The shop swapped my {old} for {a} {v} under warranty."),
            "negation-first": ("I don't use the {old} anymore; it's {a} {v}.", "Not the {old} these days, {a} {v}."),
            "compound": ("I switched to {a} {v} and the battery lasts two days.",
                         "My phone is {a} {v} now and the camera is great."),
        },
        coexist={
            "coexist-a": ("My work phone is {a_x} {x}.", "My daughter has {a_x} {x}."),
            "coexist-b": ("I keep {a_x} {x} as a spare.", "I'm tempted by {a_x} {x}."),
        },
    ),
    Attribute(
        "gym", GYMS,
        first=("I go to {v}.", "My gym is {v}."),
        clause="my gym is {v}",
        ask_now=("Which gym do I go to?", "What is my gym now?"),
        ask_before=("Which gym did I go to before?",),
        changes={
            "explicit": ("I joined {v}.", "My gym is {v} now."),
            "time-anchored": ("From next month my gym is {v}.", "Since February I train at {v}."),
            "correction": ("Sorry, I meant {v}: that's my gym.", "Typo, my gym is {v}."),
            "implied": ("Cancelled the {old} membership; the {v} pool is much nicer.",
                        "Did my first class at {v} and binned the {old} card."),
            "third-person": ("My physio got me a discount at {v}, so I train there now.",
                             "Work pays for {v} now, so that's my gym."),
            "negation-first": ("I don't go to {old} anymore, I go to {v}.", "Not {old} now: {v}."),
            "compound": ("I signed up at {v} and I go three times a week.",
                         "My gym is {v} now and it's on the way home."),
        },
        coexist={
            "coexist-a": ("My partner goes to {x}.", "There's a new {x} opening nearby."),
            "coexist-b": ("I did a trial class at {x} once.", "My friend swears by {x}."),
        },
    ),
    Attribute(
        "diet", DIETS,
        first=("I'm {v}.", "My diet is {v}."),
        clause="I'm {v}",
        ask_now=("What is my diet?", "What diet am I on now?"),
        ask_before=("What was my diet before?",),
        changes={
            "explicit": ("I'm {v} now.", "I went {v}."),
            "time-anchored": ("Since January I've been {v}.", "From Monday I'm {v}."),
            "correction": ("Sorry, I meant {v}: that's my diet.", "Correction: I'm {v}."),
            "implied": ("Threw out everything that isn't {v} and restocked the fridge.",
                        "My cookbooks are all {v} ones now."),
            "third-person": ("My doctor put me on a {v} diet and I'm sticking to it.",
                             "The dietitian says I'm {v} from now on."),
            "negation-first": ("I'm not {old} anymore; I'm {v}.", "No longer {old}: {v} now."),
            "compound": ("I'm {v} now and I feel much better.", "I went {v} and lost a bit of weight."),
        },
        coexist={
            "coexist-a": ("My partner is {x}.", "I cook {x} meals for my sister."),
            "coexist-b": ("I tried {x} for a week once.", "My flatmate went {x}."),
        },
    ),
    Attribute(
        "standup", STANDUPS,
        first=("Standup is at {v}.", "Our daily standup is at {v}."),
        clause="standup is at {v}",
        ask_now=("What time is standup?", "When is our standup now?"),
        ask_before=("What time was standup before?",),
        changes={
            "explicit": ("Standup moved to {v}.", "Standup is at {v} now."),
            "time-anchored": ("From next week standup is at {v}.", "Since Monday standup has been at {v}."),
            "correction": ("Sorry, standup is at {v}, not {old}.", "Typo: standup at {v}."),
            "implied": ("The {old} slot clashed with school drop-off, so we meet at {v}.",
                        "Calendar invite updated: daily sync {v}."),
            "third-person": ("My lead pushed standup to {v}.", "The team voted and standup is at {v} now."),
            "negation-first": ("Standup isn't at {old} anymore, it's at {v}.", "No more {old} standups: {v}."),
            "compound": ("Standup moved to {v} and it's only ten minutes long.",
                         "We shortened standup and it's at {v} now."),
        },
        coexist={
            "coexist-a": ("The design review is at {x}.", "My partner's standup is at {x}."),
            "coexist-b": ("Lunch is usually at {x}.", "The weekly retro is at {x} on Fridays."),
        },
    ),
    Attribute(
        "school", SCHOOLS,
        first=("My daughter goes to {v}.", "My daughter's school is {v}."),
        clause="my daughter goes to {v}",
        ask_now=("Which school does my daughter go to?", "What is my daughter's school now?"),
        ask_before=("Which school did my daughter go to before?",),
        changes={
            "explicit": ("My daughter moved to {v}.", "My daughter goes to {v} now."),
            "time-anchored": ("From September my daughter goes to {v}.", "Since the spring term she's at {v}."),
            "correction": ("Sorry, my daughter's school is {v}.", "I meant {v}, not {old}, for my daughter's school."),
            "implied": ("My daughter's new uniform from {v} came today; no more {old} jumpers.",
                        "We did the last {old} pickup; my daughter starts at {v} tomorrow."),
            "third-person": ("The council gave my daughter a place at {v}, she started this week.",
                             "Her teacher at {v} says my daughter settled in fast."),
            "negation-first": ("My daughter isn't at {old} anymore, she goes to {v}.",
                               "No more {old} for my daughter; {v} now."),
            "compound": ("My daughter goes to {v} now and she walks there with friends.",
                         "My daughter changed schools and loves {v}."),
        },
        coexist={
            "coexist-a": ("My son goes to {x}.", "My niece goes to {x}."),
            "coexist-b": ("We toured {x} for next year.", "My daughter's best friend goes to {x}."),
        },
    ),
    Attribute(
        "football team", TEAMS,
        first=("I support {v}.", "My football team is {v}."),
        clause="I support {v}",
        ask_now=("Which football team do I support?", "What team do I follow now?"),
        ask_before=("Which team did I support before?",),
        changes={
            "explicit": ("I support {v} now.", "I switched to supporting {v}."),
            "time-anchored": ("Since last season I support {v}.", "From this season I follow {v}."),
            "correction": ("Sorry, I meant {v}: that's my team.", "Typo, I support {v}."),
            "implied": ("Got a {v} season ticket and gave my {old} scarf away.", "Every Saturday I'm at the {v} ground now."),
            "third-person": ("My son converted me, we're both {v} fans now.", "My father-in-law got me into {v} and I follow them now."),
            "negation-first": ("I don't follow {old} anymore, I support {v}.", "Not {old} these days: {v}."),
            "compound": ("I support {v} now and go to most home games.", "I follow {v} now and the football is better."),
        },
        coexist={
            "coexist-a": ("My brother supports {x}.", "I watched {x} play on holiday."),
            "coexist-b": ("I also like watching {x}.", "My partner is a {x} fan."),
        },
    ),
    Attribute(
        "medication", MEDS,
        first=("I take {v}.", "My medication is {v}."),
        clause="I take {v}",
        ask_now=("What medication do I take?", "Which medication am I on now?"),
        ask_before=("What medication did I take before?",),
        changes={
            "explicit": ("I'm on {v} now.", "My medication is {v} now."),
            "time-anchored": ("From tomorrow I take {v}.", "Since May I've taken {v}."),
            "correction": ("Sorry, I take {v}, not {old}.", "Typo, my medication is {v}."),
            "implied": ("Finished the last {old} box; the pharmacy gave me {v} instead.",
                        "My prescription reads {v} since the review."),
            "third-person": ("My GP switched me to {v}.", "The consultant put me on {v}."),
            "negation-first": ("I don't take {old} anymore; I'm on {v}.", "No more {old}, it's {v}."),
            "compound": ("I'm on {v} now and sleeping better.", "I take {v} now and the side effects are milder."),
        },
        coexist={
            "coexist-a": ("My mum takes {x}.", "I also take vitamin D."),
            "coexist-b": ("My partner is on {x}.", "I read about {x} online."),
        },
    ),
    Attribute(
        "laptop", LAPTOPS,
        first=("My laptop is {a} {v}.", "I work on {a} {v}."),
        clause="my laptop is {a} {v}",
        ask_now=("What laptop do I have?", "Which laptop do I use now?"),
        ask_before=("What laptop did I have before?",),
        changes={
            "explicit": ("I got {a} {v}.", "My laptop is {a} {v} now."),
            "time-anchored": ("Since last week my laptop is {a} {v}.", "From Monday I'm on {a} {v}."),
            "correction": ("Sorry, my laptop is {a} {v}.", "I meant {v}, not {old}, for my laptop."),
            "implied": ("The {old} died, so IT sent a {v}.", "Migrated my dotfiles to the {v} and returned the {old}."),
            "third-person": ("IT handed me {a} {v} for work.", "My brother gave me his {v} and I use it daily."),
            "negation-first": ("I don't use the {old} anymore, I have {a} {v}.", "Not the {old} now: {a} {v}."),
            "compound": ("I switched to {a} {v} and the keyboard is lovely.", "My laptop is {a} {v} now and it's silent."),
        },
        coexist={
            "coexist-a": ("My partner has {a_x} {x}.", "I'm eyeing {a_x} {x}."),
            "coexist-b": ("The office has a spare {x}.", "My son wants {a_x} {x}."),
        },
    ),
    Attribute(
        "partner", PEOPLE,
        first=("My partner is {v}.", "I'm dating {v}."),
        clause="my partner is {v}",
        ask_now=("Who is my partner?", "Who am I dating now?"),
        ask_before=("Who was my partner before?",),
        changes={
            "explicit": ("My new partner is {v}.", "I'm with {v} now."),
            "time-anchored": ("Since the summer I've been dating {v}.", "As of last week I'm with {v}."),
            "correction": ("Sorry, my partner is {v}, not {old}.", "Typo: I'm dating {v}."),
            "implied": ("{old} moved out in March; {v} and I have been inseparable since.",
                        "Spent the weekend with {v}'s family, first time meeting them as a couple."),
            "third-person": ("My friends set me up with {v}, and we're together now.", "{old} ended things; I'm seeing {v}."),
            "negation-first": ("I'm not with {old} anymore, I'm with {v}.", "No more {old}; I'm dating {v}."),
            "compound": ("I'm dating {v} now and we're very happy.", "I'm with {v} these days and we cook together."),
        },
        coexist={
            "coexist-a": ("My friend {x} is getting married.", "My colleague {x} has a new baby."),
            "coexist-b": ("My brother's partner is {x}.", "I met {x} at a party."),
        },
    ),
    Attribute(
        "sister job", JOBS,
        first=("My sister is {a} {v}.", "My sister works as {a} {v}."),
        clause="my sister is {a} {v}",
        ask_now=("What does my sister do?", "What is my sister's job?"),
        ask_before=("What did my sister do before?",),
        changes={
            "explicit": ("My sister is {a} {v} now.", "My sister retrained as {a} {v}."),
            "time-anchored": ("Since June my sister works as {a} {v}.", "From next month my sister is {a} {v}."),
            "correction": ("Sorry, my sister is {a} {v}.", "I meant {v}, not {old}, for my sister's job."),
            "implied": ("My sister passed her {v} exams and quit being {a} {old}.",
                        "My sister's first week as {a} {v} was exhausting."),
            "third-person": ("Mum says my sister got a job as {a} {v}.", "My sister's boss says she's the best {v} they have."),
            "negation-first": ("My sister isn't {a} {old} anymore; she's {a} {v}.", "Not {a} {old} now, my sister is {a} {v}."),
            "compound": ("My sister is {a} {v} now and she loves it.", "My sister works as {a} {v} and earns more."),
        },
        coexist={
            "coexist-a": ("My brother is {a_x} {x}.", "My sister's husband is {a_x} {x}."),
            "coexist-b": ("My sister once wanted to be {a_x} {x}.", "My friend is {a_x} {x}."),
        },
    ),
    Attribute(
        "cat food", CAT_FOODS,
        first=("The cat eats {v}.", "Our cat's food is {v}."),
        clause="the cat eats {v}",
        ask_now=("What food does the cat eat?", "What is the cat's food now?"),
        ask_before=("What did the cat eat before?",),
        changes={
            "explicit": ("The cat eats {v} now.", "We switched the cat to {v}."),
            "time-anchored": ("From next week the cat eats {v}.", "Since her check-up the cat eats {v}."),
            "correction": ("Sorry, the cat eats {v}.", "I meant {v}, not {old}, for the cat."),
            "implied": ("Bought a big bag of {v} and gave the {old} to the shelter.",
                        "The cat bowls are full of {v} these days."),
            "third-person": ("The vet told us to change the cat to {v}.", "The breeder said to feed the cat {v}, so we do."),
            "negation-first": ("The cat doesn't eat {old} anymore, she eats {v}.", "No more {old}: the cat has {v}."),
            "compound": ("The cat eats {v} now and her coat is shinier.", "We moved the cat onto {v} and she loves it."),
        },
        coexist={
            "coexist-a": ("The dog eats {x}.", "The neighbour's cat eats {x}."),
            "coexist-b": ("The cat gets {x} treats sometimes.", "My sister's cat eats {x}."),
        },
    ),
    Attribute(
        "work team", WORK_TEAMS,
        first=("I'm on the {v} team.", "I work in the {v} team."),
        clause="I'm on the {v} team",
        ask_now=("Which team am I on?", "What team do I work in now?"),
        ask_before=("Which team was I on before?",),
        changes={
            "explicit": ("I moved to the {v} team.", "I'm on the {v} team now."),
            "time-anchored": ("From next sprint I'm on the {v} team.", "Since the reorg I'm in the {v} team."),
            "correction": ("Sorry, I'm on the {v} team.", "Typo: the {v} team, not {old}."),
            "implied": ("Said goodbye to the {old} folks; the {v} crew took me for lunch.",
                        "My tickets are all {v} ones now."),
            "third-person": ("My manager moved me to the {v} team.", "The director put me on the {v} team."),
            "negation-first": ("I'm not on the {old} team anymore, I'm on {v}.", "No longer {old}: the {v} team."),
            "compound": ("I joined the {v} team and the work is more interesting.",
                         "I'm on the {v} team now and we ship weekly."),
        },
        coexist={
            "coexist-a": ("My friend is on the {x} team.", "The {x} team is hiring."),
            "coexist-b": ("I help the {x} team sometimes.", "My partner leads a {x} team elsewhere."),
        },
    ),
    Attribute(
        "bank", BANKS,
        first=("I bank with {v}.", "My bank is {v}."),
        clause="my bank is {v}",
        ask_now=("Which bank am I with?", "What is my bank now?"),
        ask_before=("Which bank was I with before?",),
        changes={
            "explicit": ("I switched banks to {v}.", "My bank is {v} now."),
            "time-anchored": ("Since April I bank with {v}.", "From next month my bank is {v}."),
            "correction": ("Sorry, my bank is {v}.", "I meant {v}, not {old}, for my bank."),
            "implied": ("Closed the {old} account and the {v} card came today.", "My salary lands in {v} now."),
            "third-person": ("My accountant moved my accounts to {v}.", "My partner got us a joint {v} account and I use only that."),
            "negation-first": ("I'm not with {old} anymore, I bank with {v}.", "No more {old}: {v}."),
            "compound": ("I moved to {v} and the app is much better.", "My bank is {v} now and it has no fees."),
        },
        coexist={
            "coexist-a": ("My mortgage is with {x}.", "My mum banks with {x}."),
            "coexist-b": ("I have an old savings account at {x}.", "I saw an advert for {x}."),
        },
    ),
)
