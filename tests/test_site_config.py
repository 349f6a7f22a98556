"""A Docusaurus site's own config, read as Docusaurus reads it: run by node (ESM, CommonJS, functions, TS
through the site's jiti), or read statically when node can't run it, with a warning saying why.

No database: plain functions on configs written to tmp_path. Each node run costs ~50–200 ms.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ingestion.reading.site_config import (
    CONFIG_NAMES,
    DocsInstance,
    SiteConfigError,
    find_config,
    read_site_config,
)
from tests.support import docusaurus_site

needs_node = pytest.mark.needs("node")


def site(tmp_path: Path, text: str, name: str = "docusaurus.config.js", **files: str) -> Path:
    root = tmp_path / "site"
    root.mkdir(exist_ok=True)
    (root / name).write_text(text, encoding="utf-8")
    for rel_path, content in files.items():
        (root / rel_path).write_text(content, encoding="utf-8")
    return root


# -- node ------------------------------------------------------------------------------------------------
@needs_node
def test_esm_object_config_is_run_by_node(tmp_path):
    root = site(tmp_path, """
const title = ['My', 'Book'].join(' ');  // not a literal: only running it tells
export default {
  title,
  url: 'https://example.org/',
  baseUrl: 'guide',
  trailingSlash: false,
};
""")
    config = read_site_config(root)
    assert (config.how, config.warnings) == ("node", ())
    assert (config.title, config.url, config.base_url, config.trailing_slash) == (
        "My Book", "https://example.org", "/guide/", False)
    assert config.site_url == "https://example.org/guide/"
    assert config.config_file == root / "docusaurus.config.js"
    assert config.docs == ()  # no preset, no plugin: Docusaurus has no docs either
    assert (config.default_locale, config.locales, config.locale_paths) == ("en", ("en",), {})


@needs_node
def test_commonjs_config_with_require_and_dirname(tmp_path):
    root = site(tmp_path, """
const path = require('path');
module.exports = {
  title: 'CJS',
  url: 'https://cjs.example.org',
  baseUrl: '/',
  presets: [['classic', {docs: {sidebarPath: require.resolve('./sidebars.js'), path: path.join(__dirname, 'book')}}]],
};
""", "docusaurus.config.cjs", **{"sidebars.js": "module.exports = {};\n"})
    config = read_site_config(root)
    assert config.how == "node", config.warnings
    assert config.title == "CJS"
    assert config.docs == (DocsInstance(path="book", sidebar_path="sidebars.js"),)


@needs_node
@pytest.mark.parametrize("export", [
    "export default function createConfig(...args) { return make(args); }",
    "export default async (...args) => { await new Promise((done) => setTimeout(done, 5)); return make(args); };",
    "module.exports = Promise.resolve(make([]));",
], ids=["function", "async-function", "promise"])
def test_a_config_function_is_called_with_no_arguments_as_for_a_build(tmp_path, export):
    root = site(tmp_path, f"""
const make = (args) => ({{title: `${{args.length}} args, ${{process.env.NODE_ENV}}`, url: 'https://f.example.org'}});
{export}
""")
    config = read_site_config(root)
    assert config.how == "node", config.warnings
    assert config.title == "0 args, production"


@needs_node
def test_preset_classic_docs_options(tmp_path):
    root = site(tmp_path, """
export default {
  title: 'Versions', url: 'https://v.example.org', baseUrl: '/',
  presets: [
    ['@docusaurus/preset-classic', {
      docs: {
        path: './guide/',
        routeBasePath: '/',
        sidebarPath: new URL('./sidebars.js', import.meta.url).pathname,
        includeCurrentVersion: false,
        lastVersion: '1.0',
        onlyIncludeVersions: ['current', '1.0'],
        versions: {
          current: {label: 'Next', path: 'next', banner: 'unreleased'},
          '1.0': {label: '1.0.0', noIndex: true, className: () => 'not JSON'},
        },
        remarkPlugins: [function remark() {}],
      },
      blog: false,
    }],
  ],
};
""")
    (docs,) = read_site_config(root).docs
    assert docs == DocsInstance(
        id="default", path="guide", route_base_path="", include_current_version=False, last_version="1.0",
        versions={"current": {"label": "Next", "path": "next", "banner": "unreleased"},
                  "1.0": {"label": "1.0.0", "noIndex": True}},
        only_include_versions=("current", "1.0"), sidebar_path="sidebars.js")


@needs_node
def test_docs_false_and_docs_plugins_in_plugins(tmp_path):
    root = site(tmp_path, """
