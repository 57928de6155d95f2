"""The feedback page shows what a student wrote; it never runs it.

nbgrader's GenerateFeedback renders the graded notebook with nbconvert's HTMLExporter, which passes
the HTML in Markdown cells and in outputs through as it is. A student may write `<script>`,
`<img onerror=...>`, `<iframe>` or a `javascript:` link into a written answer (or a Markdown cell of
their own, or make their code display HTML or JavaScript), and it would run in whoever opens the page:
the student, or the instructor, logged into the LMS or JupyterHub. FeedbackExporter (course.py
configures GenerateFeedback with it) renders each Markdown cell as nbconvert does, then keeps only
ordinary markup (ALLOWED_TAGS, ALLOWED_ATTRIBUTES: headings, emphasis, lists, tables, code, links,
images); anything else is shown as text. Outputs are made inert the same way: HTML cleaned, SVG
shown as an image (an <img> never runs a script), JavaScript and widgets dropped. Math is left to
MathJax, which the page loads with its Safe extension (no `javascript:` in \\href).

The cleaning is bleach's (nbconvert depends on it for its own, stricter `sanitize_html`, which
shows headings and paragraphs as text)."""
import base64
import copy

import bleach
from bleach.css_sanitizer import CSSSanitizer
from jinja2 import pass_context
from nbconvert.exporters import HTMLExporter

ALLOWED_TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "del", "details", "div", "dl",
    "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li",
    "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strike", "strong", "sub", "summary", "sup",
    "table", "tbody", "td", "tfoot", "th", "thead", "tr", "tt", "u", "ul", "var",
})
_CELL = ["align", "colspan", "rowspan", "style"]
ALLOWED_ATTRIBUTES = {
    "*": ["class", "id", "title"],
    "a": lambda tag, name, value: name in ("class", "id", "title", "name")
    or (name == "href" and not value.strip().lower().startswith("data:")),
    "img": lambda tag, name, value: name in ("alt", "title", "width", "height", "class")
    or (name == "src" and (not value.strip().lower().startswith("data:")
                           or value.strip().lower().startswith("data:image/"))),
    "ol": ["start", "type"], "td": _CELL, "th": _CELL, "col": ["span"], "colgroup": ["span"],
}
ALLOWED_PROTOCOLS = frozenset({"http", "https", "mailto", "data"})   # data: only for images (above)
_CSS = CSSSanitizer(allowed_css_properties=["text-align"])            # what Markdown tables write
# outputs that are code for the browser: never on the page
DROPPED_OUTPUTS = ("application/javascript", "application/vnd.jupyter.widget-view+json",
                   "application/vnd.jupyter.widget-state+json", "text/javascript")


def clean(html):
    """`html` with only ordinary markup left: a tag not allowed is shown as text, an attribute not
    allowed (on*, style beyond text-align, a javascript: or data: link) is dropped."""
    return bleach.clean(html, tags=ALLOWED_TAGS, attributes=ALLOWED_ATTRIBUTES, protocols=ALLOWED_PROTOCOLS,
                        css_sanitizer=_CSS, strip=False, strip_comments=True)


def inert_outputs(nb):
    """A copy of `nb` whose outputs cannot run anything in a browser (see the module's docstring)."""
    nb = copy.deepcopy(nb)
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data")
            if not isinstance(data, dict):
                continue
            dropped = [mime for mime in DROPPED_OUTPUTS if data.pop(mime, None) is not None]
            if "text/html" in data:
                data["text/html"] = clean(_text(data["text/html"]))
            svg = data.pop("image/svg+xml", None)
            if svg is not None and "text/html" not in data:
                encoded = base64.b64encode(_text(svg).encode()).decode()
                data["text/html"] = f'<img alt="figure" src="data:image/svg+xml;base64,{encoded}">'
            if not data:
                data["text/plain"] = f"(an output of type {', '.join(dropped) or 'unknown'} is not shown here)"
            output.get("metadata", {}).get("text/html", {}).pop("isolated", None)
    return nb


def _text(value):
    return "".join(value) if isinstance(value, list) else str(value)


class FeedbackExporter(HTMLExporter):
    """nbconvert's HTML exporter, with every Markdown cell cleaned and every output made inert."""

    @pass_context
    def markdown2html(self, context, source):
        return clean(HTMLExporter.markdown2html(self, context, source))

    def from_notebook_node(self, nb, resources=None, **kw):
        return super().from_notebook_node(inert_outputs(nb), resources, **kw)
