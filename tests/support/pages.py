"""Reading an HTML page the grader wrote as a browser would: what in it could run or navigate."""
from html.parser import HTMLParser

# a written answer with what Markdown gives a student: headings below the page's, a table, a link, code
WRITTEN_ANSWER = """### Why the permutation does not matter

Each query attends to **every** key: softmax over a *set*, see `weights.sum(-1)` and
[the paper](https://arxiv.org/abs/1706.03762).

| order | output |
|:--|--:|
| any | the same |
"""

# elements that load, submit or run something of their own
ACTIVE_TAGS = ("iframe", "frame", "object", "embed", "form", "base", "svg")


def live_markup(page):
    """What in `page` could run or navigate: scripts (the page's own MathJax ones apart), event
    handlers, frames, forms, objects, inline SVG, refreshes, javascript: and data:text links."""
    found = []

    class Finder(HTMLParser):
        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            mathjax = "mathjax" in (attrs.get("src") or "") or attrs.get("type") == "text/x-mathjax-config"
            if tag == "script" and not mathjax:
                found.append(f"<script {attrs}>")
            if tag in ACTIVE_TAGS or (tag == "meta" and "http-equiv" in attrs):
                found.append(f"<{tag}>")
            for name, value in attrs.items():
                link = (value or "").strip().lower()
                if name.startswith("on"):
                    found.append(f"{tag} {name}=")
                if name in ("href", "src", "action") and link.startswith(("javascript:", "data:text")):
                    found.append(f"{tag} {name}={value}")

    Finder().feed(page)
    return found
