"""Drawing values for the conversation-context family: one function per value class (phone
numbers, amounts, dates and times, addresses, e-mail addresses, references, codes, unit numbers,
people, places, head counts, licence plates, flight numbers, choices), each from an explicit
`numpy.random.Generator`. `ValueDraw` hands out values that are distinct within an episode, so
a value names exactly one fact and the value check can tell a stale or borrowed value from the
right one.

The shapes are the ones the extractive reader recognises (`extractive.VALUE_PATTERNS`): a
statement always carries its value in one of these shapes.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from .lexicon import Lexicon, Prop

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
AIRLINES = ("BA", "LH", "AF", "KL", "IB", "TP", "EI", "SK", "AY", "LX", "OS", "FR", "U2")
PLACE_SUFFIXES = ("Kitchen", "Grill", "Tavern", "Rooms", "Hall", "Arms", "Bistro", "Club", "House")
EMAIL_DOMAINS = ("fastmail.com", "example.org", "mailbox.org", "proton.me", "outlook.com")


def _ordinal(day: int) -> str:
    if 10 <= day % 100 <= 20:
        return f"{day}th"
    return f"{day}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(day % 10, 'th') }"


_SEPARATORS = re.compile(r"[\s,.;()]+")


def _padded(value: str) -> str:
    """The value's words between spaces, lower case: " 8:45 am "."""
    return f" {_SEPARATORS.sub(' ', value.lower()).strip()} "


