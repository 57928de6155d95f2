"""The answer recorder: runs the kernel half of each test cell beside the student's code and
records what the student's code returned.

This file must stand alone (standard library and torch only): at grading time its source is sent
into the student's kernel. What it runs there is each test cell's *kernel code* (grader/split.py):
the inputs, the calls into the student's code, and `__observe__(site, thunk)` where the test had a
check. It holds no expected value, message, hint, tolerance or reference implementation, and it
judges nothing: the grader compares the recorded answers with the reference solution's in its own
process (grader/judging.py). Student code can read or replace everything here; all it can
change is the answers it reports, which is what it computes anyway.

The kernel code of a cell arrives just before the cell runs, as a marshalled code object in a file
the grader's worker writes into the kernel's folder (`inbox`); it is read, removed and run, so it
never enters IPython's history, and no source text of it exists in the kernel.
"""
import marshal
import os
import sys
import traceback

RECORD_VERSION = 2


class TestRecorder:
    def __init__(self, checks_source, records_dir=None, inbox=None, python=None):
        if python is not None and tuple(python) != tuple(sys.version_info[:2]):
            raise RuntimeError(f"the kernel's Python {sys.version_info[0]}.{sys.version_info[1]} is not the "
                               f"grader's {python[0]}.{python[1]}: grade with the environment the kernel runs")
        helpers = {"__name__": "course_checks"}
        if isinstance(checks_source, str):   # else already compiled (an in-process run compiles it once)
            checks_source = compile(checks_source, "<course checks>", "exec")
        exec(checks_source, helpers)
        self._helpers = helpers
        self.records_dir = records_dir
        self.inbox = inbox
        self.test_names = {}  # names that earlier test cells defined, for the test cells after them

    def run_test(self, grade_id, user_namespace, code=None):
        """Run one test cell's kernel code (`code`, a code object; else the one waiting in the inbox)."""
        observations = []
        if code is None:
            code = self._take_from_inbox()

        def observe(site, thunk):
            try:
                observations.append({"site": site, "value": self._helpers["plain_value"](thunk())})
            except Exception as exception:  # noqa: BLE001 - an exception is the answer to record
                observations.append({"site": site, **describe_exception(exception)})

        namespace = dict(user_namespace)
        namespace.update(self.test_names)
        namespace.update(__observe__=observe, __forbidden_ops__=self.forbidden_ops)
        error = None
        try:
            exec(code, namespace)
        except BaseException as exception:  # noqa: BLE001 - every failure is part of the record
            error = describe_exception(exception)
        for name, value in namespace.items():
            if user_namespace.get(name, _MISSING) is not value and not name.startswith("__"):
                self.test_names[name] = value
        record = {"version": RECORD_VERSION, "grade_id": grade_id, "observations": observations, "error": error}
        if self.records_dir is not None:
            import torch
            os.makedirs(self.records_dir, exist_ok=True)
            torch.save(record, os.path.join(self.records_dir, f"{grade_id}.pt"))
        return record

    def forbidden_ops(self, function, *args, **kwargs):
        """The names of every torch function and operator that function(*args, **kwargs) used: the
        notebook's own check_no_forbidden_calls, made to hand its list over instead of judging it."""
        seen = []
        helpers = self._helpers
        judge = helpers["_observe"]
        helpers["_observe"] = lambda kind, names, *rest: seen.extend(names)
        try:
            helpers["check_no_forbidden_calls"](function, *args, what="", **kwargs)
        finally:
            helpers["_observe"] = judge
        return seen

    def _take_from_inbox(self):
        try:
            with open(self.inbox, "rb") as handle:
                code = marshal.loads(handle.read())
        except (OSError, ValueError, EOFError, TypeError) as error:
            raise RuntimeError(f"the grader's test code did not arrive ({type(error).__name__})") from None
        finally:
            try:
                os.remove(self.inbox)
            except OSError:
                pass
        return code


_MISSING = object()


