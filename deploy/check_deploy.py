#!/usr/bin/python3
"""Checks what can be checked of deploy/ without a cluster (run by the integration tests):
- the Kubernetes manifests parse and have the agreed shape (a dispatcher StatefulSet with a volume
  for --work-dir whose serviceName is a headless Service, a Service for clients, workers advertising
  their pod IP);
- every flag the manifests and systemd units pass to `conveyor <cmd>` is listed by
  `conveyor <cmd> --help`;
- every dispatcher and worker they run is secured as docs/OPERATIONS.md "Security" asks of a
  reachable address: --tls-cert/--tls-key/--tls-ca and an admission token flag, and workers --allow-path;
- metrics: every dispatcher and worker serves them (--metrics-port), a pod's Prometheus annotation
  names that port, and instances of a systemd template unit do not share one;
- probes and resources: every dispatcher and worker container has a liveness probe on /healthz and
  a readiness probe on /readyz of its metrics port, and resource requests and limits for cpu and
  memory (limits not below requests);
- the dispatcher lists the files of DYNAMIC file jobs: it has --allow-path on a mount of the same
  volume claim the workers mount at their --allow-path;
- a worker's stop timeout (systemd TimeoutStopSec, Kubernetes terminationGracePeriodSeconds)
  exceeds its --drain-timeout plus a margin, so a draining worker is not killed;
- under ProtectSystem=strict, --work-dir and a worker's --allow-path are writable (StateDirectory,
  ReadWritePaths); in a pod, every file flag names a path under one of the container's mounts;
- the HorizontalPodAutoscaler (deploy/k8s/hpa.yaml) scales a worker Deployment of the manifests on
  the external metric conveyor_desired_workers with a target of 1 per pod (replicas = the estimate),
  the Prometheus adapter's values (deploy/prometheus-adapter.yaml) serve that metric from the
  cluster's series, and no dispatcher also runs a --scale-command (two actuators would fight);
- the kustomize base (deploy/kustomize/base) renders exactly the objects of deploy/k8s: read here
  (resources only), and with `kubectl kustomize` too where kubectl is installed;
- the Dockerfile is a multi-stage Debian 12 build running the README's build command as a non-root
  user, and its runtime stage installs the package of every shared library the binary links
  (`ldd`, `dpkg-query -S`), less those debian:12-slim already has.

usage: check_deploy.py CONVEYOR_BINARY   (exit 0 = fine; otherwise one line per problem)
"""
import glob
import os
import re
import json
import shlex
import shutil
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
problems = []
help_cache = {}

# What a worker needs after its drain timeout to stop (close connections, leave the dispatcher).
DRAIN_MARGIN_S = 10
# The flags that name files or directories the process opens.
PATH_FLAGS = ("tls-cert", "tls-key", "tls-ca", "token-file", "allow-path", "work-dir")
TOKEN_FLAGS = ("token-file", "auth-token")

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


