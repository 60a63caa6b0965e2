"""One episode of the context family: a long chat arrives message by message into a block
cache (`cache`, with the engine's prioritized-LRU fallback); removed blocks become events the
`tracker` turns into archived turns (`archive`, SQLite with FTS5 recall); `episode` plays it
and records every answer, judged by the value check (`values`) and ROUGE-L (`scoring`).
"""