def describe_exception(exception):
    """What an exception says: its class names (most derived first), its message, the last line of
    *student* code it came through (the test's own frames have no source here), and the test code's
    line it left (the grader tells a hidden region's error from a visible one's by it)."""
    where, test_line = None, None
    for frame in traceback.extract_tb(exception.__traceback__):
        if frame.filename.startswith("<test "):
            test_line = frame.lineno
        elif not frame.filename.startswith("<course checks>") and "grader" not in frame.filename:
            where = f"{frame.name}, line {frame.lineno}" + (f": {frame.line.strip()}" if frame.line else "")
    names = [cls.__name__ for cls in type(exception).__mro__]
    try:
        message = str(exception)[:500]
    except Exception:  # noqa: BLE001 - an exception whose text cannot be made has none
        message = ""
    return {"type": names[0], "raised": names, "message": message, "where": where, "test_line": test_line}


def fast_flop_counter():
    """FlopCounterMode counts FLOPs in a dispatch method that costs about 40 microseconds of Python an
    operation, half of a4's graded run. This puts in its place a method that makes the same calls on
    the same values, minus work whose result is known: the set of skipped operations is built once
    (torch builds it on every operation); `func.decompose` is entered (with the mode pushed again) only
    when it can decompose, by the test decompose makes itself, not for every operation; and a FLOP
    formula gets its tensors' shapes from a walk over plain tuples, lists and dicts that builds what
    torch's pytree `tree_map` builds (anything else goes through torch's own wrapper). Torch's own shape
    formulas (those of flop_counter.py: functions of what they receive and nothing else) are computed
    once for each set of shapes and other arguments they receive and remembered: addmm's, for one,
    calls mm's formula through torch's wrapper again, a pytree walk over the shapes, each time. The module
    tracker that attributes FLOPs to modules flattens every module's inputs and outputs with pytree
    and keeps the leaves only: it gets the same leaves from the same walk. The method is also free of
    the wrapper torch puts around dispatch methods to keep torch.compile out: that wrapper's first call
    imports torch._dynamo, about 1 s of CPU per kernel, and nothing is compiled while grading.

    Installed only on the torch whose code it was read from (a fingerprint of the source of every
    torch function it stands in for or relies on); any other torch keeps its own method, without the
    wrapper."""
    try:
        from torch.utils.flop_counter import FlopCounterMode, _FlopCounterMode
    except ImportError:  # a torch without it: leave everything as it is
        return
    method = _FlopCounterMode.__dict__.get("__torch_dispatch__")
    if getattr(method, "course_fast_path", False):
        return
    original = getattr(method, "__wrapped__", method)
    _FlopCounterMode.__torch_dispatch__ = original
    try:
        import hashlib
        import inspect

        import torch
        from torch.utils import _pytree, flop_counter, module_tracker
    except ImportError:  # a torch without them: its own method, unwrapped
        return
    count_flops = FlopCounterMode.__dict__.get("_count_flops")
    plain_decompose = getattr(getattr(torch, "_ops", None), "OpOverload", None)
    plain_decompose = getattr(plain_decompose, "decompose", None)
    try:
        source = "".join(inspect.getsource(part) for part in (
            original, count_flops, flop_counter, plain_decompose, module_tracker,
            _pytree.tree_flatten, _pytree.tree_is_leaf, _pytree._get_node_type, _pytree._tuple_flatten,
            _pytree._list_flatten, _pytree._dict_flatten))
    except (OSError, TypeError, AttributeError):
        return
    # sha256 of that source in each torch whose code this repeats
    if hashlib.sha256(source.encode()).hexdigest() not in {
            "d9c5df9764b47bf1dcdf5553bc9a1d1c9421aa8f7cbe6b388564e589e8cbe7c5",   # torch 2.13.0
    }:
        return

    ops = torch.ops
    skipped = frozenset({
        ops.aten.sym_is_contiguous.default, ops.aten.is_contiguous.default, ops.aten.is_contiguous.memory_format,
        ops.aten.is_strides_like_format.default, ops.aten.is_non_overlapping_and_dense.default,
        ops.aten.size.default, ops.aten.sym_size.default, ops.aten.stride.default, ops.aten.sym_stride.default,
        ops.aten.storage_offset.default, ops.aten.sym_storage_offset.default, ops.aten.numel.default,
        ops.aten.sym_numel.default, ops.aten.dim.default, ops.prim.layout.default})
    device_op = ops.prim.device.default
    higher_order = torch._ops.HigherOrderOperator
    composite = torch._C.DispatchKey.CompositeImplicitAutograd
    has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
    tensor_type = torch.Tensor
    pytree_nodes = _pytree.SUPPORTED_NODES
    shape_wrapped = flop_counter.shape_wrapper(lambda: None).__code__
    plain_tree_flatten = _pytree.tree_flatten

    class NotPlain(Exception):
        """A value that the shape walk leaves to torch's tree_map."""

    def shapes(value):
        """tree_map(get_shape, value) for plain tuples, lists and dicts of tensors and other leaves."""
        kind = type(value)
        if kind is tuple:
            return tuple([shapes(item) for item in value])
        if kind is list:
            return [shapes(item) for item in value]
        if kind is dict:
            return {key: shapes(item) for key, item in value.items()}
        if kind in pytree_nodes or issubclass(kind, tuple):   # torch.Size, namedtuples, OrderedDict, ...
            raise NotPlain
        return value.shape if isinstance(value, tensor_type) else value

    def leaves(value, found):
        """tree_flatten(value)[0] for plain tuples, lists and dicts."""
        kind = type(value)
        if kind is tuple or kind is list:
            for item in value:
                leaves(item, found)
        elif kind is dict:
            for item in value.values():
                leaves(item, found)
        elif kind in pytree_nodes or issubclass(kind, tuple):
            raise NotPlain
        else:
            found.append(value)
        return found

    def tree_flatten_leaves(tree, is_leaf=None):
        """The module tracker's tree_flatten: its hooks keep the leaves of a module's inputs and outputs only."""
        if is_leaf is None:
            try:
                return leaves(tree, []), None
            except NotPlain:
                pass
        return plain_tree_flatten(tree, is_leaf=is_leaf)

    # torch's own shape formulas (flop_counter.py, whose source is in the fingerprint) are functions of the
    # shapes and other arguments they receive and nothing else: each one's results by what it received
    memo = {formula: {} for formula in flop_counter.flop_registry.values()
            if getattr(formula, "__code__", None) is shape_wrapped and formula.__module__ == flop_counter.__name__}
    float_type = float

    def signature(value):
        """What shape_wrapper(f) hands f for a plain value (tensors as their shapes), as a hashable key that tells
        apart everything f could tell apart: containers by their kind, leaves by their type (True is not 1),
        floats by their bits (-0.0 is not 0.0). Raises NotPlain where shapes() would, TypeError where a leaf
        cannot be a key."""
        kind = type(value)
        if kind is tuple or kind is list:
            return (kind, *[signature(item) for item in value])
        if kind is dict:
            return (kind, *[(key, signature(item)) for key, item in value.items()])
        if kind in pytree_nodes or issubclass(kind, tuple):
            raise NotPlain
        if isinstance(value, tensor_type):
            return tensor_type, value.shape
        if kind is float_type:
            return kind, value.hex()
        return kind, value

    def count(counter, packet, out, args, kwargs):
        """FlopCounterMode._count_flops."""
        registry = counter.flop_registry
        if packet in registry:
            formula = registry[packet]
            flops = None
            if getattr(formula, "__code__", None) is shape_wrapped:     # shape_wrapper(f): f on the shapes
                known, key = memo.get(formula), None
                if known is not None:
                    try:
                        key = signature((args, kwargs, out))
                        flops = known.get(key)
                    except (NotPlain, TypeError):
                        key = None
                if flops is None:
                    try:
                        args_shapes, kwargs_shapes, out_shape = shapes((args, kwargs, out))
                    except NotPlain:
                        pass
                    else:
                        flops = formula.__closure__[0].cell_contents(*args_shapes, out_shape=out_shape, **kwargs_shapes)
                        if key is not None:
                            known[key] = flops
            if flops is None:
                flops = formula(*args, **kwargs, out_val=out)
            for parent in set(counter.mod_tracker.parents):
                counter.flop_counts[parent][packet] += flops
        return out

    def can_decompose(func):
        """Whether func.decompose would do anything but return NotImplemented."""
        if type(func).decompose is not plain_decompose:
            return True
        return composite in func.py_kernels or has_kernel(func.name(), composite)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs if kwargs else {}
        if func in skipped:
            return NotImplemented
        if isinstance(func, higher_order):
            return self._handle_higher_order_ops(func, types, args, kwargs)
        counter = self.counter
        if func not in counter.flop_registry and func is not device_op and can_decompose(func):
            with self:
                decomposed = func.decompose(*args, **kwargs)
                if decomposed is not NotImplemented:
                    return decomposed
        out = func(*args, **kwargs)
        if type(counter)._count_flops is not count_flops:   # a subclass's own counting
            return counter._count_flops(func._overloadpacket, out, args, kwargs)
        return count(counter, func._overloadpacket, out, args, kwargs)

    __torch_dispatch__.course_fast_path = True
    __torch_dispatch__.formula_memo = memo
    __torch_dispatch__.replaces = original
    _FlopCounterMode.__torch_dispatch__ = __torch_dispatch__
    if module_tracker.tree_flatten is plain_tree_flatten:
        module_tracker.tree_flatten = tree_flatten_leaves



