"""mkdocs.yml: the site's config (INHERIT, MkDocs' YAML tags) and the options bookchat reads from it (the package's
docstring says what was decided)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

CONFIG_NAMES = ("mkdocs.yml", "mkdocs.yaml")
MARKDOWN_SUFFIXES = (".markdown", ".mdown", ".mkdn", ".mkd", ".md")
MAX_CONFIG_BYTES = 1 << 20
MAX_INHERIT_DEPTH = 10
MAX_SNIPPET_DEPTH = 10
_DEFAULT_EXCLUDE = (".*", "/templates/")
# MkDocs always loads these, before the config's own.
_BUILTIN_EXTENSIONS = ("toc", "tables", "fenced_code")


# -- the config ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PythonRef:
    """A ``!!python/name:x`` (``args``/``kwds`` None) or ``!!python/object/apply:x`` tag's target, not imported."""

    name: str
    args: tuple = ()
    kwds: dict | None = None


@dataclass
class NavEntry:
    """One ``nav`` item: a page (``rel_path`` under ``docs_dir``), a link (``url``) or a section (``children``)."""

    title: str | None
    rel_path: str | None = None
    url: str | None = None
    children: list[NavEntry] = field(default_factory=list)

    @property
    def is_section(self) -> bool:
        return self.rel_path is None and self.url is None


@dataclass(frozen=True)
class Slugify:
    """Which slugify the ``toc`` extension uses: ``default`` (toc.slugify), ``unicode`` (toc.slugify_unicode)
    or ``pymdownx`` (pymdownx.slugs.slugify with ``case``, ``percent_encode``, ``normalize``)."""

    kind: str = "default"
    case: str = "none"
    percent_encode: bool = False
    normalize: str = "NFC"


@dataclass(frozen=True)
class TocOptions:
    permalink: bool | str = False
    slugify: Slugify = Slugify()
    separator: str = "-"


@dataclass
class SnippetOptions:
    """``pymdownx.snippets``' options; ``base_path`` resolved against the config file's folder."""

    base_path: list[Path]
    auto_append: list[str] = field(default_factory=list)
    check_paths: bool = False
    restrict_base_path: bool = True
    dedent_subsections: bool = False


@dataclass(frozen=True)
class BlogOptions:
    """Material's blog plugin (``mkdocs.blog``): where posts are and how their URLs are made."""

    blog_dir: str = "blog"
    post_dir: str = "blog/posts"
    post_url_format: str = "{date}/{slug}"
    post_url_date_format: str = "yyyy/MM/dd"
    post_url_max_categories: int = 1
    post_slugify_separator: str = "-"
    categories_slugify_separator: str = "-"

    def is_post(self, rel_path: str) -> bool:
        folder = self.post_dir.strip("/")
        return rel_path.lower().endswith((".md", ".markdown")) and \
            (not folder or folder == "." or rel_path.startswith(folder + "/"))


@dataclass
class MkDocsSite:
    root: Path
    config_file: Path
    site_name: str
    docs_dir: Path
    site_url: str | None = None  # ends in "/" (as MkDocs normalises it)
    use_directory_urls: bool = True
    language: str | None = None  # theme.language (Material's; MkDocs' own themes call it locale), as written
    nav: list[NavEntry] | None = None  # None: no ``nav``, MkDocs' folder order
    markdown_extensions: dict[str, dict] = field(default_factory=dict)  # short name → options
    toc: TocOptions = TocOptions()
    snippets: SnippetOptions | None = None  # None: pymdownx.snippets is not enabled
    blog: BlogOptions | None = None  # None: no blog plugin
    exclude_docs: list[str] = field(default_factory=list)
    draft_docs: list[str] = field(default_factory=list)
    not_in_nav: list[str] = field(default_factory=list)
    config: dict = field(default_factory=dict)  # the merged config, as read
    warnings: list[str] = field(default_factory=list)
    inherited: list[Path] = field(default_factory=list)  # the config files INHERIT read, nearest first

    def has_extension(self, *names: str) -> bool:
        return any(name in self.markdown_extensions for name in names)


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads MkDocs' tags without running anything (see the module docstring)."""


def _plain(loader: _Loader, node: yaml.Node):
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)


def _env(loader: _Loader, node: yaml.Node):
    if isinstance(node, yaml.SequenceNode) and len(node.value) > 1:
        return loader.construct_object(node.value[-1], deep=True)
    return None


def _python(loader: _Loader, suffix: str, node: yaml.Node):
    kind, _, name = suffix.partition(":")
    if kind == "name":
        return PythonRef(name.strip())
    value = _plain(loader, node)
    if isinstance(value, dict):
        args = value.get("args") or ()
        kwds = value.get("kwds") or {}
        return PythonRef(name.strip(), tuple(args) if isinstance(args, list) else (), kwds if isinstance(kwds, dict)
                         else {})
    return PythonRef(name.strip(), tuple(value) if isinstance(value, list) else (), {})