def help_of(binary, cmd):
    if cmd not in help_cache:
        out = subprocess.run([binary, cmd, "--help"], capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            problems.append(f"`conveyor {cmd} --help` failed: {out.stderr.strip()}")
        help_cache[cmd] = out.stdout
    return help_cache[cmd]


def flags_of(binary, cmd):
    return set(re.findall(r"--([a-z][a-z0-9-]*)", help_of(binary, cmd)))


def flag_values(args, name):
    """The values given to --name in args, as `--name=V` or `--name V`."""
    values = []
    for i, a in enumerate(args):
        if a == f"--{name}" and i + 1 < len(args) and not args[i + 1].startswith("--"):
            values.append(args[i + 1])
        elif a.startswith(f"--{name}="):
            values.append(a.split("=", 1)[1])
    return values


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


def check_secured(where, args):
    """docs/OPERATIONS.md "Security": a dispatcher or worker on a reachable address runs with mutual
    TLS and an admission token; a worker's datasets touch files only under --allow-path."""
    cmd, rest = args[0], args[1:]
    if cmd not in ("dispatcher", "worker"):
        return
    for f in ("tls-cert", "tls-key", "tls-ca"):
        if not flag_values(rest, f):
            problems.append(f"{where}: `conveyor {cmd}` without --{f} (every node needs mutual TLS)")
    if not any(flag_values(rest, f) for f in TOKEN_FLAGS):
        problems.append(f"{where}: `conveyor {cmd}` without --token-file or --auth-token")
    if cmd == "worker" and not flag_values(rest, "allow-path"):
        problems.append(f"{where}: `conveyor worker` without --allow-path (its datasets could "
                        "not read files)")


def default_ms(binary, cmd, flag):
    m = re.search(rf"--{flag} MS \(=(\d+)\)", help_of(binary, cmd))
    return int(m.group(1)) if m else None


def drain_timeout_s(binary, where, args, env):
    """The worker's --drain-timeout in seconds: from its arguments (a ${VAR} resolved in env),
    else the default `conveyor worker --help` shows; None if it cannot be told."""
    values = flag_values(args[1:], "drain-timeout")
    if values:
        v = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: env.get(m.group(1), m.group(0)),
                   values[-1])
        if not v.isdigit():
            problems.append(f"{where}: cannot tell the worker's --drain-timeout from `{values[-1]}`")
            return None
        return int(v) / 1000
    ms = default_ms(binary, "worker", "drain-timeout")
    if ms is None:
        problems.append("`conveyor worker --help` shows no default for --drain-timeout")
        return None
    return ms / 1000


def under(path, roots):
    path = os.path.normpath(path)
    return any(path == os.path.normpath(r) or path.startswith(os.path.normpath(r) + "/")
               for r in roots)


# --- Kubernetes ---------------------------------------------------------------------------------

QUANTITY = re.compile(r"^([0-9.]+)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")
SUFFIX = {None: 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20,
          "Gi": 2**30, "Ti": 2**40}


def quantity(v):
    m = QUANTITY.match(str(v))
    return float(m.group(1)) * SUFFIX[m.group(2)] if m else None


def check_probes_and_resources(where, c, metrics_port):
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = (c.get(probe) or {}).get("httpGet") or {}
        port = get.get("port")
        port = ports.get(port, port)
        if get.get("path") != path or str(port) != str(metrics_port):
            problems.append(f"{where}: {probe} is not an httpGet of {path} on the metrics port "
                            f"{metrics_port}")
    res = c.get("resources") or {}
    for kind in ("requests", "limits"):
        for r in ("cpu", "memory"):
            if quantity((res.get(kind) or {}).get(r)) is None:
                problems.append(f"{where}: no resources.{kind}.{r}")
    for r in ("cpu", "memory"):
        req = quantity((res.get("requests") or {}).get(r))
        lim = quantity((res.get("limits") or {}).get(r))
        if req is not None and lim is not None and lim < req:
            problems.append(f"{where}: resources.limits.{r} is below resources.requests.{r}")


def claims_at(spec, c, paths):
    """The volume claims mounted in container c at (or above) any of `paths`."""
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    out = set()
    for m in c.get("volumeMounts", []):
        if any(under(p, [m["mountPath"]]) for p in paths):
            claim = (volumes.get(m["name"], {}).get("persistentVolumeClaim") or {}).get("claimName")
            if claim:
                out.add(claim)
    return out

