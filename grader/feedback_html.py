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

Every figure an output draws gets a text alternative (WCAG 1.1.1): the text of the "Figure:" Markdown cell that
follows its cell, as the course's notebooks write one after every plot (tests/test_figures_accessible.py), else
a sentence saying that it is a figure drawn by the code cell above. It goes where nbconvert's template reads an
image's alt, the output's metadata (`output.metadata["image/png"]["alt"]`); an alt the output already carries
is kept. (Without one, nbconvert writes "No description has been provided for this image".)

The cleaning is bleach's (nbconvert depends on it for its own, stricter `sanitize_html`, which
shows headings and paragraphs as text).

The page is also made accessible (WCAG 2.1 AA, docs/accessibility.md), here and only here: PAGE_TEMPLATE
extends nbgrader's feedback template, gives `<html>` its language, makes the score at the top the first
heading and adds page_css() after nbgrader's styles: code highlighted in CodeStyle (every colour at least
4.5:1 on its background), links underlined, the cells' headings in white on a darker blue, code and
outputs wrapped at the page's width. Every page of every assignment and lab is made here."""
import base64
import copy
import functools
from html import escape

import bleach
from bleach.css_sanitizer import CSSSanitizer
from bleach.html5lib_shim import Filter
from jinja2 import BytecodeCache, pass_context
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from pygments.formatters import HtmlFormatter
from pygments.style import Style
from pygments.token import Comment, Error, Generic, Keyword, Name, Number, Operator, String, Token

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


# nbconvert's text for an image without one (HTMLExporter gives it to every <img> of a page that lacks an alt)
NO_ALT = "No description has been provided for this image"


class _MissingAlt(Filter):
    """An <img> that the cleaned markup keeps without an alt gets NO_ALT, as nbconvert would give it (the
    Markdown a student or the release writes, an output's HTML: the only places an <img> without one can come
    from, see FeedbackExporter). It acts on the parser's tokens, after the cleaning: text is never touched."""

    def __iter__(self):
        for token in super().__iter__():
            if token["type"] in ("StartTag", "EmptyTag") and token["name"] == "img":
                attributes = token["data"]
                if (None, "alt") not in attributes:
                    attributes[(None, "alt")] = NO_ALT
            yield token


def clean(html):
    """`html` with only ordinary markup left: a tag not allowed is shown as text, an attribute not
    allowed (on*, style beyond text-align, a javascript: or data: link) is dropped; an <img> without an
    alt gets nbconvert's NO_ALT."""
    cleaner = bleach.Cleaner(tags=ALLOWED_TAGS, attributes=ALLOWED_ATTRIBUTES, protocols=ALLOWED_PROTOCOLS,
                             css_sanitizer=_CSS, strip=False, strip_comments=True, filters=[_MissingAlt])
    return cleaner.clean(html)


IMAGE_OUTPUTS = ("image/png", "image/jpeg", "image/svg+xml")
NO_DESCRIPTION = "A figure drawn by the code cell above; the notebook gives no text description of it."


def figure_description(cells, index):
    """The text alternative of a figure drawn by cells[index]: the next cell's text when it is a Markdown cell
    beginning "Figure:" (its Markdown marks left out), else NO_DESCRIPTION."""
    after = cells[index + 1] if index + 1 < len(cells) else None
    text = _text(after.source).strip() if after is not None and after.cell_type == "markdown" else ""
    if not text.startswith("Figure:"):
        return NO_DESCRIPTION
    return " ".join(text.replace("`", "").replace("$", "").replace("**", "").split())


def describe_figures(nb):
    """Give every image output of `nb` (changed in place) an alt in its metadata, where nbconvert's template
    reads it, unless it has one."""
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            data = output.get("data")
            if not isinstance(data, dict):
                continue
            for mime in IMAGE_OUTPUTS:
                if mime not in data:
                    continue
                if not isinstance(output.get("metadata"), dict):
                    output["metadata"] = {}
                if not isinstance(output["metadata"].get(mime), dict):
                    output["metadata"][mime] = {}
                if not str(output["metadata"][mime].get("alt") or "").strip():
                    output["metadata"][mime]["alt"] = figure_description(nb.cells, index)
    return nb


def inert_outputs(nb):
    """A copy of `nb` whose outputs cannot run anything in a browser (see the module's docstring), every
    figure with its text alternative (describe_figures)."""
    nb = describe_figures(copy.deepcopy(nb))
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
                alt = escape(str(output["metadata"]["image/svg+xml"]["alt"]), quote=True)
                data["text/html"] = f'<img alt="{alt}" src="data:image/svg+xml;base64,{encoded}">'
            if not data:
                data["text/plain"] = f"(an output of type {', '.join(dropped) or 'unknown'} is not shown here)"
            output.get("metadata", {}).get("text/html", {}).pop("isolated", None)
    return nb


def _text(value):
    return "".join(value) if isinstance(value, list) else str(value)


# ---- the page's look: WCAG 2.1 AA ----

