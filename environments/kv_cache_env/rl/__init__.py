"""Reinforcement learning over the simulator: numeric `features` of an observation (also used by
the learned and expert policies), the Gymnasium env `kvcache/Serving-v0` (`gym`, registered on
import; needs the `gym` extra) and its batched vector env (`gym_vector`)."""

GYM_EXTRA = (
    "the Gymnasium environments need the optional gym extra: uv sync --extra gym "
    "(or pip install 'kvcache-arena[gym]')"
)
"""What a missing `gymnasium` says: the command that installs it."""
