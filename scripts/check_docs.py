#!/usr/bin/env python3
"""Checks the documentation: README.md and docs/**/*.md.

  check_docs.py --build-dir BUILD [--root ROOT] [--no-python] [--timeout S]

1. Runnable blocks. A fenced block whose opening line follows the marker line
   `<!-- runnable -->` is executed: ```sh / ```bash blocks with `bash -euo pipefail`, ```python
   blocks with the Python interpreter (PYTHONPATH=BUILD/python). The check fails if one exits
   non-zero or runs past its timeout (default 60 s). --no-python skips (and counts) the Python
   blocks, for builds without the Python client.
   Each block runs in a fresh temporary directory that holds a link to every top-level entry of
   ROOT and `build` -> BUILD, so a block reads exactly as a user at the repository root types it
   (`build/conveyor ...`, `examples/...`) while the files it writes are thrown away. The ports the
   docs use for a local cluster (5050 for the dispatcher, 6001-6009 for workers) are replaced by
   free loopback ports below the kernel's ephemeral range, so that blocks never meet another
   test's (or the user's) cluster, nor a port the kernel gave a connection meanwhile. A block
   runs in a process group of its own: whatever it started in the background is killed when it
   ends; the caller's CONVEYOR_* environment variables are removed. Runnable blocks must be quick (seconds) and talk only to 127.0.0.1.
2. Flags. Every flag that `BUILD/conveyor <command> --help` (and `conveyor bench <name> --help`)
   prints must be named somewhere in README.md or docs/*.md (--no-flags skips this).
3. Links. Every relative Markdown link `[text](path)` / `[text](path#anchor)` must name an existing
   file or folder, and an anchor in a Markdown file must name one of its headings (GitHub's rule:
   lower case, punctuation dropped, spaces to '-').

Prints one line per problem and a summary
  `docs: R runnable block(s) run, F failed, S skipped; L link(s) checked, B broken;
   G flag(s) checked, U undocumented`
and exits 1 if anything failed, else 0.
"""
import argparse
import glob
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

MARKER = "<!-- runnable -->"
SHELLS = ("sh", "bash")
DOC_PORTS = ["5050"] + [str(p) for p in range(6001, 6010)]


def doc_files(root):
    files = [os.path.join(root, "README.md")]
    files += sorted(glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True))
    return [f for f in files if os.path.isfile(f)]


