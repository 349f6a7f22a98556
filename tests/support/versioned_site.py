"""A small versioned, translated Docusaurus site written by hand ("Field Notes"): a config of plain literals
(read the same with or without node), current docs, version 2.0 (the latest) and a French translation."""

from __future__ import annotations

import json
from pathlib import Path

CONFIG = """// A site as create-docusaurus writes it, cut down.
const config = {
  title: 'Field Notes',
  url: 'https://notes.example.org',
  baseUrl: '/notes/',
  trailingSlash: true,
  i18n: {defaultLocale: 'en', locales: ['en', 'fr']},
  presets: [['classic', {docs: {routeBasePath: 'guide', sidebarPath: './sidebars.js'}, blog: false}]],
};

export default config;
"""

INTRO = """---
sidebar_position: 1
---

# Field notes

Field notes record what a surveyor saw on a site visit, written the same day.

## Weather {#weather}

Write down the weather at the start of every visit: rain changes how soil samples behave.
"""

SETUP_CURRENT = """# Setting up

## Calibrating the level

Calibrate the laser level every morning against the two brass benchmarks at the gate.
"""

SETUP_OLD = """# Setting up

## Calibrating the level

Calibrate the optical level once a week with the peg test described in the appendix.
"""

INTRO_FR = """# Carnet de terrain

Le carnet de terrain consigne ce que le géomètre a observé pendant la visite, rédigé le jour même.

## Météo {#weather}

Notez la météo au début de chaque visite : la pluie change le comportement des échantillons de sol.
"""


def write_versioned_site(root: Path) -> Path:
    pages = {
        "docusaurus.config.js": CONFIG,
        "docs/intro.md": INTRO,
        "docs/setup.md": SETUP_CURRENT,
        "versions.json": json.dumps(["2.0"]),
        "versioned_docs/version-2.0/intro.md": INTRO,
        "versioned_docs/version-2.0/setup.md": SETUP_OLD,
        "i18n/fr/docusaurus-plugin-content-docs/current/intro.md": INTRO_FR,
    }
    for rel, text in pages.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root
