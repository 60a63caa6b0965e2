"""The leaderboard report over every family's results (`kvarena report`): `build` loads run
directories, ranks agents per scenario (normalized against noop and the bound, paired), and
writes `leaderboard.md` and a self-contained `index.html` with its figures; `commands` is the
command's option parsing. (Nothing is imported here: `kvarena`'s start-up stays light.)"""

MIN_EPISODES = 3
"""Paired episodes (seeds where noop and the bound both ran) a serving scenario needs to count in
the ranking's suite mean (`ranking.rank_agents`'s `min_seeds`, in the report and at the end of
`kvarena eval`): fewer are shown, flagged, and left out unless `--min-episodes 1` asks. Here,
not in `ranking`, so that the CLI's option reads it without importing numpy at start-up."""