CODE_BACKGROUND = "#f5f5f5"    # bootstrap's <pre>, which nbgrader's page loads: the code's background
TEXT = "#1f1f1f"
LINK = "#1d4f7c"               # 7.8:1 on the code's grey, 8.5:1 on white
HEADING = "#286090"            # a cell's heading: white text on it, 6.6:1
LATE = "#a8322c"               # the late penalty, on the score panel's grey (nbgrader's #d2413a: 4.2:1)
# every (text, background) pair PAGE_CSS sets, each at least 4.5:1 (tests/test_accessibility.py)
COLOURS = {
    "code text": (TEXT, CODE_BACKGROUND),
    "link": (LINK, "#ffffff"),
    "link on grey": (LINK, CODE_BACKGROUND),
    "cell heading": ("#ffffff", HEADING),
    "late penalty": (LATE, CODE_BACKGROUND),
}

class CodeStyle(Style):
    """The feedback page's code colours: Pygments' default hues, darkened where they fell short, so that
    each is at least 4.5:1 on CODE_BACKGROUND (and on white); bold and italics as Pygments' default."""
    background_color = CODE_BACKGROUND
    highlight_color = "#ffffcc"
    styles = {
        Token: TEXT,
        Comment: "italic #356868",
        Comment.Preproc: "noitalic #7a5000",
        Keyword: "bold #007000",
        Keyword.Pseudo: "nobold",
        Keyword.Type: "nobold #a0003a",
        Operator: "#555555",
        Operator.Word: "bold #7d1dc0",
        Name.Builtin: "#007000",
        Name.Function: "#0000ff",
        Name.Class: "bold #0000ff",
        Name.Namespace: "bold #0000ff",
        Name.Exception: "bold #b0322c",
        Name.Variable: "#19177c",
        Name.Constant: "#880000",
        Name.Label: "#5f5f00",
        Name.Entity: "bold #5f5f5f",
        Name.Attribute: "#566619",
        Name.Tag: "bold #007000",
        Name.Decorator: "#7d1dc0",
        String: "#a81d1d",
        String.Doc: "italic",
        String.Interpol: "bold #904e68",
        String.Escape: "bold #8f4c16",
        String.Regex: "#904e68",
        String.Symbol: "#19177c",
        String.Other: "#007000",
        Number: "#555555",
        Generic.Heading: "bold #000080",
        Generic.Subheading: "bold #800080",
        Generic.Deleted: "#a00000",
        Generic.Inserted: "#007400",
        Generic.Error: "#c00000",
        Generic.Emph: "italic",
        Generic.Strong: "bold",
        Generic.EmphStrong: "bold italic",
        Generic.Prompt: "bold #000080",
        Generic.Output: "#5f5f5f",
        Generic.Traceback: "#0033b3",
        Error: "border:#ff0000",
    }


@functools.cache
def page_css():
    """What the page adds after nbgrader's styles (which inline Pygments' default colours and bootstrap's
    links, told apart by colour alone): the code in CodeStyle, underlined links, darker cell headings that
    grow with their content (nbgrader fixes them at 37px: on a phone the score fell out of the heading, white
    on grey), a darker late penalty, and code and outputs wrapped at the page's width (WCAG 1.4.10: no box
    to scroll sideways, which a keyboard could not reach)."""
    code = HtmlFormatter(style=CodeStyle).get_style_defs(".highlight")
    return f"""{code}
.highlight pre {{ color: {TEXT}; background-color: {CODE_BACKGROUND}; }}
pre {{ white-space: pre-wrap; overflow-wrap: anywhere; }}
a, a:hover, a:focus {{ color: {LINK}; text-decoration: underline; }}
.panel-primary > .panel-heading {{ background-color: {HEADING}; border-color: {HEADING}; }}
.panel-primary {{ border-color: {HEADING}; }}
div.nbgrader_cell .panel-heading {{ height: auto; display: flow-root; }}
div.nbgrader_cell .panel-heading a {{ color: #ffffff; }}
li.late-penalty {{ color: {LATE}; }}
"""


