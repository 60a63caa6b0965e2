"""Stability tiers for provider prompt caching (seed 002): the tracker that owns every item's
N value, content hash and tier, and moves items between tiers once per request.

Tiers, from most stable (sent first, cached) to least (sent last, uncached):

| tier   | entry N | promotion N | destination |
|--------|---------|-------------|-------------|
| L0     | 12      | — terminal  | —           |
| L1     | 9       | 12          | L0          |
| L2     | 6       | 9           | L1          |
| L3     | 3       | 6           | L2          |
| active | 0       | 3           | L3 (graduation) |

Items are keyed by prefix: ``file:PATH`` (full file content selected in active context),
``symbol:PATH`` (the file's symbol-map entry) and ``history:ID`` (one conversation message,
immutable). Fixed L0 content (system prompt, legend, tool schemas) is placed in L0 at
construction and never moves; it is not an item and appears in no snapshot.

One `update` is one request, in the seed's order of operations:

1. demotions (content hash changed, or key in `modified`; a modified ``file:`` also marks its
   ``symbol:``): N = 0, back to active, the former tier invalidated;
2. removals (absent now, or `deleted`): gone from their tier, which is invalidated. An unchecked
   file's symbol entry is no longer excluded from the symbol map, so it reappears in active with
   N = 0; a deleted file takes its symbol entry with it;
3. (the caller rebuilt the symbol index: new symbol contents are the hashes compared in 1);
4. the current active set: new items enter active with N = 0;
5. files/symbols with N ≥ 3 graduate to L3 (a graduation ripple);
6. a file-selection ripple is a change of the active file/symbol set since the last request;
7. active history graduates to L3 on any ripple (all of it), or, with no ripple, when its tokens
   exceed `cache_target_tokens` (oldest first, see `_history_to_graduate`), never when the target
   is 0;
8. the cascade (see `_run_tier`), the only place N grows;
9. the active file/symbol set is stored for step 6 of the next request.

Cascade. The seed's cascade is "bottom-up" for content (active → L3 → L2 → L1 → L0) while the
invalidation signal travels top-down; its worked example (a check of file F breaks L1, L2
veterans fill L1, L3 veterans fill L2, active graduates fill L3) needs each tier's decision to
see whether the tier above ends up invalidated. So decisions are taken from L0 down to L3, each
seeing the final state of the tier above, and the moves are applied afterwards. This is the
fixed point of the bottom-up description; it gives the same result because items entering a
tier on this request sit below every veteran and never change a veteran's fate.

Interpretations of the seed, stated once here:

- promotion uses N ≥ threshold (the seed says both "reaches" and "exceeds");
- items entering a tier on this request (new, demoted, graduated, promoted) keep that tier's
  entry N for the request; N++ applies to veterans, i.e. items that survived a request in the
  tier ("Item unchanged across a request: N increments");
- the active tier has no token gating (it is not a cache block); its N++ is capped at 3, since
  graduation, not promotion, takes items out of it;
- `invalidated` lists cached tiers only (active is never cached). On the first request every
  cached tier that has content is a miss (nothing was sent before).

A consequence of the guard, implemented as written: L0 is invalidated only on the first request
(nothing cached yet; L1 items are then at 9 + 1 < 12) or when an L0 item changes or leaves, and
the fixed L0 content never changes, so a fresh tracker never promotes anything into L0.

The one adaptation (project requirement): history is whole conversation turns and must be laid
out in time order across tiers (L0 history before L1 history ... before active history), since
providers reject a tool call split from its result. So history leaves a tier oldest-first only:
a history item promotes only when every older history item is already in a tier at least as
high as the destination, otherwise it is held like a stuck item (N++ capped at the threshold);
graduation to L3 is oldest-first too. To keep the order when history is rewritten, a new or
changed history item that is not at the end demotes every later history item to active, and
reordering tracked history items is a caller error (`ValueError`).

There is no persistence: a tracker lives for one session.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from evals.prompt_cache.clustering import assign_tiers
from evals.prompt_cache.tokens import estimate_tokens

Tier = Literal["L0", "L1", "L2", "L3", "active"]
TIERS: tuple[Tier, ...] = ("L0", "L1", "L2", "L3", "active")
"""All tiers in layout order, most stable first."""
CACHED_TIERS: tuple[Tier, ...] = ("L0", "L1", "L2", "L3")
"""Tiers that are cache blocks (each ends with a breakpoint when it has content)."""

ENTRY_N: Mapping[Tier, int] = {"L0": 12, "L1": 9, "L2": 6, "L3": 3, "active": 0}
"""N an item gets when it enters the tier."""
PROMOTION_N: Mapping[Tier, int | None] = {"L0": None, "L1": 12, "L2": 9, "L3": 6, "active": 3}
"""N at which an item may leave the tier upward (None: L0 is terminal). For active this is the
graduation threshold of files and symbols."""
TIER_ABOVE: Mapping[Tier, Tier | None] = {
    "L0": None,
    "L1": "L0",
    "L2": "L1",
    "L3": "L2",
    "active": "L3",
}
GRADUATION_N = 3
"""Files and symbols with N >= 3 leave active for L3 (history is eligible at once)."""
RANK: Mapping[Tier, int] = {tier: index for index, tier in enumerate(TIERS)}
"""0 for L0 ... 4 for active: lower is higher (more stable, earlier in the request)."""

Kind = Literal["file", "symbol", "history", "fixed"]
FILE_PREFIX = "file:"
SYMBOL_PREFIX = "symbol:"
HISTORY_PREFIX = "history:"


@dataclass(frozen=True)
class TierConfig:
    """Token gating of the tiers (the seed's `cacheMinTokens`, `cacheBufferMultiplier`)."""

    cache_min_tokens: int = 1024
    """Provider minimum for a cache block (Anthropic: 1024); 0 disables token gating and
    history graduation."""
    cache_buffer_multiplier: float = 1.5
    """Safety margin over the minimum, > 0."""

    def __post_init__(self) -> None:
        if self.cache_min_tokens < 0:
            raise ValueError(f"cache_min_tokens must be >= 0, got {self.cache_min_tokens}")
        if self.cache_buffer_multiplier <= 0:
            raise ValueError(
                f"cache_buffer_multiplier must be > 0, got {self.cache_buffer_multiplier}"
            )

    @property
    def cache_target_tokens(self) -> int:
        """``cache_min_tokens × cache_buffer_multiplier`` rounded to an int (1536 by default);
        0 when `cache_min_tokens` is 0."""
        if self.cache_min_tokens == 0:
            return 0
        return round(self.cache_min_tokens * self.cache_buffer_multiplier)


def kind_of(key: str) -> Kind:
    """Item kind from the key prefix; any other key is fixed L0 content."""
    if key.startswith(FILE_PREFIX):
        return "file"
    if key.startswith(SYMBOL_PREFIX):
        return "symbol"
    if key.startswith(HISTORY_PREFIX):
        return "history"
    return "fixed"


def path_of(key: str) -> str:
    """File path of a ``file:`` or ``symbol:`` key."""
    for prefix in (FILE_PREFIX, SYMBOL_PREFIX):
        if key.startswith(prefix):
            return key[len(prefix) :]
    raise ValueError(f"{key!r} is not a file: or symbol: key")


def content_hash(content: str) -> str:
    """SHA256 hex digest of an item's content (a history item's content is "role:content")."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Item:
    """One unit of prompt content as the caller sends it on a request."""

    key: str
    """``file:PATH``, ``symbol:PATH``, ``history:ID``; any other key is fixed L0 content."""
    content: str
    """What is sent (and hashed). For history use `history_item`, which makes it "role:content"."""
    tokens: int
    """Tokens of `content`, from provider usage or `tokens.estimate_tokens`; >= 0."""

    @property
    def kind(self) -> Kind:
        return kind_of(self.key)


def history_item(key: str, role: str, text: str, tokens: int | None = None) -> Item:
    """A history item whose content (and so hash) is ``"role:content"``; `key` gets the
    ``history:`` prefix if it lacks it; tokens default to the estimate of `text`."""
    full_key = key if key.startswith(HISTORY_PREFIX) else HISTORY_PREFIX + key
    return Item(full_key, f"{role}:{text}", estimate_tokens(text) if tokens is None else tokens)


@dataclass(frozen=True)
class TierSnapshot:
    """The tiers after one request.

    `tiers[T]` lists T's item keys in layout order: symbol entries, then files (each in the order
    they entered T), then history in time order. Fixed L0 content is not listed. A cached tier
    not in `invalidated` has exactly the keys, order and contents of the previous request.
    """

    tiers: Mapping[Tier, tuple[str, ...]]
    """Item keys per tier (every tier present, possibly empty), in layout order."""
    invalidated: frozenset[Tier]
    """Cached tiers (L0–L3) whose content changed on this request (a cache miss)."""
    n: Mapping[str, int]
    """N of every tracked item."""
    tokens: Mapping[Tier, int]
    """Item tokens per tier (fixed L0 content excluded)."""


@dataclass
class _Entry:
    """Tracker state of one item; only `StabilityTracker` touches it."""

    kind: Kind
    content_hash: str
    tokens: int
    n: int
    """Stability counter: entry N of its tier, then +1 per request survived (see `_run_tier`)."""
    tier: Tier
    entered: int
    """Logical clock of entry into `tier`: the layout order of files and symbols in a tier."""
    time: int = -1
    """History only: position in the latest request's history (time order)."""


