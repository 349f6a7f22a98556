"""A client-side dry run of the manual's ``kubectl`` and ``kustomize`` lines, with no cluster and no kubectl: the
kustomization built in Python as ``kubectl kustomize`` builds it (its ``resources``, ``labels`` and ``images``;
any other field fails, rather than being ignored), every object it makes checked against the Kubernetes API's
schemas (kubernetes-validate, strict), and each documented line parsed and run against a cluster that holds that
build and whatever earlier documented lines created: an unknown verb or flag, or an object a line names that
neither the build nor an earlier line made, fails with the line.

Pods are not in a build; a Deployment's or a Job's pods are named as a cluster names them (``bookchat-web-0``),
carry their template's labels, and are what ``get pod -l …`` lists and ``exec``/``cp`` reach. A command
substitution ``$(…)`` is run the same way, through the few text tools a pipeline of its uses (``head``, ``cut``).
"""

from __future__ import annotations

import copy
import functools
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import kubernetes_validate
import yaml

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "deploy" / "kubernetes"
KUBERNETES = "1.33"  # the API version the objects are checked against (as tests/test_deploy_manifests.py)
# kubectl's names for the kinds the manual uses: singular, plural and short forms.
KINDS = {name: kind for kind, names in {
    "Deployment": ("deployment", "deployments", "deploy"), "Job": ("job", "jobs"), "Pod": ("pod", "pods", "po"),
    "Secret": ("secret", "secrets"), "ConfigMap": ("configmap", "configmaps", "cm"),
    "Service": ("service", "services", "svc"), "Ingress": ("ingress", "ingresses", "ing"),
    "PersistentVolumeClaim": ("persistentvolumeclaim", "persistentvolumeclaims", "pvc"),
    "PodDisruptionBudget": ("poddisruptionbudget", "poddisruptionbudgets", "pdb"),
}.items() for name in names}
KUSTOMIZATION_FIELDS = {"apiVersion", "kind", "resources", "labels", "images"}  # what build() understands
# Each verb's flags (a flag given as --name=value or --name value); the global ones are allowed everywhere.
GLOBAL_FLAGS = {"-n", "--namespace", "--context"}
FLAGS = {
    "apply": {"-k", "-f", "--dry-run", "--server-side"}, "kustomize": set(), "wait": {"--for", "--timeout"},
    "rollout": {"--timeout", "-w", "--watch"}, "exec": {"-c", "--container", "-i", "-t", "-it", "--stdin", "--tty"},
    "cp": {"-c", "--container"}, "get": {"-l", "--selector", "-o", "--output"}, "scale": {"--replicas"},
    "create": {"--cert", "--key", "--from-literal", "--from-file", "--type"}, "patch": {"-p", "--patch", "--type"},
    "delete": {"-l", "--selector", "--wait"}, "logs": {"-f", "--follow", "--tail", "-c", "--container"},
}
BOOLEAN_FLAGS = {"-i", "-t", "-it", "--stdin", "--tty", "-w", "--watch", "-f", "--follow", "--server-side", "--wait"}
CONDITIONS = {"Job": {"complete", "failed"}, "Deployment": {"available", "progressing"}, "Pod": {"ready"}}


class DryRunError(AssertionError):
    """A documented line that would fail on a cluster: the line and why."""


def build(directory: Path) -> list[dict]:
    """A fresh copy of ``_build(directory)``'s objects (validating them takes a second; the build is made once)."""
    return copy.deepcopy(_build(directory.resolve()))