# nbgrader's feedback template (nbgrader/server_extensions/formgrader/templates/feedback), whose header
# writes a bare <html>: given the page's language (nbconvert's language_code, "en") and PAGE_CSS last; the
# score at the top (nbgrader's first <h4>, before any heading of the notebook's) a first-level heading in
# the h4's look, so that the notebook's own headings follow it in order
PAGE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block header -%}
{{ super() | replace('<html>', '<html lang="' ~ resources.language_code ~ '">', 1)
           | replace('</head>', '<style>' ~ resources.course_page_css ~ '</style>\n</head>', 1) }}
{%- endblock header -%}
{%- block body -%}
{{ super() | replace('<h4>', '<h1 class="h4">', 1) | replace('</h4>', '</h1>', 1) }}
{%- endblock body -%}
"""


class FeedbackExporter(HTMLExporter):
    """nbconvert's HTML exporter, with every Markdown cell cleaned and every output made inert, in
    nbgrader's feedback template made accessible (PAGE_TEMPLATE).

    A page is the template's output as it is: HTMLExporter.from_notebook_node would parse every page
    again (BeautifulSoup) to give each <img> without an alt its placeholder and tabindex="0" to the
    lab template's `.jp-Cell-inputWrapper` and `.jp-OutputArea-output` divs, and write it out again: two
    thirds of a page's time. Here every <img> already has an alt: an output's figure its description
    (describe_figures), any other its own or NO_ALT (clean, which all Markdown and all HTML of outputs
    pass through); and nbgrader's feedback template is the classic one, which writes no such divs
    (tests/test_feedback.py proves both on a page with images of every kind).

    One exporter makes every page of a `generate_feedback` run, and each student's notebook repeats the
    release's cells: a cell's code is highlighted, and its Markdown rendered and cleaned, once per
    distinct source text (with the lexer, or with the notebook's path where nbconvert would read an
    image from it; Markdown with attachments every time)."""

    CACHED = 4096          # highlighted cells, and rendered Markdown cells, each exporter keeps

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.raw_template = PAGE_TEMPLATE
        self._highlighters = {}
        self._markdown = _Recent(self.CACHED)

    def _create_environment(self):
        environment = super()._create_environment()
        # nbgrader makes an exporter for each `generate_feedback`: its templates are compiled once a process
        environment.bytecode_cache = _COMPILED.setdefault((environment.is_async, *sorted(environment.extensions)),
                                                          _Compiled())
        return environment

    def _init_resources(self, resources):
        resources = super()._init_resources(resources)
        resources["course_page_css"] = page_css()
        return resources

    @pass_context
    def markdown2html(self, context, source):
        cell = context.get("cell", {})
        if not isinstance(source, str) or not isinstance(cell, dict) or cell.get("attachments"):
            return clean(HTMLExporter.markdown2html(self, context, source))
        # the path only matters to an image nbconvert embeds from a file
        path = context.get("resources", {}).get("metadata", {}).get("path", "") if self.embed_images else ""
        return self._markdown.get((source, str(path)),
                                  lambda: clean(HTMLExporter.markdown2html(self, context, source)))

    def _highlighter(self, lexer):
        """nbconvert's highlight_code for a notebook whose language is `lexer`, remembering what it wrote for
        each source across the pages this exporter makes."""
        if not isinstance(lexer, (str, type(None))):          # as nbconvert does, unremembered
            return self.filters.get("highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self))
        if lexer not in self._highlighters:
            highlight = self.filters.get("highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self))
            self._highlighters[lexer] = _RememberedHighlight(highlight, self.CACHED)
        return self._highlighters[lexer]

    def from_notebook_node(self, nb, resources=None, **kw):
        """HTMLExporter.from_notebook_node, without parsing the page again (see the class's docstring)."""
        nb = inert_outputs(nb)
        language = nb.metadata.get("language_info", {})
        highlight_code = self._highlighter(language.get("pygments_lexer", language.get("name", None)))
        resources = self._init_resources(resources)
        data_types = WidgetsDataTypeFilter(notebook_metadata=self._nb_metadata, parent=self, resources=resources)
        self.register_filter("highlight_code", highlight_code)
        self.register_filter("filter_data_type", data_types)
        return TemplateExporter.from_notebook_node(self, nb, resources, **kw)


class _Compiled(BytecodeCache):
    """Jinja's compiled templates, in memory: each by its name and file, used while its source is the same
    (Jinja compares a checksum of it)."""

    def __init__(self):
        self.compiled = {}

    def load_bytecode(self, bucket):
        if bucket.key in self.compiled:
            bucket.bytecode_from_string(self.compiled[bucket.key])

    def dump_bytecode(self, bucket):
        self.compiled[bucket.key] = bucket.bytecode_to_string()


# one _Compiled for the environments that compile alike (nbconvert makes each with the same options but these)
_COMPILED = {}


class _Recent:
    """The `size` values last asked for, by key."""

    def __init__(self, size):
        self.size, self.values = size, {}

    def get(self, key, make):
        if key in self.values:
            value = self.values.pop(key)          # to the end: the most recent
        else:
            value = make()
            if len(self.values) >= self.size:
                del self.values[next(iter(self.values))]
        self.values[key] = value
        return value


class _RememberedHighlight:
    """nbconvert's highlight_code filter, each result kept for the exact source, language and magics
    language it was highlighted from (all of a cell that Highlight2HTML reads)."""

    def __init__(self, highlight, size):
        self.highlight, self.recent = highlight, _Recent(size)

    def __call__(self, source, language=None, metadata=None):
        magics = (metadata["magics_language"],) if isinstance(metadata, dict) and "magics_language" in metadata else ()
        if not all(isinstance(value, (str, type(None))) for value in (source, language, *magics)):
            return self.highlight(source, language, metadata)
        return self.recent.get((source, language, magics), lambda: self.highlight(source, language, metadata))
