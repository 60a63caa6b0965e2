"""How the conversation-context family says things: statements of a fact (in chat, in a notes
file, in an e-mail, in the assistant's reasoning), updates said as news, paraphrased questions,
signals of need naming a day, and filler that carries values about nobody. It owns only text;
`plan` decides what is said when and `conversation` where.

Every statement names its subject (with or without the qualifier) and holds its value in a
shape the reader recognises; a property noun is optional, and questions favour a different
noun or a verb ("How do I get hold of ...?" for a phone number), so the question's words rarely
repeat the statement's.
"""

from __future__ import annotations

import numpy as np

from .lexicon import Lexicon
from .plan import Fact
from .valuegen import ValueDraw

Host = str
"""Where a statement is said: "chat", "notes", "email" or "reasoning"."""


def possessive(phrase: str) -> str:
    return phrase + "'" if phrase.endswith("s") else phrase + "'s"


def capital(text: str) -> str:
    return text[:1].upper() + text[1:]


class Wording:
    def __init__(self, rng: np.random.Generator, lex: Lexicon, first_weekday: int):
        self.rng = rng
        self.lex = lex
        self.first_weekday = first_weekday

    def pick(self, items: tuple[str, ...] | list[str]) -> str:
        return items[int(self.rng.integers(len(items)))]

    def subject(self, fact: Fact, p_full: float = 0.7) -> str:
        return fact.subject.full if self.rng.random() < p_full else fact.subject.short

    def fill(self, form: str, fact: Fact, value: str = "", **extra: str) -> str:
        nouns = fact.prop.nouns
        noun = self.pick(nouns)
        other = next((n for n in nouns if n != noun), noun)
        s = self.subject(fact)
        return capital(form.format(S=s, Sp=possessive(s), a=noun, a2=other, v=value, **extra))

    # --- statements ----------------------------------------------------------------------

    def statement(self, fact: Fact, index: int, host: Host) -> str:
        """The sentence (or notes line) that states `fact.values[index]` in `host`."""
        lex, value = self.lex, fact.values[index]
        cls = lex.classes[fact.prop.value_class]
        if index > 0:
            forms = cls.update + lex.text("generic", "update")
        elif host == "notes":
            return self.fill(self.pick(lex.text("generic", "note")), fact, value)
        elif host == "reasoning":
            forms = lex.text("generic", "reason")
        else:
            forms = cls.say + lex.text("generic", "say")
        text = self.fill(self.pick(forms), fact, value)
        if host in ("chat", "email"):
            text = self.speech(text, fact)
        return text

    def speech(self, text: str, fact: Fact) -> str:
        """Clauses people add: an aside after the subject, a tail, an opener."""
        rng, speech = self.rng, self.lex.raw["speech"]
        names = self.lex.raw["names"]["first"]
        if rng.random() < 0.5:
            for phrase in (fact.subject.full, fact.subject.short):
                for form in (phrase, capital(phrase)):
                    at = text.find(form + " ")
                    if at >= 0:
                        aside = self.pick(speech["appositive"]).format(n=self.pick(names))
                        text = text[: at + len(form)] + aside + text[at + len(form) :]
                        break
                else:
                    continue
                break
        if text.endswith(".") and rng.random() < 0.5:
            text = text[:-1] + self.pick(speech["suffix"]) + "."
        plain = text.startswith(
            (capital(fact.subject.full), capital(fact.subject.short), fact.values[-1])
        )
        if plain and rng.random() < 0.4:
            opener = self.pick(speech["prefix"])
            text = f"{opener} {'t' + text[1:] if text.startswith('The ') else text}"
        return text

    # --- questions and days ------------------------------------------------------------

    def question(self, fact: Fact) -> str:
        cls = self.lex.classes[fact.prop.value_class]
        forms = cls.ask
        if self.rng.random() < 0.25:
            forms = forms + self.lex.text("generic", "ask")
        text = self.fill(self.pick(forms), fact)
        lead = self.pick(self.lex.text("speech", "question_leads"))
        return f"{lead} {text if text.startswith(('I ', 'If I')) else text[:1].lower() + text[1:]}"

    def weekday(self, day: int) -> str:
        return self.lex.text("days", "weekdays")[(self.first_weekday + day) % 7]

    def day_start(self, day: int) -> str:
        form = self.pick(self.lex.text("days", "day_start"))
        return form.format(d=self.weekday(day), n=day + 1)

    def part_start(self, part: int) -> str:
        """A line saying the afternoon (`part` 1) or the evening (2) has come."""
        return self.pick(self.lex.text("days", "part_start", ("afternoon", "evening")[part - 1]))

    # --- filler --------------------------------------------------------------------------

    def entity_filler(self, values: ValueDraw) -> tuple[str, dict[str, str]]:
        """A filler sentence with values about nobody, and those values by class (they count
        as wrong answers: a reader that answers with them named a value, not the fact's)."""
        names = self.lex.raw["names"]
        form = self.pick(self.lex.text("entity_filler"))
        slots = {
            "money": values.any("money"),
            "hour": values.any("hour"),
            "phone": values.any("phone"),
        }
        street = f"{self.pick(names['streets'])} {self.pick(names['street_types'])}"
        text = form.format(
            **slots,
            street=street,
            n=int(self.rng.integers(3, 40)),
            first=self.pick(names["first"]),
            last=self.pick(names["surnames"]),
        )
        return text, {k: v for k, v in slots.items() if "{" + k + "}" in form}
