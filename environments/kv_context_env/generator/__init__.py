"""The conversation generator of the context family: `generate_conversation(seed, level)`
(`conversation`) plans a world (`plan`: subjects, facts, asks, updates, signals) at a
difficulty (`levels`), draws its values (`valuegen`) from the vocabulary (`lexicon`, package
data in `data/lexicon.json`), words it (`wording`, `signal_text`), places its text in blocks
(`blocks`) and sizes its live load against the budget (`load`). Pure and deterministic:
everything comes from the seed.
"""