def fast_triton_interpreter():
    """Two pieces of work that Triton's interpreter (TRITON_INTERPRET=1: a7's kernels on a CPU) does and throws
    away, left out; every kernel computes what it computed and raises what it raised. Together they were close
    to half of a7's graded run.

    - It checks every integer +, - and * of a kernel for overflow: it redoes the operation in int64 and compares
      the result with the type's bounds (seven more interpreted operations), then hands the verdict to
      `device_assert`, which drops it unless the interpreter's options say `debug`, and nothing in the
      interpreter ever sets them so. This turns the check off (`sanitize_overflow=False` in those options).
    - At every call of a @triton.jit helper from inside a kernel (`tl.max` and `tl.sum` are such helpers) it
      patches triton.language again for that helper, about half a millisecond each, and never undoes it. The
      first such patch of a helper since the kernel's launch began already put every patch it makes in place
      (fresh copies of the same stateless wrappers), and until the launch's own patches are undone, nothing but
      the kernel's own code changes them: a later call of that helper in the same launch is not patched again.

    Only where the interpreter is already imported (torch.utils.flop_counter imports triton, so it is wherever
    the grader's FLOP counting is) and only on the Triton whose code this was read from (a fingerprint of the two
    files that hold every function involved, semantic.py and interpreter.py); elsewhere the interpreter stays as
    it is, and with `debug` on it keeps its overflow checks."""
    interpreter = sys.modules.get("triton.runtime.interpreter")
    semantic = sys.modules.get("triton.language.semantic")
    if interpreter is None or semantic is None:
        return
    import dataclasses
    import hashlib
    try:
        builder = interpreter.interpreter_builder
        options, call, patch_lang = builder.options, interpreter.InterpretedFunction.__call__, interpreter._patch_lang
        scope_class = interpreter._LangPatchScope
        digest = hashlib.sha256()
        for module in (semantic, interpreter):   # the files of every function involved, read whole (a millisecond)
            with open(module.__file__, "rb") as source:
                digest.update(source.read())
    except (AttributeError, OSError, TypeError):
        return
    # sha256 of semantic.py and interpreter.py in each Triton whose code this was read from
    if digest.hexdigest() not in {
            "b25f7c8433d4fdfbdf3d139bef719c6f99d691338f6cd7c00b3dc94d6e8248ff",   # triton 3.9.0
    }:
        return
    if options.sanitize_overflow and not options.debug:
        builder.options = dataclasses.replace(options, sanitize_overflow=False)
    if getattr(patch_lang, "course_fast_path", False):
        return

    restore, helper_call = scope_class.restore, call.__code__
    patched = set()   # the helpers patched for since a launch last began or ended

    def _patch_lang(fn):
        if sys._getframe(1).f_code is not helper_call:   # a launch: its patches, undone when it ends
            patched.clear()
            return patch_lang(fn)
        if fn in patched:                                 # a helper called from a kernel: patches never undone
            return scope_class()
        scope = patch_lang(fn)
        patched.add(fn)
        return scope

    def undo_and_forget(self):
        patched.clear()
        restore(self)

    _patch_lang.course_fast_path = True
    _patch_lang.replaces = patch_lang
    undo_and_forget.replaces = restore
    scope_class.restore = undo_and_forget
    interpreter._patch_lang = _patch_lang