_Loader.add_constructor("!ENV", _env)
_Loader.add_multi_constructor("tag:yaml.org,2002:python/", _python)
_Loader.add_constructor(None, _plain)  # any other tag: its plain value


def find_config(root: Path) -> Path | None:
    """``mkdocs.yml`` or ``mkdocs.yaml`` at ``root`` (MkDocs tries them in that order)."""
    return next((Path(root) / name for name in CONFIG_NAMES if (Path(root) / name).is_file()), None)


def load_site(root: Path) -> MkDocsSite | None:
    """The MkDocs site at ``root`` but its ``nav`` (``pages.read_mkdocs`` reads it, knowing the pages); None when
    there is no ``mkdocs.yml``/``mkdocs.yaml`` there. Never raises for bad input: what can't be read is a warning
    and the defaults stand."""
    root = Path(root).resolve()
    config_file = find_config(root)
    if config_file is None:
        return None
    warnings: list[str] = []
    inherited: list[Path] = []
    config = _load_config(config_file, warnings, chain=(), inherited=inherited)
    site = MkDocsSite(root=root, config_file=config_file, site_name="", docs_dir=root / "docs", config=config,
                      warnings=warnings, inherited=inherited)
    name = config.get("site_name")
    if isinstance(name, str | int | float) and not isinstance(name, bool) and str(name).strip():
        site.site_name = str(name).strip()
    else:
        site.site_name = root.name
        warnings.append(f"{config_file.name}: no site_name; the folder's name is the title")
    site.docs_dir = _docs_dir(config.get("docs_dir", "docs"), config_file.parent, warnings)
    url = config.get("site_url")
    if isinstance(url, str) and url.strip():
        url = url.strip()
        site.site_url = url if url.endswith("/") else url + "/"
    elif url not in (None, ""):
        warnings.append(f"site_url is not a string ({url!r}); page URLs are site-relative")
    udu = config.get("use_directory_urls", True)
    site.use_directory_urls = udu if isinstance(udu, bool) else True
    if not isinstance(udu, bool):
        warnings.append(f"use_directory_urls is not true/false ({udu!r}); true is used")
    site.language = _theme_language(config.get("theme"), warnings)
    for key in ("exclude_docs", "draft_docs", "not_in_nav"):
        setattr(site, key, _patterns(config.get(key), key, warnings))
    site.markdown_extensions = _extensions(config.get("markdown_extensions"), config.get("mdx_configs"), warnings)
    site.toc = _toc_options(site.markdown_extensions.get("toc", {}), warnings)
    if "pymdownx.snippets" in site.markdown_extensions:
        site.snippets = _snippet_options(site.markdown_extensions["pymdownx.snippets"], config_file.parent, warnings)
    return site


def _theme_language(theme: object, warnings: list[str]) -> str | None:
    """``theme.language`` (Material for MkDocs), else ``theme.locale`` (MkDocs' own themes): the pages' language."""
    if not isinstance(theme, dict):
        return None
    value = theme.get("language", theme.get("locale"))
    if value is None or (isinstance(value, str) and value.strip()):
        return value.strip() if isinstance(value, str) else None
    warnings.append(f"theme.language is not a language tag ({value!r}); the book's language is not read from it")
    return None


