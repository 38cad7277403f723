#!/usr/bin/python3
"""Checks what can be checked of deploy/ without a cluster (run by the integration tests):
the Kubernetes manifests parse and have the agreed shape, every flag the manifests and systemd
units pass to `conveyor <cmd>` is listed by `conveyor <cmd> --help`, and the Dockerfile is a
multi-stage Debian 12 build running the README's build command as a non-root user, whose runtime
stage installs the package of every shared library the binary links (`ldd`, `dpkg-query -S`), less
those debian:12-slim already has.

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

# The packages of debian:12-slim (docker-library/repo-info, repos/debian/local/bookworm-slim.md;
# `docker run --rm debian:12-slim dpkg-query -W -f '${Package}\n'` lists them). A library owned by
# one of these needs no install line in the runtime stage.
DEBIAN12_SLIM = set("""
adduser apt base-files base-passwd bash bsdutils coreutils dash debconf debian-archive-keyring
debianutils diffutils dpkg e2fsprogs findutils gcc-12-base gpgv grep gzip hostname
init-system-helpers libacl1 libapt-pkg6.0 libattr1 libaudit-common libaudit1 libblkid1 libbz2-1.0
libc-bin libc6 libcap-ng0 libcap2 libcom-err2 libcrypt1 libdb5.3 libdebconfclient0 libext2fs2
libffi8 libgcc-s1 libgcrypt20 libgmp10 libgnutls30 libgpg-error0 libhogweed6 libidn2-0 liblz4-1
liblzma5 libmd0 libmount1 libnettle8 libp11-kit0 libpam-modules libpam-modules-bin libpam-runtime
libpam0g libpcre2-8-0 libseccomp2 libselinux1 libsemanage-common libsemanage2 libsepol2
libsmartcols1 libss2 libstdc++6 libsystemd0 libtasn1-6 libtinfo6 libudev1 libunistring2 libuuid1
libxxhash0 libzstd1 login logsave mawk mount ncurses-base ncurses-bin passwd perl-base sed
sysvinit-utils tar tzdata usr-is-merged util-linux util-linux-extra zlib1g
""".split())
# The sanitizer build's runtimes (libasan8, libubsan1, ...): the image is built without them.
SANITIZER_RUNTIME = re.compile(r"^lib(a|ub|l|t|hwa)san\d+$")


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


def dockerfile_stages(text):
    """Each stage's instructions (comment lines dropped, continuations joined)."""
    text = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#"))
    stages = []
    for line in re.sub(r"\\\n", " ", text).splitlines():
        if re.match(r"FROM\s", line, re.I):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def apt_installed(stage):
    """The packages `apt-get install` / `apt install` name in a stage's RUN instructions."""
    pkgs = set()
    for line in stage:
        if not re.match(r"RUN\s", line, re.I):
            continue
        apt = installing = False
        for w in shlex.split(line[3:]):
            if w in ("&&", "||", ";", "|") or w.endswith(";"):
                apt = installing = False
            elif w in ("apt-get", "apt"):
                apt = True
            elif apt and w == "install":
                installing = True
            elif installing and not w.startswith("-"):
                pkgs.add(re.split(r"[=:]", w)[0])
    return pkgs


def linked_libraries(binary):
    """The paths of the shared libraries `ldd` resolves for the binary."""
    try:
        out = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        problems.append("deploy/Dockerfile: cannot check the runtime libraries: no ldd")
        return []
    if out.returncode != 0:
        problems.append(f"`ldd {binary}` failed: {out.stderr.strip()}")
        return []
    libs = []
    for line in out.stdout.splitlines():
        line = line.strip()
        if "=>" in line:
            name, target = (s.strip() for s in line.split("=>", 1))
            if target.startswith("not found"):
                problems.append(f"`ldd {binary}`: {name} not found")
                continue
            path = target.split(" (")[0].strip()
        else:
            path = line.split(" (")[0].strip()
        if path.startswith("/"):
            libs.append(path)
    return libs


def owners(paths):
    """{library path: owning package} by `dpkg-query -S`, trying the path, its real path, and
    the /lib <-> /usr/lib twin of each (Debian 12 is merged-/usr; dpkg records one spelling)."""
    variants = {}
    for p in paths:
        vs = []
        for q in (p, os.path.realpath(p)):
            vs += [q, q[4:] if q.startswith("/usr/") else "/usr" + q]
        variants[p] = list(dict.fromkeys(vs))
    try:
        out = subprocess.run(["dpkg-query", "-S"] + sorted({v for vs in variants.values() for v in vs}),
                             capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        problems.append("deploy/Dockerfile: cannot check the runtime libraries: no dpkg-query")
        return {}
    by_file = {}
    for line in out.stdout.splitlines():
        if line.startswith("diversion ") or ": " not in line:
            continue
        pkg, f = line.rsplit(": ", 1)
        by_file[f.strip()] = pkg.split(",")[0].strip().split(":")[0]
    return {p: next((by_file[v] for v in vs if v in by_file), None) for p, vs in variants.items()}


def check_runtime_libraries(binary, runtime_stage):
    installed = apt_installed(runtime_stage)
    libs = linked_libraries(binary)
    for lib, pkg in sorted(owners(libs).items()):
        if pkg is None:
            problems.append(f"deploy/Dockerfile: {lib} (linked by the binary) is in no Debian "
                            "package, so the runtime stage cannot install it")
        elif pkg not in installed and pkg not in DEBIAN12_SLIM and not SANITIZER_RUNTIME.match(pkg):
            problems.append(f"deploy/Dockerfile: the runtime stage does not install {pkg}, "
                            f"which holds {os.path.basename(lib)} (linked by the binary)")


def check_dockerfile(binary):
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
    stages = dockerfile_stages(text)
    if stages:
        check_runtime_libraries(binary, stages[-1])


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    binary = sys.argv[1]
    check_k8s(binary)
    check_systemd(binary)
    check_dockerfile(binary)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