module.exports = {
  title: 'Plugins', url: 'https://p.example.org', baseUrl: '/',
  presets: [['classic', {docs: false}], false, null],
  plugins: [
    function localPlugin() { return {name: 'local'}; },
    [function withOptions() { return {name: 'x'}; }, {path: 'not-docs'}],
    ['@docusaurus/plugin-content-docs', {id: 'community', path: 'community', routeBasePath: 'community/',
                                         sidebarPath: false}],
    'content-docs',
    ['@docusaurus/plugin-content-blog', {path: 'blog'}],
    false,
  ],
};
""")
    config = read_site_config(root)
    assert config.how == "node", config.warnings
    assert config.docs == (DocsInstance(id="community", path="community", route_base_path="community"),
                           DocsInstance())


@needs_node
def test_i18n_locale_folders_and_urls(tmp_path):
    root = site(tmp_path, """
export default {
  title: 'World', url: 'https://w.example.org', baseUrl: '/book/',
  i18n: {
    defaultLocale: 'en',
    locales: ['en', 'fr', 'pt-BR'],
    path: 'translations',
    localeConfigs: {
      fr: {label: 'Français', path: 'francais'},
      'pt-BR': {url: 'https://br.example.org', baseUrl: '/'},
    },
  },
};
""")
    config = read_site_config(root)
    assert (config.default_locale, config.locales, config.i18n_path) == ("en", ("en", "fr", "pt-BR"), "translations")
    assert config.locale_paths == {"fr": "francais"}  # the folder under i18n_path, not a URL segment
    assert config.locale_urls == {"en": "https://w.example.org/book/", "fr": "https://w.example.org/book/fr/",
                                  "pt-BR": "https://br.example.org/"}


@needs_node
def test_config_output_and_leftover_processes_do_not_corrupt_or_hang_the_read(tmp_path):
    root = site(tmp_path, """
const {spawn} = require('child_process');
console.log('{"ok": true, "config": {"title": "forged"}}');
console.info('info'); console.debug('debug'); process.stdout.write('raw stdout\\n');
spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], {stdio: 'inherit'});
setInterval(() => console.log('tick'), 10);
module.exports = {title: 'Noisy', url: 'https://n.example.org', baseUrl: '/'};
""")
    config = read_site_config(root, timeout=20)
    # Read by node, not stopped at the timeout (that would say so and fall back to "static"), so the read didn't
    # wait for the 60 s child nor for the ticking interval.
    assert (config.how, config.title, config.warnings) == ("node", "Noisy", ())


@needs_node
def test_wrong_types_become_defaults_with_warnings(tmp_path):
    root = site(tmp_path, """
export default {
  title: 42,
  url: 'example.org',
  baseUrl: 7,
  trailingSlash: 'yes',
  i18n: {defaultLocale: 'fr', locales: 'fr'},
  presets: [['classic', {docs: {path: 3, routeBasePath: false, versions: [], lastVersion: 1, id: 'no spaces'}}]],
};
""")
    config = read_site_config(root)
    assert config.how == "node"
    assert (config.title, config.url, config.base_url, config.trailing_slash) == ("", "", "/", None)
    assert (config.default_locale, config.locales) == ("fr", ("fr",))
    assert config.docs == (DocsInstance(),)
    warnings = "\n".join(config.warnings)
    for expected in ("title is the number 42, not a string", "url 'example.org' is not an absolute http(s) URL",
                     "links will be relative unless --base-url is given", "baseUrl is the number 7",
                     "trailingSlash is a string", "i18n.locales is a string", "docs.path is the number 3",
                     "docs.routeBasePath is false", "docs.versions is a list", "docs.lastVersion is the number 1",
                     "docs.id is a string"):
        assert expected in warnings


@needs_node
def test_a_config_that_is_not_an_object_is_an_error(tmp_path):
    root = site(tmp_path, "export default async function () { return undefined; }\n")
    expected = r"docusaurus.config.js: does not export a config object: the config is undefined"
    with pytest.raises(SiteConfigError, match=expected) as error:
        read_site_config(root)
    assert error.value.code == "site_config"


# -- when node can't run it --------------------------------------------------------------------------------
SITE_NEEDING_PACKAGES = """\
// @ts-check
import {themes as prismThemes} from 'prism-react-renderer';