@functools.cache
def _build(directory: Path) -> list[dict]:
    """``kubectl kustomize DIRECTORY``: the kustomization's resources (files, or folders with a kustomization of
    their own), its ``labels`` added to every object's metadata (and to selectors and pod templates when it says
    so), its ``images`` set in every container that names them."""
    path = directory / "kustomization.yaml"
    if not path.is_file():
        raise DryRunError(f"{directory} has no kustomization.yaml")
    kustomization = yaml.safe_load(path.read_text(encoding="utf-8"))
    unknown = set(kustomization) - KUSTOMIZATION_FIELDS
    if unknown:
        raise DryRunError(f"{path}: fields this dry run does not build: {sorted(unknown)}")
    objects = []
    for resource in kustomization.get("resources", []):
        target = directory / resource
        if target.is_dir():
            objects += copy.deepcopy(_build(target.resolve()))
        elif target.is_file():
            objects += [doc for doc in yaml.safe_load_all(target.read_text(encoding="utf-8")) if doc]
        else:
            raise DryRunError(f"{path}: the resource {resource} does not exist")
    for label in kustomization.get("labels", []):
        for doc in objects:
            doc.setdefault("metadata", {}).setdefault("labels", {}).update(label["pairs"])
            template = doc.get("spec", {}).get("template")
            if template and (label.get("includeTemplates") or label.get("includeSelectors")):
                template.setdefault("metadata", {}).setdefault("labels", {}).update(label["pairs"])
            if label.get("includeSelectors") and "selector" in doc.get("spec", {}):
                selector = doc["spec"]["selector"]
                (selector.setdefault("matchLabels", {}) if doc["kind"] != "Service" else selector).update(
                    label["pairs"])
    for image in kustomization.get("images", []):
        for doc in objects:
            for container in containers(doc):
                name, _, tag = container["image"].partition(":")
                if name == image["name"]:
                    tag = image.get("newTag", tag)
                    container["image"] = image.get("newName", name) + (f"@{image['digest']}" if "digest" in image
                                                                       else f":{tag}" if tag else "")
    for doc in objects:
        try:
            kubernetes_validate.validate(doc, KUBERNETES, strict=True)
        except kubernetes_validate.ValidationError as exc:
            raise DryRunError(f"{doc['kind']}/{doc['metadata']['name']}: {exc}") from exc
    return objects


def containers(doc: dict) -> list[dict]:
    spec = doc.get("spec", {}).get("template", {}).get("spec", {}) if doc.get("kind") in ("Deployment", "Job") \
        else doc.get("spec", {}) if doc.get("kind") == "Pod" else {}
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


@dataclass
class Cluster:
    """The objects a cluster would hold: by (kind, name), and the working directory the lines run in."""

    objects: dict[tuple[str, str], dict] = field(default_factory=dict)
    cwd: Path = REPO

    def apply(self, objects: list[dict]) -> None:
        for doc in objects:
            self.objects[(doc["kind"], doc["metadata"]["name"])] = copy.deepcopy(doc)
        self.check_references()

    def pods(self) -> dict[str, dict]:
        """The pods the workloads run, as a cluster names them, with their template's labels."""
        found = {}
        for (kind, name), doc in self.objects.items():
            if kind in ("Deployment", "Job"):
                replicas = doc["spec"].get("replicas", 1) if kind == "Deployment" else 1
                labels = doc["spec"]["template"].get("metadata", {}).get("labels", {})
                for index in range(max(replicas, 1)):
                    found[f"{name}-{index}"] = {"kind": "Pod", "metadata": {"name": f"{name}-{index}",
                                                                          "labels": labels}, "owner": name}
        return found

    def get(self, kind: str, name: str) -> dict:
        if kind == "Pod" and name in self.pods():
            return self.pods()[name]
        if (kind, name) not in self.objects:
            raise DryRunError(f"{kind}/{name} is neither in the build nor created by an earlier line")
        return self.objects[(kind, name)]

    def check_references(self) -> None:
        """What the objects name exists: the Secrets, ConfigMaps and claims pods use, an Ingress's Service and
        its TLS Secret (which an earlier line may create) once the Ingress is applied."""
        for (kind, name), doc in self.objects.items():
            wanted = []
            spec = doc.get("spec", {}).get("template", {}).get("spec", {}) if kind in ("Deployment", "Job") else {}
            for container in spec.get("containers", []):
                for env in container.get("env", []):
                    ref = env.get("valueFrom", {})
                    if "secretKeyRef" in ref:
                        wanted.append(("Secret", ref["secretKeyRef"]["name"]))
                    if "configMapKeyRef" in ref:
                        wanted.append(("ConfigMap", ref["configMapKeyRef"]["name"]))
                for source in container.get("envFrom", []):
                    for ref_kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
                        if key in source:
                            wanted.append((ref_kind, source[key]["name"]))
            for volume in spec.get("volumes", []):
                if "persistentVolumeClaim" in volume:
                    wanted.append(("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"]))
                if "secret" in volume:
                    wanted.append(("Secret", volume["secret"]["secretName"]))
            if kind == "Ingress":
                wanted += [("Secret", tls["secretName"]) for tls in doc["spec"].get("tls", [])]
                wanted += [("Service", path["backend"]["service"]["name"]) for rule in doc["spec"].get("rules", [])
                           for path in rule.get("http", {}).get("paths", [])]
            missing = [f"{k}/{n}" for k, n in wanted if (k, n) not in self.objects]
            if missing:
                raise DryRunError(f"{kind}/{name} names {', '.join(missing)}, which nothing made")

    def select(self, selector: str) -> list[str]:
        """The pods an equality selector (``a=b,c=d``) matches."""
        pairs = dict(part.split("=", 1) for part in selector.split(","))
        return [name for name, pod in self.pods().items()
                if pairs.items() <= pod["metadata"]["labels"].items()]


