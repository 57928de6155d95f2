"""Loaded by every pytest run in this repository, the whole suite or one notebook under nbval: no test
downloads anything. Lecture 9 and tests/test_real_models.py build their transformers models from
configurations, and the kernels that nbval starts inherit HF_HUB_OFFLINE, so the lecture's cells for the
real GPT-2 skip instead of downloading it."""
import os

os.environ["HF_HUB_OFFLINE"] = "1"