/** @type {import('@docusaurus/types').Config} */
const config = {
  title: 'Static Site',
  // url: 'https://old.example.org',
  url: "https://static.example.org",
  baseUrl: '/handbook/',
  trailingSlash: true,
  i18n: {defaultLocale: 'en', locales: ['en', 'de']},
  presets: [
    ['classic', ({
      docs: {path: 'content', routeBasePath: '/', sidebarPath: './sidebars.js', editUrl: 'https://x.example.org/'},
    })],
  ],
  themeConfig: {
    docs: {sidebar: {hideable: true}},
    navbar: {title: 'Navbar title', items: [{to: '/', label: 'Home'}]},
    prism: {theme: prismThemes.github},
  },
};

export default config;
"""


@needs_node
def test_a_missing_package_falls_back_to_the_static_read_naming_the_error(tmp_path):
    config = read_site_config(site(tmp_path, SITE_NEEDING_PACKAGES))
    assert config.how == "static"
    (warning,) = config.warnings
    assert "docusaurus.config.js was read without running it" in warning
    assert "prism-react-renderer" in warning and "npm install" in warning
    assert (config.title, config.url, config.base_url, config.trailing_slash) == (
        "Static Site", "https://static.example.org", "/handbook/", True)
    assert config.locales == ("en", "de")
    assert config.docs == (DocsInstance(path="content", route_base_path="", sidebar_path="sidebars.js"),)


def test_without_node_on_path_the_warning_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    config = read_site_config(site(tmp_path, SITE_NEEDING_PACKAGES))
    assert config.how == "static"
    assert config.warnings == (
        "docusaurus.config.js was read without running it (node is not on PATH): only plain literal values were "
        "used; check the title and URL below, or pass --title/--base-url",)
    assert config.title == "Static Site"


def test_a_node_that_does_not_exist_falls_back_to_the_static_read(tmp_path):
    config = read_site_config(site(tmp_path, SITE_NEEDING_PACKAGES), node="/nonexistent")
    assert config.how == "static"
    assert "node was not found at /nonexistent" in config.warnings[0]
    assert config.site_url == "https://static.example.org/handbook/"


@needs_node
def test_a_ts_config_without_the_sites_packages_is_read_statically(tmp_path):
    root = site(tmp_path, """
import type {Config} from '@docusaurus/types';
import type * as Preset from '@docusaurus/preset-classic';

const config: Config = {
  title: 'Typed',
  url: 'https://typed.example.org',
  baseUrl: process.env.BASE_URL ?? '/',
  presets: [['classic', {docs: {routeBasePath: 'reference'}, blog: false} satisfies Preset.Options]],
};

export default config;
""", "docusaurus.config.ts")
    config = read_site_config(root)
    assert config.how == "static"
    assert "npm install" in config.warnings[0]
    assert "Docusaurus's defaults were used: baseUrl" in config.warnings[0]
    assert (config.title, config.url, config.base_url) == ("Typed", "https://typed.example.org", "/")
    assert config.docs == (DocsInstance(route_base_path="reference"),)


@needs_node
@pytest.mark.slow  # waits for the cached real Docusaurus site (its node_modules hold a real jiti) when it is cold
def test_a_ts_config_runs_through_the_sites_own_jiti(tmp_path):
    root = site(tmp_path, """
import {themes as prismThemes} from 'prism-react-renderer';
import type {Config} from '@docusaurus/types';

const locales: string[] = ['en', 'ja'];
const config: Config = {
  title: `Typed ${locales.length}`,
  url: 'https://ts.example.org',
  baseUrl: '/',
  presets: [['classic', {docs: {sidebarPath: require.resolve('./sidebars.ts'), path: __dirname + '/docs'}}]],
  i18n: {defaultLocale: 'en', locales},
  themeConfig: {prism: {theme: prismThemes.github}},
};

export default config;
""", "docusaurus.config.ts", **{"sidebars.ts": "export default {};\n"})
    (root / "node_modules").symlink_to(docusaurus_site.site() / "node_modules")
    config = read_site_config(root)
    assert (config.how, config.warnings) == ("node", ())
    assert (config.title, config.locales) == ("Typed 2", ("en", "ja"))
    assert config.docs == (DocsInstance(sidebar_path="sidebars.ts"),)


@needs_node
def test_a_config_that_throws_falls_back_with_the_error(tmp_path):
    root = site(tmp_path, """
