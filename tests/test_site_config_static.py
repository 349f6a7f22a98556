"""``ingestion.reading.site_config_static``: a Docusaurus config read without running it — plain literals at the
shallowest depth a key appears, comments and strings that only look like keys ignored, the preset's docs options,
and the keys it could not read — on cases tests/test_site_config.py leaves out."""

from __future__ import annotations

from ingestion.reading.site_config_static import read_literals

CONFIG = """// url: "https://commented.example"
const x = a ? url : b;
export default {
  title: 'My Site', url: "https://example.org", baseUrl: `/${b}/`,
  trailingSlash: false,
  themeConfig: { navbar: { title: 'Nav title' }, docs: { sidebar: {} } },
  i18n: { defaultLocale: 'fr', locales: ['fr', "en",], },
  presets: [['classic', { docs: { path: 'guides', routeBasePath: '/', sidebarPath: false,
                                  onlyIncludeVersions: ["current", '2.0'], lastVersion: version } }]],
  plugins: [['@docusaurus/plugin-content-docs', {id: 'api'}]],
};
"""


def test_plain_literals_are_read_and_the_rest_named():
    raw, not_read, notes = read_literals(CONFIG)
    assert raw == {
        "title": "My Site", "url": "https://example.org", "trailingSlash": False,
        "i18n": {"defaultLocale": "fr", "locales": ["fr", "en"]},
        "presets": [["classic", {"docs": {"path": "guides", "routeBasePath": "/", "sidebarPath": False,
                                          "onlyIncludeVersions": ["current", "2.0"]}}]],
    }
    assert not_read == ["baseUrl", "docs.lastVersion"]
    assert notes == ["a docs plugin is listed in plugins: its docs are not read without running the config"]


def test_a_list_of_double_quoted_strings_keeps_its_values():
    raw, _, _ = read_literals('module.exports = { i18n: { locales: ["en", "fr"] } }')
    assert raw["i18n"] == {"defaultLocale": "en", "locales": ["en", "fr"]}


def test_two_values_that_disagree_or_an_escaped_string_are_not_read():
    assert read_literals('export default { title: "A", nested: { x: 1 }, title: "B" }')[:2] == (
        {"presets": [["classic", {}]]}, ["title"])
    raw, not_read, _ = read_literals('module.exports = { title: "it\\"s", url: "x" /* url: "y" */ }')
    assert raw["url"] == "x" and not_read == ["title"]


def test_docs_false_in_the_preset():
    assert read_literals('module.exports = { presets: [["classic", { docs: false }]] }') == (
        {"presets": [["classic", {"docs": False}]]}, [], [])