class StabilityTracker:
    """Tier assignment of files, symbol entries and history for one session (see module doc).

    Each tier keeps its items in priority order, N descending, ties by earlier entry; the order
    is maintained across requests (merged, never re-sorted) and drives the token walk.
    """

    def __init__(self, config: TierConfig = TierConfig(), fixed_l0: Sequence[Item] = ()) -> None:
        for item in fixed_l0:
            if item.kind != "fixed":
                raise ValueError(f"fixed L0 content needs a non-item key, got {item.key!r}")
        self._config = config
        self._fixed_l0 = tuple(fixed_l0)
        self._entries: dict[str, _Entry] = {}
        self._order: dict[Tier, list[str]] = {tier: [] for tier in TIERS}
        self._clock = 0
        self._requests = 0
        self._last_active: frozenset[str] = frozenset()
        self._pending_invalid: set[Tier] = set()
        self._request_clock = 0
        """`_clock` when the request being processed began: later entries are fresh."""

    # ----- read access

    @property
    def config(self) -> TierConfig:
        return self._config

    @property
    def fixed_l0(self) -> tuple[Item, ...]:
        return self._fixed_l0

    @property
    def fixed_l0_tokens(self) -> int:
        return sum(item.tokens for item in self._fixed_l0)

    def tier_of(self, key: str) -> Tier:
        """Tier of a tracked item (KeyError if untracked)."""
        return self._entries[key].tier

    def n_of(self, key: str) -> int:
        """N of a tracked item (KeyError if untracked)."""
        return self._entries[key].n

    # ----- session start

    def initialize(
        self,
        symbols: Sequence[Item],
        deps: Mapping[str, Collection[str]],
        active_files: Collection[str] = (),
    ) -> None:
        """Place symbol entries in L1/L2/L3 by clustering the mutual-reference graph.

        `deps[A]` is the set of file paths A references; `active_files` are the paths selected
        in active context, whose symbol entries are excluded. Each placed entry gets its tier's
        entry N. Call once, before the first `update`.
        """
        if self._requests or self._entries:
            raise ValueError("initialize() runs once, before the first update()")
        for item in symbols:
            if item.kind != "symbol":
                raise ValueError(f"initialize() takes symbol: entries, got {item.key!r}")
        excluded = set(active_files)
        kept = [item for item in symbols if path_of(item.key) not in excluded]
        tokens = {path_of(item.key): item.tokens for item in kept}
        if len(tokens) != len(kept):
            raise ValueError("duplicate symbol keys in initialize()")
        placement = assign_tiers(tokens, deps, cache_target_tokens=self._config.cache_target_tokens)
        for item in kept:
            tier = placement[path_of(item.key)]
            self._entries[item.key] = self._new_entry(item, tier)
            self._order[tier].append(item.key)

    # ----- one request

    def update(
        self,
        *,
        files: Sequence[Item] = (),
        symbols: Sequence[Item] = (),
        history: Sequence[Item] = (),
        modified: Collection[str] = (),
        deleted: Collection[str] = (),
    ) -> TierSnapshot:
        """Apply one request and return the tiers to send.

        `files`: full-content files selected in active context (``file:`` keys); `symbols`: the
        project's symbol entries (``symbol:``; those of selected files are excluded here);
        `history`: all history items in time order (``history:``; tracked items must keep their
        relative order); `modified`: keys edited since the last request; `deleted`: keys of
        deleted files (their ``symbol:`` entry goes too; none may be in this request).
        """
        modified_keys = _with_symbols(modified)
        deleted_keys = _with_symbols(deleted)
        present = _present_items(files, symbols, history, deleted_keys)
        self._check_history_order(history)
        marked = self._start_marks()
        self._request_clock = self._clock

        self._demote_changed(present, history, modified_keys, marked)  # step 1
        for key in [key for key in self._entries if key not in present]:  # step 2
            self._remove(key, marked)
        self._track(present, history)  # steps 3-4

        active_now = self._active_file_symbols()
        graduating = [  # step 5
            key
            for key in self._order["active"]
            if self._entries[key].kind != "history" and self._entries[key].n >= GRADUATION_N
        ]
        ripple = active_now != self._last_active or bool(graduating)  # step 6
        graduating += self._history_to_graduate(ripple)  # step 7
        self._cascade(graduating, marked)  # step 8
        self._last_active = self._active_file_symbols()  # step 9
        self._requests += 1
        self._assert_history_in_time_order()
        return self.snapshot(frozenset(marked))

    def purge_history(self) -> None:
        """History compaction (`remove_by_prefix("history:")`): drop every history item; the
        tiers that held some are reported invalidated on the next request."""
        for key in [key for key, entry in self._entries.items() if entry.kind == "history"]:
            self._remove(key, self._pending_invalid)

    def snapshot(self, invalidated: frozenset[Tier] = frozenset()) -> TierSnapshot:
        """The current tiers in layout order (`invalidated` as given)."""
        tiers = {tier: self._layout_keys(tier) for tier in TIERS}
        return TierSnapshot(
            tiers=tiers,
            invalidated=invalidated,
            n={key: entry.n for key, entry in self._entries.items()},
            tokens={
                tier: sum(self._entries[key].tokens for key in keys) for tier, keys in tiers.items()
            },
        )

    # ----- steps

    def _start_marks(self) -> set[Tier]:
        """Tiers invalidated before anything moves: those purged since the last request and, on
        the first request, every cached tier with content (nothing was cached yet)."""
        marked = set(self._pending_invalid)
        self._pending_invalid.clear()
        if self._requests == 0:
            marked |= {tier for tier in CACHED_TIERS if self._order[tier]}
            if self._fixed_l0:
                marked.add("L0")
        return marked

    def _demote_changed(
        self,
        present: Mapping[str, Item],
        history: Sequence[Item],
        modified: set[str],
        marked: set[Tier],
    ) -> None:
        """Step 1: tracked items whose hash changed or that were modified go back to active at
        N = 0; so does every history item after the first new or changed one (time order)."""
        first_changed = self._first_changed_history(history, modified)
        for key, item in present.items():
            entry = self._entries.get(key)
            if entry and (entry.content_hash != content_hash(item.content) or key in modified):
                self._demote(key, item, marked)
        for item in history[first_changed + 1 :]:
            entry = self._entries.get(item.key)
            if entry and entry.tier != "active":
                self._demote(item.key, item, marked)

    def _track(self, present: Mapping[str, Item], history: Sequence[Item]) -> None:
        """Steps 3-4: new items enter active at N = 0; history takes its time from its position
        in this request's history; known items take the caller's current token count."""
        for key, item in present.items():
            entry = self._entries.get(key)
            if entry is None:
                self._entries[key] = self._new_entry(item, "active")
                self._order["active"].append(key)
            else:
                entry.tokens = item.tokens
        for time, item in enumerate(history):
            self._entries[item.key].time = time

    def _check_history_order(self, history: Sequence[Item]) -> None:
        times = [self._entries[item.key].time for item in history if item.key in self._entries]
        if any(later <= earlier for earlier, later in pairwise(times)):
            raise ValueError("tracked history items were reordered; history is append-only")

    def _first_changed_history(self, history: Sequence[Item], modified: set[str]) -> int:
        """Index of the first history item that is new or changed (len(history) if none)."""
        for index, item in enumerate(history):
            entry = self._entries.get(item.key)
            if (
                entry is None
                or entry.content_hash != content_hash(item.content)
                or item.key in modified
            ):
                return index
        return len(history)

    def _history_to_graduate(self, ripple: bool) -> list[str]:
        """Active history graduating to L3 (step 7), oldest first.

        Any ripple: all of it (the cache blocks break anyway). No ripple: only when its tokens
        exceed `cache_target_tokens`, and then the oldest items until the graduated tokens reach
        the target. One target-sized block is what the rule is for (the new L3 content meets the
        provider minimum), and the newest turns wait for the next ripple or the next full block,
        so a long session does not break L3 on every request once history is large. Never when
        the target is 0.
        """
        target = self._config.cache_target_tokens
        if target == 0:
            return []
        active = sorted(
            (key for key in self._order["active"] if self._entries[key].kind == "history"),
            key=lambda key: self._entries[key].time,
        )
        if ripple:
            return active
        if sum(self._entries[key].tokens for key in active) <= target:
            return []
        chosen: list[str] = []
        total = 0
        for key in active:
            if total >= target:
                break
            chosen.append(key)
            total += self._entries[key].tokens
        return chosen

    def _cascade(self, graduating: list[str], marked: set[Tier]) -> None:
        """Steps 5, 7 and 8: move graduates to L3, run every cached tier, bump active N."""
        incoming: dict[Tier, list[str]] = {tier: [] for tier in TIERS}
        incoming["L3"] = list(graduating)
        for key in graduating:
            self._order["active"].remove(key)
        if graduating:
            marked.add("L3")
        for tier in CACHED_TIERS:
            outgoing = self._run_tier(tier, marked)
            above = TIER_ABOVE[tier]
            if outgoing and above is not None:
                marked |= {tier, above}
                incoming[above] += outgoing
        for key in self._order["active"]:
            entry = self._entries[key]
            if not self._is_fresh(entry):
                entry.n = min(entry.n + 1, GRADUATION_N)
        for tier in CACHED_TIERS:
            for key in incoming[tier]:
                self._admit(key, tier)

    def _run_tier(self, tier: Tier, marked: set[Tier]) -> list[str]:
        """The seed's per-tier algorithm on `tier`'s veterans; returns the items promoting out.

        Walk the priority order from the top: while the accumulated tokens are below
        `cache_target_tokens` the item is held back (N frozen); every later item gets N++. If the
        tier above is invalidated, an incremented item with N ≥ the promotion threshold promotes
        out (history oldest-first only, see `_promotable`); otherwise N++ is capped at the
        threshold. Entrants of this request are added after this runs, at the bottom.
        """
        order = self._order[tier]
        target = self._config.cache_target_tokens
        held: list[str] = []
        rest: list[str] = []
        accumulated = 0
        for key in order:
            if accumulated < target:
                held.append(key)
                accumulated += self._entries[key].tokens
            else:
                rest.append(key)
        threshold = PROMOTION_N[tier]
        above = TIER_ABOVE[tier]
        open_above = above is not None and above in marked
        candidates = {
            key
            for key in rest
            if open_above and threshold is not None and self._entries[key].n + 1 >= threshold
        }
        outgoing = [key for key in rest if key in self._promotable(tier, candidates)]
        staying = [key for key in rest if key not in outgoing]
        for key in staying:
            entry = self._entries[key]
            entry.n = entry.n + 1 if threshold is None else min(entry.n + 1, threshold)
        self._order[tier] = _merge_by_n(held, staying, self._entries)
        return outgoing

    def _promotable(self, tier: Tier, candidates: set[str]) -> set[str]:
        """Candidates that may leave: files and symbols all; history only as the oldest run of
        the tier's history (every older history item is then at least as high as the
        destination, since lower tiers hold only newer history)."""
        allowed = {key for key in candidates if self._entries[key].kind != "history"}
        for key in self._history_of(tier):
            if key not in candidates:
                break
            allowed.add(key)
        return allowed

    # ----- entry mechanics

    def _new_entry(self, item: Item, tier: Tier) -> _Entry:
        self._clock += 1
        return _Entry(
            kind=item.kind,
            content_hash=content_hash(item.content),
            tokens=item.tokens,
            n=ENTRY_N[tier],
            tier=tier,
            entered=self._clock,
        )

    def _is_fresh(self, entry: _Entry) -> bool:
        """Entered its tier on the request being processed (no N++ on that request)."""
        return entry.entered > self._request_clock

    def _demote(self, key: str, item: Item, marked: set[Tier]) -> None:
        """Content changed: N = 0, back to active; the former tier is invalidated."""
        self._remove(key, marked)
        self._entries[key] = self._new_entry(item, "active")
        self._order["active"].append(key)

    def _remove(self, key: str, marked: set[Tier]) -> None:
        entry = self._entries.pop(key)
        self._order[entry.tier].remove(key)
        if entry.tier != "active":
            marked.add(entry.tier)

    def _admit(self, key: str, tier: Tier) -> None:
        """Enter `tier` at its entry N, at the bottom of its priority order."""
        entry = self._entries[key]
        assert all(self._entries[other].n >= ENTRY_N[tier] for other in self._order[tier]), (
            f"an item in {tier} has N below its entry N: N was changed outside _run_tier"
        )
        self._clock += 1
        entry.tier = tier
        entry.n = ENTRY_N[tier]
        entry.entered = self._clock
        self._order[tier].append(key)

    # ----- views

    def _active_file_symbols(self) -> frozenset[str]:
        return frozenset(
            key for key in self._order["active"] if self._entries[key].kind != "history"
        )

    def _history_of(self, tier: Tier) -> list[str]:
        keys = [key for key in self._order[tier] if self._entries[key].kind == "history"]
        return sorted(keys, key=lambda key: self._entries[key].time)

    def _layout_keys(self, tier: Tier) -> tuple[str, ...]:
        def entered(kind: Kind) -> list[str]:
            keys = [key for key in self._order[tier] if self._entries[key].kind == kind]
            return sorted(keys, key=lambda key: self._entries[key].entered)

        return (*entered("symbol"), *entered("file"), *self._history_of(tier))

    def _assert_history_in_time_order(self) -> None:
        history = sorted(
            (entry for entry in self._entries.values() if entry.kind == "history"),
            key=lambda entry: entry.time,
        )
        ranks = [RANK[entry.tier] for entry in history]
        assert ranks == sorted(ranks), (
            "history out of time order across tiers: a history item left a tier before an "
            "older one (see _promotable / _history_to_graduate)"
        )


