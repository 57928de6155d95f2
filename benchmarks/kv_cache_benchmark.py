"""Benchmark: KV-cache generation of the a4_kv_cache reference solution against real peers.

Systems, all greedy, batch 1, a 16-token prompt, on CPU with 2 threads (or on a GPU with --device cuda):
  reference_cached    generate(model, prompt, n, use_cache=True)   (the a4 reference solution)
  reference_fast      fast_generate(model, prompt, n)              (the same notebook's section 6: the
                      same prefill and KVCache, decode steps with fused q/k/v and (in, out) weights)
  reference_uncached  generate(model, prompt, n, use_cache=False)  (its own recompute-everything mode)
  nanogpt_loop        nanoGPT's generate loop on the same model: model(idx)[:, -1] over the whole
                      context every step, argmax, torch.cat
  hf_gpt2_generate    Hugging Face transformers' GPT2LMHeadModel built from a GPT2Config with the same
                      dimensions (random weights, nothing downloaded), model.generate(...,
                      do_sample=False, use_cache=True, min_new_tokens=n)
On CUDA, four more (decoding on a GPU done right: static shapes, hence CUDA graphs; lecture 8, section 9):
  reference_static    the reference model's decode step with static shapes (the notebook's
                      StaticDecoder, section 6): the position lives in a device tensor, each step
                      writes its key/value into the preallocated KVCache with index_copy_ and attends
                      over all max_len positions, the later ones masked (eager)
  reference_graph     the same step captured once with torch.cuda.graph and replayed once per token
  hf_gpt2_static      Hugging Face's generate with its StaticCache (one cache reused, reset per call):
                      on CUDA generate compiles the forward with torch.compile(mode="reduce-overhead"),
                      i.e. CUDA graphs
  hf_gpt2_static_eager  the same StaticCache with generate's compilation disabled

The reference code is taken from the solution notebook itself (solutions/a4_kv_cache/a4_kv_cache.ipynb):
its setup, provided, solution and locked cells are executed into a namespace; test and demo cells are
skipped.
Repetitions are interleaved (every system and length once per round) and the median is reported.

    python benchmarks/kv_cache_benchmark.py                 # 3 rounds, about 3-5 minutes on 2 cores
    python benchmarks/kv_cache_benchmark.py --quick         # 1 round
    python benchmarks/kv_cache_benchmark.py --out results.json
    python benchmarks/kv_cache_benchmark.py --device cuda  # GPU: adds the static and graph rows

Needs `transformers` (requirements-bench.txt); without it the Hugging Face row is skipped.
"""
import argparse
import contextlib
import io
import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "solutions" / "a4_kv_cache" / "a4_kv_cache.ipynb"
REFERENCE_ROWS = ("reference_cached", "reference_fast")   # the rows the ratios are taken for


def load_reference(notebook=NOTEBOOK):
    """Execute the notebook's setup, provided, solution and locked cells (not tests, not demos)."""
    import nbformat

    nb = nbformat.read(str(notebook), as_version=4)
    namespace = {"__name__": "a4_reference"}
    for index, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader")
        if cell.cell_type != "code" or not meta or meta.get("grade"):
            continue  # markdown, demo/plot cells (no nbgrader metadata), test cells
        with contextlib.redirect_stdout(io.StringIO()):   # the setup cell prints the device
            exec(compile(cell.source, f"<{notebook.name} cell {index}>", "exec"), namespace)
    return namespace


def build_models(ref, dims, device):
    torch.manual_seed(0)
    max_len = dims["prompt_len"] + max(dims["new_tokens"])
    model = ref["DecoderOnlyLM"](dims["vocab"], dims["d_model"], dims["n_heads"], dims["n_layers"],
                                 dims["d_ff"], max_len).to(device).eval()
    hf = None
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
        from transformers.utils import logging as hf_logging
        hf_logging.set_verbosity_error()
        config = GPT2Config(vocab_size=dims["vocab"], n_positions=max_len, n_embd=dims["d_model"],
                            n_layer=dims["n_layers"], n_head=dims["n_heads"], n_inner=dims["d_ff"],
                            activation_function="relu", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                            bos_token_id=None, eos_token_id=None, pad_token_id=0)
        hf = GPT2LMHeadModel(config).to(device).eval()
    except ImportError:
        print("transformers is not installed: the Hugging Face row is skipped "
              "(pip install -r requirements-bench.txt -c constraints.txt)", file=sys.stderr)
    return model, hf


def nanogpt_generate(model, idx, max_new_tokens):
    """nanoGPT's GPT.generate (greedy): the whole context through the model at every step."""
    with torch.no_grad():
        for _ in range(max_new_tokens):
            logits = model(idx)[:, -1, :]
            idx_next = torch.argmax(logits, dim=-1, keepdim=True)
            idx = torch.cat((idx, idx_next), dim=1)
    return idx