def fenced_blocks(path):
    """Yields (line number, language, text, runnable) for every fenced block of a Markdown file."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(```+|~~~+)\s*([\w+-]*)", lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(2), m.group(3).lower(), i
        runnable = i > 0 and lines[i - 1].strip() == MARKER
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        if i >= len(lines):
            raise SystemExit(f"{path}:{start + 1}: a fenced block is never closed")
        i += 1
        yield start + 1, lang, "\n".join(body) + "\n", runnable


def ephemeral_low():
    """The lowest port the kernel hands out for bind(0) and outgoing connections."""
    try:
        return int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(n):
    """n distinct free loopback ports below the kernel's ephemeral range: a port the kernel
    picks for another test's `--port 0` node or for any outgoing connection can never be one of
    them (a port from bind(0), released and bound again later, could be taken in between)."""
    rng = random.SystemRandom()
    low = ephemeral_low()
    first = 10000 if low > 11000 else 1024
    if low - first < 100 * n:
        raise SystemExit(f"the kernel's ephemeral ports start at {low}: too few ports below them "
                         f"(from {first}) to pick {n} for the docs' clusters")
    chosen = []
    for _ in range(200 * n):
        if len(chosen) == n:
            break
        port = rng.randrange(first, low)
        if port in chosen:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        chosen.append(port)
    if len(chosen) < n:
        raise SystemExit(f"found only {len(chosen)} free loopback ports below {low}, needed {n}")
    return [str(p) for p in chosen]


def with_free_ports(text):
    """The block with each of the docs' well-known ports replaced by a free one (whole numbers
    only: 50500 or 16001 stay)."""
    mapping = dict(zip(DOC_PORTS, free_ports(len(DOC_PORTS))))
    return re.sub(r"(?<![\w.])(" + "|".join(DOC_PORTS) + r")(?!\w)", lambda m: mapping[m.group(1)], text)


def sandbox(root, build_dir):
    """A temporary working directory that looks like the repository root with its build."""
    tmp = tempfile.mkdtemp(prefix="conveyor-docs-")
    for entry in os.listdir(root):
        if entry in ("build", ".git") or entry.startswith("build-"):
            continue
        os.symlink(os.path.join(root, entry), os.path.join(tmp, entry))
    os.symlink(build_dir, os.path.join(tmp, "build"))
    return tmp


def run_block(root, build_dir, python, lang, text, timeout):
    """Runs one block; returns None on success, else a description of the failure."""
    tmp = sandbox(root, build_dir)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(build_dir, "python")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # As in a fresh shell: the caller's conveyor settings (log level, token...) do not leak in.
    for name in [n for n in env if n.startswith("CONVEYOR_")]:
        del env[name]
    if lang in SHELLS:
        cmd = ["bash", "-euo", "pipefail", "-c", text]
    else:
        cmd = [python, "-c", text]
    # Output goes to a file, not a pipe: nodes a block left in the background keep a pipe open,
    # and the block is over when its shell is, not when they are.
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        proc.wait(timeout=timeout)
        failure = None if proc.returncode == 0 else f"exited with status {proc.returncode}"
    except subprocess.TimeoutExpired:
        failure = f"ran past its {timeout} s timeout"
    finally:
        # What the block left running in the background (nodes started with `&`).
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        subprocess.run(["rm", "-rf", tmp], check=False)
    log.seek(0)
    out = log.read()
    log.close()
    if failure:
        text = out.decode("utf-8", "replace")
        if len(text) <= 6000:
            return f"{failure}; its output:\n{text}"
        # The head too: a sanitizer report's first stack (the direct leak, the bad access) comes
        # first and would be cut from a tail.
        return f"{failure}; its output begins:\n{text[:3000]}\n[...]\nand ends:\n{text[-3000:]}"
    return None


def slug(heading):
    s = re.sub(r"[`*]", "", heading.strip().lower())
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    out, counts = set(), {}
    in_code = False
    for line in open(path, encoding="utf-8"):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        if in_code:
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = counts.get(base, 0)
            counts[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def check_links(path):
    """Yields (line, problem) for every broken relative link of one file."""
    in_code = False
    for no, line in enumerate(open(path, encoding="utf-8"), 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        if in_code:
            continue
        for target in re.findall(r"\]\(([^)\s]+)\)", re.sub(r"`[^`]*`", "", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            dest = path if not file_part else os.path.normpath(
                os.path.join(os.path.dirname(path), file_part))
            yield no, target, dest, anchor


def help_flags(binary, args):
    out = subprocess.run([binary] + args + ["--help"], capture_output=True, text=True, timeout=30)
    return set(re.findall(r"^\s+(?:-\w \[ )?(--[a-z0-9][a-z0-9-]*)", out.stdout, re.M)) - {"--help"}


def sub_names(binary, args, heading):
    """The subcommands `conveyor [args] --help` lists under `heading:` (commands, benchmarks)."""
    out = subprocess.run([binary] + args + ["--help"], capture_output=True, text=True, timeout=30).stdout
    part = out.split(heading + ":", 1)
    if len(part) < 2:
        raise SystemExit(f"check_docs: `{' '.join([binary] + args)} --help` lists no {heading}")
    return re.findall(r"^  ([a-z][a-z-]*)\s", part[1], re.M)


def undocumented_flags(binary, text):
    """Yields (command, flag) for every flag a command prints that the docs never name."""
    named = set(re.findall(r"--[a-z0-9][a-z0-9-]*", text))
    for cmd in sub_names(binary, [], "commands"):
        subs = [[cmd]]
        if cmd == "bench":
            subs = [["bench", b] for b in sub_names(binary, ["bench"], "benchmarks")]
        for args in subs:
            for flag in sorted(help_flags(binary, args)):
                yield " ".join(args), flag, flag in named


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", required=True, help="the build folder with conveyor (and python/)")
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="the repository root (default: this script's repository)")
    ap.add_argument("--python", default=sys.executable, help="interpreter for Python blocks")
    ap.add_argument("--no-python", action="store_true", help="skip Python blocks (no Python client)")
    ap.add_argument("--no-flags", action="store_true", help="do not check that every flag is named")
    ap.add_argument("--timeout", type=int, default=60, help="seconds each block may run")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    build_dir = os.path.abspath(args.build_dir)
    if not os.path.isfile(os.path.join(build_dir, "conveyor")):
        print(f"check_docs: --build-dir {build_dir} holds no `conveyor` binary (build it first)")
        return 2
    if not args.no_python and not os.path.isdir(os.path.join(build_dir, "python", "conveyor")):
        print(f"check_docs: {build_dir}/python/conveyor is missing: build the Python client, "
              "or pass --no-python")
        return 2

    ran = failed = skipped = links = broken = 0
    for path in doc_files(root):
        rel = os.path.relpath(path, root)
        for line, lang, text, runnable in fenced_blocks(path):
            if not runnable:
                continue
            if lang not in SHELLS + ("python",):
                print(f"{rel}:{line}: a runnable block must be sh, bash or python, not `{lang}`")
                failed += 1
                continue
            if lang == "python" and args.no_python:
                skipped += 1
                continue
            ran += 1
            started = time.monotonic()
            problem = run_block(root, build_dir, args.python, lang, with_free_ports(text), args.timeout)
            if problem:
                failed += 1
                print(f"{rel}:{line}: runnable {lang} block {problem}")
            else:
                print(f"{rel}:{line}: runnable {lang} block ok ({time.monotonic() - started:.1f} s)")
        for line, target, dest, anchor in check_links(path):
            links += 1
            if not os.path.exists(dest):
                broken += 1
                print(f"{rel}:{line}: link `{target}`: {os.path.relpath(dest, root)} does not exist")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                broken += 1
                print(f"{rel}:{line}: link `{target}`: {os.path.relpath(dest, root)} has no heading "
                      f"with anchor #{anchor}")
    flags = undocumented = 0
    if not args.no_flags:
        text = "".join(open(p, encoding="utf-8").read() for p in doc_files(root))
        for cmd, flag, documented in undocumented_flags(os.path.join(build_dir, "conveyor"), text):
            flags += 1
            if not documented:
                undocumented += 1
                print(f"`conveyor {cmd}` has the flag {flag}, which README.md and docs/ never name")
    print(f"docs: {ran} runnable block(s) run, {failed} failed, {skipped} skipped; "
          f"{links} link(s) checked, {broken} broken; {flags} flag(s) checked, {undocumented} undocumented")
    return 1 if failed or broken or undocumented else 0


if __name__ == "__main__":
    sys.exit(main())