def check_k8s(binary):
    kinds = {}
    data_claims = {"dispatcher": None, "worker": set()}
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
            template = d.get("spec", {}).get("template", {})
            spec = template.get("spec", {})
            annotations = template.get("metadata", {}).get("annotations", {}) or {}
            for c in spec.get("containers", []):
                where = f"{rel} {kind}/{name} container {c.get('name')}"
                args = c.get("args", [])
                check_args(binary, where, args)
                if not args or args[0] not in ("dispatcher", "worker"):
                    continue
                check_secured(where, args)
                mounts = [m["mountPath"] for m in c.get("volumeMounts", [])]
                for f in PATH_FLAGS:
                    for v in flag_values(args[1:], f):
                        if not under(v, mounts):
                            problems.append(f"{where}: --{f}={v} is on none of the container's "
                                            "volumes")
                ports = flag_values(args[1:], "metrics-port")
                if ports:
                    check_probes_and_resources(where, c, ports[-1])
                allowed = flag_values(args[1:], "allow-path")
                if args[0] == "dispatcher":
                    data_claims["dispatcher"] = claims_at(spec, c, allowed)
                else:
                    data_claims["worker"] |= claims_at(spec, c, allowed)
                if not ports:
                    problems.append(f"{where}: no --metrics-port")
                elif annotations.get("prometheus.io/scrape") != "true" or \
                        str(annotations.get("prometheus.io/port")) != ports[-1]:
                    problems.append(f"{where}: the pod's prometheus.io/scrape and prometheus.io/port "
                                    f"annotations do not name its --metrics-port {ports[-1]}")
                if args[0] == "worker":
                    drain = drain_timeout_s(binary, where, args, {})
                    grace = spec.get("terminationGracePeriodSeconds", 30)
                    if drain is not None and grace < drain + DRAIN_MARGIN_S:
                        problems.append(f"{where}: terminationGracePeriodSeconds {grace} is not "
                                        f"above the drain timeout ({drain:g} s) plus "
                                        f"{DRAIN_MARGIN_S} s: a draining worker would be killed")
    if data_claims["dispatcher"] is not None and \
            not data_claims["dispatcher"] & data_claims["worker"]:
        problems.append("k8s: the dispatcher has no --allow-path on the volume claim the workers "
                        "mount at their --allow-path (DYNAMIC file jobs list their files there)")
    sts = kinds.get("StatefulSet", [])
    if not any("dispatcher" == (s["spec"]["template"]["spec"]["containers"][0]["args"] or [""])[0]
               and s["spec"].get("volumeClaimTemplates") for s in sts):
        problems.append("k8s: no dispatcher StatefulSet with a volume claim for --work-dir")
    services = {s["metadata"]["name"]: s for s in kinds.get("Service", [])}
    if not any(s["spec"].get("clusterIP") != "None" for s in services.values()):
        problems.append("k8s: no Service for the dispatcher")
    for s in sts:
        name, svc = s["spec"].get("serviceName"), services.get(s["spec"].get("serviceName"))
        if not svc or svc["spec"].get("clusterIP") != "None":
            problems.append(f"k8s: StatefulSet/{s['metadata']['name']}'s serviceName {name} is not "
                            "a headless Service (clusterIP: None) of the manifests")
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
    check_hpa(kinds)


