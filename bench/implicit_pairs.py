"""Our own implicit-recall pairs (issue 35): a later message that needs an earlier one it shares no content word with.

Written for this project (h-fuse, 2026-12-06), not derived from LoCoMo or from the issue's held-out cue/trigger set.
Each pair is (earlier, later): the earlier message is stitched into a LoCoMo dev conversation (0-4, 13 pairs each,
spread evenly between its turns, said by one of its two speakers); the later message is the question, and the
earlier one is its only gold turn. `check()` verifies that no pair shares a content term (retrieval.text.content_terms:
stemmed, stop words out), so only meaning can connect them. Used by bench/fusion_sweep.py (dev only: tuning).
"""

from __future__ import annotations

from bench.common import Question, Turn
from retrieval.text import content_terms

PAIRS: tuple[tuple[str, str], ...] = (
    ("I finally got the cast off my wrist this morning.", "Typing with both hands again feels amazing."),
    ("My sister gave birth to twins on Tuesday.", "Being an aunt of two newborns is already exhausting."),
    ("We adopted a rescue greyhound from the shelter.", "The new dog keeps stealing socks from the laundry basket."),
    ("I passed my driving test on the third attempt.", "Now I can take the car to work instead of the bus."),
    ("Our basement flooded after the storm last night.", "The insurance adjuster comes Friday to look at the water damage."),
    ("I started learning Japanese on an app.", "Hiragana is harder to memorise than I thought."),
    ("My landlord is raising the rent by twenty percent.", "I might have to move somewhere cheaper when the lease ends."),
    ("I signed up for a marathon in October.", "My knees ache after every long training run."),
    ("The doctor said my cholesterol is too high.", "So I've swapped bacon for oatmeal at breakfast."),
    ("We're repainting the nursery a soft yellow.", "The baby's room smells of fresh paint all week."),
    ("I got laid off from the warehouse job.", "Sending out resumes every day is draining."),
    ("My grandmother turns ninety next month.", "We're planning a big surprise party for Nana."),
    ("I lost my phone on the train.", "Without it I can't even call a taxi or check messages."),
    ("Our team won the regional chess tournament.", "The trophy is sitting on my desk now."),
    ("I'm allergic to peanuts, it turns out.", "Now I carry an EpiPen everywhere and read every label at the store."),
    ("My car broke down on the highway.", "The mechanic says the transmission needs replacing."),
    ("I've been growing tomatoes on the balcony.", "The first red ones were ready for a salad yesterday."),
    ("We bought a house near the lake.", "Closing on the property took three months of paperwork."),
    ("I'm training a puppy to sit and stay.", "Treats in my pocket make the lessons go faster."),
    ("My brother is getting married in Spain.", "I need to renew my passport before the wedding."),
    ("I quit sugar at the start of the year.", "No desserts or sweets for four months now and I don't miss them."),
    ("The bakery downstairs closed for good.", "I miss grabbing a croissant on my way out each morning."),
    ("I've been having trouble sleeping lately.", "Insomnia has me awake at 3 am most nights."),
    ("My daughter got into medical school.", "She'll be a physician in a few years, we're so proud."),
    ("I joined a choir at the community centre.", "Rehearsals on Thursday evenings are the highlight of my week."),
    ("Our flight to Lisbon got cancelled.", "The airline rebooked us for the day after, so we lost a night at the hotel."),
    ("I broke my glasses playing football.", "Everything is blurry until the optician makes new lenses."),
    ("My neighbour's tree fell onto our fence.", "We're splitting the repair costs for the garden boundary."),
    ("I'm teaching my son to ride a bike.", "He wobbled all the way down the street without training wheels today."),
    ("I got promoted to team lead.", "Managing five people is a whole new kind of responsibility."),
    ("We had a power cut for two days.", "All the food in the freezer had to be thrown away."),
    ("I've been baking sourdough every weekend.", "My starter, named Gerald, lives on the kitchen counter."),
    ("My cat needs surgery on her leg.", "The vet bill is going to be huge."),
    ("I'm moving to Berlin for work.", "Packing up the apartment into boxes is taking forever."),
    ("I took up rock climbing at an indoor gym.", "My forearms are sore from hanging on the wall."),
    ("The school called about my son's fight in the playground.", "He's got detention for a week and I'm furious."),
    ("I sprained my ankle hiking.", "Crutches make the stairs at home a real challenge."),
    ("My best friend moved to Australia.", "The time difference makes video calls tricky."),
    ("I've decided to go vegan.", "Cheese is the hardest thing to give up."),
    ("Our roof started leaking during the rain.", "There's a bucket in the attic catching drips."),
    ("I'm writing a novel in the evenings.", "Chapter twelve is finally done and the plot twist works."),
    ("My father had a heart attack.", "He's recovering in the cardiac ward and the nurses are lovely."),
    ("I won tickets to see Coldplay.", "The concert is at the stadium next Saturday."),
    ("I've been learning to knit.", "The scarf I made has a few dropped stitches but I love it."),
    ("We're expecting our first baby in spring.", "I've been reading parenting books every night."),
    ("My bike was stolen outside the library.", "I reported the theft to the police but they weren't hopeful."),
    ("I failed my statistics exam.", "Retaking the course next semester is going to cost me."),
    ("The kids have chickenpox.", "They're covered in itchy spots and can't go to school."),
    ("I bought an electric scooter.", "Commuting takes half the time now and I skip the traffic."),
    ("My manager resigned suddenly.", "Nobody knows who the new boss will be."),
    ("I adopted two kittens from a friend.", "They chase each other around the flat at night."),
    ("I'm getting braces at thirty.", "Eating an apple is impossible with all this metal in my mouth."),
    ("We renovated the kitchen.", "The new oven and marble countertops look fantastic."),
    ("My laptop died in the middle of the presentation.", "I had to finish the slides from memory in front of the clients."),
    ("I'm running for the town council.", "Knocking on doors for votes every weekend is tiring."),
    ("Our dog had puppies.", "Six little ones are squeaking in a basket in the hall."),
    ("I've taken up the violin again after twenty years.", "My fingers remember the scales better than I thought."),
    ("The heating broke in the middle of winter.", "We're sleeping in coats and wool hats until the boiler is fixed."),
    ("I was diagnosed with diabetes.", "Checking my blood glucose before meals is a new habit."),
    ("My son is learning to swim.", "He can now float on his back in the deep end of the pool."),
    ("I'm taking a pottery class.", "My first bowl came out of the kiln lopsided."),
    ("We got engaged on the beach at sunset.", "The ring is a little loose, so it goes to the jeweller tomorrow."),
    ("I was in a small car accident.", "The other driver's insurance will cover the bumper."),
    ("My mum is retiring after forty years of teaching.", "Her colleagues are throwing a farewell dinner at the school."),
    ("I've started therapy.", "Talking to a counsellor once a week is helping me understand my anxiety."),
)
PER_CONVERSATION = 13


