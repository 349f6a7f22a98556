"""``/metrics``' own decisions (``bookchat.scraping``), without a scrape: which ``Authorization`` headers carry the
token, ``METRICS_ALLOW`` read as networks (a bad entry named), which addresses it lets in, and a part of the scrape
that can't be read left out and marked, the rest still shown. The view end to end: tests/test_metrics.py."""

from __future__ import annotations

import ipaddress

import pytest

from bookchat import scraping
from bookchat.base.errors import ConfigurationError

TOKEN = "scrape-me-0123456789"


@pytest.mark.parametrize(("header", "matches"), [
    (f"Bearer {TOKEN}", True), (f"bearer   {TOKEN}  ", True), (f"BEARER {TOKEN}", True),
    ("", False), (f"Basic {TOKEN}", False), ("Bearer", False), (f"Bearer {TOKEN}x", False),
    (f"Bearer {TOKEN[:-1]}", False), ("Bearer " + "a" * 2000, False), ("Bearer tökén", False),
])
def test_only_a_bearer_header_with_the_exact_token_matches(header, matches):
    assert scraping.token_matches(header, TOKEN) is matches


def test_a_header_with_a_character_outside_latin1_never_matches():
    assert scraping.token_matches("Bearer 令牌", "令牌") is False


def test_the_allow_list_reads_addresses_and_networks_and_names_a_bad_entry():
    assert scraping.allowed_networks(" 10.0.0.0/8, 192.0.2.7 ,, ::1 ") == [
        ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("192.0.2.7/32"), ipaddress.ip_network("::1/128")]
    assert scraping.allowed_networks("10.1.2.3/8") == [ipaddress.ip_network("10.0.0.0/8")]  # host bits allowed
    with pytest.raises(ConfigurationError, match="'prometheus.local' is neither an address nor a network"):
        scraping.allowed_networks("10.0.0.0/8, prometheus.local")


def test_an_address_is_let_in_by_a_listed_network_of_its_own_version(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "METRICS_ALLOW": ""}
    assert scraping.address_allowed("203.0.113.9")  # no list: every address
    settings.BOOKCHAT = {**settings.BOOKCHAT, "METRICS_ALLOW": "10.0.0.0/8,2001:db8::/32"}
    assert scraping.address_allowed("10.20.30.40") and scraping.address_allowed("2001:db8::5")
    assert not scraping.address_allowed("192.0.2.1") and not scraping.address_allowed("::ffff:10.0.0.1")
    assert not scraping.address_allowed("not-an-address")


def test_a_part_that_cannot_be_read_is_left_out_and_marked(monkeypatch, caplog):
    def broken():
        raise RuntimeError("the database is down")
        yield  # a generator, as the parts are

    monkeypatch.setattr(scraping, "database_metrics", broken)
    monkeypatch.setattr(scraping, "queue_metrics", lambda: iter(()))
    families = {family.name: family for family in scraping.Scrape().collect()}
    ok = {sample.labels["part"]: sample.value for sample in families["bookchat_scrape_ok"].samples}
    assert ok == {"database": 0, "queue": 1, "memory": 1}
    assert "bookchat_book_passages" not in families and "bookchat_worker_resident_bytes" in families
    assert "reading the database metrics failed" in caplog.text