def kind_and_name(text: str, names: list[str]) -> list[tuple[str, str]]:
    """``deploy/bookchat-web`` or ``deployment bookchat-web bookchat-worker``: (kind, name) pairs."""
    if "/" in text:
        kind, _, name = text.partition("/")
        names = [name]
    else:
        kind = text
    if kind not in KINDS:
        raise DryRunError(f"unknown resource type {kind!r}")
    return [(KINDS[kind], name) for name in names]


def parse(words: list[str], verb: str) -> tuple[list[str], dict[str, str]]:
    """A kubectl command's positional words and flags, the flags checked against what ``verb`` takes; what
    follows ``--`` (exec's command) is returned as positional words after a ``--``."""
    positional, flags, allowed = [], {}, FLAGS[verb] | GLOBAL_FLAGS
    index = 0
    while index < len(words):
        word = words[index]
        if word == "--":
            positional += words[index:]
            break
        if word.startswith("-"):
            name, equals, value = word.partition("=")
            if name not in allowed:
                raise DryRunError(f"kubectl {verb} has no flag {name}")
            if not equals and name not in BOOLEAN_FLAGS:
                index += 1
                if index >= len(words):
                    raise DryRunError(f"kubectl {verb} {name} needs a value")
                value = words[index]
            flags[name] = value
        else:
            positional.append(word)
        index += 1
    return positional, flags


def kubectl(cluster: Cluster, words: list[str]) -> str:
    """One kubectl command run against ``cluster``: what it would print (``get -o name``), or ''."""
    if not words:
        raise DryRunError("kubectl with no verb")
    verb, rest = words[0], words[1:]
    if verb not in FLAGS:
        raise DryRunError(f"kubectl has no verb {verb!r} (this dry run knows {sorted(FLAGS)})")
    args, flags = parse(rest, verb)
    return VERBS[verb](cluster, args, flags, verb) or ""


def _apply(cluster: Cluster, args: list[str], flags: dict[str, str], verb: str) -> None:
    """``apply -k DIR`` / ``-f FILE``, and ``kustomize DIR`` (built, not applied)."""
    directory = flags.get("-k") or (args[0] if verb == "kustomize" and args else None)
    if directory is not None:
        objects = build(cluster.cwd / directory)
    elif "-f" in flags:
        objects = [doc for doc in yaml.safe_load_all((cluster.cwd / flags["-f"]).read_text(encoding="utf-8"))
                   if doc]
        for doc in objects:
            kubernetes_validate.validate(doc, KUBERNETES, strict=True)
    else:
        raise DryRunError(f"kubectl {verb} needs -k DIRECTORY or -f FILE")
    if verb == "apply":
        cluster.apply(objects)


