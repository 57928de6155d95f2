"""The lectures' progress bar, kept here once. `python -m grader sync` copies the lines between the
two marker comments (markers included) into the setup cell of every lecture;
tests/test_device_helper.py proves every copy is current.

Two things it does that a bare `tqdm(...)` does not:
- a saved notebook keeps a widget bar as the text it had when it appeared ("0/300"), so when the loop
  ends the widget is replaced by its last line;
- it redraws at most about 50 times per loop, however slow the machine. Every redraw of a widget bar is
  a message from the kernel, and a client that reads them only after the cell (nbval does) loses
  messages past ZeroMQ's queue limit of 1000, the cell's "finished" message among them; a slow CI
  machine running a 1000-step loop at tqdm's default rate (10 redraws a second) got there.

Stdlib only (tqdm and ipywidgets are optional: without tqdm the loop runs without a bar).
"""

# --- progress bar: grader/provided/progress.py (do not edit) ---
try:
    from tqdm.auto import tqdm as _tqdm
    from tqdm.notebook import tqdm as _widget_tqdm
    from IPython.display import display
except ImportError:  # tqdm is optional
    _tqdm = None


def tqdm(iterable, **kwargs):
    """tqdm's progress bar, redrawn at most ~50 times and saved finished (see grader/provided/progress.py)."""
    if _tqdm is None:
        yield from iterable
        return
    total = kwargs.get("total", len(iterable) if hasattr(iterable, "__len__") else None)
    if total:
        kwargs.setdefault("miniters", max(1, total // 50))       # a fixed step turns tqdm's adaptive one off,
        kwargs.setdefault("maxinterval", float("inf"))           # and its monitor must not turn it back on
    kwargs.setdefault("mininterval", 0.5)
    if issubclass(_tqdm, _widget_tqdm):                          # Jupyter, Colab, Kaggle: a widget
        bar = _tqdm(iterable, display=False, **kwargs)
        shown = display(bar.container, display_id=True)
        yield from bar
        shown.update({"text/plain": str(bar)}, raw=True)
    else:                                                        # a terminal: tqdm's text bar
        yield from _tqdm(iterable, **kwargs)
# --- end of progress bar ---
