#!/usr/bin/python3
"""Checks what can be checked of deploy/ without a cluster (run by the integration tests):
the Kubernetes manifests parse and have the agreed shape, every flag the manifests and systemd
units pass to `conveyor <cmd>` is listed by `conveyor <cmd> --help`, and the Dockerfile is a
multi-stage Debian 12 build running the README's build command as a non-root user.

usage: check_deploy.py CONVEYOR_BINARY   (exit 0 = fine; otherwise one line per problem)
"""
import glob
import os
import re
import shlex
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
problems = []
help_cache = {}


def flags_of(binary, cmd):
    if cmd not in help_cache:
        out = subprocess.run([binary, cmd, "--help"], capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            problems.append(f"`conveyor {cmd} --help` failed: {out.stderr.strip()}")
        help_cache[cmd] = set(re.findall(r"--([a-z][a-z0-9-]*)", out.stdout))
    return help_cache[cmd]


def check_args(binary, where, args):
    if not args:
        problems.append(f"{where}: no conveyor subcommand")
        return
    cmd, rest = args[0], args[1:]
    known = flags_of(binary, cmd)
    for a in rest:
        if a.startswith("--"):
            name = a[2:].split("=", 1)[0]
            if name not in known:
                problems.append(f"{where}: `conveyor {cmd}` has no flag --{name}")


def check_k8s(binary):
    kinds = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "deploy", "k8s", "*.yaml"))):
        rel = os.path.relpath(path, ROOT)
        try:
            docs = [d for d in yaml.safe_load_all(open(path)) if d]
        except yaml.YAMLError as e:
            problems.append(f"{rel}: does not parse: {e}")
            continue
        for d in docs:
            kind, name = d.get("kind"), d.get("metadata", {}).get("name")
            kinds.setdefault(kind, []).append(d)
            spec = d.get("spec", {}).get("template", {}).get("spec", {})
            for c in spec.get("containers", []):
                check_args(binary, f"{rel} {kind}/{name} container {c.get('name')}", c.get("args", []))
    sts = kinds.get("StatefulSet", [])
    if not any("dispatcher" == (s["spec"]["template"]["spec"]["containers"][0]["args"] or [""])[0]
               and s["spec"].get("volumeClaimTemplates") for s in sts):
        problems.append("k8s: no dispatcher StatefulSet with a volume claim for --work-dir")
    if not kinds.get("Service"):
        problems.append("k8s: no Service for the dispatcher")
    deps = kinds.get("Deployment", [])
    ok = False
    for d in deps:
        c = d["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e for e in c.get("env", [])}
        pod_ip = env.get("POD_IP", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        if c["args"][0] == "worker" and pod_ip == "status.podIP" and any(
                a.startswith("--advertise=$(POD_IP)") for a in c["args"]):
            ok = True
    if not ok:
        problems.append("k8s: no worker Deployment advertising its pod IP (downward API)")


def check_systemd(binary):
    units = sorted(glob.glob(os.path.join(ROOT, "deploy", "systemd", "*.service")))
    if not units:
        problems.append("systemd: no units")
    for path in units:
        rel = os.path.relpath(path, ROOT)
        found = False
        for line in open(path):
            if line.startswith("ExecStart="):
                found = True
                words = shlex.split(line[len("ExecStart="):])
                if not words[0].endswith("/conveyor"):
                    problems.append(f"{rel}: ExecStart does not run conveyor")
                check_args(binary, rel, words[1:])
        if not found:
            problems.append(f"{rel}: no ExecStart")


def check_dockerfile():
    path = os.path.join(ROOT, "deploy", "Dockerfile")
    text = open(path).read()
    froms = re.findall(r"^FROM\s+(\S+)", text, re.M)
    if len(froms) < 2 or not all(f.startswith("debian:12") for f in froms):
        problems.append(f"deploy/Dockerfile: want a multi-stage Debian 12 build, FROM lines are {froms}")
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    if not users or users[-1].split(":")[0] in ("0", "root"):
        problems.append("deploy/Dockerfile: the final stage must run as a non-root USER")
    readme = open(os.path.join(ROOT, "README.md")).read()
    m = re.search(r"<!-- build-command -->\s*```sh\n([^\n]+)\n", readme)
    if not m:
        problems.append("README.md: no build command marked <!-- build-command -->")
    elif m.group(1).split("#")[0].strip() not in text:
        problems.append(f"deploy/Dockerfile: does not run the README's build command `{m.group(1)}`")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    binary = sys.argv[1]
    check_k8s(binary)
    check_systemd(binary)
    check_dockerfile()
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