def check_hpa(kinds):
    hpas = kinds.get("HorizontalPodAutoscaler", [])
    workers = {d["metadata"]["name"] for d in kinds.get("Deployment", [])
               if (d["spec"]["template"]["spec"]["containers"][0].get("args") or [""])[0] == "worker"}
    if not hpas:
        problems.append("k8s: no HorizontalPodAutoscaler for the workers")
    for h in hpas:
        where = f"k8s HorizontalPodAutoscaler/{h['metadata']['name']}"
        spec = h.get("spec", {})
        ref = spec.get("scaleTargetRef", {})
        if ref.get("kind") != "Deployment" or ref.get("name") not in workers:
            problems.append(f"{where}: scaleTargetRef {ref.get('kind')}/{ref.get('name')} is not a "
                            "worker Deployment of the manifests")
        lo, hi = spec.get("minReplicas", 1), spec.get("maxReplicas", 0)
        if not 1 <= lo <= hi:
            problems.append(f"{where}: needs 1 <= minReplicas ({lo}) <= maxReplicas ({hi})")
        metrics = spec.get("metrics", [])
        external = [m.get("external", {}) for m in metrics if m.get("type") == "External"]
        if len(metrics) != 1 or len(external) != 1 or \
                external[0].get("metric", {}).get("name") != "conveyor_desired_workers":
            problems.append(f"{where}: needs exactly one metric, the external "
                            "conveyor_desired_workers")
        elif external[0].get("target", {}) != {"type": "AverageValue", "averageValue": "1"}:
            problems.append(f"{where}: the target must be averageValue \"1\" (replicas = the "
                            "estimate), got {external[0].get('target')}")
    for s in kinds.get("StatefulSet", []) + kinds.get("Deployment", []):
        for c in s["spec"]["template"]["spec"]["containers"]:
            if hpas and flag_values(c.get("args", [])[1:], "scale-command"):
                problems.append(f"k8s {s['kind']}/{s['metadata']['name']}: --scale-command next to "
                                "the HorizontalPodAutoscaler: two actuators would fight")
    path = os.path.join(ROOT, "deploy", "prometheus-adapter.yaml")
    try:
        values = yaml.safe_load(open(path)) or {}
    except (OSError, yaml.YAMLError) as e:
        problems.append(f"deploy/prometheus-adapter.yaml: cannot read: {e}")
        return
    rules = (values.get("rules") or {}).get("external") or []
    if not any(r.get("name", {}).get("as") == "conveyor_desired_workers" and
               'job_name=""' in r.get("metricsQuery", "") and
               "<<.LabelMatchers>>" in r.get("metricsQuery", "") for r in rules):
        problems.append("deploy/prometheus-adapter.yaml: no external rule serving "
                        "conveyor_desired_workers from the cluster's series (job_name=\"\") with "
                        "the HPA's label matchers")


def canonical(docs):
    return sorted(json.dumps(d, sort_keys=True) for d in docs if d)


def check_kustomize():
    base = os.path.join(ROOT, "deploy", "kustomize", "base")
    rel = os.path.relpath(base, ROOT)
    try:
        k = yaml.safe_load(open(os.path.join(base, "kustomization.yaml"))) or {}
    except (OSError, yaml.YAMLError) as e:
        problems.append(f"{rel}/kustomization.yaml: cannot read: {e}")
        return
    # This reader knows `resources` only: a patch or generator would change what renders.
    extra = set(k) - {"apiVersion", "kind", "resources"}
    if extra:
        problems.append(f"{rel}/kustomization.yaml: fields this check does not render: "
                        f"{sorted(extra)}")
    rendered = []
    for r in k.get("resources", []):
        try:
            rendered += list(yaml.safe_load_all(open(os.path.join(base, r))))
        except (OSError, yaml.YAMLError) as e:
            problems.append(f"{rel}/{r}: cannot read: {e}")
    shipped = []
    for path in sorted(glob.glob(os.path.join(ROOT, "deploy", "k8s", "*.yaml"))):
        shipped += list(yaml.safe_load_all(open(path)))
    if canonical(rendered) != canonical(shipped):
        problems.append(f"{rel}: does not render the objects of deploy/k8s (copy the changed "
                        "manifest, or list the new one under resources)")
    if shutil.which("kubectl"):
        out = subprocess.run(["kubectl", "kustomize", base], capture_output=True, text=True,
                             timeout=120)
        if out.returncode != 0:
            problems.append(f"kubectl kustomize {rel} failed: {out.stderr.strip()}")
        elif canonical(yaml.safe_load_all(out.stdout)) != canonical(shipped):
            problems.append(f"kubectl kustomize {rel} does not render the objects of deploy/k8s")


# --- systemd ------------------------------------------------------------------------------------

def parse_unit(path):
    """{key: [values]} of a unit file (sections merged; `\\` continues a line)."""
    keys, line = {}, ""
    for raw in open(path):
        raw = raw.rstrip("\n")
        if not line and (not raw.strip() or raw.lstrip()[0] in "#;"):
            continue
        if raw.endswith("\\"):
            line += raw[:-1] + " "
            continue
        line += raw
        if "=" in line and not line.startswith("["):
            k, v = line.split("=", 1)
            keys.setdefault(k.strip(), []).append(v.strip())
        line = ""
    return keys