def _with_symbols(keys: Iterable[str]) -> set[str]:
    """`keys` plus the ``symbol:`` entry of every ``file:`` key; unknown prefixes are misuse."""
    expanded: set[str] = set()
    for key in keys:
        kind = kind_of(key)
        if kind == "fixed":
            raise ValueError(f"{key!r} is not an item key (file:, symbol:, history:)")
        expanded.add(key)
        if kind == "file":
            expanded.add(SYMBOL_PREFIX + path_of(key))
    return expanded


def _present_items(
    files: Sequence[Item],
    symbols: Sequence[Item],
    history: Sequence[Item],
    deleted: set[str],
) -> dict[str, Item]:
    """Items sent on this request, by key: files, the symbol entries of unselected files,
    history. Validates prefixes, duplicates and that nothing deleted is sent."""
    present: dict[str, Item] = {}
    for items, kind in ((files, "file"), (symbols, "symbol"), (history, "history")):
        for item in items:
            if item.kind != kind:
                raise ValueError(f"{kind} items need the {kind}: prefix, got {item.key!r}")
            if item.tokens < 0:
                raise ValueError(f"{item.key!r} has negative tokens")
            if item.key in present:
                raise ValueError(f"duplicate item {item.key!r}")
            if item.key in deleted:
                raise ValueError(f"{item.key!r} is deleted but was sent on this request")
            present[item.key] = item
    selected = {path_of(item.key) for item in files}
    return {
        key: item
        for key, item in present.items()
        if not (item.kind == "symbol" and path_of(key) in selected)
    }


def _merge_by_n(first: list[str], second: list[str], entries: Mapping[str, _Entry]) -> list[str]:
    """Merge two N-descending lists into one; on equal N, `first` comes first."""
    merged: list[str] = []
    i = j = 0
    while i < len(first) and j < len(second):
        if entries[first[i]].n >= entries[second[j]].n:
            merged.append(first[i])
            i += 1
        else:
            merged.append(second[j])
            j += 1
    return merged + first[i:] + second[j:]