class ValueDraw:
    """Values for one episode: `draw(prop)` never returns a value twice."""

    def __init__(self, rng: np.random.Generator, lex: Lexicon) -> None:
        self.rng = rng
        self.lex = lex
        self.used: set[str] = set()
        self._padded: list[str] = []
        """Drawn values as `_padded` words: no value may contain another ("8:45" and "8:45
        am"), or the value check could not tell them apart."""
        self._makers: dict[str, Callable[[Prop], str]] = {
            "phone": lambda p: self.phone(),
            "money": lambda p: self.money(),
            "when": lambda p: self.when(),
            "date": lambda p: self.date(),
            "day": lambda p: self.weekly(),
            "hour": lambda p: self.hour(),
            "address": lambda p: self.address(),
            "email": lambda p: self.email(),
            "ref": lambda p: self.ref(),
            "code": lambda p: self.code(),
            "unit": lambda p: self.unit(),
            "person": lambda p: self.person(),
            "place": lambda p: self.place(),
            "count": lambda p: self.count(),
            "plate": lambda p: self.plate(),
            "flightno": lambda p: self.flight(),
            "choice": self.choice,
        }

    def draw(self, prop: Prop) -> str:
        """A fresh value of `prop`'s class (distinct from every value drawn before)."""
        make = self._makers[prop.value_class]
        for _ in range(200):
            value = make(prop)
            padded = _padded(value)
            if value not in self.used and not any(
                padded in other or other in padded for other in self._padded
            ):
                self.used.add(value)
                self._padded.append(padded)
                return value
        raise AssertionError(f"value pool of {prop.value_class} exhausted")

    def any(self, value_class: str) -> str:
        """A value of `value_class` for filler (not reserved: it may repeat)."""
        return self._makers[value_class](Prop(value_class, ("x",)))

    # --- one maker per class ------------------------------------------------------------

    def pick(self, items: tuple[str, ...] | list[str]) -> str:
        return items[int(self.rng.integers(len(items)))]

    def digits(self, n: int) -> str:
        return "".join(str(int(d)) for d in self.rng.integers(0, 10, size=n))

    def letters(self, n: int) -> str:
        return "".join(chr(65 + int(c)) for c in self.rng.integers(0, 26, size=n))

    def phone(self) -> str:
        form = int(self.rng.integers(3))
        if form == 0:
            area = f"0{1 + int(self.rng.integers(9))}{self.digits(2)}"
            return f"{area} {self.digits(3)} {self.digits(4)}"
        if form == 1:
            return f"07{self.digits(3)} {self.digits(6)}"
        return f"+44 {self.digits(2)} {self.digits(4)} {self.digits(4)}"

    def money(self) -> str:
        step = 5 if self.rng.random() < 0.6 else 10
        amount = f"{int(self.rng.integers(3, 480)) * step:,}"
        return self.pick([f"£{amount}", f"${amount}", f"€{amount}", f"{amount} euros"])

    def hour(self) -> str:
        h = int(self.rng.integers(7, 20))
        m = self.pick(["00", "15", "30", "45"])
        twelve = (h - 1) % 12 + 1
        half = "am" if h < 12 else "pm"
        forms = [f"{h}:{m}", f"{twelve}:{m} {half}" if m != "00" else f"{twelve} {half}"]
        return "noon" if self.rng.random() < 0.05 else self.pick(forms)

    def date(self) -> str:
        day = int(self.rng.integers(1, 29))
        month, weekday = self.pick(MONTHS), self.pick(WEEKDAYS)
        return self.pick(
            [f"{month} {day}", f"{weekday} the {_ordinal(day)}", f"the {_ordinal(day)} of {month}"]
        )

    def when(self) -> str:
        day = self.pick(WEEKDAYS) if self.rng.random() < 0.5 else self.date()
        return f"{day} at {self.hour()}"

    def weekly(self) -> str:
        weekday = self.pick(WEEKDAYS)
        return self.pick(
            [f"{weekday}s", f"{weekday} evenings", f"{weekday} mornings", f"every other {weekday}"]
        )

    def address(self) -> str:
        names = self.lex.raw["names"]
        street = f"{self.pick(names['streets'])} {self.pick(names['street_types'])}"
        number = int(self.rng.integers(1, 180))
        return self.pick(
            [
                f"{number} {street}",
                f"Flat {int(self.rng.integers(1, 30))}, {number} {street}",
                f"Unit {int(self.rng.integers(1, 40))}, "
                f"{self.pick(names['business'])} Business Park",
            ]
        )

    def email(self) -> str:
        names = self.lex.raw["names"]
        first, last = self.pick(names["first"]).lower(), self.pick(names["surnames"]).lower()
        return f"{first}.{last}@{self.pick(EMAIL_DOMAINS)}"

    def ref(self) -> str:
        return self.pick(
            [
                f"{self.letters(2)}{self.digits(1)}-{self.digits(2)}{self.letters(1)}",
                f"{self.letters(3)}{self.digits(3)}",
                f"#{self.digits(6)}",
                f"{self.letters(1)}{self.digits(7)}",
            ]
        )

    def code(self) -> str:
        return self.digits(4) if self.rng.random() < 0.8 else self.digits(6)

    def unit(self) -> str:
        return self.pick(
            [
                f"{self.letters(1)}{int(self.rng.integers(1, 60))}",
                f"{int(self.rng.integers(1, 40))}{self.letters(1)}",
                f"{int(self.rng.integers(100, 999))}",
            ]
        )

    def person(self) -> str:
        names = self.lex.raw["names"]
        return f"{self.pick(names['first'])} {self.pick(names['surnames'])}"

    def place(self) -> str:
        names = self.lex.raw["names"]
        return self.pick(
            [
                f"The {self.pick(names['business'])} {self.pick(PLACE_SUFFIXES)}",
                f"{self.pick(names['streets'])} Park",
                f"{self.pick(names['business'])} Hall",
            ]
        )

    def count(self) -> str:
        return f"{int(self.rng.integers(6, 220))} {self.pick(['people', 'guests', 'of us'])}"

    def plate(self) -> str:
        return f"{self.letters(2)}{self.digits(2)} {self.letters(3)}"

    def flight(self) -> str:
        return f"{self.pick(AIRLINES)} {int(self.rng.integers(100, 9999))}"

    def choice(self, prop: Prop) -> str:
        assert prop.choice is not None, "a choice property names its pool"
        return self.pick(self.lex.raw["choices"][prop.choice])
