"""The WCAG 2.1 A and AA checks of axe-core (axe-playwright-python bundles it) on a page the grader
wrote, opened from its file in Debian's Chromium as tests/test_browser.py opens it; and the WCAG
contrast ratio, for checks that need no browser."""
from pathlib import Path

from .browser import CHROMIUM, CHROMIUM_ARGS

WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
WIDTHS = (1280, 320)          # a desktop window, and a phone's (WCAG 1.4.10: reflow at 320 CSS px)


def contrast(foreground, background):
    """WCAG 2.1's contrast ratio of two "#rrggbb" colours (1 to 21)."""
    def luminance(colour):
        channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, b = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * r + 0.7152 * g + 0.0722 * b
    light, dark = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def describe(violations):
    """One paragraph per violation: its id, impact, rule, and each element with what to fix."""
    lines = []
    for violation in violations:
        lines.append(f"{violation['id']} ({violation['impact']}): {violation['help']} [{violation['helpUrl']}]")
        for node in violation["nodes"]:
            target = " ".join(str(t) for t in node["target"])
            summary = " ".join(node.get("failureSummary", "").split())
            lines.append(f"    {target}: {summary}")
    return "\n".join(lines)


class Checker:
    """One Chromium for many pages: `violations(path)` opens the file with every request to anything
    but a file refused (the pages load MathJax and require.js from a CDN; the machine has no network,
    and what is checked is the page's own markup), and returns axe's WCAG 2.1 A/AA violations at each
    width in WIDTHS (`tags`: axe's rule tags to run, WCAG 2.1 A and AA unless given)."""

    def __init__(self, tags=WCAG_TAGS):
        self.tags = list(tags)

    def __enter__(self):
        from axe_playwright_python.sync_playwright import Axe
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        self._browser = self._playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                                         args=CHROMIUM_ARGS)
        self._axe = Axe()
        return self

    def __exit__(self, *exc):
        self._browser.close()
        self._playwright.stop()

    def violations(self, path: Path):
        found = {}
        for width in WIDTHS:
            page = self._browser.new_page(viewport={"width": width, "height": 900})
            try:
                page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                           else route.abort())
                page.goto(Path(path).resolve().as_uri(), wait_until="load")
                results = self._axe.run(page, options={"runOnly": {"type": "tag", "values": self.tags},
                                                       "resultTypes": ["violations"]})
            finally:
                page.close()
            for violation in results.response["violations"]:
                entry = found.setdefault(violation["id"], dict(violation, nodes=[], seen=set()))
                for node in violation["nodes"]:
                    if tuple(node["target"]) not in entry["seen"]:
                        entry["seen"].add(tuple(node["target"]))
                        entry["nodes"].append(dict(node, target=[f"at {width}px:"] + list(node["target"])))
        return list(found.values())
