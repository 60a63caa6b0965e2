"""Text pools of the conversation generator: fact templates and their value pools, owner
names, chat topics, tool outputs, small talk and question forms (`conversation.py` draws from
them). Topic filler avoids the attribute words of the fact templates;
`wording.ATTRIBUTE_FILLER` names them on purpose, without values. Pure data: changing a pool
changes every generated conversation (the golden context run pins them).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class Template:
    """A fact template: an attribute of the user or of a named person, and its value pool."""

    attr: str
    values: tuple[str, ...]


class ToolKind(enum.Enum):
    """What a tool output shows; `NOTES` is the notes file that carries statements."""

    SEARCH = 0
    LISTING = 1
    LOGS = 2
    NOTES = 3


@dataclass(frozen=True, slots=True)
class Topic:
    """What ordinary chat is about during one phase of the conversation."""

    key: str
    intro: str
    user: tuple[str, ...]
    assistant: tuple[str, ...]
    reasoning: tuple[str, ...]
    queries: tuple[str, ...]
    results: tuple[str, ...]


SYSTEM_PROMPT = (
    "You are a helpful assistant in a long-running chat with one user. The user works on "
    "several things at once and sometimes mentions personal details in passing. Keep track "
    "of what the user tells you, use the tools when asked, and when the user asks about "
    "something from earlier, answer from the conversation itself. Be concise and friendly."
)

TEMPLATES: tuple[Template, ...] = (
    Template("locker code", ("4471", "9130", "5512", "2086", "7345", "3619", "8802")),
    Template(
        "wifi password",
        ("blue-otter-42", "maple-crane-17", "quiet-falcon-88", "paper-lantern-5", "tidy-walrus-29"),
    ),
    Template("flight number", ("BA 2291", "LH 418", "AF 1127", "KL 1804", "IB 3170", "TP 547")),
    Template("hotel room number", ("1408", "512", "2217", "309", "744", "1126")),
    Template("dog's name", ("Biscuit", "Pepper", "Juniper", "Waffles", "Rufus", "Noodle")),
    Template(
        "favourite colour",
        ("teal", "burnt orange", "lavender", "forest green", "mustard yellow", "coral"),
    ),
    Template(
        "project codename", ("Bluefin", "Kestrel", "Halcyon", "Tamarind", "Nightjar", "Copperleaf")
    ),
    Template(
        "birthday", ("March 14", "June 2", "October 29", "January 8", "August 21", "December 3")
    ),
    Template("hometown", ("Porto", "Tampere", "Cork", "Bergen", "Trieste", "Hobart", "Mombasa")),
    Template("parking spot", ("B-17", "D-42", "A-9", "F-23", "C-118", "E-6")),
    Template(
        "dentist appointment",
        (
            "Tuesday at 3 pm",
            "Friday at 9:30 am",
            "Monday at noon",
            "Thursday at 4:15 pm",
            "Wednesday at 11 am",
        ),
    ),
    Template("shoe size", ("42", "38", "44", "39", "45", "41")),
    Template("library card number", ("LC-55812", "LC-20934", "LC-71406", "LC-38127", "LC-90263")),
    Template(
        "manager's name",
        (
            "Elena Novak",
            "Daniel Okafor",
            "Sofia Lindqvist",
            "Rahul Mehta",
            "Grace Whitfield",
            "Marta Kowalski",
        ),
    ),
    Template(
        "favourite restaurant",
        ("Casa Lupo", "The Copper Pot", "Osteria Nonna", "Blue Lotus", "Harbour Grill"),
    ),
    Template("licence plate", ("WD 118 ZT", "LM 52 RKA", "KR 207 JP", "HN 63 VXE", "TB 915 LC")),
    Template("bike lock combination", ("318", "0624", "772", "4091", "5560", "1937")),
    Template(
        "wedding anniversary",
        ("April 11", "September 30", "July 19", "February 27", "November 5"),
    ),
    Template(
        "usual coffee order",
        ("an oat flat white", "a double espresso", "a cortado", "an iced americano", "a chai"),
    ),
    Template("cat's name", ("Mochi", "Luna", "Tofu", "Pickles", "Saffron", "Ziggy")),
    Template("gym membership number", ("GM-40117", "GM-22853", "GM-67310", "GM-15498", "GM-80026")),
    Template(
        "emergency contact",
        ("Laura Bennett", "Omar Haddad", "Chloe Martin", "Yusuf Demir", "Hannah Reyes"),
    ),
    Template(
        "favourite band",
        (
            "Velvet Static",
            "Northern Hollow",
            "Glass Harbour",
            "The Tin Orchards",
            "Moonlit Engines",
        ),
    ),
    Template(
        "trip budget", ("1,800 euros", "2,400 dollars", "950 pounds", "3,100 euros", "1,250 francs")
    ),
    Template("apartment number", ("12B", "4A", "31", "7C", "19D", "208")),
)
"""Fact templates ("{Owner} {attr} is {value}."), each with a pool of at least five values."""

OWNER_NAMES: tuple[str, ...] = (
    "Maria", "Tom", "Priya", "Kenji", "Lucas", "Amara", "Fatima",
    "Oliver", "Ines", "Jonas", "Mei", "Diego", "Nadia", "Felix",
)  # fmt: skip
"""Other people a fact may be about (distinct within an episode)."""

GREETINGS: tuple[str, ...] = (
    "Hi there!",
    "Good morning.",
    "Hey, hope you're well.",
    "Hello again.",
    "Hi, I could use a hand today.",
)

QUESTION_LEADS: tuple[str, ...] = (
    "Okay, different thing.",
    "Quick question before we move on.",
    "I need something from earlier.",
    "Sorry, my memory is terrible today.",
    "Hold on, something just came up.",
)
TWO_FACT_FORMS: tuple[str, ...] = (
    "What are {o1} {a1} and {o2} {a2}?",
    "Can you tell me {o1} {a1} and {o2} {a2}?",
)
QUESTION_FORMS: tuple[str, ...] = (
    "What is {owner} {attr}?",
    "Can you remind me what {owner} {attr} is?",
    "What was {owner} {attr} again?",
    "Do you remember what {owner} {attr} is?",
)
LOOK_BACK_REPLIES: tuple[str, ...] = (
    "Let me look back through our conversation.",
    "Let me check what you told me earlier.",
    "One moment, I'll look back at what we discussed.",
    "Let me scroll back and find that for you.",
)
REASONING_QUESTION: tuple[str, ...] = (
    "The user is asking about a detail mentioned earlier. I should find the exact message "
    "where it came up, and check whether it was corrected later, before answering.",
    "This refers back to something from earlier in the chat. The safest approach is to find "
    "the most recent mention and quote it rather than guess.",
)
NOTES_REPLIES: tuple[str, ...] = (
    "I've opened the notes file; its contents are above.",
    "That's the file as it is saved.",
    "Here are your notes as they are saved.",
    "The notes file is printed above, unchanged.",
)
NOTES_FILES: tuple[tuple[str, str], ...] = (
    ("~/notes/personal.md", "Personal"),
    ("~/notes/misc.md", "Misc"),
    ("~/notes/todo.md", "To do and reminders"),
    ("~/Documents/notes.txt", "Notes"),
)
NOTE_LINES: tuple[str, ...] = (
    "buy printer paper and batteries",
    "call the bank about the new statement",
    "water the plants on the balcony",
    "return the borrowed ladder to the neighbours",
    "renew the insurance before the end of the month",
    "send the slides to the team by Friday",
    "book a haircut",
    "pick up the dry cleaning",
    "check the train times for the weekend",
    "reply to the invitation from the book club",
    "order new ink for the printer",
    "look into a cheaper phone plan",
    "back up the laptop",
    "cancel the unused streaming trial",
)
TOOL_REQUESTS: Mapping[ToolKind, tuple[str, ...]] = MappingProxyType(
    {
        ToolKind.SEARCH: (
            "Could you look that up for me?",
            "Please run a quick search and show me what comes back.",
            "Can you search the web for a second opinion?",
        ),
        ToolKind.LISTING: (
            "Can you list the files we have so far?",
            "Could you show me what's in the folder?",
            "Can you check which files are there?",
        ),
        ToolKind.LOGS: (
            "Can you check the recent logs while we talk?",
            "Could you tail the logs, just in case?",
            "Can you see if the logs say anything odd?",
        ),
        ToolKind.NOTES: (
            "Also, can you open my notes file and read it back to me?",
            "Could you pull up my notes from last week while you're at it?",
            "Can you cat my notes file so we both have it in front of us?",
        ),
    }
)
"""What the user says to ask for each tool output (the first of the turn)."""
TOPIC_SWITCHES: tuple[str, ...] = (
    "Changing the subject.",
    "Different topic now.",
    "Okay, switching to something else.",
    "Let's move on to the other thing on my list.",
)
TOOL_REPLIES: tuple[str, ...] = (
    "Here's what came back.",
    "I ran that; the output is above.",
    "Done, the results are above.",
    "I checked, and here is my take.",
)
CHITCHAT_USER: tuple[str, ...] = (
    "How's your day going?",
    "The weather here has been strange all week.",
    "I finally slept properly last night.",
    "My neighbour started learning the trumpet, so that's fun.",
    "I had the best croissant this morning.",
    "Do you ever get tired of all these questions?",
    "It's so quiet in the office today.",
    "I watched a documentary about octopuses yesterday.",
    "I think I need a holiday soon.",
    "Sorry, I got distracted for a minute there.",
    "The trains were late again this morning.",
    "I just made tea, back in a second.",
)
CHITCHAT_ASSISTANT: tuple[str, ...] = (
    "Ha, that sounds like quite a morning.",
    "Glad to hear it! A good night's sleep changes everything.",
    "That sounds lovely.",
    "Octopuses really are remarkable creatures.",
    "No worries at all, take your time.",
    "A short break now and then helps a lot.",
    "I'm always happy to help, so ask away.",
    "Enjoy the tea!",
    "That's a fun thing to look forward to.",
)
FOLDERS: tuple[str, ...] = ("~/projects/app", "~/Documents/drafts", "./src", "~/Downloads")
FILE_NAMES: tuple[str, ...] = (
    "README.md",
    "draft_v3.docx",
    "main.py",
    "requirements.txt",
    "summary.csv",
    "slides_final.pptx",
    "photo_0412.jpg",
    "config.yaml",
    "utils.py",
    "meeting_notes.md",
    "budget_sheet.xlsx",
    "test_main.py",
    "invoice_march.pdf",
    "Makefile",
)
MONTHS: tuple[str, ...] = (
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
)  # fmt: skip
LOG_SERVICES: tuple[str, ...] = ("api", "worker", "scheduler", "sync")
LOG_EVENTS: tuple[str, ...] = (
    "request completed in 182 ms",
    "cache warmed with 2048 entries",
    "retrying connection to the database (attempt 2)",
    "job batch-77 finished, 14 items processed",
    "health check ok",
    "slow query detected, 1.9 s",
    "config reloaded",
    "queue depth at 31",
    "user session refreshed",
    "upload finished, 3 files",
    "memory usage at 71 percent",
    "scheduled backup started",
    "rate limit reached for client 42, backing off",
)

TOPICS: tuple[Topic, ...] = (
    Topic(
        key="trip",
        intro="I'm planning a week-long trip to Japan in the autumn and want help with the plan.",
        user=(
            "I think we should spend three nights in Kyoto and the rest in Tokyo.",
            "Is the rail pass actually worth it for that route?",
            "My partner wants to see the temples, I mostly want good food.",
            "We land in the evening, so the first day is basically lost.",
            "Could we fit in a day trip to Nara somewhere?",
            "I'd like to avoid the most crowded spots if possible.",
            "What should we pack for October weather?",
            "Let's keep one day completely unplanned.",
            "Do we need to reserve seats on the bullet train?",
            "I read that some museums close on Mondays.",
            "Maybe we should try a traditional inn for one night.",
            "Cash or card, what works better there these days?",
        ),
        assistant=(
            "Three nights in Kyoto is a good balance between temples and rest.",
            "For a single round trip between Tokyo and Kyoto the pass is roughly break-even.",
            "Nara works well as a day trip from Kyoto, about forty-five minutes by train.",
            "Early mornings are the best way to avoid crowds at the popular shrines.",
            "October is usually mild, so layers and a light rain jacket should be enough.",
            "Reserved seats are cheap and worth it during busy weeks.",
            "Many museums do close on Mondays, so put the markets on that day instead.",
            "A night in a ryokan is a memorable experience, with dinner often included.",
            "Cards are widely accepted now, but keep some cash for small shops and shrines.",
            "An unplanned day is a great idea; neighbourhoods like Yanaka reward wandering.",
            "Food halls in department store basements are a great, cheap lunch option.",
            "Consider a suica card for local trains and convenience stores.",
        ),
        reasoning=(
            "The user is weighing a rail pass against single tickets.",
            "I should compare the total fare of the planned legs with the pass price.",
            "They care more about food than sights, so the plan should lean on markets.",
            "Crowds matter to them, which suggests early starts.",
            "I need to keep the day trip realistic given train times.",
        ),
        queries=("kyoto temples opening hours", "japan rail pass price", "nara day trip"),
        results=(
            "Kyoto Travel Guide - Temples open from 9 am; arrive early to avoid crowds.",
            "Rail Pass Calculator - Compare the pass against individual fares.",
            "Nara Park - Deer, temples and a short ride from Kyoto station.",
            "Autumn in Japan - Leaves peak in mid November in Kyoto.",
            "Forum thread - Is a ryokan worth the price? Mostly yes, say travellers.",
            "Timetable - Limited express trains run every 15 minutes.",
        ),
    ),
    Topic(
        key="report",
        intro="I have to finish the quarterly sales report by Thursday and I'm behind.",
        user=(
            "The numbers for the northern region still look off to me.",
            "Can we restructure the summary so the key points come first?",
            "My boss prefers short paragraphs and lots of charts.",
            "I'm not sure whether to include the returns data at all.",
            "Revenue is up nine percent but margins went down.",
            "The appendix is getting way too long.",
            "Should the forecast go in the main section or at the end?",
            "I need a better title than 'Q3 Results'.",
            "Two of the charts show the same thing, I think.",
            "Let's draft the conclusion next.",
            "Finance sent a corrected spreadsheet this morning.",
        ),
        assistant=(
            "Leading with the three main findings will make the summary much easier to scan.",
            "If margins fell while revenue rose, it's worth one sentence explaining why.",
            "Returns data belongs in the appendix unless it changed the totals noticeably.",
            "A forecast usually fits best right after the results, before the risks.",
            "You could merge the two similar charts into one with both series.",
            "A title like 'Growth with Pressure on Margins' tells the story up front.",
            "Short paragraphs with one idea each will suit your boss's preference.",
            "Trimming the appendix to tables people actually reference will help.",
            "Let's compare the corrected spreadsheet with the draft figures first.",
            "For the conclusion, restate the main result and the one action you recommend.",
            "Regional differences are clearer as a small table than as prose.",
        ),
        reasoning=(
            "The draft mixes results and interpretation, which makes it hard to skim.",
            "The margin decline needs context, otherwise it reads as a problem.",
            "I should suggest a structure before rewriting sentences.",
            "The corrected spreadsheet may change the regional totals.",
            "Charts should each answer one question.",
        ),
        queries=("executive summary structure", "sales report chart types", "margin analysis"),
        results=(
            "How to Write an Executive Summary - Lead with conclusions, then evidence.",
            "Choosing Charts - Bar charts for comparison, lines for trends over time.",
            "Margin Analysis Basics - Separate price effects from cost effects.",
            "Report Templates - A one-page summary followed by detailed sections.",
            "Style Guide - Keep paragraphs under five sentences.",
            "Forecasting in Reports - Show ranges, not single numbers.",
        ),
    ),
    Topic(
        key="debug",
        intro="A small Python service I maintain keeps crashing overnight and I can't see why.",
        user=(
            "It only fails after running for several hours.",
            "Memory seems to grow slowly until the container gets killed.",
            "We added a caching layer two weeks ago, which is suspicious.",
            "The stack trace points at the database client.",
            "Restarting fixes it for a while, obviously.",
            "I'm not sure how to profile it in production safely.",
            "Could it be the thread pool never shrinking?",
            "The tests all pass locally, which is annoying.",
            "Maybe we should add more logging around the workers.",
            "Let's try to reproduce it with a load test.",
            "The timeouts started around the same time as the upgrade.",
        ),
        assistant=(
            "Slow growth over hours often points to an unbounded cache or a leaked reference.",
            "It would help to cap the cache size and see whether the growth stops.",
            "A sampling profiler can run in production with very little overhead.",
            "Thread pools usually don't shrink by themselves unless configured to.",
            "Logging the cache size and the open connections every minute would be revealing.",
            "A load test with the overnight traffic pattern is a good way to reproduce it.",
            "If the database client holds connections, check the pool settings first.",
            "Compare the dependency versions before and after the upgrade.",
            "Tests pass locally because they don't run long enough to show the leak.",
            "Let's look at where the cache entries are created and whether they expire.",
            "A heap snapshot taken before and after a few hours would show what grows.",
        ),
        reasoning=(
            "The slow memory growth suggests a leak rather than a single spike.",
            "The caching layer is the most recent change, so I should start there.",
            "Reproducing the failure quickly matters more than guessing.",
            "The database client may be holding connections open.",
            "Profiling in production needs to be low-overhead.",
        ),
        queries=("python memory leak cache", "sampling profiler production", "connection pool"),
        results=(
            "Finding Memory Leaks in Python - Use tracemalloc to compare snapshots.",
            "py-spy - A sampling profiler that attaches to a running process.",
            "Connection Pool Settings - Set a maximum size and recycle idle connections.",
            "Unbounded Caches - Why every cache needs an eviction policy.",
            "Issue tracker - Memory grows over time when the client is reused across threads.",
            "Load Testing Guide - Replay real traffic patterns to find slow failures.",
        ),
    ),
    Topic(
        key="moving",
        intro="We're moving flats at the end of the month and I want to get organised.",
        user=(
            "We have way more books than boxes.",
            "The movers quoted for a full day, which seems like a lot.",
            "I need to remember to redirect the post.",
            "Should we paint before or after moving the furniture?",
            "The new kitchen is smaller, so some things have to go.",
            "I'd like to sell the old sofa rather than move it.",
            "Internet installation takes two weeks, apparently.",
            "Let's make a checklist for the last week.",
            "My partner wants to label every single box.",
            "We still have to clean the old place for the deposit.",
            "The lift in the new building is tiny.",
        ),
        assistant=(
            "Painting before the furniture arrives is much easier and faster.",
            "Booking the internet installation now means it's ready soon after you arrive.",
            "Labelling boxes by room saves a lot of time when unpacking.",
            "Selling the sofa online a couple of weeks ahead usually works well.",
            "A checklist for the last week could start with utilities and the post.",
            "Measure the lift before moving day so nothing large gets stuck.",
            "Cleaning the old place right after the movers leave is the usual approach.",
            "Books pack best in small boxes, otherwise they get too heavy.",
            "A full-day quote is normal if stairs or a small lift are involved.",
            "Decide what to give away before packing the kitchen.",
        ),
        reasoning=(
            "The user has a fixed deadline, so the order of tasks matters.",
            "Some tasks have long lead times, like the internet installation.",
            "The small lift may limit what furniture can be moved.",
            "Getting the deposit back depends on the cleaning.",
        ),
        queries=("moving checklist", "redirect post service", "how to pack books"),
        results=(
            "The Ultimate Moving Checklist - Eight weeks to go, four weeks to go, moving day.",
            "Redirect Your Post - Set it up at least a week before you move.",
            "Packing Tips - Small boxes for books, towels for fragile items.",
            "Selling Furniture Online - Good photos and honest descriptions sell faster.",
            "End of Tenancy Cleaning - What landlords usually check.",
            "Moving Day Tips - Keep an essentials box with kettle, snacks and chargers.",
        ),
    ),
    Topic(
        key="talk",
        intro="I'm giving a twenty-minute talk at a conference next month and need to prepare.",
        user=(
            "The slides are mostly text right now.",
            "I tend to talk too fast when I'm nervous.",
            "Should I start with a story or with the main result?",
            "There's a Q&A at the end, which worries me.",
            "I have forty slides, which is probably too many.",
            "My demo might fail on the conference wifi.",
            "Let's work on the opening minute.",
            "The audience is mostly engineers, some managers.",
            "I want one memorable takeaway.",
            "How do I handle a question I can't answer?",
            "I rehearsed yesterday and ran five minutes over.",
        ),
        assistant=(
            "For twenty minutes, around fifteen slides is a comfortable number.",
            "Starting with a short story and then the main result hooks both groups.",
            "Recording the demo as a backup video removes the risk on the day.",
            "Pausing at the end of each slide naturally slows your pace.",
            "For a question you can't answer, say so and offer to follow up afterwards.",
            "Replacing text with one image or number per slide makes them easier to follow.",
            "A single takeaway repeated at the start and the end tends to stick.",
            "If you ran five minutes over, cut a section rather than speaking faster.",
            "Engineers like concrete examples, managers like the impact, so show both.",
            "Practising the first minute until it's automatic helps with nerves.",
        ),
        reasoning=(
            "The main issue is too much content for the time slot.",
            "The mixed audience means the talk needs both detail and a clear message.",
            "Nerves and speed are linked, so structure can help with both.",
            "A fallback for the demo is essential.",
        ),
        queries=("conference talk structure", "slide design tips", "handling q&a nerves"),
        results=(
            "Giving a Great Technical Talk - One idea per slide, practise out loud.",
            "Slide Design - Fewer words, larger fonts, one image.",
            "Handling Q&A - Repeat the question, answer briefly, offer follow-ups.",
            "Live Demos - Always have a recorded fallback.",
            "Public Speaking - Breathing exercises before going on stage.",
            "Timing Your Talk - Plan for two minutes less than your slot.",
        ),
    ),
    Topic(
        key="garden",
        intro="I want to turn the patch behind the house into a small vegetable garden.",
        user=(
            "The soil is mostly clay and stays wet for days.",
            "It only gets sun in the afternoon.",
            "I'd like tomatoes, beans and some herbs.",
            "Slugs destroyed everything I planted last year.",
            "Should I build raised beds or dig directly?",
            "I have no idea when to start the seeds.",
            "Is compost from the garden centre good enough?",
            "My kids want to grow pumpkins.",
            "Watering every day isn't realistic for me.",
            "Let's sketch a simple layout.",
            "How far apart should the rows be?",
        ),
        assistant=(
            "Raised beds are a good fix for heavy clay that stays wet.",
            "Afternoon sun is enough for beans and most herbs; tomatoes prefer more.",
            "Start tomato seeds indoors about six weeks before the last frost.",
            "Copper tape and beer traps help a lot against slugs.",
            "Bagged compost is fine, especially mixed into the top layer.",
            "Pumpkins need space, so give them a corner where they can sprawl.",
            "A soaker hose on a timer solves the daily watering problem.",
            "A simple layout puts tall plants on the north side so they don't shade others.",
            "Mulch keeps moisture in, so you can water less often.",
            "Herbs like thyme and rosemary cope well with dry spells.",
        ),
        reasoning=(
            "Clay soil and limited sun constrain what will grow well.",
            "The slug problem needs to be solved before planting seedlings.",
            "Low maintenance matters because daily watering isn't realistic.",
            "The kids' pumpkins need a lot of space.",
        ),
        queries=("raised bed clay soil", "slug control organic", "when to sow tomatoes"),
        results=(
            "Gardening on Clay - Raised beds and organic matter improve drainage.",
            "Organic Slug Control - Barriers, traps and encouraging predators.",
            "Sowing Calendar - Tomatoes indoors in March, beans outdoors in May.",
            "Companion Planting - Basil next to tomatoes, marigolds at the edges.",
            "Watering Guide - Deep watering twice a week beats a daily sprinkle.",
            "Growing Pumpkins - Each plant needs about two square metres.",
        ),
    ),
)
"""Chat topics; a conversation moves through two or three of them."""