def shared_terms(earlier: str, later: str) -> set[str]:
    return set(content_terms(earlier)) & set(content_terms(later))


def check() -> list[str]:
    """One line per pair that shares a content term (none, for the set as committed)."""
    return [f"pair {j}: {sorted(w)}" for j, (a, b) in enumerate(PAIRS) if (w := shared_terms(a, b))]


def stitched(ts: list[Turn], conv: int) -> tuple[list[Turn], list[Question]]:
    """Conversation `conv`'s turns (dev: 0-4) with its 13 earlier messages stitched in, and the later ones as
    questions (gold: the stitched turn, dia_id "P<conv>:<j>")."""
    if not 0 <= conv < len(PAIRS) // PER_CONVERSATION:
        raise ValueError(f"conversation {conv}: the pairs are stitched into dev conversations 0-4 only")
    mine = PAIRS[conv * PER_CONVERSATION : (conv + 1) * PER_CONVERSATION]
    speakers = sorted({str(t.meta["speaker"]) for t in ts})
    at = {(j + 1) * len(ts) // (len(mine) + 1): j for j in range(len(mine))}
    out: list[Turn] = []
    qs: list[Question] = []
    for n, t in enumerate(ts):
        if n in at:
            j = at[n]
            speaker = speakers[j % len(speakers)]
            role = next(x.role for x in ts if x.meta["speaker"] == speaker)
            dia = f"P{conv}:{j}"
            out.append(Turn(dia, role, f"{speaker}: {mine[j][0]}", {**t.meta, "dia_id": dia, "speaker": speaker}))
            qs.append(Question(conv, mine[j][1], 0, (dia,)))
        out.append(t)
    return out, qs
