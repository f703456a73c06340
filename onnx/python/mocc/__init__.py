"""MOCC (EuroSys'22) for polycc: training over the Rust simulator, online adaptation, ONNX export."""

import importlib.util
import sys

# With onnx/ on sys.path (pytest or python -m run from onnx/), the Rust crate's directory onnx/gym
# imports as an empty namespace package named "gym", and stable-baselines3's save() then fails
# reading gym.__version__. Only a namespace package is hidden; a real OpenAI Gym is left alone.
_gym = importlib.util.find_spec("gym") if "gym" not in sys.modules else None
if _gym is not None and _gym.origin in (None, "namespace"):
    sys.modules["gym"] = None  # type: ignore[assignment]  # `import gym` now raises ImportError