def timespan_s(text):
    """systemd time span ("45", "45s", "1min 30s", "infinity") in seconds; None if unparsable."""
    if text.strip() == "infinity":
        return float("inf")
    units = {"us": 1e-6, "ms": 1e-3, "": 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600,
             "hr": 3600}
    total, pos, text = 0.0, 0, text.replace(" ", "")
    for m in re.finditer(r"(\d+(?:\.\d+)?)([a-z]*)", text):
        if m.start() != pos or m.group(2) not in units:
            return None
        total += float(m.group(1)) * units[m.group(2)]
        pos = m.end()
    return total if pos == len(text) and text else None


def example_env():
    """Variables set by deploy/systemd/*.env.example (what the units' env files hold)."""
    env = {}
    for path in glob.glob(os.path.join(ROOT, "deploy", "systemd", "*.env.example")):
        for line in open(path):
            m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)=(.*)", line)
            if m:
                env[m.group(1)] = m.group(2).strip().strip('"')
    return env


def check_systemd(binary):
    units = sorted(glob.glob(os.path.join(ROOT, "deploy", "systemd", "*.service")))
    if not units:
        problems.append("systemd: no units")
    for path in units:
        rel = os.path.relpath(path, ROOT)
        keys = parse_unit(path)
        if not keys.get("ExecStart"):
            problems.append(f"{rel}: no ExecStart")
        for exec_start in keys.get("ExecStart", []):
            words = shlex.split(exec_start)
            if not words[0].endswith("/conveyor"):
                problems.append(f"{rel}: ExecStart does not run conveyor")
                continue
            args = words[1:]
            check_args(binary, rel, args)
            if not args or args[0] not in ("dispatcher", "worker"):
                continue
            cmd = args[0]
            check_secured(rel, args)
            ports = flag_values(args[1:], "metrics-port")
            if not ports:
                problems.append(f"{rel}: no --metrics-port")
            elif "@" in os.path.basename(path) and not re.search(r"[$%]", ports[-1]):
                problems.append(f"{rel}: every instance of this template unit would serve metrics "
                                f"on port {ports[-1]}: take it from the instance's env file")
            if cmd == "worker":
                env = example_env()
                for e in keys.get("Environment", []):
                    for w in shlex.split(e):
                        if "=" in w:
                            env[w.split("=", 1)[0]] = w.split("=", 1)[1]
                drain = drain_timeout_s(binary, rel, args, env)
                stop = timespan_s(keys.get("TimeoutStopSec", ["90s"])[-1])  # systemd's default
                if stop is None:
                    problems.append(f"{rel}: cannot read TimeoutStopSec={keys['TimeoutStopSec'][-1]}")
                elif drain is not None and stop < drain + DRAIN_MARGIN_S:
                    problems.append(f"{rel}: TimeoutStopSec ({stop:g} s) is not above the worker's "
                                    f"drain timeout ({drain:g} s) plus {DRAIN_MARGIN_S} s: systemd "
                                    "would kill a draining worker")
            if keys.get("ProtectSystem", [""])[-1] == "strict":
                writable = [p.lstrip("-+") for v in keys.get("ReadWritePaths", []) for p in v.split()]
                for key, base in (("StateDirectory", "/var/lib"), ("CacheDirectory", "/var/cache"),
                                  ("LogsDirectory", "/var/log"), ("RuntimeDirectory", "/run")):
                    writable += [os.path.join(base, d) for v in keys.get(key, []) for d in v.split()]
                needs = [("work-dir", v) for v in flag_values(args[1:], "work-dir")]
                if cmd == "worker":  # cache() files are written under --allow-path
                    needs += [("allow-path", v) for v in flag_values(args[1:], "allow-path")]
                for f, v in needs:
                    if not under(v, writable):
                        problems.append(f"{rel}: --{f} {v} is read-only under ProtectSystem=strict "
                                        "(no ReadWritePaths= or StateDirectory= for it)")


# --- Dockerfile ---------------------------------------------------------------------------------

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
    check_kustomize()
    check_systemd(binary)
    check_dockerfile(binary)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