def _wait(cluster: Cluster, args: list[str], flags: dict[str, str], verb: str) -> None:
    condition = flags.get("--for", "")
    if not condition.startswith("condition="):
        raise DryRunError(f"kubectl wait --for={condition}: this dry run knows condition=…")
    for kind, name in kind_and_name(args[0], args[1:]):
        cluster.get(kind, name)
        if condition.removeprefix("condition=").lower() not in CONDITIONS.get(kind, set()):
            raise DryRunError(f"a {kind} has no condition {condition}")


def _rollout(cluster: Cluster, args: list[str], flags: dict[str, str], verb: str) -> None:
    if not args or args[0] not in ("status", "restart", "undo", "history") or len(args) < 2:
        raise DryRunError(f"kubectl rollout {' '.join(args)}: rollout status|restart|undo|history TYPE/NAME")
    for kind, name in kind_and_name(args[1], args[2:]):
        if kind != "Deployment":
            raise DryRunError(f"kubectl rollout: a {kind} is not rolled out")
        cluster.get(kind, name)


def _exec(cluster: Cluster, args: list[str], flags: dict[str, str], verb: str) -> None:
    """``exec deploy/NAME -- COMMAND …`` or ``exec POD -- …``: something with pods, and a command."""
    if "--" not in args or args.index("--") != 1 or len(args) < 3:
        raise DryRunError("kubectl exec TARGET -- COMMAND …")
    target = args[0]
    workload = cluster.get(*(kind_and_name(target, []) if "/" in target else [("Pod", target)])[0])
    if workload["kind"] not in ("Deployment", "Job", "Pod"):
        raise DryRunError(f"kubectl exec {target}: not something with pods")


def _cp(cluster: Cluster, args: list[str], flags: dict[str, str], verb: str) -> None:
    remote = [arg for arg in args if re.match(r"^[\w.-]+:/", arg)]
    if len(args) != 2 or len(remote) != 1:
        raise DryRunError(f"kubectl cp {' '.join(args)}: SOURCE DESTINATION, one of them POD:/path")
    cluster.get("Pod", remote[0].split(":", 1)[0])


def _get(cluster: Cluster, args: list[str], flags: dict[str, str], verb: str) -> str:
    """``get TYPE NAME…``, or ``get pod [-l SELECTOR] [-o name]``, which prints the pods it finds."""
    if not args:
        raise DryRunError("kubectl get TYPE")
    if KINDS.get(args[0]) != "Pod" or len(args) != 1:
        for pair in kind_and_name(args[0], args[1:]):
            cluster.get(*pair)
        return ""
    selector = flags.get("-l") or flags.get("--selector")
    names = cluster.select(selector) if selector else list(cluster.pods())
    if selector and not names:
        raise DryRunError(f"no pod has the labels {selector}")
    return "".join(f"pod/{name}\n" if flags.get("-o") == "name" else f"{name}\n" for name in names)


def _scale(cluster: Cluster, args: list[str], flags: dict[str, str], verb: str) -> None:
    if not flags.get("--replicas", "").isdigit() or not args:
        raise DryRunError("kubectl scale TYPE NAME… --replicas=N")
    for pair in kind_and_name(args[0], args[1:]):
        cluster.get(*pair)


def _create(cluster: Cluster, args: list[str], flags: dict[str, str], verb: str) -> None:
    if args[:1] != ["secret"] or len(args) != 3 or args[1] not in ("tls", "generic", "docker-registry"):
        raise DryRunError(f"kubectl create {' '.join(args)}: this dry run knows create secret tls|generic NAME")
    if args[1] == "tls" and not {"--cert", "--key"} <= set(flags):
        raise DryRunError("kubectl create secret tls needs --cert and --key")
    cluster.objects[("Secret", args[2])] = {"kind": "Secret", "metadata": {"name": args[2]}}


def _patch(cluster: Cluster, args: list[str], flags: dict[str, str], verb: str) -> None:
    (kind, name), = kind_and_name(args[0], args[1:])
    cluster.get(kind, name)
    try:
        patch = json.loads(flags.get("-p") or flags["--patch"])
    except (KeyError, ValueError) as exc:
        raise DryRunError(f"kubectl patch: the patch is not JSON ({exc})") from exc
    if kind == "Secret" and not set(patch) <= {"stringData", "data", "metadata", "type"}:
        raise DryRunError(f"a Secret has no {sorted(set(patch))}")


