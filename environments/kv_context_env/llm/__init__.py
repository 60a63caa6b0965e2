"""The chat-model boundary of the context family: `agent` (the tool schemas, the observation
text and the turn loop shared by hosted-model evals and the verifiers taskset) and
`chat_reader` (an OpenAI-compatible chat model as the reader).
"""
