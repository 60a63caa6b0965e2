"""Reinforcement learning over the simulator: numeric `features` of an observation (also used by
the learned and expert policies), the Gymnasium env `kvcache/Serving-v0` (`gym`, registered on
import; needs the `gym` extra) and its batched vector env (`gym_vector`)."""
