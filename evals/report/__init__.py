"""The leaderboard report over every family's results (`kvarena report`): `build` loads run
directories, ranks agents per scenario (normalized against noop and the bound, paired), and
writes `leaderboard.md` and a self-contained `index.html` with its figures; `commands` is the
command's option parsing. (Nothing is imported here: `kvarena`'s start-up stays light.)"""
