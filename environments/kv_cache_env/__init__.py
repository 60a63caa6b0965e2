"""kv-cache-env: an environment in which an agent manages the KV-cache of a simulated LLM server.

`kv_cache_env.sim` is the simulator (pure); the verifiers taskset is added on top of it.
"""