def _delete(cluster: Cluster, args: list[str], flags: dict[str, str], verb: str) -> None:
    for pair in kind_and_name(args[0], args[1:]):
        cluster.get(*pair)
        del cluster.objects[pair]


def _logs(cluster: Cluster, args: list[str], flags: dict[str, str], verb: str) -> None:
    cluster.get(*(kind_and_name(args[0], []) if "/" in args[0] else [("Pod", args[0])])[0])


VERBS = {"apply": _apply, "kustomize": _apply, "wait": _wait, "rollout": _rollout, "exec": _exec, "cp": _cp,
         "get": _get, "scale": _scale, "create": _create, "patch": _patch, "delete": _delete, "logs": _logs}


def kustomize(cluster: Cluster, words: list[str]) -> str:
    """``kustomize edit set image NAME=NEW`` (NAME in the kustomization's ``images:``) and ``kustomize build``."""
    if words[:1] == ["build"]:
        build(cluster.cwd / (words[1] if len(words) > 1 else "."))
        return ""
    if words[:3] != ["edit", "set", "image"] or len(words) != 4:
        raise DryRunError(f"kustomize {' '.join(words)}: this dry run knows edit set image and build")
    path = cluster.cwd / "kustomization.yaml"
    if not path.is_file():
        raise DryRunError(f"kustomize edit: no kustomization.yaml in {cluster.cwd.relative_to(REPO)}")
    name = re.split(r"[=:@]", words[3], maxsplit=1)[0]
    images = [image["name"] for image in yaml.safe_load(path.read_text(encoding="utf-8")).get("images", [])]
    if name not in images:
        raise DryRunError(f"kustomize edit set image {name}: the kustomization's images are {images}")
    return ""


def pipeline(cluster: Cluster, text: str) -> str:
    """A command, or a pipeline of commands, with ``$(…)`` substitutions run first: its output."""
    text = re.sub(r"\$\(([^()]*)\)", lambda inner: pipeline(cluster, inner.group(1)).strip(), text)
    output = ""
    for stage in text.split(" | "):
        words = shlex.split(stage)
        if words[0] == "kubectl":
            output = kubectl(cluster, words[1:])
        elif words[0] == "kustomize":
            output = kustomize(cluster, words[1:])
        elif words[0] == "head" and words[1:2] == ["-n"]:
            output = "".join(output.splitlines(keepends=True)[:int(words[2])])
        elif words[0] == "cut" and len(words) == 3 and words[1].startswith("-d") and words[2].startswith("-f"):
            column = int(words[2][2:]) - 1
            output = "".join(line.split(words[1][2:])[column] + "\n" for line in output.splitlines())
        elif words[0] == "cd" and len(words) == 2:
            cluster.cwd = (cluster.cwd / words[1]).resolve()
            if not cluster.cwd.is_dir():
                raise DryRunError(f"cd {words[1]}: no such folder")
        else:
            raise DryRunError(f"{words[0]}: not a command this dry run runs")
    return output


def run(cluster: Cluster, line: str) -> None:
    """One documented line (commands joined by ``&&``), from the repository's root as the manual's lines are."""
    cluster.cwd = REPO
    for command in line.split(" && "):
        pipeline(cluster, command.split(" #")[0].strip())


def dry_run(lines: list, cluster: Cluster | None = None) -> Cluster:
    """Each of ``lines`` (tests/support/howto.py's) that uses kubectl or kustomize, in order, against a cluster
    holding deploy/kubernetes's build: the first that would fail raises, naming its line."""
    if cluster is None:  # what the build makes counts as there; what it refers to is checked when applied
        cluster = Cluster({(doc["kind"], doc["metadata"]["name"]): doc for doc in build(MANIFESTS)})
    for line in lines:
        if not re.search(r"(^|&& |\$\()(kubectl|kustomize) ", line.text):
            continue
        try:
            run(cluster, line.text)
        except DryRunError as exc:
            raise DryRunError(f"{line}\n  {exc}") from exc
    return cluster