def _load_config(path: Path, warnings: list[str], *, chain: tuple[Path, ...], inherited: list[Path]) -> dict:
    name = path.name if not chain else str(path)
    try:
        data = path.read_bytes()
        if len(data) > MAX_CONFIG_BYTES:
            warnings.append(f"{name}: larger than {MAX_CONFIG_BYTES} bytes; not read")
            return {}
        config = yaml.load(data.decode("utf-8-sig"), Loader=_Loader)  # noqa: S506 (a SafeLoader subclass)
    except UnicodeDecodeError:
        warnings.append(f"{name}: not UTF-8 text; not read")
        return {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        warnings.append(f"{name}: invalid YAML{where}: {getattr(exc, 'problem', None) or exc}")
        return {}
    except (OSError, ValueError, TypeError, RecursionError) as exc:
        warnings.append(f"{name}: not read: {exc}")
        return {}
    if config is None:
        return {}
    if not isinstance(config, dict):
        warnings.append(f"{name}: not a mapping of settings; not read")
        return {}
    inherit = config.pop("INHERIT", None)
    if inherit is None:
        return config
    if not isinstance(inherit, str) or not inherit.lower().endswith((".yml", ".yaml")):
        warnings.append(f"{name}: INHERIT {inherit!r} is not a .yml/.yaml file; not read")
        return config
    parent = (path.parent / inherit).resolve()
    if parent in chain or parent == path.resolve():
        warnings.append(f"{name}: INHERIT loop at {inherit!r}; not read again")
        return config
    if len(chain) >= MAX_INHERIT_DEPTH:
        warnings.append(f"{name}: INHERIT nested more than {MAX_INHERIT_DEPTH} deep")
        return config
    if not parent.is_file():
        warnings.append(f"{name}: inherited config file {inherit!r} does not exist")
        return config
    inherited.append(parent)
    return merge(_load_config(parent, warnings, chain=(*chain, path.resolve()), inherited=inherited), config)


def merge(parent: dict, child: dict) -> dict:
    """``child`` merged into ``parent`` as ``mergedeep.merge`` (REPLACE) does: mappings key by key, recursively;
    anything else replaced by the child's value."""
    out = dict(parent)
    for key, value in child.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def _docs_dir(value: object, base: Path, warnings: list[str]) -> Path:
    if not isinstance(value, str) or not value.strip():
        warnings.append(f"docs_dir is not a folder name ({value!r}); docs is used")
        value = "docs"
    folder = (base / value.strip()).resolve()
    if not folder.is_dir():
        warnings.append(f"docs_dir {value!r} is not a folder")
    return folder


def _patterns(value: object, key: str, warnings: list[str]) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [line.strip() for line in value.splitlines() if line.strip() and not line.strip().startswith("#")]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return [item.strip() for item in value if item.strip()]
    warnings.append(f"{key} is not gitignore patterns; ignored")
    return []


def _short(name: str) -> str:
    return name.removeprefix("markdown.extensions.")


def _extensions(value: object, mdx_configs: object, warnings: list[str]) -> dict[str, dict]:
    """``markdown_extensions`` (a list of names and ``{name: options}``, or a mapping) as {short name: options},
    MkDocs' built-in ``toc``, ``tables``, ``fenced_code`` first."""
    out: dict[str, dict] = {name: {} for name in _BUILTIN_EXTENSIONS}
    items: list = []
    if isinstance(value, dict):
        items = [{k: v} for k, v in value.items()]
    elif isinstance(value, list):
        items = value
    elif value is not None:
        warnings.append("markdown_extensions is not a list; ignored")
    for item in items:
        if isinstance(item, str):
            out.setdefault(_short(item), {})
        elif isinstance(item, dict) and len(item) == 1:
            name, options = next(iter(item.items()))
            if not isinstance(name, str):
                warnings.append(f"markdown_extensions: {item!r} is not an extension; ignored")
                continue
            if options is not None and not isinstance(options, dict):
                warnings.append(f"markdown_extensions: options of {name} are not a mapping; ignored")
                options = None
            out[_short(name)] = {**out.get(_short(name), {}), **(options or {})}
        else:
            warnings.append(f"markdown_extensions: {item!r} is not an extension; ignored")
    if isinstance(mdx_configs, dict):
        for name, options in mdx_configs.items():
            if isinstance(name, str) and isinstance(options, dict) and _short(name) in out:
                out[_short(name)] = {**out[_short(name)], **options}
    return out


def _toc_options(options: dict, warnings: list[str]) -> TocOptions:
    permalink = options.get("permalink", False)
    separator = options.get("separator", "-")
    if not isinstance(separator, str):
        warnings.append(f"toc separator {separator!r} is not a string; '-' is used")
        separator = "-"
    return TocOptions(permalink=permalink if isinstance(permalink, bool | str) else False,
                      slugify=_slugify_option(options.get("slugify"), warnings), separator=separator)


def _slugify_option(value: object, warnings: list[str]) -> Slugify:
    if value is None:
        return Slugify()
    if isinstance(value, PythonRef):
        name = value.name
        if name in ("markdown.extensions.toc.slugify",):
            return Slugify()
        if name == "markdown.extensions.toc.slugify_unicode":
            return Slugify("unicode")
        if name == "pymdownx.slugs.slugify" and value.kwds is not None:
            kwds = {**dict(enumerate(value.args)), **value.kwds}
            return Slugify("pymdownx", case=str(kwds.get("case", "none")),
                           percent_encode=bool(kwds.get("percent_encode", False)),
                           normalize=str(kwds.get("normalize", "NFC")))
    warnings.append(f"toc slugify {getattr(value, 'name', value)!r} is not known; Python-Markdown's default is used")
    return Slugify()


def _snippet_options(options: dict, project: Path, warnings: list[str]) -> SnippetOptions:
    bases = options.get("base_path", ["."])
    if isinstance(bases, str):
        bases = [bases]
    if not isinstance(bases, list):
        warnings.append("pymdownx.snippets base_path is not a list of paths; '.' is used")
        bases = ["."]
    append = options.get("auto_append") or []
    if isinstance(append, str):
        append = [append]
    if not isinstance(append, list):
        warnings.append("pymdownx.snippets auto_append is not a list of paths; ignored")
        append = []
    return SnippetOptions(
        base_path=[(project / str(base)).resolve() for base in bases if isinstance(base, str)],
        auto_append=[str(item) for item in append if isinstance(item, str)],
        check_paths=bool(options.get("check_paths", False)),
        restrict_base_path=options.get("restrict_base_path", True) is not False,
        dedent_subsections=bool(options.get("dedent_subsections", False)))
