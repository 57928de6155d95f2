"""Debian's Chromium for the browser and hub tests, driven by Playwright (never `playwright
install`: /usr/bin/chromium is the browser)."""
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
# headless on a machine with no network: without the background-networking flags Chromium keeps
# trying (and failing) to reach Google's services
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def what_is_missing():
    """Why a browser test cannot run here ([] = it can)."""
    missing = []
    if not CHROMIUM.exists():
        missing.append(f"{CHROMIUM} is not installed")
    try:
        import playwright  # noqa: F401
    except ImportError:
        missing.append("playwright is not installed in this environment")
    return missing


def check_screenshot(path: Path, min_std=0.02):
    """The PNG decodes, has a real size and is not one flat colour."""
    import matplotlib.image as mpimg
    import numpy as np

    image = mpimg.imread(path)
    assert image.ndim == 3 and image.shape[0] > 300 and image.shape[1] > 300, image.shape
    std = float(np.asarray(image[..., :3], dtype=float).std())
    assert std > min_std, f"{path.name} looks blank (pixel std {std:.4f})"