def systems(ref, model, hf):
    generate = ref["generate"]
    table = {
        "reference_cached": lambda prompt, n: generate(model, prompt, n, use_cache=True),
        "reference_fast": lambda prompt, n: ref["fast_generate"](model, prompt, n),
        "reference_uncached": lambda prompt, n: generate(model, prompt, n, use_cache=False),
        "nanogpt_loop": lambda prompt, n: nanogpt_generate(model, prompt, n),
    }
    if hf is not None:
        def hf_generate(prompt, n):
            with torch.no_grad():
                return hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n,
                                   min_new_tokens=n, do_sample=False, use_cache=True, pad_token_id=0)
        table["hf_gpt2_generate"] = hf_generate
    return table


def gpu_systems(ref, model, hf, max_len, device):
    """The static-shape rows (CUDA only): {name: generate function}, and {name: why it was skipped}.
    StaticDecoder is the notebook's own (its provided cell, grader/provided/static_decode.py)."""
    table, skipped = {}, {}
    for name, graph in (("reference_static", False), ("reference_graph", True)):
        try:
            decoder = ref["StaticDecoder"](model, max_len, graph=graph)
            table[name] = decoder.generate
        except Exception as error:  # noqa: BLE001 - report and go on with the other rows
            skipped[name] = f"{type(error).__name__}: {error}"
    if hf is None:
        skipped["hf_gpt2_static"] = skipped["hf_gpt2_static_eager"] = "transformers is not installed"
        return table, skipped
    try:
        from transformers import StaticCache
        static_cache = StaticCache(config=hf.config, max_cache_len=max_len)
    except Exception as error:  # noqa: BLE001 - an older or newer transformers
        skipped["hf_gpt2_static"] = skipped["hf_gpt2_static_eager"] = f"no StaticCache: {type(error).__name__}: {error}"
        return table, skipped

    def hf_static(compiled):
        def run(prompt, n):
            static_cache.reset()
            with torch.no_grad():
                return hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n,
                                   min_new_tokens=n, do_sample=False, use_cache=True, pad_token_id=0,
                                   past_key_values=static_cache, disable_compile=not compiled)
        return run
    table["hf_gpt2_static"], table["hf_gpt2_static_eager"] = hf_static(True), hf_static(False)
    return table, skipped


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run(args):
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    dims = dict(vocab=args.vocab, d_model=args.d_model, n_heads=args.n_heads, n_layers=args.n_layers,
                d_ff=args.d_ff, prompt_len=args.prompt_len, new_tokens=args.new_tokens)
    ref = load_reference()
    model, hf = build_models(ref, dims, args.device)
    table = systems(ref, model, hf)
    skipped = {}
    if args.device.startswith("cuda"):
        extra, skipped = gpu_systems(ref, model, hf, args.prompt_len + max(args.new_tokens), args.device)
        table.update(extra)
    if args.systems:
        table = {name: fn for name, fn in table.items() if name in set(args.systems) | {"reference_cached"}}
    prompt = torch.randint(0, args.vocab, (1, args.prompt_len), generator=torch.Generator().manual_seed(0))
    prompt = prompt.to(args.device)

    # warm-up: allocator, kernels, HF's first-call setup; on a GPU every timed length once, so that
    # torch.compile (Hugging Face's static cache) has compiled and captured before the clock runs
    warm_lengths = args.new_tokens if args.device.startswith("cuda") else [8]
    for name, fn in list(table.items()):
        try:
            for n in warm_lengths:
                fn(prompt, n)
        except Exception as error:  # a peer that cannot run here is reported, not fatal
            if name in REFERENCE_ROWS or name == "reference_uncached":
                raise
            skipped[name] = f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
            del table[name]
    sync(args.device)
    for name, why in skipped.items():
        print(f"skipped {name}: {why}", file=sys.stderr)

    times = {name: {n: [] for n in args.new_tokens} for name in table}
    outputs = {}
    for round_ in range(args.reps):
        for n in args.new_tokens:
            for name, fn in table.items():
                sync(args.device)
                start = time.perf_counter()
                out = fn(prompt, n)
                sync(args.device)
                times[name][n].append(time.perf_counter() - start)
                if round_ == 0:
                    outputs[(name, n)] = out.cpu()
                    if out.shape[1] != args.prompt_len + n:
                        raise RuntimeError(f"{name} produced {out.shape[1] - args.prompt_len} tokens, not {n}")
            print(f"round {round_ + 1}/{args.reps}, {n} new tokens: "
                  + ", ".join(f"{name} {times[name][n][-1]:.2f}s" for name in table), file=sys.stderr)

    results = {}
    for name in table:
        results[name] = {}
        for n in args.new_tokens:
            median = statistics.median(times[name][n])
            results[name][str(n)] = {"median_s": median, "tokens_per_s": n / median, "times_s": times[name][n]}
    ratios = {}
    for n in args.new_tokens:
        speed = {name: results[name][str(n)]["tokens_per_s"] for name in table}
        ratios[str(n)] = {f"{mine} / {other}": speed[mine] / speed[other]
                          for mine in REFERENCE_ROWS if mine in table for other in table if other != mine}
    same = {str(n): all(torch.equal(outputs[("reference_cached", n)], outputs[(other, n)])
                        for other in ("reference_fast", "reference_uncached", "nanogpt_loop") if other in table)
            for n in args.new_tokens}
    # the static rows attend over the whole buffer (masked): float rounding may differ, so reported apart
    same_static = {str(n): {other: torch.equal(outputs[("reference_cached", n)], outputs[(other, n)])
                            for other in ("reference_static", "reference_graph") if other in table}
                   for n in args.new_tokens}
    largest = str(max(args.new_tokens))
    targets = {}
    # the targets are the CPU's (2 threads): on a GPU the tiny model's decode is launch-bound, and the
    # figures to read there are the graph rows against eager and against HF's static cache (below)
    on_cpu = not args.device.startswith("cuda")
    if on_cpu and "reference_uncached" in table:
        targets["reference_cached >= 5x reference_uncached at %s new tokens" % largest] = \
            ratios[largest]["reference_cached / reference_uncached"] >= 5.0
    if on_cpu and "hf_gpt2_generate" in table:
        for mine in REFERENCE_ROWS:
            if mine in table:
                targets[f"{mine} >= 2x hf_gpt2_generate at {largest} new tokens"] = \
                    ratios[largest][f"{mine} / hf_gpt2_generate"] >= 2.0
    for mine, other in (("reference_graph", "reference_static"), ("reference_graph", "hf_gpt2_static")):
        if mine in table and other in table:
            ratios[largest][f"{mine} / {other}"] = (results[mine][largest]["tokens_per_s"]
                                                    / results[other][largest]["tokens_per_s"])
    report = {
        "config": dict(dims, device=args.device, threads=args.threads, batch=1, repetitions=args.reps,
                       decoding="greedy", dtype="float32"),
        "environment": {"torch": torch.__version__, "python": platform.python_version(),
                        "transformers": _version("transformers"), "machine": platform.machine(),
                        "processor": platform.processor() or None, "cpu_count": os.cpu_count(),
                        "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None},
        "results": results, "ratios": ratios, "greedy_tokens_identical_cached_fast_uncached_nanogpt": same,
        "greedy_tokens_identical_to_cached_static_rows": same_static, "skipped": skipped,
        "targets_met": targets,
    }
    print_table(report, list(table), args.new_tokens)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
        print(f"\nwrote {args.out}")
    return report


def _version(package):
    try:
        from importlib.metadata import version
        return version(package)
    except Exception:  # noqa: BLE001 - not installed
        return None


def print_table(report, names, lengths):
    c = report["config"]
    print(f"\nKV-cache generation, greedy, batch 1, prompt {c['prompt_len']} tokens, {c['device']}, "
          f"{c['threads']} threads, median of {c['repetitions']} interleaved rounds")
    print(f"model: vocab {c['vocab']}, d_model {c['d_model']}, {c['n_heads']} heads, {c['n_layers']} layers, "
          f"d_ff {c['d_ff']}, float32\n")
    mine = [name for name in REFERENCE_ROWS if name in names]
    speed_ups = "".join(f"{'x' + m.split('_')[1]:>10s}" for m in mine)
    header = f"{'system':22s}" + "".join(f"{f'{n} new: tok/s':>16s}" + speed_ups for n in lengths)
    print(header)
    print("-" * len(header))
    for name in names:
        row = f"{name:22s}"
        for n in lengths:
            tps = report["results"][name][str(n)]["tokens_per_s"]
            row += f"{tps:16.1f}" + "".join(f"{report['results'][m][str(n)]['tokens_per_s'] / tps:9.2f}x" for m in mine)
        print(row)
    print("\n" + "; ".join(f"x{m.split('_')[1]} = {m} tokens/s divided by the row's" for m in mine))
    for target, met in report["targets_met"].items():
        print(f"target: {target}: {'met' if met else 'NOT met'}")
    print("greedy tokens identical (cached, fast, uncached, nanoGPT loop):",
          report["greedy_tokens_identical_cached_fast_uncached_nanogpt"])
    if any(report["greedy_tokens_identical_to_cached_static_rows"].values()):
        print("greedy tokens of the static rows identical to reference_cached:",
              report["greedy_tokens_identical_to_cached_static_rows"])
    largest = str(max(lengths))
    for key in ("reference_graph / reference_static", "reference_graph / hf_gpt2_static"):
        if key in report["ratios"].get(largest, {}):
            print(f"{key} at {largest} new tokens: {report['ratios'][largest][key]:.2f}x")
    for name, why in report["skipped"].items():
        print(f"skipped {name}: {why}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one round instead of --reps")
    parser.add_argument("--reps", type=int, default=3, help="interleaved rounds (median reported)")
    parser.add_argument("--new-tokens", type=int, nargs="+", default=[256, 512])
    parser.add_argument("--prompt-len", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--vocab", type=int, default=1024)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--n-heads", type=int, default=4)
    parser.add_argument("--n-layers", type=int, default=4)
    parser.add_argument("--d-ff", type=int, default=1024)
    parser.add_argument("--systems", nargs="+", help="run only these systems (reference_cached always runs)")
    parser.add_argument("--out", help="write the results as JSON to this path (default: stdout table only)")
    args = parser.parse_args(argv)
    if args.quick:
        args.reps = 1
    run(args)


if __name__ == "__main__":
    main()