if (!process.env.DEPLOY_URL) throw new Error('DEPLOY_URL is not set');
module.exports = {title: 'Thrower', url: process.env.DEPLOY_URL, baseUrl: '/'};
""")
    config = read_site_config(root)
    assert config.how == "static"
    assert "DEPLOY_URL is not set" in config.warnings[0]
    assert "(not plain literals, so Docusaurus's defaults were used: url)" in config.warnings[0]
    assert config.title == "Thrower"
    assert any("links will be relative unless --base-url is given" in warning for warning in config.warnings)


@needs_node
def test_a_syntax_error_falls_back_with_the_error(tmp_path):
    config = read_site_config(site(tmp_path, "export default {title: 'Broken' url: 'https://b.example.org'};\n"))
    assert config.how == "static"
    assert "SyntaxError" in config.warnings[0]
    # `'Broken' url:` is neither a plain literal nor an object key: neither is read.
    assert (config.title, config.url) == ("", "")
    assert "Docusaurus's defaults were used: title)" in config.warnings[0]


@needs_node
def test_a_config_that_never_finishes_is_stopped_at_the_timeout(tmp_path):
    root = site(tmp_path, "export default {title: 'Loop', url: 'https://l.example.org'};\nwhile (true) {}\n",
                "docusaurus.config.mjs")
    config = read_site_config(root, timeout=1)
    assert config.how == "static"
    assert "node did not finish loading it in 1 s" in config.warnings[0]
    assert config.title == "Loop"


def test_binary_and_oversized_files_are_refused_before_node_runs(tmp_path):
    root = tmp_path / "site"
    root.mkdir()
    config_file = root / "docusaurus.config.js"
    config_file.write_bytes(b"\x7fELF\x00\x01\x02" * 1000)
    with pytest.raises(SiteConfigError, match=r"docusaurus.config.js: not a text file"):
        read_site_config(root)
    config_file.write_bytes(b"// " + b"x" * 2_100_000)
    with pytest.raises(SiteConfigError, match=r"docusaurus.config.js: 2,100,003 bytes: too big for a site config"):
        read_site_config(root)
    config_file.write_bytes(b"export default {title: '\xff'};")
    with pytest.raises(SiteConfigError, match=r"docusaurus.config.js: not UTF-8 text \(byte 24\)"):
        read_site_config(root)


# -- finding the file, and the static read on its own ---------------------------------------------------
def test_find_config_takes_docusaurus_order(tmp_path):
    assert find_config(tmp_path) is None
    with pytest.raises(SiteConfigError, match=r"no docusaurus\.config\.\{ts,mts,cts,js,mjs,cjs\} in"):
        read_site_config(tmp_path)
    for name in ("docusaurus.config.cjs", "docusaurus.config.js", "docusaurus.config.ts"):
        (tmp_path / name).write_text("module.exports = {};\n")
    assert find_config(tmp_path) == tmp_path / "docusaurus.config.ts"
    assert set(CONFIG_NAMES) == {f"docusaurus.config.{ext}" for ext in ("js", "mjs", "ts", "cjs", "mts", "cts")}


def test_static_read_takes_only_plain_top_level_literals(tmp_path):
    root = site(tmp_path, """
/* title: 'In a comment', */
const base = '/x/';
module.exports = {
  title: 'The ' + 'Book',
  url: `https://template.example.org`,
  baseUrl: base,
  'trailingSlash': false,
  tagline: 'title: "inside a string"',
  presets: [['@docusaurus/preset-classic', {docs: false}]],
  themeConfig: {navbar: {title: 'Navbar'}},
  plugins: [['@docusaurus/plugin-content-docs', {id: 'api', path: 'api'}]],
};
""")
    config = read_site_config(root, node="/nonexistent")
    assert (config.title, config.url, config.base_url, config.trailing_slash) == ("", "", "/", False)
    assert config.docs == ()
    warnings = "\n".join(config.warnings)
    assert "Docusaurus's defaults were used: title, url, baseUrl" in warnings
    assert "a docs plugin is listed in plugins" in warnings
    assert "links will be relative unless --base-url is given" in warnings


def test_static_read_of_a_function_config_and_a_one_line_config(tmp_path):
    root = site(tmp_path, """
export default async function createConfig() {
  return {
    title: "Async", url: 'https://a.example.org', baseUrl: '/a/',
    presets: [['classic', {docs: {path: 'guide', routeBasePath: 'guide', onlyIncludeVersions: ['current']}}]],
  };
}
""")
    config = read_site_config(root, node="/nonexistent")
    assert (config.title, config.site_url) == ("Async", "https://a.example.org/a/")
    assert config.docs == (DocsInstance(path="guide", route_base_path="guide", only_include_versions=("current",)),)
    root = site(tmp_path, "module.exports = {title: 'One', url: 'https://one.example.org', baseUrl: ''}\n")
    config = read_site_config(root, node="/nonexistent")
    assert (config.title, config.site_url, config.docs) == ("One", "https://one.example.org/", (DocsInstance(),))
