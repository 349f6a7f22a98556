"""Every ``kubectl`` and ``kustomize`` line of the docs, run as a client-side dry run (tests/support/kubectl.py:
no cluster, no kubectl): ``apply -k``/``kustomize`` build deploy/kubernetes's kustomization and check every object
against the Kubernetes API's schemas, and each object a line names (``deploy/bookchat-web``, ``job/…``, the pods
``-l app.kubernetes.io/component=web`` selects, the TLS Secret the Ingress references) must be in the build or
made by an earlier line of the same page. The negative tests prove it catches what it claims to."""

from __future__ import annotations

import pytest

from tests.support import howto
from tests.support.kubectl import MANIFESTS, Cluster, DryRunError, build, dry_run
from tests.test_docs_truth import documents


def kubernetes_pages() -> list:
    return [path for path in documents() if any(word in path.read_text(encoding="utf-8")
                                                for word in ("kubectl ", "kustomize "))]


def lines_of(text: str, tmp_path) -> list[howto.Line]:
    page = tmp_path / "page.md"
    page.write_text(text)
    return howto.commands(page)


@pytest.mark.parametrize("page", kubernetes_pages(), ids=lambda path: path.name)
def test_every_kubectl_line_of_the_docs_runs_against_the_kustomization(page):
    lines = howto.commands(page)
    assert any("kubectl " in line.text or "kustomize " in line.text for line in lines), page
    dry_run(lines)


def test_the_kubernetes_how_to_is_run_in_full():
    """The how-to's lines reach what they are about: the build applied, the Job waited for, the pods' backup
    copied out of a web pod picked by its label."""
    cluster = dry_run(howto.commands(section="kubernetes"))
    assert ("Ingress", "bookchat") in cluster.objects and ("Secret", "bookchat-tls") in cluster.objects
    assert cluster.select("app.kubernetes.io/component=web") == ["bookchat-web-0", "bookchat-web-1"]


def test_the_build_is_what_kubectl_kustomize_makes():
    objects = {(doc["kind"], doc["metadata"]["name"]): doc for doc in build(MANIFESTS)}
    web = objects[("Deployment", "bookchat-web")]
    assert web["metadata"]["labels"]["app.kubernetes.io/part-of"] == "bookchat"  # the kustomization's labels
    assert "app.kubernetes.io/part-of" not in web["spec"]["selector"]["matchLabels"]  # not its selectors
    assert web["spec"]["template"]["spec"]["containers"][0]["image"] == "localhost/bookchat:latest"  # images:
    assert objects[("Ingress", "bookchat")]["spec"]["tls"][0]["secretName"] == "bookchat-tls"


@pytest.mark.parametrize(("page", "why"), [
    ("`kubectl aply -k deploy/kubernetes`", "no verb 'aply'"),
    ("`kubectl exec deploy/bookchat-wbe -- bookchat backup /data/b.tar.gz`", "Deployment/bookchat-wbe"),
    ("`kubectl wait --for=condition=complete job/bookchat-bootstrapp`", "Job/bookchat-bootstrapp"),
    ("`kubectl wait --for=condition=ready job/bookchat-bootstrap`", "no condition"),
    ("`kubectl scale deployment bookchat-web bookchat-workers --replicas=0`", "Deployment/bookchat-workers"),
    ("`kubectl scale deployment bookchat-web --replica=0`", "no flag --replica"),
    ("`kubectl apply -k deploy/kubernetes`", "Secret/bookchat-tls"),  # the TLS Secret no line created
    ("`kubectl apply -k deploy`", "no kustomization.yaml"),
    ("`kubectl patch secret bookchat-secrets -p '{stringData: 1}'`", "not JSON"),
    ("`cd deploy/kubernetes && kustomize edit set image bookchatt=registry.example.org/b:1`", "images are"),
    ('```bash\nkubectl cp "$(kubectl get pod -l app.kubernetes.io/component=webb -o name | head -n 1 | '
     'cut -d/ -f2)":/data/b.tar.gz b.tar.gz\n```', "no pod has the labels"),
])
def test_a_line_that_would_fail_on_a_cluster_is_caught_and_named(page, why, tmp_path):
    with pytest.raises(DryRunError, match=why) as caught:
        dry_run(lines_of(f"Text.\n\n{page}\n", tmp_path))
    assert f"page.md:{4 if page.startswith('```') else 3}: " in str(caught.value), "the failure names the line"


def test_a_kustomization_field_the_build_does_not_understand_fails(tmp_path):
    (tmp_path / "kustomization.yaml").write_text("resources: []\npatches: [{path: p.yaml}]\n")
    with pytest.raises(DryRunError, match="patches"):
        build(tmp_path)


def test_an_object_named_by_an_earlier_line_counts(tmp_path):
    lines = lines_of("`kubectl create secret generic extra --from-literal=a=b`\n\n"
                     "`kubectl patch secret extra -p '{\"stringData\": {\"a\": \"c\"}}'`\n", tmp_path)
    assert ("Secret", "extra") in dry_run(lines, Cluster()).objects