def fast_cell_transforms(shell):
    """Two things IPython does with every cell's text before it runs it, made cheap where their result
    is known; every cell still runs as IPython would run it.

    - Its token transforms (`a = %magic`, `a = !cmd`, `%magic`, `!cmd`, `obj?`, `,f a b`, `/f a`) tokenize
      the whole cell with Python's pure-Python tokenizer, and ipykernel has each cell transformed twice:
      about 3 ms for a 3 kB cell, some 0.1 CPU-s of a4's graded run. Each of them starts at a token `%`,
      `!` or `?`, or at a `,`, `;` or `/` that begins a line, and none fires on a cell that is already
      Python (no Python statement holds those tokens where they look for them). A cell without those
      characters, or that compiles as Python, skips them; any other cell goes through them as before.
    - Whether a cell must run as a coroutine (top-level `await`) is decided by compiling it, twice a
      cell. A cell in which neither `await` nor `async` appears cannot be one.

    Only where the transforms are IPython's own four and the escapes the ones they look for."""
    try:
        from IPython.core import inputtransformer2 as transforms
    except ImportError:
        return
    manager = shell.input_transformer_manager
    if getattr(manager.do_token_transforms, "course_fast_path", False):
        return
    known = [transforms.MagicAssign, transforms.SystemAssign, transforms.EscapedCommand, transforms.HelpEnd]
    if (type(manager) is not transforms.TransformerManager or manager.token_transformers != known
            or transforms.ESCAPE_SINGLES != {"!", "?", "%", ",", ";", "/"}
            or transforms.ESCAPE_DOUBLES != {"!!", "??"}):
        return
    import ast
    import re

    escape_starting_a_line = re.compile(r"^\s*[,;/]", re.MULTILINE)
    flags = ast.PyCF_ONLY_AST | getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)
    token_transforms, should_run_async = manager.do_token_transforms, shell.should_run_async

    last = ["", True]   # the text last looked at (ipykernel has each cell transformed twice), and the verdict

    def is_python(text):
        if not ("%" in text or "!" in text or "?" in text or escape_starting_a_line.search(text)):
            return True
        if text != last[0]:
            try:
                compile(text, "<cell>", "exec", flags)
                last[:] = text, True
            except Exception:  # noqa: BLE001 - not Python as it stands: IPython's transforms decide
                last[:] = text, False
        return last[1]

    def do_token_transforms(lines):
        return lines if is_python("".join(lines)) else token_transforms(lines)

    def run_as_coroutine(raw_cell, *, transformed_cell=None, preprocessing_exc_tuple=None):
        if transformed_cell is not None and "await" not in transformed_cell and "async" not in transformed_cell:
            return False
        return should_run_async(raw_cell, transformed_cell=transformed_cell,
                                preprocessing_exc_tuple=preprocessing_exc_tuple)

    do_token_transforms.course_fast_path = True
    manager.do_token_transforms = do_token_transforms
    shell.should_run_async = run_as_coroutine


