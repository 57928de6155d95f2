"""Copy the figures of the README and docs/ out of the executed lectures.

The plots are the PNG outputs already stored in lectures/*.ipynb (nbval keeps them current), so
nothing is re-run: each figure is found by a phrase in the source of the cell that draws it
(robust to cells being added or moved) and written, byte for byte, to docs/img/<name>.png.

    python tools/export_readme_figures.py          # writes docs/img/*.png
    python tools/export_readme_figures.py --check  # exit 1 if docs/img is stale
"""
import argparse
import base64
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "docs" / "img"

# name -> (lecture, phrase in the drawing cell's source, which PNG of that cell, what it shows)
FIGURES = {
    "attention_heatmap": ("02_self_attention.ipynb", "def plot_attention(", 0,
                          "hand-made self-attention on \"the cat sat on the mat\": each row is one query's "
                          "distribution over the keys"),
    "positional_encoding": ("03_positional_encodings.ipynb", "pe_img = sinusoidal_pe(128, 128)", 0,
                            "the sinusoidal positional-encoding matrix (128 positions x 128 "
                            "dimensions)"),
    "roofline": ("07_flop_io_accounting.ipynb", "measured matmuls on this device", 0,
                 "roofline of the development CPU with measured matmuls and a GPT-2-small "
                 "layer's operations"),
    "kv_cache_flops": ("08_kv_cache_decoding.ipynb", "FLOPs for one new token", 0,
                       "FLOPs for one new token vs context length, with and without a KV cache"),
    "kv_cache_speed": ("08_kv_cache_decoding.ipynb", "Measured cost of one decoding step", 0,
                       "measured time of one decoding step vs context length, with and without "
                       "a KV cache"),
}


def find_png(lecture, phrase, index):
    nb = json.loads((REPO / "lectures" / lecture).read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and phrase in "".join(cell["source"]):
            pngs = [out["data"]["image/png"] for out in cell.get("outputs", [])
                    if "image/png" in out.get("data", {})]
            if len(pngs) <= index:
                raise SystemExit(f"{lecture}: the cell with {phrase!r} has no stored PNG #{index}; "
                                 "execute the lecture first")
            data = pngs[index]
            return base64.b64decode(data if isinstance(data, str) else "".join(data))
    raise SystemExit(f"{lecture}: no code cell contains {phrase!r}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check docs/img is current")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    stale = []
    for name, (lecture, phrase, index, what) in FIGURES.items():
        png = find_png(lecture, phrase, index)
        assert png[:8] == b"\x89PNG\r\n\x1a\n", f"{name}: not a PNG"
        path = OUT / f"{name}.png"
        if args.check:
            if not path.exists() or path.read_bytes() != png:
                stale.append(path.name)
            continue
        path.write_bytes(png)
        print(f"{path.relative_to(REPO)}  {len(png) // 1024:4d} KB  {lecture}: {what}")
    if stale:
        print("stale figures (run tools/export_readme_figures.py):", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
