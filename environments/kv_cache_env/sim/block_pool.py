"""The GPU block pool: exact accounting of every physical KV block.

A block is in exactly one of four states, and the four counts always sum to `num_blocks`:

- **free**: holds nothing (`num_free`);
- **private**: holds a sequence's own tokens (`num_private`; sequences own the per-sequence
  counts, the pool only the total - private blocks are interchangeable, so they are counted, not
  named);
- **shared**: a content-addressed prefix block with reference count > 0 (`ref_counts`; the
  pool keeps `shared`, the same keys, see below);
- **cached**: a prefix block whose count fell to 0. It still holds its tokens and is reused on a
  prefix hit, but it counts as available and is reclaimed least recently used first when fresh
  blocks run out (vLLM v1's free-block queue; `cached` is ordered LRU first).

Usage, as vLLM reports it, is `(num_private + shared) / num_blocks`: cached blocks are free.

A prefix hash names `unit` blocks (1 for per-block hashes; a trace's 512-token hash block is 32
16-token blocks): the blocks of one hash are stored, shared, cached and reclaimed together, so
`shared` and `cached` count `unit` blocks per hash.

References are counted per distinct chain, not per holder: `shared` maps each referenced hash
to its occurrences in the chains held now (each chain once, however many hold it), and
`holders` how many hold each chain. A popular system prompt of ~30 hashes is held by most
requests of a synthetic episode; its per-hash counts change only when its first holder comes
and its last one leaves, and the holders in between cost one dictionary update each (the same
idea as `reference.py`'s). `ref_counts`, the per-holder count vLLM keeps per block
(`KVCacheBlock.ref_cnt`), is derived from the two. Which hashes are referenced, and the order in
which they become cached (the last holder's release, tail first), are the same either way.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from itertools import repeat
from operator import countOf


class BlockPool:
    __slots__ = (
        "_hit_memo",
        "cached",
        "holders",
        "num_blocks",
        "num_free",
        "num_private",
        "peak_used",
        "shared",
        "unit",
    )

    def __init__(self, num_blocks: int, unit: int = 1, *, reclaims: bool = True) -> None:
        """`reclaims=False` promises the pool never runs short of free blocks (the reference
        engine played step by step, `simulator.run_reference_stepwise`), so no cached block is
        ever reclaimed and `cached` needs no LRU order: a plain dict, about half the memory of
        an OrderedDict for the ~180 k cached hashes of a full Mooncake replay. A reclaim from
        it fails loudly."""
        if num_blocks < 1:
            raise ValueError(f"a block pool needs at least 1 block, got {num_blocks}")
        if unit < 1:
            raise ValueError(f"a prefix hash names at least 1 block, got {unit}")
        self.unit = unit
        self.num_blocks = num_blocks
        self.num_free = num_blocks
        self.num_private = 0
        self.shared: dict[int, int] = {}
        """Referenced prefix hashes (the keys: shared blocks), each with its occurrences in
        the distinct chains held now (`holders`' keys)."""
        self.holders: dict[tuple[int, ...], int] = {}
        """How many hold each chain (by content), while at least one does."""
        self.cached: OrderedDict[int, None] | dict[int, None] = OrderedDict() if reclaims else {}
        self.peak_used = 0
        self._hit_memo: dict[int, tuple[Sequence[int], tuple[int, int]]] = {}
        """`cached_hit_length` per chain object (by id, the chain kept alive beside its answer),
        valid until a hash changes state (stored, cached, taken back, reclaimed): the queue's
        head is looked up every step while it waits, and every waiting request every turn."""

    # --- views -------------------------------------------------------------------------------
    @property
    def available(self) -> int:
        """Blocks an allocation can take now: free plus reclaimable cached prefix blocks."""
        return self.num_free + len(self.cached) * self.unit

    @property
    def used(self) -> int:
        return self.num_private + len(self.shared) * self.unit

    @property
    def ref_counts(self) -> dict[int, int]:
        """Holders per referenced hash (a holder counts each occurrence in its chain): what
        vLLM's per-block `ref_cnt` would read. Built on each call: for checks and reports."""
        counts: dict[int, int] = {}
        for chain, holders in self.holders.items():
            for h in chain:
                counts[h] = counts.get(h, 0) + holders
        return counts

    def sole_held(self, chain: Sequence[int]) -> int:
        """Hashes of the held `chain` that its holder alone references (0 when several hold
        it): what evicting that holder releases, in hashes (x `unit` for blocks)."""
        if self.holders[_key(chain)] > 1:
            return 0
        return countOf(map(self.shared.__getitem__, chain), 1)

    @property
    def cached_blocks(self) -> int:
        """Blocks held by cached (reference count 0, reclaimable) prefix hashes."""
        return len(self.cached) * self.unit

    def cached_hit_length(self, hashes: Sequence[int]) -> tuple[int, int]:
        """Longest leading run of `hashes` held in the pool, and how many of those are cached
        (reference count 0), in hashes (x `unit` for blocks). A chain stops at its first miss,
        as in vLLM's find_longest_cache_hit. The answer is remembered per chain object until a
        hash changes state, so a chain must not be mutated (the engine's are tuples)."""
        memo = self._hit_memo.get(id(hashes))
        if memo is not None and memo[0] is hashes:
            return memo[1]
        counts = self.shared
        if all(map(counts.__contains__, hashes)):
            # The common case (a popular prefix held by running sequences), checked in one
            # C-level pass instead of a Python loop over the chain.
            found = len(hashes), 0
        else:
            hits = cached = 0
            for h in hashes:
                if h in counts:
                    hits += 1
                elif h in self.cached:
                    hits += 1
                    cached += 1
                else:
                    break
            found = hits, cached
        self._hit_memo[id(hashes)] = (hashes, found)
        return found

    # --- private blocks ----------------------------------------------------------------------
    def allocate(self, n: int) -> list[int]:
        """Take `n` blocks for private use. Returns the hashes of cached prefix blocks that had
        to be reclaimed (their contents are gone). Caller misuse raises ValueError."""
        if n < 0:
            raise ValueError(f"cannot allocate {n} blocks")
        if n > self.available:
            raise ValueError(f"no free blocks: need {n}, available {self.available}")
        reclaimed = self._take(n)
        self.num_private += n
        self.note_peak()
        return reclaimed

    def take_free(self, n: int) -> None:
        """Take `n` blocks the caller knows are free (`n <= num_free`: no cached block is
        reclaimed) for private use, and note the peak. The engine's decode loop counts the
        growth of many sequences against `num_free` and takes it here in one call (vLLM's
        `allocate_slots` for a batch, without `allocate`'s checks)."""
        self.num_free -= n
        self.num_private += n
        used = self.num_private + len(self.shared) * self.unit
        if used > self.peak_used:
            self.peak_used = used

    def free(self, n: int) -> None:
        """Return `n` private blocks."""
        if n < 0 or n > self.num_private:
            raise ValueError(f"cannot free {n} private blocks, {self.num_private} in use")
        self.num_private -= n
        self.num_free += n

    # --- shared prefix blocks ----------------------------------------------------------------
    def acquire_prefix(
        self, hashes: Sequence[int], hits: int | None = None
    ) -> tuple[int, list[int], list[int]]:
        """Reference every block of the chain `hashes`: hits are shared (a cached one is taken
        back off the LRU queue), misses get fresh blocks. Returns (hits, stored, reclaimed):
        the hashes newly stored and the cached hashes reclaimed to make room. `hits` may pass
        in a `cached_hit_length` just computed (nothing may change in between)."""
        if not hashes:
            return 0, [], []  # nothing to reference (and no chain to count holders of)
        key = _key(hashes)
        holders = self.holders.get(key)
        if holders:
            # another holder already references every hash of this chain: they all hit, and
            # no hash changes state
            self.holders[key] = holders + 1
            return len(hashes), [], []
        if hits is None:
            hits, _ = self.cached_hit_length(hashes)
        counts = self.shared
        cached = self.cached
        get = counts.get  # one lookup per hash instead of `in` then `+=` (two)
        for h in hashes[:hits]:
            count = get(h)
            if count:
                counts[h] = count + 1
            else:
                del cached[h]
                counts[h] = 1
                self._hit_memo.clear()  # a cached hash is shared again
        stored = list(hashes[hits:])
        fresh = dict.fromkeys(stored, 1)
        if stored and (
            len(fresh) < len(stored)
            or not counts.keys().isdisjoint(fresh)
            or not cached.keys().isdisjoint(fresh)
        ):
            fresh = self._acquire_scattered(stored)
            stored = list(fresh)
        need = len(stored) * self.unit
        if need > self.available:
            raise ValueError(f"no free blocks: need {need}, available {self.available}")
        reclaimed = self._take(need)
        if stored:
            counts.update(fresh)  # a chain's misses: new hashes, in chain order, in C
            self._hit_memo.clear()
        self.holders[key] = 1
        self.note_peak()
        return hits, stored, reclaimed

    def _acquire_scattered(self, tail: list[int]) -> dict[int, int]:
        """The part of a chain after its first miss when it is not a hash chain (a hash
        repeated, or one held or cached after the miss; no built-in schedule has either):
        what is held or cached is referenced as a hit, every occurrence counted; returns the
        new hashes with their occurrences, to be stored."""
        counts = self.shared
        cached = self.cached
        new: dict[int, int] = {}
        for h in tail:
            if h in new:
                new[h] += 1
            elif h in counts:
                counts[h] += 1
            elif h in cached:
                del cached[h]
                counts[h] = 1
                self._hit_memo.clear()
            else:
                new[h] = 1
        return new

    def release_prefix(self, hashes: Sequence[int]) -> int:
        """Drop one reference to each block of the chain. Blocks reaching 0 stay cached; the
        chain is released tail first so its tail is reclaimed first (vLLM frees in reverse).
        Returns how many hashes reached 0 (the ones the caller held alone; x `unit` for blocks)."""
        if not hashes:
            return 0
        key = _key(hashes)
        holders = self.holders[key] - 1
        if holders:
            self.holders[key] = holders  # others still hold the chain: nothing is released
            return 0
        del self.holders[key]
        counts = self.shared
        cached = self.cached
        released = 0
        for h in reversed(hashes):
            count = counts[h] - 1
            if count:
                counts[h] = count
            else:
                del counts[h]
                cached[h] = None
                released += 1
        if released:
            self._hit_memo.clear()
        return released

    # --- internals ---------------------------------------------------------------------------
    def _take(self, n: int) -> list[int]:
        from_free = min(n, self.num_free)
        self.num_free -= from_free
        if from_free == n:
            return []
        # Reclaim whole cached hashes, least recently used first; what a unit holds beyond the
        # need goes back to the free count.
        units = -(-(n - from_free) // self.unit)
        self.num_free += units * self.unit - (n - from_free)
        cached = self.cached
        assert isinstance(cached, OrderedDict), "reclaim from a pool built with reclaims=False"
        self._hit_memo.clear()
        # (the pops as one C-level map: ~15% less than a comprehension calling popitem)
        return [h for h, _ in map(cached.popitem, repeat(False, units))]

    def note_peak(self) -> None:
        """Record the usage now as the peak if it is higher (after `allocate` and
        `acquire_prefix`, and after the engine writes its batched decode growth)."""
        used = self.num_private + len(self.shared) * self.unit
        if used > self.peak_used:
            self.peak_used = used

    def copy(self) -> BlockPool:
        clone = BlockPool.__new__(BlockPool)
        clone.unit = self.unit
        clone.num_blocks = self.num_blocks
        clone.num_free = self.num_free
        clone.num_private = self.num_private
        clone.shared = dict(self.shared)
        clone.holders = dict(self.holders)
        clone.cached = type(self.cached)(self.cached)
        clone.peak_used = self.peak_used
        clone._hit_memo = {}
        return clone

    def check(self) -> None:
        """Assert the accounting identity; a failure names the likely bug."""
        prefix = (len(self.shared) + len(self.cached)) * self.unit
        total = self.num_free + self.num_private + prefix
        assert total == self.num_blocks, (
            f"block leak: free {self.num_free} + private {self.num_private} + shared "
            f"{len(self.shared)} + cached {len(self.cached)} (x{self.unit}) != "
            f"{self.num_blocks}"
        )
        assert self.num_free >= 0 and self.num_private >= 0, "negative block count"
        assert all(c > 0 for c in self.shared.values()), "shared block with count <= 0"
        assert not (self.shared.keys() & self.cached.keys()), "block both shared and cached"
        assert all(h > 0 for h in self.holders.values()), "a chain with no holder kept"
        occurrences: dict[int, int] = {}
        for chain in self.holders:
            for h in chain:
                occurrences[h] = occurrences.get(h, 0) + 1
        assert occurrences == self.shared, "shared counts disagree with the held chains"


def _key(chain: Sequence[int]) -> tuple[int, ...]:
    """A chain as a `holders` key: its content (the engine's chains are tuples already)."""
    return chain if type(chain) is tuple else tuple(chain)