def fast_cell_names():
    """ipykernel names each cell's code after a MurmurHash2 of its text (the file name its tracebacks show,
    the one a debugger is told how to compute), written in Python a byte at a time: about 0.3 ms a kilobyte,
    some 15 ms of a4's graded run. This computes the same hash a four-byte word at a time, and takes its
    place only where it gives what ipykernel's gives on a sample of every tail length."""
    try:
        from ipykernel import compiler
    except ImportError:
        return
    original = compiler.murmur2_x86
    if getattr(original, "course_fast_path", False):
        return
    import array

    def murmur2_x86(data, seed):
        m, mask = 0x5BD1E995, 0xFFFFFFFF
        raw = data.encode("utf8")
        length = len(raw)
        words = array.array("I")        # four bytes each wherever CPython runs; the check below holds it to that
        words.frombytes(raw[:length & ~3])
        if sys.byteorder == "big":
            words.byteswap()
        h = seed ^ length
        for k in words:
            k = (k * m) & mask
            k = ((k ^ (k >> 24)) * m) & mask
            h = ((h * m) & mask) ^ k
        tail = raw[length & ~3:]
        if tail:
            h = ((h ^ int.from_bytes(tail, "little")) * m) & mask
        h = ((h ^ (h >> 13)) * m) & mask
        return h ^ (h >> 15)

    sample = "".join(chr(32 + (7 * i) % 95) for i in range(257)) + "é∑😀"
    if all(murmur2_x86(sample[:n], seed) == original(sample[:n], seed)
           for n in (0, 1, 2, 3, 4, 5, 6, 7, 100, 257, 258, 259, 260) for seed in (0, 0xC70F6907)):
        murmur2_x86.course_fast_path = True
        murmur2_x86.replaces = original
        compiler.murmur2_x86 = murmur2_x86
